"""Writing systems without spaces between words: Chinese, Japanese and Korean. Pure.

FTS5's `unicode61` tokenizer splits text at spaces and punctuation, so a Chinese sentence
or a Japanese phrase is one token and no word inside it can be found (`数据库的索引需要重建`
is found only by that whole line). Without a dictionary to cut such text into words, it
is searched as overlapping pairs of characters (bigrams, as Lucene's CJK analyzer does):

- the index holds each such character as a token of its own (`spaced`: a zero-width
  space on either side, which the tokenizer splits at and a reader never sees);
- a run of them in a query or a block becomes its overlapping pairs (`pieces`:
  `数据库` -> `数据`, `据库`), each searched as a phrase of two adjacent tokens, so
  `索引` finds the line above and `数据库` matches it on both its pairs.

Korean puts spaces between words but joins particles to them (`데이터베이스를`), so a word
is found inside another only this way too. Other scripts written without spaces (Thai,
Lao, Khmer, Myanmar) are not cut: without a dictionary their pairs of letters say little.
"""

from __future__ import annotations

import re

SEPARATOR = "\u200b"
"""Set around each character of these scripts in the index's text: the tokenizer splits at
it (it is neither a letter nor a digit) and a snippet takes it out again."""

_CHARS = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3130-\u318f"  # Hangul Compatibility Jamo
    "\u31f0-\u31ff"  # Katakana Phonetic Extensions
    "\u3400-\u4dbf"  # CJK Unified Ideographs Extension A
    "\u4e00-\u9fff"  # CJK Unified Ideographs
    "\uac00-\ud7af"  # Hangul Syllables
    "\uf900-\ufaff"  # CJK Compatibility Ideographs
    "\uff66-\uff9f"  # Halfwidth Katakana
    "\U00020000-\U0003134f"  # CJK Unified Ideographs Extensions B to G, Compatibility Supplement
)
_ONE = re.compile(f"[{_CHARS}]")
_RUN = re.compile(f"[{_CHARS}]+")
_BOUNDARY = re.compile(f"(?<=[{_CHARS}])(?=[^\\W_])|(?<=[^\\W_])(?=[{_CHARS}])")
"""Between a character of these scripts and a letter or digit next to it."""


def holds(text: str) -> bool:
    """Whether the text holds a character of these scripts."""
    return not text.isascii() and _ONE.search(text) is not None


def spaced(text: str) -> str:
    """The text as the index holds it: each character of these scripts a word of its own."""
    return _BOUNDARY.sub(SEPARATOR, text) if holds(text) else text


def plain(text: str) -> str:
    """Text read back from the index, as it was written."""
    return text.replace(SEPARATOR, "")


def pieces(word: str) -> list[str]:
    """A word (letters and digits) as a search counts it: a run of these scripts as its
    overlapping pairs of characters (a lone character as itself), anything else whole.

    >>> pieces("gen后数据库")
    ['gen', '后数', '数据', '据库']
    """
    if not holds(word):
        return [word]
    out: list[str] = []
    at = 0
    for run in _RUN.finditer(word):
        if run.start() > at:
            out.append(word[at : run.start()])
        chars = run.group()
        out.extend([chars] if len(chars) == 1 else [chars[i : i + 2] for i in range(len(chars) - 1)])
        at = run.end()
    if at < len(word):
        out.append(word[at:])
    return out

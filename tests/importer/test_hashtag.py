"""Tags written in a note's text: pure, no store."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from demarkus.errors import BadRequestError
from demarkus.importer import parse_note
from demarkus.importer.hashtag import inline_tags, joined_tags
from demarkus.importer.wikilink import Names, WikiLinks
from demarkus.protocol import MAX_PUBLISHER_BYTES, validate_publisher_metadata


@pytest.mark.parametrize(
    "line, tags",
    [
        ("Decided in the #weekly meeting.", ["weekly"]),
        ("#inbox/to-read first", ["inbox/to-read"]),  # a nested tag, at the start of a line
        ("#y1984 and #snake_case and #kebab-case", ["y1984", "snake_case", "kebab-case"]),
        ("#Weekly, #weekly and #WEEKLY", ["Weekly"]),  # one tag in any case, as first written
        ("#déjà-vu", ["déjà-vu"]),
        ("#a/ and #/b", ["a", "b"]),  # a slash at either end is no part of it
        ("#1984 is an issue", []),  # digits only
        ("#-- and #_ and # and #", []),  # no letter
        ("# A heading", []),
        ("C# and page#part and (#paren) and [#Context](#context)", []),  # not after a space
        ("a `#code` span", []),
        ("\\#escaped", []),
        ("#[[write path]] and #[[ a/b ]]", ["write path", "a/b"]),  # Logseq's, a name with spaces
        ("#[[a, b]] and x#[[c]]", []),  # a comma, or not after a space
    ],
)
def test_a_tag_is_a_hash_after_a_space_then_a_word_holding_a_letter(line: str, tags: list[str]):
    assert inline_tags(f"# Title\n\n{line}\n") == tags


def test_a_logseq_tag_naming_a_page_is_a_tag_and_a_link():
    wiki = WikiLinks(Names.of(["write path.md", "log.md"]), "/kb")
    note = parse_note(b"- Appends go down the #[[write path]].\n", "/kb/log.md", links=(wiki,), vault=True)
    assert note.metadata["tags"] == "write path"
    assert note.body == b"- Appends go down the #[write path](<write path.md>).\n"


def test_code_and_html_blocks_hold_no_tags():
    body = "# A\n\n```\n#fenced\n```\n\n    #indented\n\n<div>\n#html\n</div>\n\nand #real\n"
    assert inline_tags(body) == ["real"]


def test_joined_tags_keep_what_is_written_and_add_what_it_lacks_in_any_case():
    assert joined_tags("Storage,adr", ["storage", "Log", "ADR", "log", "raft"]) == "Storage,adr,Log,raft"
    assert joined_tags("", ["x", "X"]) == "x"
    assert joined_tags("a,A", []) == "a,A"  # the frontmatter's own, as written


def test_a_note_read_as_a_vaults_has_its_texts_tags_after_the_frontmatters():
    raw = b"---\ntags: [storage, adr]\n---\n# Log\n\nA #Storage note about #raft, and #raft again.\n"
    assert parse_note(raw, "/kb/log.md").metadata["tags"] == "storage,adr"  # without: the frontmatter's
    note = parse_note(raw, "/kb/log.md", vault=True)
    assert note.metadata["tags"] == "storage,adr,raft" and note.tags_left_out == ()
    bare = parse_note(b"# Log\n\n#raft\n", "/kb/log.md", vault=True)
    assert dict(bare.metadata) == {"title": "Log", "tags": "raft"}


def test_tags_past_the_metadata_limit_are_left_out_and_named_and_the_note_is_kept():
    words = [f"tag{n:03d}" for n in range(200)]  # about 1,400 bytes of tags
    raw = ("# Many\n\n" + " ".join(f"#{w}" for w in words) + "\n").encode()
    note = parse_note(raw, "/kb/many.md", vault=True)
    kept = note.metadata["tags"].split(",")
    assert kept == words[: len(kept)] and note.tags_left_out == tuple(words[len(kept) :])
    assert note.tags_left_out  # some did not fit
    size = sum(len(k) + len(v) for k, v in note.metadata.items())
    assert MAX_PUBLISHER_BYTES - len(",tag000") < size <= MAX_PUBLISHER_BYTES
    assert validate_publisher_metadata(note.metadata) == dict(note.metadata)


def test_a_note_with_the_most_keys_and_no_tags_key_takes_no_tags():
    keys = "".join(f"k{n}: v\n" for n in range(49))  # 49 keys and the title: the most allowed
    note = parse_note(f"---\n{keys}---\n# T\n\n#raft\n".encode(), "/kb/t.md", vault=True)
    assert "tags" not in note.metadata and note.tags_left_out == ("raft",)


TEXT = st.lists(
    st.sampled_from(["#ab", " #Ab/c-d", "#1984", " `#code` ", "#", "C#", "\n", " ", "word", "é", "*#x*", " #[[a b]]"])
    | st.text(max_size=3),
    max_size=60,
).map("".join)
"""Text with tags, non-tags and code among any characters."""


@settings(max_examples=300, deadline=None)
@given(TEXT, st.integers(0, 100) | st.integers(900, MAX_PUBLISHER_BYTES), st.sampled_from(["", "tags: x, y\n"]))
def test_tags_never_refuse_a_note_and_each_is_written_in_its_text(text: str, pad: int, tags: str):
    raw = f"---\n{tags}pad: '{'p' * pad}'\n---\n# T\n\n{text}\n".encode()
    try:
        plain = parse_note(raw, "/kb/t.md")
    except BadRequestError:
        return  # refused without reading tags too (over the limit, a control character)
    note = parse_note(raw, "/kb/t.md", vault=True)
    assert validate_publisher_metadata(note.metadata) == dict(note.metadata)
    assert {k: v for k, v in note.metadata.items() if k != "tags"} == {
        k: v for k, v in plain.metadata.items() if k != "tags"
    }
    held = plain.metadata.get("tags")
    written = note.metadata.get("tags")
    added = written.split(",")[len(held.split(",")) if held else 0 :] if written else []
    for tag in [*added, *note.tags_left_out]:
        written = f"#{tag}" in text if re.fullmatch(r"[\w/-]+", tag) else f"#[[{tag}]]" in text
        assert written and re.search(r"[^\W\d_]", tag) and "," not in tag

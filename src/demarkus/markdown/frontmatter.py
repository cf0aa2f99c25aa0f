"""YAML frontmatter of a user's note, turned into publisher metadata. Pure.

A note may open with a `---` block; the block becomes metadata and leaves the body::

    ---
    title: Segment log
    tags: [storage, adr]           # or "storage, adr"
    supersedes: ../adr/0002.md     # an alias of rel-supersedes; a string or a list
    rel-depends-on: [a.md, b.md]
    owner: ops                     # any other scalar key the metadata rules allow
    ---

Every value is read as text (PyYAML's base loader constructs no objects, so `date:
2026-01-31` and `draft: yes` stay as written). Lists become comma-separated values, the
form `tags` and `rel-*` take everywhere else; a nested mapping is refused.

Hugo writes the block in TOML between `+++` lines (`title = "Segment log"`); it is read
the same way, its dates, numbers and booleans as text (`2026-01-31`, `0.5`, `true`).
"""

from __future__ import annotations

import datetime
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import yaml

from ..errors import BadRequestError
from .relations import REL_PREFIX
from .sections import parse_outline, shown_title

try:  # the C loader when libyaml is there; the same rules either way
    from yaml import CBaseLoader as _Loader
except ImportError:  # pragma: no cover - depends on the wheel
    from yaml import BaseLoader as _Loader  # type: ignore[assignment]

__all__ = ["RELATION_ALIASES", "Frontmatter", "first_heading", "map_metadata", "parse_frontmatter", "split_frontmatter"]

RELATION_ALIASES = frozenset({"supersedes", "superseded-by", "depends-on", "implements", "derived-from", "related"})
"""Frontmatter keys read as `rel-<key>` (the predicates frozen worlds use)."""

_OPEN = re.compile(r"(---|\+\+\+)[ \t]*\r?\n")
_CLOSE = {
    "---": re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.MULTILINE),
    "+++": re.compile(r"^\+\+\+[ \t]*(?:\r?\n|\Z)", re.MULTILINE),
}
_LEADING_BLANK = re.compile(r"(?:[ \t]*\r?\n)+")


@dataclass(frozen=True, slots=True)
class Frontmatter:
    """A note split in two: the block (None when there is none) and the body after it."""

    block: str | None
    body: str
    toml: bool = False
    """The block is TOML (between `+++` lines), else YAML."""


def split_frontmatter(text: str) -> Frontmatter:
    """Split a leading `---` block (closed by `---` or `...`) or `+++` block (closed by
    `+++`) from the body; the blank lines right after the block go with it. A leading
    byte-order mark is dropped.

    Raises:
        BadRequestError: the block is opened but never closed.
    """
    text = text.removeprefix("\ufeff")
    opened = _OPEN.match(text)
    if opened is None:
        return Frontmatter(None, text)
    fence = opened.group(1)
    closed = _CLOSE[fence].search(text, opened.end())
    if closed is None:
        raise BadRequestError(
            f"the note opens a frontmatter block with `{fence}` but never closes it; "
            f"add a closing `{fence}` line after the last key"
        )
    rest = text[closed.end() :]
    blank = _LEADING_BLANK.match(rest)
    return Frontmatter(text[opened.end() : closed.start()], rest[blank.end() :] if blank else rest, fence == "+++")


def parse_frontmatter(block: str, *, toml: bool = False) -> dict[str, object]:
    """The block (YAML, or TOML with `toml`) as a mapping of keys to strings, lists or
    mappings (all leaves text).

    Raises:
        BadRequestError: not valid YAML (or TOML), or not a mapping of keys to values.
    """
    if toml:
        try:
            return {key: _as_text(value) for key, value in tomllib.loads(block).items()}
        except tomllib.TOMLDecodeError as exc:
            raise BadRequestError(f"the frontmatter is not valid TOML ({exc}); fix it") from None
    try:
        loaded = yaml.load(block, Loader=_Loader)  # the base loader builds no objects: safe
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 2} of the file, column {mark.column + 1}" if mark is not None else ""
        raise BadRequestError(
            f"the frontmatter is not valid YAML{where} ({exc.problem or exc}); fix it (quote values that contain `: `)"
        ) from None
    except (yaml.YAMLError, TypeError) as exc:
        raise BadRequestError(f"the frontmatter is not valid YAML ({exc}); fix it") from None
    if loaded is None or loaded == "":
        return {}
    if not isinstance(loaded, dict):
        raise BadRequestError("the frontmatter must be `key: value` lines; it holds a single value or a list")
    return {str(key): value for key, value in loaded.items()}


def _as_text(value: object) -> object:
    """A TOML value with its leaves as text, as the YAML base loader gives them."""
    if isinstance(value, dict):
        return {str(key): _as_text(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_text(item) for item in value]
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    return str(value)


def map_metadata(
    fields: Mapping[str, object],
    resolve: Callable[[str], str],
    declared: Mapping[str, Sequence[str]] | None = None,
) -> tuple[dict[str, str], tuple[str, ...]]:
    """Publisher metadata from frontmatter fields: `title`, `tags` (a list or a comma
    string), `rel-*` keys and their aliases (each reference passed through `resolve`),
    and every other key as text. `declared` relations (predicate -> references as
    written, found elsewhere than the frontmatter) join those of the same predicate, each
    reference once. Empty values are dropped. The keys are not checked against the
    metadata rules here; the caller does that once, for the whole document. Also the keys
    left out: metadata is text or a list of text, and a key holding a mapping or a list
    of lists (a reference manager's `authors: [{name: ...}]`) is not the note's to lose.
    """
    out: dict[str, str] = {}
    nested: list[str] = []
    relations: dict[str, list[str]] = {}
    for key in sorted(fields):
        value = fields[key]
        if isinstance(value, dict) or isinstance(value, list) and any(isinstance(v, (list, dict)) for v in value):
            nested.append(key)
            continue
        if key in RELATION_ALIASES or key.startswith(REL_PREFIX):
            name = key if key.startswith(REL_PREFIX) else REL_PREFIX + key
            references = [resolve(r) for r in _pieces(value)]
            relations.setdefault(name, [])
            relations[name].extend(r for r in references if r not in relations[name])
            continue
        if key == "tags":
            text = ",".join(_pieces(value))
        else:
            text = ", ".join(_pieces(value)) if isinstance(value, list) else str(value).strip()
        if text:
            out[key] = text
    for predicate, more in (declared or {}).items():
        held = relations.setdefault(REL_PREFIX + predicate, [])
        held.extend(r for r in more if r not in held)
    for name, held in relations.items():
        if held:
            out[name] = ", ".join(held)
    return out, tuple(nested)


_HEADING_LINE = re.compile(rb"^(?: {0,3}#(?:[ \t]|$)| {0,3}=+[ \t]*$)", re.MULTILINE)
"""A line that may open or underline a level-1 heading: `# Title`, or `===` under one."""
PREFIX_TRIES = 3
"""Lines that may hold the title read by parsing only the text up to them, before the
whole body is parsed: most notes open with their title."""


def first_heading(body: bytes) -> str | None:
    """The text of the first top-level level-1 heading (outside code blocks and lists), if
    any: a `# ` bullet of an outliner's page is one of its blocks, not its title. Without
    the id a heading may give itself (`# Guide {#guide}`), as the page shows it.

    The text up to a line that may hold it is parsed first: markdown reads a block from
    the lines before it and its own (a heading is one line, or a line and its `===`
    underline), so a heading there is one in the whole body; unless the body opens with
    `---`, which a later line may close as a front matter block."""
    if b"\r" in body or body.startswith((b"\xef\xbb\xbf", b"---")):  # a lone `\r` ends a line too
        return _title(body)
    for tried, match in enumerate(_HEADING_LINE.finditer(body)):
        if tried == PREFIX_TRIES:
            break
        line_end = body.find(b"\n", match.start())
        found = _title(body if line_end < 0 else body[: line_end + 1])
        if found is not None:
            return found
    else:
        return None  # no line may hold one
    return _title(body)


def _title(body: bytes) -> str | None:
    for section in parse_outline(body).sections:
        if section.level == 1 and not section.in_list and section.title.strip():
            return shown_title(section.title)
    return None


def _pieces(value: object) -> list[str]:
    """A list's items, or a comma string's pieces, trimmed and without empty ones."""
    items = [str(item) for item in value] if isinstance(value, list) else str(value).split(",")
    return [item.strip() for item in items if item.strip()]

"""One markdown file of a user's folder as a document: its path in the store, its body
without frontmatter and its publisher metadata. `parse_note` is pure; `read_file` reads
a file (never through a symlink) and nothing else.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from types import MappingProxyType
from typing import Generic, Protocol, TypeVar
from urllib.parse import unquote

from ..catalog import ALIAS_KEYS
from ..errors import BadRequestError, NoTextError
from ..markdown.frontmatter import first_heading, map_metadata, parse_frontmatter, split_frontmatter
from ..markdown.links import resolve_target
from ..markdown.relations import written_reference
from ..protocol import (
    MAX_BODY,
    MAX_METADATA,
    MAX_PUBLISHER_BYTES,
    MAX_PUBLISHER_KEYS,
    RESERVED_KEYS,
    validate_publisher_metadata,
    well_formed_key,
)
from ..store.layout import check_segments
from .blockref import Block, drop_block_ids, find_blocks
from .comment import drop_comments
from .hashtag import inline_tags, joined_tags
from .outliner import heading_lists
from .properties import drop_hidden_properties, split_properties

__all__ = [
    "MAX_FILE",
    "LinkForm",
    "Note",
    "NoteAliases",
    "NoteBlocks",
    "document_path",
    "has_note",
    "markdown_suffix",
    "note_file",
    "note_files",
    "note_name",
    "page_name",
    "parse_note",
    "shown",
]

T = TypeVar("T")

MAX_FILE = MAX_BODY + MAX_METADATA
"""Bytes read from one file at most: a body at the limit plus a frontmatter block."""
OTHER_MARKDOWN = (".mdx", ".markdown", ".mdown", ".mkd", ".mkdn", ".qmd", ".rmd")
"""The other names a markdown file goes by (Docusaurus' `.mdx`, Jekyll's `.markdown`,
Quarto's `.qmd`, R Markdown's `.Rmd`), in the order one is read when several differ only
by it. A note read from such a file is the document of the same name ending in `.md`, as
every document does."""
SPELLINGS = tuple(
    spelled for suffix in OTHER_MARKDOWN for spelled in (suffix, suffix.upper(), "." + suffix[1:].capitalize())
)
"""How each of `OTHER_MARKDOWN` may be written: in lower case, upper case, or with a
capital first letter (`.Rmd`, as R Markdown writes it)."""


class LinkForm(Protocol):
    """A way a folder's notes name each other that the store cannot follow as written
    (`site.Sites`: by a web address; `wikilink.WikiLinks`: as `[[name]]`)."""

    def localize(self, body: str, path: str) -> str:
        """`body` of the document at `path` with such links made links to the notes."""
        ...

    def document(self, reference: str, path: str) -> tuple[str, str] | None:
        """(document path, fragment) a relation written so names from `path`; None if not one."""
        ...

    def relations(self, body: str, path: str) -> Mapping[str, Sequence[tuple[str, str]]]:
        """The typed relations `body` declares in this form: predicate -> (document path,
        fragment) of each target."""
        ...


@dataclass(frozen=True, slots=True)
class Note:
    """What one version of a file becomes: a document path, a body and metadata."""

    path: str
    body: bytes
    metadata: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    tags_left_out: tuple[str, ...] = ()
    """Tags its text writes (`#tag`) that the metadata limit left no room for."""
    keys_nested: tuple[str, ...] = ()
    """Frontmatter keys left out for holding a mapping or a list of lists."""
    keys_unspelled: tuple[str, ...] = ()
    """Frontmatter keys left out for being spelled by no metadata key (`作者`)."""
    keys_taken: tuple[str, ...] = ()
    """Frontmatter keys left out for being spelled like a key the note or the server
    already has (`Title` beside `title`, `modified`)."""
    keys_crowded: tuple[str, ...] = ()
    """Frontmatter keys left out for the metadata limits (the longest values first)."""

    @property
    def keys_left_out(self) -> tuple[str, ...]:
        """Every frontmatter key left out."""
        return self.keys_nested + self.keys_unspelled + self.keys_taken + self.keys_crowded


def shown(relative: str) -> str:
    """A file name fit to print, even when it is not valid UTF-8."""
    return relative.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def markdown_suffix(relative: str) -> str | None:
    """The markdown suffix `relative` ends in: `.md`, or one of `OTHER_MARKDOWN` as
    `SPELLINGS` writes it (`.MDX`, `.Rmd`); None for any other file."""
    if relative.endswith(".md"):
        return ".md"
    return next((spelled for spelled in SPELLINGS if relative.endswith(spelled)), None)


def note_name(relative: str) -> str:
    """The note a markdown file at `relative` holds, named as its document is: `b.md` for
    `b.mdx` or `b.markdown`; any other path as it is."""
    suffix = markdown_suffix(relative)
    return relative if suffix in (None, ".md") else relative[: -len(suffix)] + ".md"


def document_path(relative: str, prefix: str) -> str:
    """The document path for a file at `relative` (a `/`-separated path inside the
    folder) under `prefix`: its `note_name`.

    Raises:
        BadRequestError: the name cannot be a document path (not UTF-8, hidden, a
            `versions` folder, too long or too deep); the message says what to rename.
    """
    try:
        relative.encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequestError("the file name is not valid UTF-8; rename the file") from None
    path = prefix.rstrip("/") + "/" + note_name(relative)
    try:
        return "/" + "/".join(check_segments(path))
    except BadRequestError as exc:
        raise BadRequestError(f"the file name cannot be a document path: {exc}") from None


def parse_note(
    raw: bytes,
    path: str,
    extra: Mapping[str, str] | None = None,
    links: Sequence[LinkForm] = (),
    *,
    vault: bool = False,
) -> Note:
    """The note at document path `path` from the file's bytes; `extra` metadata (git's)
    is added after the frontmatter's. A note without a title takes its first H1. Links
    and relations in one of the `links` forms (a web address, a wiki link) name the note
    in the store, and the relations a form declares in the body join the frontmatter's.
    A `vault` note is read as the editors that write wiki links write it: its comments
    (`%%...%%`) are left out (`comment`); without a `---` block, the `key:: value` lines
    it opens with are its frontmatter (`properties`), the block properties Logseq never
    shows and Obsidian's `^id` block ids are left out (`blockref`), the child blocks an
    outliner indents under a heading are a list (`outliner`), and the tags its text
    writes (`hashtag.inline_tags`) join the frontmatter's, as many as the metadata limit
    leaves room for: a note is never refused for them, and those left out are named in
    `Note.tags_left_out`.

    Raises:
        NoTextError: no text besides the frontmatter.
        BadRequestError: not UTF-8, too large, bad frontmatter, or metadata the
            rules refuse; the message says what to fix.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequestError(
            f"the file is not valid UTF-8 (byte {exc.start}); save it as UTF-8 and import again"
        ) from None
    parts = split_frontmatter(text)
    fields = parse_frontmatter(parts.block, toml=parts.toml) if parts.block is not None else {}
    text = drop_comments(parts.body) if vault else parts.body
    if vault and parts.block is None:
        fields, rest = split_properties(text)
        text = rest if rest.strip() else text  # a page of properties only: they are its text too
    if vault:
        text = drop_block_ids(drop_hidden_properties(heading_lists(text)))
    tags = inline_tags(text) if vault else []  # before links are rewritten: `#[[a b]]` is a tag
    declared: dict[str, list[str]] = {}
    for form in links:
        for predicate, targets in form.relations(text, path).items():
            declared.setdefault(predicate, []).extend(written_reference(*target) for target in targets)
        text = form.localize(text, path)
    metadata, nested = map_metadata(fields, lambda reference: _resolve(path, reference, links), declared)
    body = text.encode("utf-8")
    if len(body) > MAX_BODY:
        raise BadRequestError(
            f"the body is {len(body)} bytes; a document holds at most {MAX_BODY} (1 MiB); split the file"
        )
    if not body.strip():
        raise NoTextError(
            "the file has no text besides its frontmatter, and a document needs text: add some to import it"
        )
    if "title" not in metadata:
        heading = first_heading(body)
        if heading:
            metadata["title"] = heading
        elif vault and (name := page_name(path)).isprintable():  # those editors show it by its file's name
            metadata["title"] = name
    metadata, unspelled, taken, statuses = _spelled(metadata)
    metadata.update(extra or {})
    metadata, crowded = _within_limits(metadata, kept=set(extra or {}))
    try:
        checked = validate_publisher_metadata(metadata)
    except BadRequestError as exc:
        raise BadRequestError(f"frontmatter: {exc}") from None
    left_out = _add_tags(checked, [*statuses, *tags])
    return Note(
        path=path,
        body=body,
        metadata=MappingProxyType(checked),
        tags_left_out=left_out,
        keys_nested=tuple(nested),
        keys_unspelled=unspelled,
        keys_taken=taken,
        keys_crowded=crowded,
    )


_UNSPELLED = re.compile(r"[^a-z0-9]+")
_NAMING_KEYS = frozenset({"title", "tags", *ALIAS_KEYS})
"""Keys that name a note or say what it is: the last to give way to the metadata limits."""


def _within_limits(metadata: dict[str, str], kept: AbstractSet[str]) -> tuple[dict[str, str], tuple[str, ...]]:
    """The metadata within `MAX_PUBLISHER_BYTES` and `MAX_PUBLISHER_KEYS`, and the keys
    left out for it: the longest values first (an `abstract` a reference manager writes),
    never a key that names the note, a relation or one of `kept`. A note whose frontmatter
    is over the limits is imported without them, not refused; what is still over is
    refused by the rules."""
    spare = sorted(
        (key for key in metadata if key not in kept and key not in _NAMING_KEYS and not key.startswith("rel-")),
        key=lambda key: (-_size({key: metadata[key]}), key),
    )
    out = dict(metadata)
    left_out: list[str] = []
    for key in spare:
        if len(out) <= MAX_PUBLISHER_KEYS and _size(out) <= MAX_PUBLISHER_BYTES:
            break
        del out[key]
        left_out.append(key)
    return out, tuple(left_out)


def _spelled(
    metadata: Mapping[str, str],
) -> tuple[dict[str, str], tuple[str, ...], tuple[str, ...], list[str]]:
    """The frontmatter's keys as metadata spells them, those left out (spelled as no key;
    spelled as a key the note or the server has), and its status as tags. An editor's own
    spelling names the same key (`created_at`, `Due Date`: `created-at`, `due-date`), and
    a value written over several lines is one line (as YAML folds it). A `status` (a key
    the server sets) becomes a tag, `status:draft`, as the catalog's filters and the stale
    marker read a status; a key nothing is left of, or spelled like another key of the
    note or one the server sets (`modified`, which editors write too), is left out, not
    the whole note."""
    out: dict[str, str] = {}
    unspelled: list[str] = []
    taken: list[str] = []
    statuses: list[str] = []
    for key, value in metadata.items():
        spelled = key if well_formed_key(key) else _UNSPELLED.sub("-", key.lower()).strip("-")
        value = " ".join(value.split()) if "\n" in value or "\r" in value else value
        if spelled == "status":
            statuses += [f"status:{piece.strip()}" for piece in value.split(",") if piece.strip()]
        elif not spelled:
            unspelled.append(key)
        elif spelled in RESERVED_KEYS or spelled in out or spelled != key and spelled in metadata:
            taken.append(key)
        else:
            out[spelled] = value
    return out, tuple(unspelled), tuple(taken), statuses


def page_name(path: str) -> str:
    """A note's name in the editors that write wiki links: its file name without `.md`,
    Logseq's `___` (formerly `%2F`) as the `/` of a namespace and its other escapes
    decoded (`New to Logseq%3F.md` is `New to Logseq?`); a Logseq journal
    (`journals/2024_01_15.md`) by the date it is for, as Logseq names it by default
    (`Jan 15th, 2024`, its links `[[Jan 15th, 2024]]`)."""
    stem = posixpath.basename(note_name(path)).removesuffix(".md")
    if (day := _journal_day(path, stem)) is not None:
        return f"{_MONTHS[day.month - 1]} {day.day}{_ordinal(day.day)}, {day.year}"
    return unquote(stem.replace("___", "/"))


_JOURNAL_FILE = re.compile(r"(\d{4})_(\d{2})_(\d{2})")
"""Logseq's default journal file name, `yyyy_MM_dd`."""
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
"""Logseq's `MMM` (English whatever the machine's locale, as its default title format)."""


def _journal_day(path: str, stem: str) -> date | None:
    if posixpath.basename(posixpath.dirname(path)) != "journals" or not (found := _JOURNAL_FILE.fullmatch(stem)):
        return None
    try:
        return date(*(int(part) for part in found.groups()))
    except ValueError:  # 2024_02_30
        return None


def _ordinal(day: int) -> str:
    """`st`, `nd`, `rd` or `th`, as an English date writes the day (`1st`, `12th`, `22nd`)."""
    if day % 100 in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


def _add_tags(metadata: dict[str, str], found: Sequence[str]) -> tuple[str, ...]:
    """Join `found` to the valid `metadata`'s `tags` one by one while the metadata stays
    within the publisher limits (`MAX_PUBLISHER_BYTES`, `MAX_PUBLISHER_KEYS`); the tags
    that did not fit."""
    left_out: list[str] = []
    for tag in found:
        tags = joined_tags(metadata.get("tags", ""), [tag])
        if tags == metadata.get("tags"):
            continue  # the frontmatter's already
        grown = {**metadata, "tags": tags}
        if len(grown) > MAX_PUBLISHER_KEYS or _size(grown) > MAX_PUBLISHER_BYTES:
            left_out.append(tag)
            continue
        metadata["tags"] = tags
    return tuple(left_out)


def _size(metadata: Mapping[str, str]) -> int:
    """Bytes of keys and values, as `validate_publisher_metadata` counts them."""
    return sum(len(key.encode("utf-8")) + len(value.encode("utf-8")) for key, value in metadata.items())


def is_app_folder(path: Path) -> bool:
    """Whether `path` is an editor's own folder, which holds no notes: a Logseq graph's
    `logseq/` (its `config.edn`, and backups and old versions of pages as `.md` files
    under `bak/` and `version-files/`). Hidden folders (Obsidian's `.obsidian`, Logseq's
    `.recycle`) are never read anyway."""
    return path.name == "logseq" and (path / "config.edn").is_file()


def in_app_folder(folder: Path, parts: Sequence[str]) -> bool:
    """Whether the path `parts` (inside `folder`) is or lies in an `is_app_folder`."""
    return any(part == "logseq" and is_app_folder(folder.joinpath(*parts[: i + 1])) for i, part in enumerate(parts))


def note_file(folder: Path, name: str) -> str | None:
    """The file the note `name` (a path ending in `.md`) is read from: `name` itself, or
    the same path under another markdown name (`OTHER_MARKDOWN`, in its order); None
    when the folder holds none."""
    files = note_files(name)
    parts = name.split("/")
    if not files or not _readable_folder(folder, parts[:-1]):
        return None
    here = folder.joinpath(*parts[:-1])
    return next((file for file in files if _regular(here / posixpath.basename(file))), None)


def note_files(name: str) -> tuple[str, ...]:
    """The files the note `name` may be read from, the one read first first: `name`,
    then `name` under each of `OTHER_MARKDOWN` (as `SPELLINGS` writes them, in order)."""
    if not name.endswith(".md"):
        return ()
    stem = name[: -len(".md")]
    return (name, *(stem + spelled for spelled in SPELLINGS))


def has_note(folder: Path, name: str) -> bool:
    """Whether the folder holds the note `name` (`note_file`)."""
    return note_file(folder, name) is not None


def _readable_folder(folder: Path, parts: Sequence[str]) -> bool:
    """Whether the folder `parts` names inside `folder` is one an import enters: reached
    through no symlink, not hidden and no `is_app_folder`."""
    if not all(parts) or any(part.startswith(".") for part in parts) or in_app_folder(folder, parts):
        return False
    here = folder
    for part in parts:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except OSError:
            return False
        if not stat.S_ISDIR(mode):
            return False
    return True


def _regular(path: Path) -> bool:
    """Whether `path` is a regular file (not through a symlink at its end)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


class PerFolder(Generic[T]):
    """What a folder's notes say together (their names, their targets): read from its
    listing when first asked for, or `read` from a listing already made (an import's
    scan, a watcher's after each change)."""

    def __init__(self, list_notes: Callable[[], Iterable[str]]) -> None:
        self._list_notes = list_notes
        self._value: T | None = None

    def current(self) -> T:
        if self._value is None:
            self.read(self._list_notes())
        assert self._value is not None
        return self._value

    def read(self, files: Iterable[str]) -> None:
        """Read it from the notes `files` (paths in the folder)."""
        self._value = self._gather(sorted(files))

    def _gather(self, files: Sequence[str]) -> T:
        raise NotImplementedError


class PerNote(Generic[T]):
    """What `read` finds in each note of a folder, read again only when the file's size or
    modification time changed (a watcher asks after every batch); what it keeps is for the
    notes of the last listing only."""

    def __init__(self, folder: Path, read: Callable[[Path], T]) -> None:
        self.folder = folder
        self._read = read
        self._seen: dict[str, tuple[int, int, T]] = {}

    def __call__(self, files: Sequence[str]) -> dict[str, T]:
        """Each of `files` (paths in the folder) with what was found in it."""
        seen, self._seen = self._seen, {}
        for relative in files:
            try:
                st = os.stat(self.folder / relative, follow_symlinks=False)
            except OSError:
                continue
            known = seen.get(relative)
            if known is None or known[:2] != (st.st_mtime_ns, st.st_size):
                known = (st.st_mtime_ns, st.st_size, self._read(self.folder / relative))
            self._seen[relative] = known
        return {relative: known[2] for relative, known in self._seen.items()}


class NoteAliases(PerNote[tuple[str, ...]]):
    """The aliases each note of a folder gives itself in its frontmatter (a page of
    `key:: value` properties: its `alias` and its `title`, Logseq's names). A note that
    cannot be read or parsed has none: its import reports why."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder, lambda file: _aliases(file))


class NoteBlocks(PerNote[Mapping[str, Block]]):
    """The block ids each note of a folder declares for other notes to link to
    (`blockref`). A note that cannot be read declares none."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder, lambda file: _blocks(file))


FRONTMATTER_HEAD = 2 * MAX_METADATA
"""Bytes of a file read for its aliases: a frontmatter block longer than this holds more
metadata than a document may, and its note is refused anyway."""


def _aliases(file: Path) -> tuple[str, ...]:
    try:  # the head may end inside a character: only the body beyond the block can be cut
        parts = split_frontmatter(read_file(file, FRONTMATTER_HEAD).decode("utf-8", "replace"))
        if parts.block is None:
            fields, _ = split_properties(parts.body)  # a page opening with `alias:: ...` (Logseq's)
        elif "alias" in parts.block:
            fields = parse_frontmatter(parts.block, toml=parts.toml)
        else:  # most notes have none: no YAML to read
            return ()
    except BadRequestError:
        return ()
    found: list[str] = []
    title = fields.get("title") if parts.block is None else None  # a page's own name (Logseq's)
    if isinstance(title, str):
        found.append(title)
    for key in ALIAS_KEYS:
        value = fields.get(key)
        if isinstance(value, str):
            value = value.split(",")
        if isinstance(value, list):
            found.extend(item.strip() for item in value if isinstance(item, str) and item.strip())
    return tuple(dict.fromkeys(found))


def _blocks(file: Path) -> dict[str, Block]:
    try:
        text = read_file(file).decode("utf-8")
    except (BadRequestError, UnicodeDecodeError):
        return {}
    return find_blocks(heading_lists(split_frontmatter(text).body))  # the outline it is imported with


def read_file(file: Path, head: int | None = None) -> bytes:
    """The bytes of a regular file, at most `MAX_FILE`, never through a symlink; with
    `head`, its first `head` bytes whatever its size.

    Raises:
        BadRequestError: a symlink, not a regular file, or (without `head`) too large.
    """
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        if os.path.islink(file):
            raise BadRequestError("the file is a symbolic link; symlinks are not followed") from None
        raise BadRequestError(f"the file cannot be read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BadRequestError("not a regular file; only markdown files are imported")
        if head is None and st.st_size > MAX_FILE:
            raise BadRequestError(
                f"the file is {st.st_size} bytes; a document holds at most {MAX_BODY} (1 MiB); split the file"
            )
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(MAX_FILE + 1 if head is None else head)
    finally:
        os.close(fd)
    if head is None and len(data) > MAX_FILE:
        raise BadRequestError(f"the file grew past {MAX_FILE} bytes while it was read; split it")
    return data


def _resolve(path: str, reference: str, links: Sequence[LinkForm] = ()) -> str:
    """A relation reference written as a relative file path (`../b.md`, `b.md#api`), or
    in one of the `links` forms, becomes the imported document's path; anything else
    stays as written (absolute paths are document paths already, and bad references are
    reported when read)."""
    for form in links:
        local = form.document(reference, path)
        if local is not None:
            return written_reference(*local)
    if reference.startswith(("/", "#")) or "://" in reference or any(ch.isspace() for ch in reference):
        return reference
    try:
        target = resolve_target(path, reference)
    except BadRequestError:
        return reference
    if target.external or target.authority is not None:
        return reference
    return written_reference(target.target, target.fragment)

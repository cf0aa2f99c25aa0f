"""Import a whole folder: find its markdown files, bring each document in step
(`apply.import_file`), optionally archive the documents whose file is gone, and sum up.

The folder is only read. Hidden folders (`.git`, `.obsidian`) are not entered, nor is a
Logseq graph's own `logseq/` folder (`note.is_app_folder`: settings and page backups), nor
what git ignores there (`ignored.Ignored`: a repository's `node_modules/`). A symlink
is never followed: one that stays inside the folder is skipped (its target is imported
under its own name), one that leads out of it is refused.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from ..errors import BadRequestError, DemarkusError
from ..protocol import in_scope, normalize_scope
from .apply import FileResult, Outcome, Source, Target, archive_document, import_file
from .ignored import Ignored
from .note import document_path, is_app_folder, markdown_suffix, note_files, note_name, shown

__all__ = ["Scan", "Summary", "documents_under", "import_folder", "scan_folder"]

_ENTRY = re.compile(r"- \[.*\]\((.+)\)")
MAX_FILES = 1_000_000
"""Markdown files one import reads, at most (their names are held in memory)."""
MAX_NAMED = 5
"""Shadowed files a summary names; the rest it counts."""
MAX_LISTED = 1_000_000
"""Documents `--archive-missing` looks at under the prefix, at most."""


@dataclass(frozen=True, slots=True)
class Scan:
    """The folder's markdown files (`/`-separated, relative, sorted) and its symlinks."""

    files: tuple[str, ...]
    skipped: tuple[str, ...]
    """Symlinks that stay inside the folder."""
    escaping: tuple[str, ...]
    """Symlinks that lead out of it."""
    shadowed: tuple[str, ...] = ()
    """Markdown files not read because a file of the same note is (`b.mdx` beside `b.md`:
    both would be the document `b.md`)."""


@dataclass(frozen=True, slots=True)
class Summary:
    """Every file's result, in path order, and the counts the command prints."""

    results: tuple[FileResult, ...]
    shadowed: tuple[str, ...] = ()
    """Markdown files that were not read (`Scan.shadowed`)."""

    def count(self, outcome: Outcome) -> int:
        return sum(1 for r in self.results if r.outcome == outcome)

    @property
    def versions(self) -> int:
        return sum(r.versions for r in self.results)

    @property
    def refused(self) -> tuple[FileResult, ...]:
        return tuple(r for r in self.results if r.outcome == Outcome.REFUSED)

    @property
    def ok(self) -> bool:
        return not self.refused and not any(r.problems for r in self.results)

    def lines(self) -> list[str]:
        """The summary as printed: the counts, then one line per problem."""
        counts = ", ".join(f"{self.count(o)} {o.value}" for o in Outcome)
        out = [f"{counts}; {self.versions} versions added"]
        if self.shadowed:
            out.append(
                _not_read(
                    [shown(name) for name in self.shadowed],
                    "beside a file of the same name read as the same document (b.md before b.mdx); "
                    "rename one to import both",
                )
            )
        textless = [shown(r.relative) for r in self.results if r.why_skipped]
        if textless:
            out.append(
                _not_read(
                    textless,
                    "with no text besides the frontmatter, as a site's list page often is "
                    "(a Hugo section's _index.md); add text to import one",
                )
            )
        for result in self.results:
            name = result.relative and shown(result.relative) or result.path
            for problem in result.problems:
                kind = "refused" if result.outcome == Outcome.REFUSED else "warning"
                out.append(f"{kind} {name}: {problem}")
        return out


def _not_read(names: list[str], why: str) -> str:
    """The summary's line for files left out without a failure: the first few named."""
    more = f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else ""
    files = "file" if len(names) == 1 else "files"
    return f"not read: {len(names)} {files} ({', '.join(names[:MAX_NAMED])}{more}) {why}"


def scan_folder(folder: Path) -> Scan:
    """Walk `folder` (never through a symlink, past nothing git ignores) for markdown files
    (`note.markdown_suffix`): of the files of one note (`b.md`, `b.mdx`) the first
    `note.note_files` names is read.

    Raises:
        BadRequestError: more than `MAX_FILES` of them.
    """
    top = folder.resolve()
    ignored = Ignored.of(folder)
    notes: dict[str, list[str]] = {}
    skipped: list[str] = []
    escaping: list[str] = []
    count = 0
    for here, dirs, names in os.walk(folder):
        base = Path(here)
        relative = base.relative_to(folder).as_posix()
        prefix = "" if relative == "." else relative + "/"
        kept = []
        for name in sorted(dirs):
            if name.startswith(".") or is_app_folder(base / name) or prefix + name in ignored:
                continue
            if (base / name).is_symlink():
                (skipped if _inside(base / name, top) else escaping).append(prefix + name)
                continue
            kept.append(name)
        dirs[:] = kept
        for name in names:
            if markdown_suffix(name) is None or prefix + name in ignored:
                continue
            if (base / name).is_symlink():
                (skipped if _inside(base / name, top) else escaping).append(prefix + name)
                continue
            notes.setdefault(note_name(prefix + name), []).append(prefix + name)
            count += 1
            if count > MAX_FILES:
                raise BadRequestError(
                    f"{folder} holds more than {MAX_FILES} markdown files; import its folders one at a "
                    "time, each with its own --prefix"
                )
    files: list[str] = []
    shadowed: list[str] = []
    for name, found in notes.items():
        order = note_files(name)
        ranked = sorted(found, key=order.index)
        files.append(ranked[0])
        shadowed.extend(ranked[1:])
    return Scan(tuple(sorted(files)), tuple(sorted(skipped)), tuple(sorted(escaping)), tuple(sorted(shadowed)))


async def import_folder(
    source: Source,
    target: Target,
    *,
    archive_missing: bool = False,
    progress: Callable[[int], None] | None = None,
    scan: Scan | None = None,
) -> Summary:
    """Import every markdown file of `source.folder` into `target`; with
    `archive_missing`, archive the documents under the prefix that no file maps to.
    `progress(n)` is called after each file; `scan` is the folder's, when already made."""
    scan = scan if scan is not None else scan_folder(source.folder)
    results: list[FileResult] = []
    for relative in scan.escaping:
        reason = "a symbolic link that leads out of the folder; copy the file in instead"
        results.append(FileResult(relative, "", Outcome.REFUSED, problems=(reason,)))
    results.extend(FileResult(relative, "", Outcome.SKIPPED) for relative in scan.skipped)
    if source.history is not None:
        source.history.expect(source.folder / relative for relative in scan.files)
    for relative in scan.files:
        results.append(await import_file(source, target, relative))
        if progress is not None:
            progress(1)
    if archive_missing:
        present = set(_paths(scan, source.prefix))
        try:
            gone = [p async for p in documents_under(target, source.prefix) if p not in present]
        except DemarkusError as exc:
            reason = f"--archive-missing could not list {source.prefix}: {exc.message}"
            results.append(FileResult("", source.prefix, Outcome.REFUSED, problems=(reason,)))
            gone = []
        for path in gone:
            results.append(await archive_document(target, path))
    return Summary(tuple(sorted(results, key=lambda r: (not r.relative, r.relative, r.path))), scan.shadowed)


async def documents_under(target: Target, prefix: str) -> AsyncIterator[str]:
    """Every active document under `prefix`, walking LIST pages folder by folder."""
    scope = normalize_scope(prefix)
    folders = [scope]
    seen = 0
    while folders:
        folder = folders.pop()
        cursor: str | None = None
        while True:
            response = await target.backend.list(folder, token=target.token, cursor=cursor)
            if response.status == "not-found" and folder == scope:
                return
            response.raise_for_status()
            for line in response.text.splitlines():
                found = _ENTRY.fullmatch(line)
                if found is None:
                    continue
                name = unquote(found.group(1))
                child = folder.rstrip("/") + "/" + name.rstrip("/")
                if name.endswith("/"):
                    folders.append(child)
                elif in_scope(child, scope):
                    seen += 1
                    if seen > MAX_LISTED:
                        return
                    yield child
            cursor = response.metadata.get("next-cursor")
            if not cursor:
                break


def _paths(scan: Scan, prefix: str) -> Iterator[str]:
    """The document path of every file and skipped symlink the folder holds."""
    for relative in (*scan.files, *scan.skipped, *scan.escaping):
        try:
            yield document_path(relative, prefix)
        except DemarkusError:
            continue


def _inside(link: Path, top: Path) -> bool:
    try:
        return link.resolve().is_relative_to(top)
    except (OSError, RuntimeError):
        return False

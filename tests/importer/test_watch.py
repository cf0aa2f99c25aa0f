"""A folder followed as it changes (`FolderSync.run`): an edit, a new file, a deletion, a
rename, a new folder and a removed one each show in `mark_lookup` and the relation graph
within 2 s, the store never writes the folder, and a watch on a folder that does not
exist fails at once. Waits are bounded and follow the sync's own reports (no sleeps)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from demarkus.graph import GraphStore
from demarkus.importer import Source, Target
from demarkus.importer.folder import scan_folder
from demarkus.importer.myst import FolderTargets, NoteTargets
from demarkus.importer.sync import FolderSync
from demarkus.importer.wikilink import FolderNames
from demarkus.mcp.server import LocalResolver
from demarkus.mcp.tools import Tools
from demarkus.service import Service

from .test_folder import tree_state

AUTHORITY = "mark://localhost"
VISIBLE_WITHIN = 2.0


class Followed:
    """A running sync, its reports as they come, and the tools an agent would use."""

    def __init__(self, sync: FolderSync, tools: Tools, reports: asyncio.Queue[str]) -> None:
        self.sync, self.tools, self.reports = sync, tools, reports

    async def lookup(self, query: str) -> str:
        return await self.tools.lookup(query, "/", None, 10, "body", 0)

    async def until(self, check: Callable[[], Awaitable[bool]], what: str) -> float:
        """Seconds until `check` holds, waking on each report; fails after 2 s."""
        started = time.monotonic()
        while not await check():
            left = VISIBLE_WITHIN - (time.monotonic() - started)
            if left <= 0:
                pytest.fail(f"{what} not visible within {VISIBLE_WITHIN} s")
            try:
                await asyncio.wait_for(self.reports.get(), left)
            except TimeoutError:
                continue
        return time.monotonic() - started


@contextlib.asynccontextmanager
async def following(
    folder: Path, root: Path, names: FolderNames | None = None, targets: FolderTargets | None = None
) -> AsyncIterator[Followed]:
    """A sync of `folder` into a new store at `root`, caught up, until the block ends."""
    root.mkdir()
    service = Service.open(root, trusted=True, dates_versions=True)
    graph = GraphStore(None)
    reports: asyncio.Queue[str] = asyncio.Queue()
    sync = FolderSync(
        Source(folder, "/notes", names=names, targets=targets),
        Target(service, dates_versions=True),
        reports.put_nowait,
        service=service,
        graph=graph,
        authority=AUTHORITY,
    )
    stop = asyncio.Event()
    caught: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(sync.run(stop, caught_up=lambda _summary: caught.set_result(None)))
    await asyncio.wait_for(asyncio.shield(caught), 10)
    tools = Tools(LocalResolver(service, AUTHORITY, graph, scope="/"))
    try:
        yield Followed(sync, tools, reports)
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
        service.close()


@pytest.fixture
async def followed(tmp_path: Path) -> AsyncIterator[tuple[Followed, Path]]:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "alpha.md").write_text("---\ntitle: Alpha\nsupersedes: beta.md\n---\nThe quorum holds.\n")
    (folder / "beta.md").write_text("# Beta\n\nLease heartbeat interval.\n")
    async with following(folder, tmp_path / "store") as run:
        yield run, folder


async def test_each_change_to_the_folder_shows_in_lookup_within_two_seconds(followed):
    run, folder = followed
    assert "/notes/beta.md" in await run.lookup("lease heartbeat")
    before = tree_state(folder)

    async def shows(query: str, path: str) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return path in await run.lookup(query)

        return check

    async def gone(query: str, path: str) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return path not in await run.lookup(query)

        return check

    (folder / "beta.md").write_text("# Beta\n\nLease heartbeat interval, now with a snapshot cadence.\n")
    await run.until(await shows("snapshot cadence", "/notes/beta.md"), "an edit")

    (folder / "gamma.md").write_text("# Gamma\n\nThe learner catches up at a fixed rate.\n")
    await run.until(await shows("learner catches", "/notes/gamma.md"), "a new file")

    (folder / "gamma.md").rename(folder / "delta.md")
    await run.until(await shows("learner catches", "/notes/delta.md"), "a renamed file")
    await run.until(await gone("learner catches", "/notes/gamma.md"), "the old name of a renamed file")

    (folder / "beta.md").unlink()
    await run.until(await gone("lease heartbeat", "/notes/beta.md"), "a deletion")

    sub = folder / "runbooks"
    staged = folder.parent / "staged"
    staged.mkdir()
    (staged / "restore.md").write_text("# Restore\n\nCheck the quorum before a restore.\n")
    staged.rename(sub)  # a whole folder appears at once
    await run.until(await shows("restore", "/notes/runbooks/restore.md"), "a folder moved in")
    shutil.rmtree(sub)
    await run.until(await gone("restore", "/notes/runbooks/restore.md"), "a folder removed")

    history = await run.tools.versions("/notes/beta.md")
    assert "total: 2\n" in history  # the edit made exactly one more version
    assert "archived" in await run.tools.fetch("/notes/beta.md")  # the deletion archived it
    assert tree_state(folder) != before  # the test changed the folder ...
    assert not list(folder.rglob(".demarkus*"))  # ... the sync wrote nothing into it


async def test_the_relation_graph_follows_the_folder(followed):
    run, folder = followed
    assert "supersedes" in await run.tools.backlinks("/notes/beta.md")
    (folder / "alpha.md").write_text("---\ntitle: Alpha\n---\nThe quorum holds, on its own now.\n")

    async def no_backlink() -> bool:
        return "supersedes" not in await run.tools.backlinks("/notes/beta.md")

    await run.until(no_backlink, "a relation removed from the frontmatter")


async def test_a_wiki_link_to_a_note_that_comes_later_leads_to_it_once_its_note_changes(tmp_path: Path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "alpha.md").write_text("# Alpha\n\nSee [[Gamma]] and [[beta|the beta]].\n")
    (folder / "beta.md").write_text("# Beta\n")
    async with following(folder, tmp_path / "store", FolderNames(lambda: scan_folder(folder).files)) as run:
        alpha = await run.tools.fetch("/notes/alpha.md")
        assert "See [[Gamma]] and [the beta](beta.md).\n" in alpha  # no gamma.md yet
        (folder / "gamma.md").write_text("# Gamma\n")
        (folder / "alpha.md").write_text("# Alpha\n\nSee [[Gamma]] and [[beta|the beta]], again.\n")

        async def linked() -> bool:
            return "(/notes/alpha.md)" in await run.tools.backlinks("/notes/gamma.md")

        await run.until(linked, "a wiki link to a new note")
        assert "See [Gamma](gamma.md) and [the beta](beta.md), again.\n" in await run.tools.fetch("/notes/alpha.md")


async def test_a_link_to_a_myst_target_declared_later_leads_to_it_once_its_note_changes(tmp_path: Path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "alpha.md").write_text("# Alpha\n\nSee [the lease](#lease-rules).\n")
    targets = FolderTargets(lambda: scan_folder(folder).files, NoteTargets(folder))
    async with following(folder, tmp_path / "store", targets=targets) as run:
        assert "See [the lease](#lease-rules).\n" in await run.tools.fetch("/notes/alpha.md")  # no target yet
        (folder / "beta.md").write_text("# Beta\n\n(lease-rules)=\n## Leases\n")
        (folder / "alpha.md").write_text("# Alpha\n\nSee [the lease](#lease-rules), again.\n")

        async def linked() -> bool:
            return "(/notes/alpha.md)" in await run.tools.backlinks("/notes/beta.md")

        await run.until(linked, "a link to a new target")
        assert "See [the lease](beta.md#leases), again.\n" in await run.tools.fetch("/notes/alpha.md")


async def test_a_note_with_no_text_is_reported_skipped_with_why(tmp_path: Path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "alpha.md").write_text("# Alpha\n")
    async with following(folder, tmp_path / "store") as run:
        (folder / "guides.md").write_text("---\ntitle: Guides\n---\n")  # a site's list page
        started = time.monotonic()
        line = ""
        while "guides.md" not in line:
            line = await asyncio.wait_for(run.reports.get(), VISIBLE_WITHIN - (time.monotonic() - started))
        assert line == (
            "skipped /notes/guides.md: the file has no text besides its frontmatter, and a document needs text: "
            "add some to import it"
        )
        assert "status: not-found" in await run.tools.fetch("/notes/guides.md")


async def test_a_note_under_another_markdown_name_is_followed_file_by_file(tmp_path: Path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "guide.md").write_text("# Guide\n\nThe plain quorum.\n")
    (folder / "guide.mdx").write_text("# Guide\n\nThe jsx quorum.\n")
    async with following(folder, tmp_path / "store") as run:

        async def says(words: str) -> bool:
            return words in await run.tools.fetch("/notes/guide.md", True)  # not `unchanged`

        assert await says("The plain quorum.")
        (folder / "guide.mdx").write_text("# Guide\n\nThe jsx quorum, edited.\n")
        (folder / "post.markdown").write_text("# Post\n\nA zorbex entry.\n")

        async def posted() -> bool:
            return "/notes/post.md" in await run.lookup("zorbex")

        await run.until(posted, "a new .markdown file")
        assert await says("The plain quorum.")  # guide.md is still the file read
        (folder / "guide.md").unlink()  # its other file is the note now
        await run.until(lambda: says("The jsx quorum, edited."), "the note's other file")
        (folder / "guide.mdx").unlink()
        await run.until(lambda: says("status: archived"), "the note's last file gone")
        assert "total: 2\n" in await run.tools.versions("/notes/guide.md")


async def test_what_git_ignores_is_not_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    folder = tmp_path / "repo"
    folder.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True, timeout=60)
    (folder / ".gitignore").write_text("build/\n")  # (the watcher skips node_modules/ itself)
    (folder / "a.md").write_text("# A\n")
    async with following(folder, tmp_path / "store") as run:
        (folder / "build" / "docs").mkdir(parents=True)
        (folder / "build" / "docs" / "out.md").write_text("# Out\n\nThe zorbex output.\n")
        (folder / "b.md").write_text("# B\n\nThe zorbex note.\n")

        async def noted() -> bool:
            return "/notes/b.md" in await run.lookup("zorbex")

        await run.until(noted, "a new note beside an ignored one")
        assert "/notes/build/" not in await run.lookup("zorbex")


async def test_a_logseq_graphs_page_backups_are_not_followed(tmp_path: Path):
    graph = tmp_path / "graph"
    (graph / "logseq").mkdir(parents=True)
    (graph / "logseq" / "config.edn").write_text("{:meta/version 1}\n")
    (graph / "pages").mkdir()
    (graph / "pages" / "Tasks.md").write_text("- ## Usage\n\t- Mark a block LATER.\n")
    async with following(graph, tmp_path / "store") as run:
        backups = graph / "logseq" / "bak" / "pages" / "Tasks"
        backups.mkdir(parents=True)
        (backups / "2024-01-15T10_00.Desktop.md").write_text("- ## Usage\n\t- The zorbex backup.\n")
        (graph / "pages" / "Tasks.md").write_text("- ## Usage\n\t- The zorbex marker.\n")

        async def edited() -> bool:
            return "/notes/pages/Tasks.md" in await run.lookup("zorbex")

        await run.until(edited, "an edit to a page")
        assert "/notes/logseq/" not in await run.lookup("zorbex")


async def test_a_folder_that_cannot_be_watched_fails_at_once(tmp_path: Path):
    root = tmp_path / "store"
    root.mkdir()
    service = Service.open(root, trusted=True)
    sync = FolderSync(Source(tmp_path / "missing", "/"), Target(service), lambda _line: None)
    with pytest.raises(FileNotFoundError):
        await asyncio.wait_for(sync.run(asyncio.Event()), 10)
    service.close()


async def test_a_folder_named_through_a_symlink_is_followed(tmp_path: Path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.md").write_text("# A\n\nFirst words.\n")
    link = tmp_path / "link"
    link.symlink_to(real)
    root = tmp_path / "store"
    root.mkdir()
    service = Service.open(root, trusted=True)
    reports: asyncio.Queue[str] = asyncio.Queue()
    sync = FolderSync(Source(link, "/"), Target(service), reports.put_nowait)
    stop = asyncio.Event()
    caught: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(sync.run(stop, caught_up=lambda _summary: caught.set_result(None)))
    try:
        await asyncio.wait_for(asyncio.shield(caught), 10)
        run = Followed(sync, Tools(LocalResolver(service, AUTHORITY, GraphStore(None), scope="/")), reports)
        (real / "a.md").write_text("# A\n\nSecond words.\n")

        async def edited() -> bool:
            return "/a.md" in await run.lookup("second words")

        await run.until(edited, "an edit under a folder named through a symlink")
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
        service.close()

"""`demarkus mcp --docs FOLDER --site URL` as a real stdio subprocess, nothing else given:
the folder is imported into a store under the user's data directory, its relations (and
its links by the address it is published at) are known, the tools only read, and a saved
change shows in `mark_lookup` within 2 s. Waits are bounded and wake on the server's own
`docs:` lines on stderr (no sleeps)."""

from __future__ import annotations

import asyncio
import os
import queue
import sys
import threading
import time
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from ..conftest import call
from ..importer.test_folder import tree_state

VISIBLE_WITHIN = 2.0


def _stderr_lines() -> tuple[int, queue.Queue[str]]:
    """A pipe for the server's stderr, and its lines as they come."""
    read_end, write_end = os.pipe()
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        with os.fdopen(read_end, encoding="utf-8", errors="replace") as stream:
            for line in stream:
                lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return write_end, lines


async def _next_line(lines: queue.Queue[str], timeout: float) -> str | None:
    try:
        return await asyncio.to_thread(lines.get, True, timeout)
    except queue.Empty:
        return None


async def test_mcp_docs_serves_a_folder_and_follows_its_changes(tmp_path: Path):
    folder = tmp_path / "my notes"
    (folder / "adr").mkdir(parents=True)
    (folder / "adr" / "one.md").write_text("---\ntitle: One\nsuperseded-by: two.md\n---\nThe old lease rule.\n")
    (folder / "adr" / "two.md").write_text("---\ntitle: Two\nsupersedes: one.md\n---\nThe new lease rule.\n")
    site = "https://github.com/org/notes/blob/main/"
    (folder / "history.md").write_text(f"# History\n\nIt began with [the old rule]({site}adr/one.md).\n")
    (folder / "log.md").write_text("# Log\n\nThen came [[two|the new rule]].\n")
    data = tmp_path / "data"
    write_end, lines = _stderr_lines()
    env = {**os.environ, "XDG_DATA_HOME": str(data), "DEMARKUS_HOME": str(tmp_path / "home")}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "demarkus", "mcp", "--docs", str(folder), "--site", site, "--wikilinks"],
        env=env,
    )
    with os.fdopen(write_end, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as agent:
            tools = sorted(t.name for t in (await agent.list_tools()).tools)
            assert "mark_publish" not in tools and "mark_lookup" in tools  # edit the files, not the store

            async def shows(query: str, needle: str) -> bool:
                text, failed = await call(agent, "mark_lookup", query=query, match="body")
                return not failed and needle in text

            async def until(query: str, needle: str, what: str) -> None:
                started = time.monotonic()
                while not await shows(query, needle):
                    left = VISIBLE_WITHIN - (time.monotonic() - started)
                    if left <= 0:
                        pytest.fail(f"{what} not visible within {VISIBLE_WITHIN} s")
                    await _next_line(lines, left)

            first_import = time.monotonic()
            while not await shows("lease rule", "/adr/two.md"):  # the first import runs beside the server
                if time.monotonic() - first_import > 30:
                    pytest.fail("the folder was not imported within 30 s")
                await _next_line(lines, 5)
            backlinks, _ = await call(agent, "mark_backlinks", url="/adr/one.md")
            assert "/adr/two.md" in backlinks and "supersedes" in backlinks
            assert "/history.md" in backlinks  # a link by the folder's published address
            backlinks, _ = await call(agent, "mark_backlinks", url="/adr/two.md")
            assert "/log.md" in backlinks  # a wiki link

            before = tree_state(folder)
            (folder / "adr" / "two.md").write_text(
                "---\ntitle: Two\nsupersedes: one.md\n---\nThe lease rule, revised.\n"
            )
            await until("revised", "/adr/two.md", "an edit")
            (folder / "three.md").write_text("# Three\n\nQuorum snapshots.\n")
            await until("quorum snapshots", "/three.md", "a new file")
            assert set(tree_state(folder)) == set(before) | {"three.md"}

    stores = list((data / "demarkus" / "docs").iterdir())
    assert len(stores) == 1 and stores[0].name.startswith("my-notes-")  # one store, named after the folder
    assert not list(folder.rglob(".demarkus*"))  # nothing written into the folder

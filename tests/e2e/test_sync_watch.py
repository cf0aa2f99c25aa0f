"""`demarkus sync --watch` as a subprocess against a real QUIC authority (another
subprocess): an edit, a new file and a deletion each show in `mark_lookup` within 2 s.
Waits are bounded and wake on the sync's own report lines (no sleeps)."""

from __future__ import annotations

import asyncio
import os
import queue
import re
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from demarkus import auth
from demarkus.client import Client
from demarkus.graph import GraphStore
from demarkus.mcp.server import LocalResolver
from demarkus.mcp.tools import Tools
from demarkus.tls import DEV_CERT, default_tls_dir

from .processes import DEMARKUS, cli, pump, running, wait_for_line

WATCHING = re.compile(r"(watching) ")
VISIBLE_WITHIN = 2.0


async def until(check: Callable[[], Awaitable[bool]], lines: queue.Queue[str | None], what: str) -> float:
    """Seconds until `check` holds, waking on each line the sync prints; fails after 2 s."""
    started = time.monotonic()
    while not await check():
        left = VISIBLE_WITHIN - (time.monotonic() - started)
        if left <= 0:
            pytest.fail(f"{what} not visible in mark_lookup within {VISIBLE_WITHIN} s")
        try:
            await asyncio.to_thread(lines.get, True, left)
        except queue.Empty:
            continue
    return time.monotonic() - started


async def test_sync_watch_publishes_each_saved_change_within_two_seconds(tmp_path: Path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "alpha.md").write_text("---\ntitle: Alpha\n---\nThe quorum holds.\n")
    tokens = tmp_path / "tokens.toml"
    writer = auth.generate_token()
    auth.add_grant(tokens, "notes", writer, ["/notes/**"], ["publish"])
    env = {"DEMARKUS_HOME": os.environ["DEMARKUS_HOME"]}
    serve = [*DEMARKUS, "serve", "--root", str(tmp_path / "store"), "--create", "--port", "0", "--tokens", str(tokens)]
    with running(serve, env=env) as (_server, url):
        sync = subprocess.Popen(
            [*DEMARKUS, "sync", str(folder), f"{url}/notes", "--token", writer, "--watch"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
        )
        reader, lines = pump(sync)
        try:
            caught_up = wait_for_line(sync, WATCHING, lines, timeout=60)
            assert caught_up.group(1) == "watching"
            async with Client(url, ca=default_tls_dir() / DEV_CERT, dial_host="127.0.0.1") as client:
                tools = Tools(LocalResolver(client, client.authority, GraphStore(None), scope="/"))

                def shows(query: str, path: str, present: bool = True) -> Callable[[], Awaitable[bool]]:
                    async def check() -> bool:
                        return (path in await tools.lookup(query, "/notes", None, 10, "body", 0)) == present

                    return check

                assert await shows("quorum holds", "/notes/alpha.md")()
                (folder / "alpha.md").write_text("---\ntitle: Alpha\n---\nThe quorum holds; snapshots rotate.\n")
                await until(shows("snapshots rotate", "/notes/alpha.md"), lines, "an edit")
                (folder / "beta.md").write_text("# Beta\n\nLease heartbeat interval.\n")
                await until(shows("lease heartbeat", "/notes/beta.md"), lines, "a new file")
                (folder / "beta.md").unlink()
                await until(shows("lease heartbeat", "/notes/beta.md", present=False), lines, "a deletion")
                history = await tools.versions("/notes/alpha.md")
                assert "total: 2\n" in history
        finally:
            sync.terminate()
            assert sync.wait(timeout=10) == 0  # SIGTERM ends the watch cleanly
            reader.join(timeout=10)
            for pipe in (sync.stdout, sync.stderr):
                if pipe is not None:
                    pipe.close()


async def test_serve_docs_imports_follows_and_still_checks_tokens(tmp_path: Path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "alpha.md").write_text("# Alpha\n\nThe quorum holds.\n")
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    server = subprocess.Popen(
        [*DEMARKUS, "serve", "--docs", str(folder), "--prefix", "/notes", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # the `docs:` lines, on stderr, wake the waits too
        text=True,
        env=env,
    )
    reader, lines = pump(server)
    try:
        either = re.compile(r"listening on (mark://\S+)|(watching) ")  # their order depends on the import's time
        seen = [wait_for_line(server, either, lines) for _ in range(2)]
        url = next(found.group(1) for found in seen if found.group(1))
        assert any(found.group(2) for found in seen)
        async with Client(url, ca=default_tls_dir() / DEV_CERT, dial_host="127.0.0.1") as client:
            tools = Tools(LocalResolver(client, client.authority, GraphStore(None), scope="/"))

            async def edited() -> bool:
                return "/notes/alpha.md" in await tools.lookup("snapshots rotate", "/notes", None, 10, "body", 0)

            assert "/notes/alpha.md" in await tools.lookup("quorum holds", "/notes", None, 10, "body", 0)
            (folder / "alpha.md").write_text("# Alpha\n\nThe quorum holds; snapshots rotate.\n")
            await until(edited, lines, "an edit")
            refused = await client.publish("/notes/alpha.md", "# Forged\n")
            assert refused.status == "not-permitted"  # the folder's owner writes; callers are refused as before
        assert list((tmp_path / "data" / "demarkus" / "docs").iterdir())
    finally:
        server.terminate()
        assert server.wait(timeout=10) == 0
        reader.join(timeout=10)
        if server.stdout is not None:
            server.stdout.close()


def test_sync_without_watch_catches_up_and_archives_what_is_gone(tmp_path: Path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n")
    (folder / "b.md").write_text("# B\n")
    store = str(tmp_path / "store")
    first = cli("sync", str(folder), "--root", store)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("2 created, 0 updated, 0 unchanged, 0 archived,")
    (folder / "b.md").unlink()
    again = cli("sync", str(folder), "--root", store)
    assert again.stdout.startswith("0 created, 0 updated, 1 unchanged, 1 archived,"), again.stdout
    both = cli("mcp", "--docs", str(folder), "--host", "mark://localhost")
    assert both.returncode == 2 and "demarkus sync" in both.stderr

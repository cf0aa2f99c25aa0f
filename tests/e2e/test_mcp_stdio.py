"""`demarkus mcp` as a real stdio subprocess against a real QUIC authority, and the
official MCP Inspector CLI as an outside client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from demarkus.mcp.server import READ_TOOLS, WRITE_TOOLS
from demarkus.server.quic import serve_mark
from demarkus.service import Service

from ..conftest import call, make_server
from ..snippets import DEMO_NOTES, DOCS, EXECUTABLE, read_snippets, substitute
from .processes import REPO

INSPECTOR = REPO / ".venv" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"

CALLS = [
    ("mark_lookup", {"query": "snapshot quorum", "match": "body", "limit": 5, "budget": 800}),
    ("mark_lookup", {"query": "runbook", "limit": 3}),
    ("mark_fetch", {"url": "/runbooks/restore-from-snapshot.md#steps"}),
    ("mark_fetch", {"url": "/decisions/adr-0012-replicated-segment-log.md"}),
    ("mark_explore", {"url": "/runbooks/take-snapshot.md"}),
    ("mark_list", {"url": "/runbooks"}),
    ("mark_versions", {"url": "/operations/retention.md"}),
    ("mark_fetch", {"url": "/nowhere.md"}),
    ("mark_backlinks", {"url": "/runbooks/verify-cluster-health.md"}),
    ("mark_lookup", {"query": "kafka zookeeper broker topic partitions", "match": "body", "limit": 3, "budget": 1500}),
]


def mcp_params(url: str, cert: Path, home: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "demarkus", "mcp", "--host", url, "--ca", str(cert), "--read-only"],
        env={**os.environ, "DEMARKUS_HOME": home},
    )


async def test_stdio_server_over_quic_answers_like_the_in_process_server(demo_root: Path, tls_files, tmp_path: Path):
    cert, key = tls_files
    async with serve_mark(Service.open(demo_root, writable=False), port=0, cert=cert, key=key) as server:
        url = f"mark://localhost:{server.port}"
        async with Client(mcp_params(url, cert, str(tmp_path / "home"))) as remote:
            tools = sorted(t.name for t in (await remote.list_tools()).tools)
            assert tools == sorted(
                ["mark_lookup", "mark_fetch", "mark_explore", "mark_backlinks", "mark_list", "mark_versions"]
            )
            remote_texts = [await call(remote, tool, **args) for tool, args in CALLS]
        async with Client(make_server(demo_root, authority=url)) as local:
            local_texts = [await call(local, tool, **args) for tool, args in CALLS]
    assert remote_texts == local_texts
    assert remote_texts[0][0].count(">>> ") >= 2
    backlinks, _ = remote_texts[8]  # from the authority's /graph.md: this runbook was never read
    assert "(/runbooks/rotate-tls-certificates.md)" in backlinks
    assert url not in backlinks  # named by path: the text does not change with the port
    weak, _ = remote_texts[-1]  # a weak match over QUIC: the authority's `informative` reached the tool
    assert weak.endswith(
        "\n\n>>> note: weak match: the best row holds 1 of the query's 5 informative words; "
        "no evidence printed (the documents may not hold the answer: fetch a row to check, "
        "or ask with other words)\n"
    )


@pytest.mark.skipif(not INSPECTOR.exists(), reason="scripts/bootstrap installs the MCP Inspector")
def test_the_mcp_inspector_cli_lists_tools_and_calls_lookup(tmp_path: Path):
    """The Inspector runs the README's `mcpServers` snippet, as Claude Desktop would: a
    folder of markdown, imported into a store under the (fresh) data directory."""
    command = Path(sys.executable).with_name("demarkus")
    config = substitute(read_snippets().mcp_servers, {EXECUTABLE: str(command), DOCS: str(DEMO_NOTES)})
    (tmp_path / "mcp.json").write_text(json.dumps(config), encoding="utf-8")
    base = [str(INSPECTOR), "--cli", "--config", str(tmp_path / "mcp.json"), "--server", "demarkus"]
    env = {key: value for key, value in os.environ.items() if key != "MCP_CATALOG_PATH"}  # exclusive with --config
    env["PATH"] = f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    env["HOME"] = str(tmp_path / "home")  # the Inspector keeps its storage there
    env["XDG_DATA_HOME"] = str(tmp_path / "data")  # and demarkus the folder's store
    listed = subprocess.run([*base, "--method", "tools/list"], capture_output=True, text=True, timeout=120, env=env)
    assert listed.returncode == 0, listed.stderr
    hints = {tool["name"]: tool.get("annotations", {}) for tool in json.loads(listed.stdout)["tools"]}
    assert {"mark_lookup", "mark_fetch", "mark_explore"} <= set(hints)
    for name in READ_TOOLS:  # a client may run these without asking
        assert hints[name]["readOnlyHint"] is True and hints[name]["openWorldHint"] is False, name
    assert hints["mark_lookup"]["title"] == "Look up documents"
    called = subprocess.run(
        [
            *base,
            "--method",
            "tools/call",
            "--tool-name",
            "mark_lookup",
            "--tool-arg",
            "query=snapshot",
            "--tool-arg",
            "limit=2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)
    text = result["content"][0]["text"]
    assert text.startswith("status: ok\nmatches: 2\n")
    assert "/runbooks/" in text


async def test_stdio_server_writes_through_quic_with_the_callers_token(
    tokens, store_root: Path, tls_files, tmp_path: Path
):
    cert, key = tls_files
    async with serve_mark(Service.open(store_root, tokens=tokens.file), port=0, cert=cert, key=key) as server:
        url = f"mark://localhost:{server.port}"
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "demarkus", "mcp", "--host", url, "--ca", str(cert), "--token", tokens.writer],
            env={**os.environ, "DEMARKUS_HOME": str(tmp_path / "home")},
        )
        async with Client(params) as remote:
            hints = {t.name: t.annotations for t in (await remote.list_tools()).tools}
            assert all(hints[name] and hints[name].read_only_hint is not True for name in WRITE_TOOLS)
            assert hints["mark_archive"].destructive_hint is True
            assert hints["mark_append"].destructive_hint is False and hints["mark_append"].idempotent_hint is False
            created, failed = await call(
                remote, "mark_publish", url="/docs/a.md", body="# A\n\nFirst.\n", metadata={"title": "A"}
            )
            assert not failed and created.startswith("status: created\nversion: 1\n")
            appended, _ = await call(remote, "mark_append", url="/docs/a.md", body="Second.\n")
            assert appended.startswith("status: created\nversion: 2\n")
            archived, _ = await call(remote, "mark_archive", url="/docs/a.md")
            assert archived.startswith("status: ok\nversion: 2\narchived: true")
            gone, _ = await call(remote, "mark_fetch", url="/docs/a.md")
            assert gone.startswith("status: archived")
            old, _ = await call(remote, "mark_fetch", url="/docs/a.md/v1")
            assert old.endswith("# A\n\nFirst.\n")

"""A client that cannot reach an authority fails fast and says why: `demarkus fetch` and the
MCP stdio server as subprocesses, against a port where nothing listens, an authority whose
certificate they do not trust (another $DEMARKUS_HOME than the server's), and an authority
killed under an open connection."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp import Client as MCPClient
from mcp import StdioServerParameters
from mcp.client.stdio import stdio_client

from demarkus.client import Client
from demarkus.errors import TransportError
from demarkus.server.quic import serve_mark
from demarkus.service import Service

from ..client.ports import free_udp_port
from ..conftest import call
from .processes import DEMARKUS, cli, running

BOUND = 3.0
"""Seconds a failure to connect may take to be reported, the process's own start aside. A
behavioural bound, not a benchmark: the failures take under a second, and the margin is for
a loaded machine."""
STRAY = ("Traceback", "never retrieved", "Exception")
"""What must not reach stderr: tracebacks and asyncio's reports of unseen failures."""


def timed_cli(*args: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run the command; also return how long it took beyond the interpreter's own start
    (`demarkus --version` timed just before)."""
    started = time.monotonic()
    cli("--version", env=env)
    startup = time.monotonic() - started
    started = time.monotonic()
    result = cli(*args, env=env)
    return result, time.monotonic() - started - startup


def serve_args(root: Path) -> list[str]:
    return [*DEMARKUS, "serve", "--root", str(root), "--create", "--port", "0"]


def test_fetch_from_a_port_where_nothing_listens_says_so_on_one_line(tmp_path: Path):
    port = free_udp_port()
    result, elapsed = timed_cli("fetch", f"mark://localhost:{port}/a.md", env={"DEMARKUS_HOME": str(tmp_path)})
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: nothing is listening at mark://localhost:{port} (127.0.0.1 port {port} ")
    assert result.stderr.count("\n") == 1  # the error line and nothing else
    assert not any(stray in result.stderr for stray in STRAY)
    assert elapsed < BOUND


def test_fetch_without_the_servers_certificate_names_ca_and_insecure_on_one_line(tmp_path: Path):
    server_home, client_home = tmp_path / "server-home", tmp_path / "client-home"
    client_env = {"DEMARKUS_HOME": str(client_home)}
    with running(serve_args(tmp_path / "store"), env={"DEMARKUS_HOME": str(server_home)}) as (proc, url):
        result, elapsed = timed_cli("fetch", f"{url}/a.md", env=client_env)
        # the advice works: the certificate where the message says a development server keeps it
        trusted = cli("fetch", f"{url}/a.md", "--ca", str(server_home / "tls" / "dev-cert.pem"), env=client_env)
        proc.terminate()
        proc.wait(timeout=10)
        assert proc.stderr is not None
        served_stderr = proc.stderr.read()  # all of it: the process has stopped
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: {url} presented a certificate this client does not trust (")
    assert f"trusts the public CAs and {client_home}/tls/dev-cert.pem, which does not exist" in result.stderr
    assert "Pass --ca FILE with the authority's certificate" in result.stderr and "--insecure" in result.stderr
    assert result.stderr.count("\n") == 1
    assert not any(stray in result.stderr for stray in STRAY)
    assert elapsed < BOUND
    assert trusted.stderr.startswith("error: no document at /a.md")  # connected: the answer is the store's
    assert "Traceback" not in served_stderr  # the refused client costs the authority no traceback


async def test_an_authority_killed_under_an_open_connection_is_reported_within_seconds(tmp_path: Path):
    home = tmp_path / "home"
    with running(serve_args(tmp_path / "store"), env={"DEMARKUS_HOME": str(home)}) as (proc, url):
        async with Client(url, ca=home / "tls" / "dev-cert.pem", dial_host="127.0.0.1") as client:
            assert (await client.fetch("/health")).status == "ok"
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            started = time.monotonic()
            with pytest.raises(TransportError) as caught:
                await client.fetch("/health")
            elapsed = time.monotonic() - started
    assert str(caught.value).startswith(f"nothing is listening at {url}")
    assert elapsed < BOUND


async def mcp_fetch(url: str, home: Path, stderr: Path) -> tuple[str, bool, float]:
    """Start `demarkus mcp --host URL` (no --ca) with its own home, call mark_fetch once;
    return the text, whether it is a tool error, and how long the call took."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "demarkus", "mcp", "--host", url, "--read-only"],
        env={**os.environ, "DEMARKUS_HOME": str(home)},
    )
    with stderr.open("w") as errlog:
        async with MCPClient(stdio_client(params, errlog=errlog)) as agent:  # type: ignore[arg-type]
            started = time.monotonic()
            text, is_error = await call(agent, "mark_fetch", url="/a.md")
            return text, is_error, time.monotonic() - started


async def test_an_mcp_tool_call_to_a_port_where_nothing_listens_is_a_tool_error_saying_so(tmp_path: Path):
    port = free_udp_port()
    text, is_error, elapsed = await mcp_fetch(f"mark://localhost:{port}", tmp_path / "home", tmp_path / "stderr")
    assert is_error
    assert f"nothing is listening at mark://localhost:{port} (127.0.0.1 port {port} refused" in text
    assert elapsed < BOUND
    assert not any(stray in (tmp_path / "stderr").read_text() for stray in STRAY)


async def test_an_mcp_tool_call_without_the_servers_certificate_is_a_tool_error_naming_ca(
    demo_root: Path, tls_files, tmp_path: Path
):
    cert, key = tls_files
    async with serve_mark(Service.open(demo_root), port=0, cert=cert, key=key) as server:
        url = f"mark://localhost:{server.port}"
        text, is_error, elapsed = await mcp_fetch(url, tmp_path / "home", tmp_path / "stderr")
    assert is_error
    assert f"{url} presented a certificate this client does not trust" in text
    assert "Pass --ca FILE" in text and "--insecure" in text
    assert elapsed < BOUND
    assert (tmp_path / "stderr").read_text() == ""  # not even aioquic's warning about the alert

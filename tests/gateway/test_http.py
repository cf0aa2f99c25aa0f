"""A real uvicorn on 127.0.0.1 (socket bound to port 0): the MCP SDK's HTTP client and the
official MCP Inspector CLI list and call tools with a bearer token; `demarkus gateway`
serves plain HTTP on loopback only and HTTPS with a configured certificate."""

from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from demarkus import auth
from demarkus.gateway import create_app

from ..conftest import call
from ..e2e.processes import REPO, running
from .conftest import config_text, make_config, uvicorn_on_loopback

INSPECTOR = REPO / ".venv" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"
LISTENING = re.compile(r"gateway listening on (https?://\S+/mcp)")
TOKEN = auth.generate_token()
GATEWAY = [sys.executable, "-m", "demarkus.gateway.cli"]


def demo_config(demo_root: Path):  # type: ignore[no-untyped-def]
    return make_config({"demo": {"root": demo_root}}, {"agent": {"token": TOKEN, "read": ["demo"]}})


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_sdk_http_client_lists_and_calls_tools_through_uvicorn(demo_root: Path, mode: str):
    async with uvicorn_on_loopback(create_app(demo_config(demo_root))) as base:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        async with http, Client(streamable_http_client(f"{base}/mcp/", http_client=http), mode=mode) as client:  # type: ignore[arg-type]
            names = sorted(tool.name for tool in (await client.list_tools()).tools)
            worlds, worlds_err = await call(client, "mark_worlds")
            lookup, lookup_err = await call(
                client, "mark_lookup", query="snapshot quorum", url="mark://demo/", match="body", limit=3, budget=800
            )
            refused, refused_err = await call(client, "mark_fetch", url="mark://elsewhere/x.md")
        async with httpx2.AsyncClient(timeout=30) as anonymous:
            denied = await anonymous.post(
                f"{base}/mcp/",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={"Accept": "application/json, text/event-stream"},
            )
            health = await anonymous.get(f"{base}/healthz")
    assert names == sorted(
        [
            "mark_append",
            "mark_archive",
            "mark_backlinks",
            "mark_explore",
            "mark_fetch",
            "mark_list",
            "mark_lookup",
            "mark_lookup_all",
            "mark_publish",
            "mark_versions",
            "mark_worlds",
        ]
    )
    assert not worlds_err and "| demo | mark://demo/ | no |" in worlds
    assert not lookup_err and lookup.startswith("status: ok\nmatches: 3\n") and ">>> mark://demo/" in lookup
    assert refused_err and "is not one of your worlds" in refused
    assert denied.status_code == 401 and denied.headers["www-authenticate"] == 'Bearer realm="demarkus"'
    assert health.status_code == 200


# --- the command, as a subprocess ---------------------------------------------------------


def gateway_process(config: Path, *args: str):  # type: ignore[no-untyped-def]
    return running([*GATEWAY, "--config", str(config), "--port", "0", *args], pattern=LISTENING)


def inspector(url: str, *args: str, tmp_path: Path) -> dict:  # type: ignore[type-arg]
    env = {
        **os.environ,
        "PATH": f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "MCP_CATALOG_PATH": str(tmp_path / "inspector-catalog.json"),
    }
    done = subprocess.run(
        [str(INSPECTOR), "--cli", url, "--transport", "http", "--header", f"Authorization: Bearer {TOKEN}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout)


@pytest.mark.skipif(not INSPECTOR.exists(), reason="scripts/bootstrap installs the MCP Inspector")
def test_the_mcp_inspector_cli_lists_and_calls_tools_on_the_gateway_command(demo_root: Path, tmp_path: Path):
    config = tmp_path / "gateway.toml"
    config.write_text(
        config_text({"demo": {"root": demo_root}}, {"agent": {"token": TOKEN, "read": ["demo"]}}), encoding="utf-8"
    )
    with gateway_process(config) as (proc, url):
        assert url.startswith("http://127.0.0.1:")
        listed = inspector(url, "--method", "tools/list", tmp_path=tmp_path)
        names = {tool["name"] for tool in listed["tools"]}
        assert {"mark_lookup", "mark_fetch", "mark_explore", "mark_worlds", "mark_lookup_all"} <= names
        called = inspector(
            url,
            "--method",
            "tools/call",
            "--tool-name",
            "mark_lookup",
            "--tool-arg",
            "query=snapshot",
            "--tool-arg",
            "url=mark://demo/",
            "--tool-arg",
            "limit=2",
            tmp_path=tmp_path,
        )
        text = called["content"][0]["text"]
        assert text.startswith("status: ok\nmatches: 2\n")
        assert "| mark://demo/runbooks/" in text
        everywhere = inspector(
            url,
            "--method",
            "tools/call",
            "--tool-name",
            "mark_lookup_all",
            "--tool-arg",
            "query=snapshot",
            tmp_path=tmp_path,
        )
        assert "worlds: 1\nsucceeded: 1\nfailed: 0\n" in everywhere["content"][0]["text"]
        proc.terminate()
        _, stderr = proc.communicate(timeout=15)
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert [(line["tool"], line["status"]) for line in lines] == [("mark_lookup", "ok"), ("mark_lookup_all", "ok")]
    assert TOKEN not in stderr and "snapshot" not in stderr


def test_the_gateway_command_refuses_plain_http_off_loopback(demo_root: Path, tmp_path: Path):
    config = tmp_path / "gateway.toml"
    config.write_text(
        config_text({"demo": {"root": demo_root}}, {"agent": {"token": TOKEN, "read": ["demo"]}}), encoding="utf-8"
    )
    done = subprocess.run(
        [*GATEWAY, "--config", str(config), "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "plain HTTP is for loopback only" in done.stderr


def test_the_gateway_command_names_a_bad_config_field(tmp_path: Path):
    config = tmp_path / "gateway.toml"
    config.write_text('[worlds.Bad_Name]\nroot = "/"\n', encoding="utf-8")
    done = subprocess.run([*GATEWAY, "--config", str(config)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert f"{config}: [worlds.Bad_Name] is not a world name" in done.stderr


async def test_the_gateway_command_serves_https_with_a_configured_certificate(
    demo_root: Path, tmp_path: Path, tls_files
):
    cert, key = tls_files
    config = tmp_path / "gateway.toml"
    config.write_text(
        config_text({"demo": {"root": demo_root}}, {"agent": {"token": TOKEN, "read": ["demo"]}}, cert=cert, key=key),
        encoding="utf-8",
    )
    with gateway_process(config) as (_, url):
        assert url.startswith("https://127.0.0.1:")
        context = ssl.create_default_context(cafile=str(cert))
        base = url.removesuffix("/mcp")
        async with httpx2.AsyncClient(verify=context, timeout=30) as plain:
            health = await plain.get(f"{base}/healthz")
        http = httpx2.AsyncClient(verify=context, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        async with http, Client(streamable_http_client(f"{url}/", http_client=http)) as client:  # type: ignore[arg-type]
            worlds, err = await call(client, "mark_worlds")
    assert health.status_code == 200
    assert not err and "mark://demo/" in worlds

"""Malformed tools/call requests through a real uvicorn: `arguments` that is not an object,
a `name` that is not a string, `params` that is not an object, a body that is not JSON.
Each gets a clear JSON-RPC error saying what to send, with no internal text, and one
access-log line; the same session's next good call works."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import httpx2
import pytest

from demarkus import auth
from demarkus.gateway import create_app

from .conftest import ACCEPT, RawSession, make_config, uvicorn_on_loopback

TOKEN = auth.generate_token()
INTERNAL = (
    "pydantic",
    "Traceback",
    "Error",
    "rror:",
    "validation error",
    "JSONRPC",
    "Arguments",
    ".py",
    "attribute",
    "input_value",
    "https://",
)
"""Text that would come from inside the gateway or its libraries, not from a message for
the caller."""

ARGUMENTS = "tools/call params.arguments must be an object with mark_fetch's parameters by name, "
NAME = "tools/call params.name must be a tool's name"
BODY = "the request is not a JSON-RPC 2.0 message: send one object such as "
OVERVIEW = "mark://demo/overview.md"

CASES = [
    # (id, params, HTTP status, JSON-RPC code, the start of the message, its end)
    ("arguments-string", {"name": "mark_fetch", "arguments": OVERVIEW}, 200, -32602, ARGUMENTS, "it was a string"),
    ("arguments-list", {"name": "mark_fetch", "arguments": [OVERVIEW]}, 200, -32602, ARGUMENTS, "it was a list"),
    ("arguments-number", {"name": "mark_fetch", "arguments": 7}, 200, -32602, ARGUMENTS, "it was a number"),
    ("arguments-boolean", {"name": "mark_fetch", "arguments": True}, 200, -32602, ARGUMENTS, "it was a boolean"),
    ("name-number", {"name": 5, "arguments": {}}, 200, -32602, NAME, "it was a number"),
    ("name-missing", {"arguments": {"url": OVERVIEW}}, 200, -32602, NAME, "it was null"),
    ("params-string", "mark_fetch", 400, -32602, BODY, "params being an object"),
    ("params-list", ["mark_fetch", {"url": OVERVIEW}], 400, -32602, BODY, "params being an object"),
]


def demo_app(demo_root: Path):  # type: ignore[no-untyped-def]
    return create_app(make_config({"demo": {"root": demo_root}}, {"agent": {"token": TOKEN, "read": ["demo"]}}))


def agent_http() -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)


def access_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == "demarkus.gateway.access"]


def logged_tool(params: Any) -> str:
    """What the access log names for these params: the tool, "?" for a name that is not
    one, "" for none."""
    if params.get("name") == "mark_fetch":
        return "mark_fetch"
    return "?" if "name" in params else ""


@pytest.mark.parametrize(
    "params, status, code, start, end", [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
async def test_a_malformed_tools_call_gets_a_clean_error_and_the_next_good_call_works(
    demo_root: Path, caplog, params, status, code, start, end
):
    caplog.set_level(logging.INFO, logger="demarkus.gateway.access")
    async with uvicorn_on_loopback(demo_app(demo_root)) as base, agent_http() as http:
        session = RawSession(http, f"{base}/mcp/")
        await session.open()
        bad = await session.request("tools/call", params)
        good = await session.call("mark_fetch", url=OVERVIEW)
    assert bad.status_code == status
    error = bad.json()["error"]
    assert error["code"] == code
    assert error["message"].startswith(start) and error["message"].endswith(end)
    assert not [text for text in INTERNAL if text in bad.text]
    assert good.status_code == 200
    result = good.json()["result"]
    assert not result["isError"] and result["content"][0]["text"].startswith("status: ok")
    lines = access_lines(caplog)
    if status == 400:  # the SDK's transport refused the body: no tool was named
        assert {k: v for k, v in lines[0].items() if k != "ts"} == {
            "event": "http",
            "status": 400,
            "reason": "bad-request",
            "method": "POST",
            "caller": "agent",
        }
    else:
        first = lines[0]
        assert (first["event"], first["status"], first["world"]) == ("tool", "bad-request", "")
        assert first["tool"] == logged_tool(params)
    assert [(line["tool"], line["status"]) for line in lines[1:]] == [("mark_fetch", "ok")]


async def test_a_body_that_is_not_json_gets_a_clean_parse_error(demo_root: Path, caplog):
    caplog.set_level(logging.INFO, logger="demarkus.gateway.access")
    async with uvicorn_on_loopback(demo_app(demo_root)) as base, agent_http() as http:
        session = RawSession(http, f"{base}/mcp/")
        await session.open()
        bad = await http.post(
            session.url,
            content=b'{"jsonrpc": "2.0", "id": 1, "method": "to',
            headers={**session.headers, "Content-Type": "application/json"},
        )
        good = await session.call("mark_worlds")
    assert bad.status_code == 400
    assert bad.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "the request body is not JSON; send one JSON-RPC 2.0 request object"},
    }
    assert good.status_code == 200 and not good.json()["result"]["isError"]
    lines = access_lines(caplog)
    assert [(line["event"], line["status"]) for line in lines] == [("http", 400), ("tool", "ok")]


async def test_null_arguments_mean_none_and_a_2026_request_gets_the_same_clean_error(demo_root: Path):
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    modern = {**ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "mark_fetch"}

    def fetch(arguments: object) -> dict[str, Any]:
        params = {"name": "mark_fetch", "arguments": arguments, "_meta": meta}
        return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}

    async with uvicorn_on_loopback(demo_app(demo_root)) as base, agent_http() as http:
        session = RawSession(http, f"{base}/mcp/")
        await session.open()
        none = await session.request("tools/call", {"name": "mark_worlds", "arguments": None})
        bad = await http.post(f"{base}/mcp/", headers=modern, json=fetch(OVERVIEW))
        good = await http.post(f"{base}/mcp/", headers=modern, json=fetch({"url": OVERVIEW}))
    assert none.status_code == 200 and not none.json()["result"]["isError"]
    assert bad.json()["error"]["code"] == -32602
    assert bad.json()["error"]["message"].startswith(ARGUMENTS)
    assert not [text for text in INTERNAL if text in bad.text]
    assert good.status_code == 200
    assert good.json()["result"]["content"][0]["text"].startswith("status: ok")

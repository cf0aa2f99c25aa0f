"""The OpenAI-compatible reader against a local stand-in endpoint (http.server on
127.0.0.1, port 0) that returns scripted tool calls."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from demarkus.eval.errors import RunRefused
from demarkus.eval.openai_reader import OpenAIReader
from demarkus.eval.policies import get_policy
from demarkus.eval.questions import Question
from demarkus.eval.runner import RunConfig, run_eval
from demarkus.worlds import demo_world_path

QUESTION = Question("q01", "direct", "What is the largest payload?", {"max_payload_kib": "number"}, "/reference")
FINAL = json.dumps({"answer": {}, "citations": [], "abstain": True})


def tool_call(name: str, arguments: dict[str, Any], usage: dict[str, Any] | None) -> dict[str, Any]:
    reply = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call-1",
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(arguments)},
                        }
                    ],
                }
            }
        ]
    }
    if usage is not None:
        reply["usage"] = usage
    return reply


def final(text: str, usage: dict[str, Any]) -> dict[str, Any]:
    return {"choices": [{"message": {"role": "assistant", "content": text}}], "usage": usage}


class StandIn:
    def __init__(self, script: list[dict[str, Any]]) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                stand_in.requests.append(
                    {
                        "path": self.path,
                        "auth": self.headers.get("Authorization"),
                        "body": json.loads(self.rfile.read(length)),
                    }
                )
                reply = (
                    stand_in.script.pop(0)
                    if stand_in.script
                    else final(FINAL, {"prompt_tokens": 1, "completion_tokens": 1})
                )
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    box = StandIn([])
    thread = threading.Thread(target=box.server.serve_forever, daemon=True)
    thread.start()
    yield box
    box.server.shutdown()
    box.server.server_close()


class FakeSession:
    tools = [{"name": "mark_lookup", "description": "Find.", "inputSchema": {"type": "object"}}]

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        record = {"name": name, "input": arguments, "output": f"result of {name}"}
        self.calls.append(record)
        return record


async def test_the_reader_runs_tool_calls_and_counts_api_usage(stand_in: StandIn) -> None:
    stand_in.script += [
        tool_call(
            "mark_lookup",
            {"query": "payload", "limit": 3},
            {
                "prompt_tokens": 900,
                "completion_tokens": 40,
                "prompt_tokens_details": {"cached_tokens": 100},
                "completion_tokens_details": {"reasoning_tokens": 10},
            },
        ),
        final(FINAL, {"prompt_tokens": 1000, "completion_tokens": 20}),
    ]
    reader = OpenAIReader(stand_in.url, "test-model", "secret")
    session = FakeSession()
    result = await reader.attempt(QUESTION, session, get_policy("graph-budget-first-v1"), steps=8)
    assert result["final"] == FINAL and result["turns"] == 2 and result["usage_complete"]
    assert result["usage"] == {"input": 1900, "output": 50, "reasoning": 10, "cache": {"read": 100, "write": 0}}
    assert session.calls == [
        {"name": "mark_lookup", "input": {"query": "payload", "limit": 3}, "output": "result of mark_lookup"}
    ]
    first, second = stand_in.requests
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer secret"
    assert first["body"]["model"] == "test-model"
    assert first["body"]["messages"][0]["content"] == get_policy("graph-budget-first-v1").prompt
    assert first["body"]["tools"][0]["function"]["name"] == "mark_lookup"
    assert second["body"]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call-1",
        "content": "result of mark_lookup",
    }


async def test_missing_usage_makes_the_attempt_incomplete_and_the_last_step_forbids_tools(stand_in: StandIn) -> None:
    stand_in.script += [tool_call("mark_lookup", {"query": "x"}, None), tool_call("mark_lookup", {"query": "y"}, None)]
    result = await OpenAIReader(stand_in.url, "m", "k").attempt(
        QUESTION, FakeSession(), get_policy("graph-section-first-v1"), steps=3
    )
    assert not result["usage_complete"] and result["turns"] == 3
    assert stand_in.requests[-1]["body"]["tool_choice"] == "none"


async def test_a_paid_run_refuses_without_approve_after_printing_the_plan(
    stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVAL_TEST_KEY", "secret")
    lines: list[str] = []
    config = RunConfig(
        world=demo_world_path(),
        output=tmp_path / "run",
        reader="openai",
        model="test-model",
        base_url=stand_in.url,
        api_key_env="EVAL_TEST_KEY",
        case="q01",
        echo=lines.append,
    )
    with pytest.raises(RunRefused, match="--approve"):
        await run_eval(config)
    assert any(line.startswith("planned: 1 attempts") for line in lines)
    assert any("oracle-estimated spend: >= " in line for line in lines)
    assert stand_in.requests == []


async def test_an_approved_paid_run_goes_through_the_real_mcp_tools(
    stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVAL_TEST_KEY", "secret")
    stand_in.script += [
        tool_call(
            "mark_lookup",
            {"query": "payload idempotency", "url": "/reference", "limit": 3, "match": "body"},
            {"prompt_tokens": 2000, "completion_tokens": 30},
        ),
        final(FINAL, {"prompt_tokens": 2500, "completion_tokens": 25}),
    ]
    config = RunConfig(
        world=demo_world_path(),
        output=tmp_path / "run",
        reader="openai",
        model="test-model",
        base_url=stand_in.url,
        api_key_env="EVAL_TEST_KEY",
        case="q01",
        approve=True,
        echo=lambda _: None,
    )
    report = await run_eval(config)
    assert report["spec"]["reader"] == "openai" and report["spec"]["model"] == "test-model"
    (attempt,) = report["attempts"]
    assert attempt["trace"]["usage_total"] == 4555 and attempt["trace"]["usage_complete"]
    assert attempt["trace"]["calls"][0]["output"].startswith("status: ok")
    assert attempt["tool_result_tokens"] > 0
    assert not attempt["score"]["correct"]  # it abstained on an answerable question
    assert (tmp_path / "run" / "report.json").exists()

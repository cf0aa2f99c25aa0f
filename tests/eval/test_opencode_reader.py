"""The OpenCode reader end to end: the pinned OpenCode, isolated in the attempt's temporary
directory, talks to a scripted OpenAI-compatible endpoint on 127.0.0.1 (server-sent events,
as OpenCode streams) and to the runner's real `demarkus mcp` over the real QUIC authority,
all under strace."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from demarkus.eval.errors import RunRefused
from demarkus.eval.opencode_reader import parse_events
from demarkus.eval.policies import get_policy
from demarkus.eval.runner import RunConfig, run_eval
from demarkus.worlds import demo_world_path

from ..opencode.syscalls import STRACE_OPTIONS, parse_trace
from ..opencode.test_opencode import NOT_ON_DISK, OPENCODE, VERSION

LOOKUP = {
    "query": "payload size limit idempotency key hours",
    "url": "/reference",
    "match": "body",
    "limit": 3,
    "budget": 1500,
}
PAYLOAD = "A payload may be at most 256 KiB."
IDEMPOTENCY = "The broker remembers an idempotency key for 24 hours after the job that carried it was enqueued."
ANSWER = {
    "answer": {"idempotency_window_hours": 24, "max_payload_kib": 256},
    "citations": [
        {"field": "max_payload_kib", "url": "/reference/job-format.md/v1#payload", "quote": PAYLOAD},
        {
            "field": "idempotency_window_hours",
            "url": "/reference/job-format.md/v1#idempotency-keys",
            "quote": IDEMPOTENCY,
        },
    ],
    "abstain": False,
}


class ScriptedEndpoint:
    """`POST /v1/chat/completions` answered from a script, streamed as OpenAI's chunks."""

    def __init__(self, script: list[dict[str, Any]]) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.hang = False
        """Answer nothing until `release` is set (a model that never replies)."""
        self.release = threading.Event()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                if endpoint.hang:
                    endpoint.release.wait(timeout=120)
                    return
                step = endpoint.script.pop(0) if endpoint.script else {"text": "no more script", "usage": {}}
                data = b"".join(f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks(step, body["model"]))
                data += b"data: [DONE]\n\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


def chunks(step: dict[str, Any], model: str) -> list[dict[str, Any]]:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": model}
    if "tool" in step:
        name, arguments = step["tool"]
        call = {"index": 0, "id": "call-1", "type": "function", "function": {"name": name, "arguments": arguments}}
        delta: dict[str, Any] = {"role": "assistant", "tool_calls": [call]}
        finish = "tool_calls"
    else:
        delta, finish = {"role": "assistant", "content": step["text"]}, "stop"
    return [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        {**base, "choices": [], "usage": step["usage"]},
    ]


@pytest.fixture
def endpoint() -> Iterator[ScriptedEndpoint]:
    box = ScriptedEndpoint([])
    thread = threading.Thread(target=box.server.serve_forever, daemon=True)
    thread.start()
    yield box
    box.release.set()
    box.server.shutdown()
    box.server.server_close()
    thread.join(timeout=10)


@pytest.fixture
def opencode() -> Path:
    assert OPENCODE.exists(), f"no {OPENCODE}: scripts/bootstrap installs OpenCode from tests/opencode/package.json"
    return OPENCODE


def config(tmp_path: Path, endpoint: ScriptedEndpoint, **changes: Any) -> RunConfig:
    values: dict[str, Any] = {
        "world": demo_world_path(),
        "output": tmp_path / "run",
        "reader": "opencode",
        "policy": "graph-budget-first-v1",
        "model": "scripted/test-model",
        "base_url": endpoint.url,
        "api_key_env": "EVAL_TEST_KEY",
        "case": "q01",
        "timeout": 150.0,
        "opencode_bin": str(OPENCODE),
        "echo": lambda _: None,
    }
    values.update(changes)
    return RunConfig(**values)


async def test_an_opencode_attempt_answers_from_the_real_lookup_isolated_in_its_temp_dir(
    opencode: Path, endpoint: ScriptedEndpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    strace = shutil.which("strace")
    assert strace, "strace is needed to watch OpenCode's files and sockets: apt-get install strace"
    monkeypatch.setenv("EVAL_TEST_KEY", "secret")
    # the reader drops the caller's OPENCODE_* (this one would replace the policy prompt)
    monkeypatch.setenv("OPENCODE_CONFIG_CONTENT", json.dumps({"agent": {"benchmark": {"prompt": "leaked"}}}))
    runs = tmp_path / "runs"
    runs.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(runs))
    endpoint.script += [
        {
            "tool": ("fixture_mark_lookup", json.dumps(LOOKUP)),
            "usage": {"prompt_tokens": 2000, "completion_tokens": 30, "prompt_tokens_details": {"cached_tokens": 500}},
        },
        {"text": json.dumps(ANSWER), "usage": {"prompt_tokens": 2600, "completion_tokens": 80}},
    ]
    log = tmp_path / "strace.log"
    report = await run_eval(
        config(tmp_path, endpoint, approve=True, opencode_prefix=(strace, *STRACE_OPTIONS, "-o", str(log)))
    )

    (attempt,) = report["attempts"]
    assert "error" not in attempt, attempt["error"]
    trace = attempt["trace"]
    (call,) = trace["calls"]
    assert call["name"] == "fixture_mark_lookup" and call["input"] == LOOKUP
    assert call["output"].startswith("status: ok") and PAYLOAD in call["output"] and IDEMPOTENCY in call["output"]
    assert trace["final"] == json.dumps(ANSWER)
    assert attempt["score"]["correct"], attempt["score"]["reasons"]
    assert trace["turns"] == 2 and trace["usage_complete"] and not trace["usage_lower_bound"]
    assert trace["usage"] == {"input": 4600, "output": 110, "reasoning": 0, "cache": {"read": 500, "write": 0}}
    assert trace["usage_total"] == 4710 and trace["session"].startswith("ses_")
    assert trace["turn_usage"] == [
        {"input": 2000, "output": 30, "reasoning": 0, "cache": {"read": 500, "write": 0}},
        {"input": 2600, "output": 80, "reasoning": 0, "cache": {"read": 0, "write": 0}},
    ]
    assert attempt["tool_calls_by_tool"] == {"mark_lookup": 1} and attempt["protocol_requests"] > 0
    spec = report["spec"]
    assert spec["reader"] == "opencode" and spec["model"] == "scripted/test-model"
    assert spec["opencode_version"] == VERSION and spec["reader_config_hash"].startswith("sha256-")

    first, second = endpoint.requests
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer secret"
    assert first["body"]["max_tokens"] == 4096
    assert first["body"]["messages"][0]["content"].startswith(get_policy("graph-budget-first-v1").prompt)
    assert first["body"]["messages"][-1]["content"].startswith(
        "What is the largest payload, in KiB, that a single Harborwick job may carry"
    )
    assert sorted(t["function"]["name"] for t in first["body"]["tools"]) == [
        f"fixture_{name}"
        for name in ("mark_backlinks", "mark_explore", "mark_fetch", "mark_list", "mark_lookup", "mark_versions")
    ]
    assert second["body"]["messages"][-1]["content"] == call["output"]

    with log.open(encoding="utf-8", errors="replace") as lines:
        watched = parse_trace(lines, cwd=str(runs))
    assert watched.calls > 1000, f"only {watched.calls} calls traced"
    changed = sorted({change.path for change in watched.changes})
    attempt_dir = re.compile(re.escape(str(runs)) + r"/demarkus-eval-[^/]+/q01-1-[^/]+(/|$)")
    database = [path for path in changed if attempt_dir.match(path) and "/opencode/data/opencode/" in path]
    assert database, changed[:50]  # OpenCode wrote its own database inside the attempt's directory
    assert sys.executable in watched.executed, watched.executed  # the MCP server OpenCode started
    outside = [c for c in watched.changed_outside(*NOT_ON_DISK) if not attempt_dir.match(c.path)]
    assert outside == [], f"written outside the attempt's temp dir: {outside}"
    assert watched.internet() == [], f"OpenCode reached out: {watched.internet()}"


async def test_an_opencode_run_refuses_without_approve_after_printing_the_plan(
    opencode: Path, endpoint: ScriptedEndpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVAL_TEST_KEY", "secret")
    lines: list[str] = []
    with pytest.raises(RunRefused, match="--approve"):
        await run_eval(config(tmp_path, endpoint, echo=lines.append))
    assert any(line.startswith("planned: 1 attempts") and "reader opencode" in line for line in lines), lines
    assert any("oracle-estimated spend: >= " in line for line in lines), lines
    assert endpoint.requests == []


def test_the_opencode_reader_needs_a_provider_model_and_a_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVAL_TEST_KEY", raising=False)
    from demarkus.eval.opencode_reader import OpenCodeReader

    with pytest.raises(RunRefused, match="provider/name"):
        OpenCodeReader.from_options(str(OPENCODE), "gpt", None, "EVAL_TEST_KEY")
    with pytest.raises(RunRefused, match=r"\$EVAL_TEST_KEY"):
        OpenCodeReader.from_options(str(OPENCODE), "local/m", "http://127.0.0.1:9/v1", "EVAL_TEST_KEY")
    with pytest.raises(RunRefused, match="--opencode-bin"):
        OpenCodeReader.from_options(str(tmp_path / "nothing"), "openai/m", None, "EVAL_TEST_KEY")


def step(part_id: str, total: int | None, **tokens: Any) -> str:
    counts = {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}, **tokens}
    if total is not None:
        counts["total"] = total
    return json.dumps({"type": "step_finish", "sessionID": "ses_1", "part": {"id": part_id, "tokens": counts}})


def test_events_count_each_step_once_and_refuse_a_total_that_is_not_the_sum() -> None:
    text = json.dumps({"type": "text", "part": {"id": "t1", "messageID": "m2", "text": '{"abstain": true}'}})
    tool = json.dumps(
        {
            "type": "tool_use",
            "part": {
                "id": "c1",
                "tool": "fixture_mark_fetch",
                "state": {"status": "error", "input": {}, "error": "no"},
            },
        }
    )
    first = step("s1", 140, input=100, output=10, reasoning=5, cache={"read": 20, "write": 5})
    events = parse_events([first, first, tool, step("s2", 3, input=1, output=2), text, ""])
    assert events.session == "ses_1" and events.turns == 2 and events.usage_complete
    assert events.usage == {"input": 126, "output": 12, "reasoning": 5, "cache": {"read": 20, "write": 5}}
    assert events.turn_usage == (
        {"input": 125, "output": 10, "reasoning": 5, "cache": {"read": 20, "write": 5}},
        {"input": 1, "output": 2, "reasoning": 0, "cache": {"read": 0, "write": 0}},
    )
    assert events.calls == ({"name": "fixture_mark_fetch", "input": {}, "output": "no", "error": True},)
    assert events.final == '{"abstain": true}'

    wrong = parse_events([step("s1", 999, input=1)])
    assert not wrong.usage_complete and "not the sum" in wrong.errors[0]
    assert not parse_events([]).usage_complete  # no step finished: nothing is known


def processes_under(root: Path) -> list[str]:
    """The command lines of live processes whose working directory is under `root`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cwd = Path(os.readlink(proc / "cwd"))
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cwd.is_relative_to(root):
            found.append(f"{proc.name}: {command}")
    return found


async def test_an_attempt_whose_model_never_answers_times_out_and_leaves_no_process(
    opencode: Path, endpoint: ScriptedEndpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVAL_TEST_KEY", "secret")
    runs = tmp_path / "runs"
    runs.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(runs))
    endpoint.hang = True
    report = await run_eval(config(tmp_path, endpoint, approve=True, timeout=20.0))
    (attempt,) = report["attempts"]
    assert attempt["error"] == "attempt timed out after 20.0 s"
    assert not attempt["trace"]["usage_complete"] and not attempt["score"]["correct"]
    assert len(endpoint.requests) == 1, "OpenCode reached the model before the timeout"
    assert processes_under(runs) == []
    assert list(runs.iterdir()) == [], "the run's temporary directory is removed"


def test_the_config_hash_changes_with_the_reader_setup_and_never_with_paths() -> None:
    from demarkus.eval.opencode_reader import OpenCodeReader

    def hashed(**changes: Any) -> str:
        values: dict[str, Any] = {"binary": Path("/a/opencode"), "version": VERSION, "model": "local/m"}
        values |= {"base_url": "http://127.0.0.1:1/v1", "api_key_env": "K"} | changes
        steps = values.pop("steps", 8)
        return OpenCodeReader(**values).config_hash(steps)

    base = hashed()
    assert base == hashed(binary=Path("/elsewhere/opencode"), base_url="http://127.0.0.1:2/v1", api_key_env="L")
    for changes in (
        {"version": "1.18.34"},
        {"model": "local/n"},
        {"steps": 4},
        {"max_output_tokens": 2048},
        {"base_url": None},
    ):
        assert hashed(**changes) != base, changes

"""One evaluation run: world -> fresh store -> QUIC authority -> stdio MCP subprocess per
attempt -> reader loop -> scored attempts -> report.

Every attempt gets a fresh `demarkus mcp --host mark://localhost:PORT --ca CERT
--read-only --scope <question scope>` subprocess (its own DEMARKUS_HOME, DEMARKUS_*
variables removed), so sessions never share state and the reader sees only the read
tools, confined to the question's scope. A reader that is an MCP client of its own (the
opencode reader) starts that same command itself (`reader.McpServer`), and its attempt is
bounded by the same timeout.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcp import Client as MCPClient
from mcp import StdioServerParameters
from mcp.types import TextContent

from ..server.quic import serve_mark
from ..service import Service
from ..tls import ensure_dev_certificate
from ..tokens import count_tokens
from ..worlds import open_world
from ..worlds.loader import load_world
from .errors import RunRefused
from .implementation import READERS, entry_modules, implementation_hashes
from .policies import Policy, get_policy
from .questions import Question, RubricEntry, parse_questions, parse_rubric
from .reader import AttemptResult, McpServer, Reader, ToolSchema
from .records import DECISIONS_META, Attempt, CallRecord, Lifecycle, Report, RunSpec
from .report import build_report, write_outputs
from .scoring import SCORING_VERSION, Corpus, relation_expansions, score_attempt, tool_name

SUITE = "world-answer-v1"
TOOL_PROFILE = "read-only-v1"
READ_TOOLS = ("mark_backlinks", "mark_explore", "mark_fetch", "mark_list", "mark_lookup", "mark_versions")


@dataclass
class RunConfig:
    world: Path
    output: Path
    reader: str = "oracle"
    policy: str = "graph-section-first-v1"
    steps: int = 8
    timeout: float = 180.0
    repeats: int = 1
    case: str | None = None
    mcp_bin: str | None = None
    model: str = "oracle"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    max_output_tokens: int = 4096
    approve: bool = False
    opencode_bin: str | None = None
    opencode_prefix: tuple[str, ...] = ()
    """A command put before each attempt's OpenCode (e.g. strace, to watch what it does)."""
    echo: Callable[[str], None] = print
    extra: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        if self.steps < 2 or self.repeats < 1 or self.timeout <= 0:
            raise RunRefused("steps must be >= 2, repeats >= 1 and timeout > 0")
        if self.reader not in READERS:
            raise RunRefused(f"unknown reader {self.reader!r}; choose one of {', '.join(sorted(READERS))}")
        if self.output.exists() and any(self.output.iterdir()):
            raise RunRefused(f"output directory {self.output} is not empty; every run writes to a new directory")
        get_policy(self.policy)


class MCPSession:
    """One MCP session of one attempt (a `reader.Session`): calls recorded as {name, input, output, error}."""

    def __init__(self, client: MCPClient, schemas_json: str, tool_names: list[str], server: McpServer) -> None:
        self.client = client
        self.server = server
        self.schemas_json = schemas_json
        self.tool_names = tool_names
        self.tools: list[ToolSchema] = json.loads(schemas_json)
        self.calls: list[CallRecord] = []

    async def call(self, name: str, arguments: Mapping[str, Any]) -> CallRecord:
        record: CallRecord = {"name": name, "input": dict(arguments)}
        if name not in self.tool_names:
            record["output"] = f"unknown tool {name}; available: {', '.join(self.tool_names)}"
            record["error"] = True
        else:
            try:
                result = await self.client.call_tool(name, dict(arguments))
                record["output"] = "".join(p.text for p in result.content if isinstance(p, TextContent))
                if result.is_error:
                    record["error"] = True
                decisions = (result.meta or {}).get(DECISIONS_META)
                if isinstance(decisions, list):
                    record["decisions"] = decisions
            except Exception as exc:  # a transport failure is recorded, not raised into the reader
                record["output"] = f"tool call failed: {exc}"
                record["error"] = True
        self.calls.append(record)
        return record


class _RequestCounter(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if '"msg": "request"' in record.getMessage():
            self.count += 1


def _mcp_params(mcp_bin: str | None, url: str, cert: Path, scope: str, home: Path) -> StdioServerParameters:
    command, prefix = (mcp_bin, []) if mcp_bin else (sys.executable, ["-m", "demarkus"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEMARKUS_")}
    env["DEMARKUS_HOME"] = str(home)
    return StdioServerParameters(
        command=command,
        args=[*prefix, "mcp", "--host", url, "--ca", str(cert), "--read-only", "--scope", scope],
        env=env,
    )


def _mcp_server(params: StdioServerParameters, home: Path) -> McpServer:
    """The command of `params` for a reader that starts it itself: only DEMARKUS_HOME is
    added to that reader's environment (which has no DEMARKUS_* of its own)."""
    env = params.env or {}
    return McpServer(
        command=(params.command, *params.args),
        environment={"DEMARKUS_HOME": env["DEMARKUS_HOME"]},
        workdir=home,
    )


def make_reader(config: RunConfig, corpus: Corpus, rubric: Mapping[str, RubricEntry]) -> Reader:
    """The reader `config` names; its module is imported only when it runs (`implementation.READERS`)."""
    if config.reader == "oracle":
        from .oracle import OracleReader

        return OracleReader(corpus, rubric)
    if config.reader == "opencode":
        from .opencode_reader import OpenCodeReader

        return OpenCodeReader.from_options(
            config.opencode_bin,
            config.model,
            config.base_url,
            config.api_key_env,
            max_output_tokens=config.max_output_tokens,
            prefix=config.opencode_prefix,
        )
    from .openai_reader import OpenAIReader

    return OpenAIReader.from_options(
        config.base_url, config.model, config.api_key_env, max_output_tokens=config.max_output_tokens
    )


async def run_eval(config: RunConfig) -> Report:
    """Run every scheduled attempt and write report.json, report.md and chart.png."""
    config.validate()
    policy = get_policy(config.policy)
    world = open_world(config.world)
    questions = parse_questions(world.questions())
    if config.case:
        questions = [q for q in questions if q.id == config.case]
        if not questions:
            raise RunRefused(f"no question {config.case!r} in {config.world}")
    rubric = parse_rubric(world.rubric())
    corpus = Corpus.from_world(world)
    hashes = implementation_hashes(config.reader, config.mcp_bin)
    reader = make_reader(config, corpus, rubric)
    spec: RunSpec = {
        "suite": SUITE,
        "world": world.id,
        "authority": world.authority,
        "documents": world.documents_count,
        "versions": world.versions_count,
        "fixture_hashes": {
            "corpus": world.corpus_sha256,
            "questions": world.questions_sha256,
            "rubric": world.rubric_sha256,
        },
        "reader": config.reader,
        "model": reader.model,
        "steps": config.steps,
        "timeout": config.timeout,
        "repeats": config.repeats,
        "case": config.case or "",
        "max_output_tokens": config.max_output_tokens if config.reader != "oracle" else 0,
        "reader_policy": policy.name,
        "reader_prompt_hash": policy.prompt_hash,
        "tool_profile": TOOL_PROFILE,
        "scoring_version": SCORING_VERSION,
        "expected_attempts": len(questions) * config.repeats,
        "implementation_entries": entry_modules(config.reader),
    }
    if config.reader == "opencode":
        from .opencode_reader import OpenCodeReader

        assert isinstance(reader, OpenCodeReader)
        spec["opencode_version"] = reader.version
        spec["reader_config_hash"] = reader.config_hash(config.steps)
    config.output.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="demarkus-eval-") as tmp_name:
        tmp = Path(tmp_name)
        store = tmp / "store"
        store.mkdir()
        service = Service.open(store, trusted=True)
        with service.deferred_index():
            await load_world(world, service)
        cert, key = ensure_dev_certificate(tmp / "tls")
        counter = _RequestCounter()
        access = logging.getLogger("demarkus.access")
        old_level = access.level
        access.setLevel(logging.INFO)
        access.addHandler(counter)
        lifecycle: Lifecycle = {"tool_profile": TOOL_PROFILE, "startup_verified": False, "server_stayed_up": False}
        attempts: list[Attempt] = []
        try:
            async with serve_mark(service, host="127.0.0.1", port=0, cert=cert, key=key) as server:
                url = f"mark://localhost:{server.port}"
                lifecycle["endpoint"] = f"127.0.0.1:{server.port}"

                async def one(question: Question, repeat: int, the_reader: Reader) -> Attempt:
                    return await _attempt(
                        question, repeat, the_reader, policy, config, url, cert, tmp, counter, corpus, rubric, lifecycle
                    )

                if config.reader != "oracle":
                    await _plan_paid_run(config, questions, corpus, rubric, one)
                for repeat in range(1, config.repeats + 1):
                    for question in questions:
                        attempts.append(await one(question, repeat, reader))
                        config.echo(progress_line(attempts[-1], len(attempts), len(questions) * config.repeats))
                lifecycle["server_stayed_up"] = True
        finally:
            access.removeHandler(counter)
            access.setLevel(old_level)
            service.close()
    lifecycle["cleanup_verified"] = not tmp.exists()
    report = build_report(spec, hashes, attempts, lifecycle, generated=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    write_outputs(report, config.output)
    return report


def describe_failure(exc: Exception, timeout: float) -> str:
    """What went wrong in an attempt, in one line. The MCP client's task group wraps what
    happened inside it (the attempt's timeout among it) in an exception group: the leaves
    are what happened."""
    leaves: list[BaseException] = [exc]
    while any(isinstance(leaf, BaseExceptionGroup) for leaf in leaves):
        leaves = [e for leaf in leaves for e in (leaf.exceptions if isinstance(leaf, BaseExceptionGroup) else (leaf,))]
    if any(isinstance(leaf, TimeoutError) for leaf in leaves):
        return f"attempt timed out after {timeout} s"
    return "; ".join(f"{type(leaf).__name__}: {leaf}" for leaf in leaves)


def progress_line(attempt: Attempt, done: int, total: int, width: int = 20) -> str:
    """One line per finished attempt, led by a bar of the run so far: `[#####...] 4/16 q04 r1 ...`."""
    filled = width * done // max(total, 1)
    mark = "correct" if attempt["score"]["correct"] else "wrong"
    return (
        f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} "
        f"{attempt['task']} r{attempt['repeat']} {attempt['category']}: {mark}, "
        f"{attempt['trace']['turns']} turns, {len(attempt['trace']['calls'])} calls, "
        f"{attempt['trace']['usage_total']} tokens"
    )


async def _plan_paid_run(
    config: RunConfig,
    questions: list[Question],
    corpus: Corpus,
    rubric: Mapping[str, RubricEntry],
    one: Callable[[Question, int, Reader], Awaitable[Attempt]],
) -> None:
    """Print the planned attempts and the oracle's (lower-bound) spend; refuse without --approve."""
    from .oracle import OracleReader

    oracle = OracleReader(corpus, rubric)
    estimate = 0
    for question in questions:
        attempt = await one(question, 1, oracle)
        estimate += attempt["trace"]["usage_total"]
    planned = len(questions) * config.repeats
    config.echo(
        f"planned: {planned} attempts ({len(questions)} questions x {config.repeats} repeats), "
        f"reader {config.reader} model {config.model}, policy {config.policy}, {config.steps} steps"
    )
    config.echo(
        f"oracle-estimated spend: >= {estimate * config.repeats} tokens (a lower bound; real readers spend more)"
    )
    if not config.approve:
        raise RunRefused("a paid reader needs --approve; nothing was sent to the model")


async def _attempt(
    question: Question,
    repeat: int,
    reader: Reader,
    policy: Policy,
    config: RunConfig,
    url: str,
    cert: Path,
    tmp: Path,
    counter: _RequestCounter,
    corpus: Corpus,
    rubric: Mapping[str, RubricEntry],
    lifecycle: Lifecycle,
) -> Attempt:
    home = Path(tempfile.mkdtemp(prefix=f"{question.id}-{repeat}-", dir=tmp))
    scope = question.scope or "/"
    started = time.perf_counter()
    before = counter.count
    errors: list[str] = []
    result: AttemptResult = {"final": None, "usage": {}, "usage_complete": False, "turns": 0}
    session: MCPSession | None = None
    try:
        params = _mcp_params(config.mcp_bin, url, cert, scope, home)
        async with MCPClient(params) as client:
            listed = (await client.list_tools()).tools
            names = sorted(t.name for t in listed)
            schemas = [
                {"name": t.name, "description": t.description, "inputSchema": t.input_schema}
                for t in sorted(listed, key=lambda t: t.name)
            ]
            if tuple(names) != READ_TOOLS:
                raise RunRefused(f"the MCP server offers {names}, expected exactly the read tools {list(READ_TOOLS)}")
            lifecycle["startup_verified"] = True
            lifecycle["tool_names"] = names
            session = MCPSession(client, json.dumps(schemas, sort_keys=True), names, _mcp_server(params, home))
            result = await asyncio.wait_for(reader.attempt(question, session, policy, config.steps), config.timeout)
    except RunRefused:
        raise
    except Exception as exc:
        errors.append(describe_failure(exc, config.timeout))
    elapsed = (time.perf_counter() - started) * 1000
    calls = session.calls if session is not None else []
    usage = result.get("usage") or {}
    usage_total = usage.get("input", 0) + usage.get("output", 0) + usage.get("reasoning", 0)
    by_tool = Counter(tool_name(c) for c in calls)
    score = score_attempt(question, rubric[question.id], calls, result.get("final"), corpus)
    attempt: Attempt = {
        "task": question.id,
        "category": question.category,
        "repeat": repeat,
        "latency_phase": "cold" if repeat == 1 else "warm",
        "elapsed_ms": round(elapsed, 1),
        "protocol_requests": counter.count - before,
        "tool_result_tokens": sum(count_tokens(c.get("output") or "") for c in calls),
        "relation_expansions": relation_expansions(calls),
        "tool_calls_by_tool": dict(sorted(by_tool.items())),
        "trace": {
            "usage": usage,
            "usage_total": usage_total,
            "usage_complete": bool(result.get("usage_complete")) and not errors,
            "usage_lower_bound": bool(result.get("lower_bound")),
            "turns": result.get("turns", 0),
            "calls": calls,
            "final": result.get("final"),
        },
        "score": score,
    }
    if "session" in result:
        attempt["trace"]["session"] = result["session"]
    if "turn_usage" in result:
        attempt["trace"]["turn_usage"] = result["turn_usage"]
    if result.get("errors"):
        errors.extend(result.get("errors", []))
    if errors:
        attempt["trace"]["errors"] = errors
        attempt["error"] = "; ".join(errors)
    return attempt

"""The JSON records of a run, as typed dicts: tool calls, usage, attempts, summaries, the run
spec and the report (`demarkus-eval-report-v1`, see `report`).

They are TypedDicts rather than dataclasses because they are the JSON itself: a report
is written with `json.dumps` and read back with `json.loads`, keys in the order built here,
and derived reports (rescored, metrics-only) keep the same shape. A report read from disk
becomes a `Report` once `report.validate_report` has accepted it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict


class CacheUsage(TypedDict):
    read: int
    write: int


class Usage(TypedDict, total=False):
    """Model tokens of an attempt: all four keys, or none when the attempt failed before
    its reader returned."""

    input: int
    output: int
    reasoning: int
    cache: CacheUsage


def empty_usage() -> Usage:
    """All counts at zero, for a reader to add to."""
    return {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}


DECISIONS_META = "demarkus/decisions"
"""Where a budgeted mark_lookup result lists its decisions (`demarkus.mcp.server.DECISIONS_META`)."""


class DecisionRecord(TypedDict):
    """One include or skip of a budgeted lookup (`demarkus.expand.Decision`)."""

    location: str
    tokens: int
    action: str
    why: str


class CallRecord(TypedDict):
    """One tool call as the reader made it and the text it got back; a budgeted lookup
    also keeps its decisions (from the result's `_meta`, which the reader never sees). A
    metrics-only export keeps only the name and the failure flag."""

    name: str
    input: NotRequired[dict[str, Any]]
    output: NotRequired[str]
    error: NotRequired[bool]
    decisions: NotRequired[list[DecisionRecord]]


class Trace(TypedDict):
    usage: Usage
    usage_total: int
    usage_complete: bool
    usage_lower_bound: bool
    turns: int
    calls: list[CallRecord]
    final: str | None
    errors: NotRequired[list[str]]
    session: NotRequired[str]
    """The reader's own session id (OpenCode's), to find the session in its database."""
    turn_usage: NotRequired[list[Usage]]
    """Usage of each model turn, as the reader counted it (OpenCode); sums to `usage`."""


class Score(TypedDict):
    correct: bool
    answer_correct: bool
    citations_valid: bool
    evidence_sufficient: bool
    reasons: list[str]


class Attempt(TypedDict):
    task: str
    category: str
    repeat: int
    latency_phase: str
    """`cold` for repeat 1, else `warm`."""
    elapsed_ms: float
    protocol_requests: int
    tool_result_tokens: int
    relation_expansions: int
    tool_calls_by_tool: dict[str, int]
    trace: Trace
    score: Score
    error: NotRequired[str]


class Latency(TypedDict):
    samples: int
    mean_ms: float | None
    min_ms: float | None
    max_ms: float | None


class Summary(TypedDict):
    """Totals over a set of attempts (`report.summarize`)."""

    attempts: int
    correct: int
    known_total_tokens: int
    usage_complete: bool
    usage_lower_bound: bool
    model_turns: int
    tool_calls: int
    protocol_requests: int
    tool_result_tokens: int
    relation_expansions: int
    failures: int
    answer_correct: int
    citations_valid: int
    evidence_sufficient: int
    usage: Usage
    tool_calls_by_tool: dict[str, int]
    tokens_per_correct_answer: float | None
    result_tokens_per_correct_answer: float | None
    cold_latency: Latency
    warm_latency: Latency


class FixtureHashes(TypedDict):
    corpus: str
    questions: str
    rubric: str


class RunSpec(TypedDict):
    """What two runs must share to be compared (deep-equal, see `compare`)."""

    suite: str
    world: str
    authority: str
    documents: int
    versions: int
    fixture_hashes: FixtureHashes
    reader: str
    model: str
    steps: int
    timeout: float
    repeats: int
    case: str
    max_output_tokens: int
    reader_policy: str
    reader_prompt_hash: str
    tool_profile: str
    scoring_version: str
    expected_attempts: int
    opencode_version: NotRequired[str]
    """`opencode --version` of an opencode-reader run."""
    reader_config_hash: NotRequired[str]
    """sha256 of an opencode-reader run's canonical reader config (`opencode_reader.config_hash`)."""
    implementation_entries: NotRequired[dict[str, list[str]]]
    """Part -> the modules whose imports its implementation hash covers (`implementation`);
    absent in reports written before the hashes followed imports."""


def reader_name(spec: Mapping[str, Any]) -> str:
    """Which reader produced a run, in a few words: `oracle`, `openai gpt-5.1`,
    `OpenCode 1.18.33 openai/gpt-5.1`."""
    reader = str(spec.get("reader", "?"))
    if reader == "oracle":
        return "oracle"
    if reader == "opencode":
        return f"OpenCode {spec.get('opencode_version', '?')} {spec.get('model', '?')}"
    return f"{reader} {spec.get('model', '?')}"


class Lifecycle(TypedDict):
    tool_profile: str
    startup_verified: bool
    server_stayed_up: bool
    endpoint: NotRequired[str]
    tool_names: NotRequired[list[str]]
    cleanup_verified: NotRequired[bool]


class Report(TypedDict):
    format: str
    spec: RunSpec
    generated: str
    implementation_hashes: dict[str, str]
    """server, mcp, runner and reader (`implementation.implementation_hashes`)."""
    attempts: list[Attempt]
    summary: Summary
    categories: dict[str, Summary]
    lifecycle: Lifecycle
    rescored_from_sha256: NotRequired[str]
    rescored_at: NotRequired[str]
    scorer_implementation_sha256: NotRequired[str]
    metrics_only: NotRequired[bool]
    source_report_sha256: NotRequired[str]
    tool_result_tokens: NotRequired[int]

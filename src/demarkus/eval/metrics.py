"""`eval export-metrics`: a shareable copy of a report, without anything private.

A private report holds retrieved document text (tool outputs), the reader's arguments and
answers, and diagnostics that quote both. The export keeps only counts and grades, so it
still compares under the same rules (summaries, categories, tool calls by tool, relation
expansions) but can never be rescored. Fields are copied from an allow-list: a field
added to reports later stays private until it is listed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from .records import Attempt, CallRecord, Report, Score
from .report import build_report, digest, read_report, validate_report, write_new_report

SCORING_NOTE = "scoring details retained in private trace"
RUN_NOTE = "run failed; details retained in private trace"

_ATTEMPT_KEYS = (
    "task",
    "category",
    "repeat",
    "latency_phase",
    "elapsed_ms",
    "protocol_requests",
    "tool_result_tokens",
    "relation_expansions",
    "tool_calls_by_tool",
)
_TRACE_KEYS = ("usage", "usage_total", "usage_complete", "usage_lower_bound", "turns", "turn_usage")


def strip_attempt(attempt: Attempt) -> Attempt:
    """Counts and grades of one attempt; tool calls keep only their name and failure flag."""
    trace = attempt["trace"]
    stripped = _allowed(trace, _TRACE_KEYS)
    stripped["calls"] = [_name_only(call) for call in trace["calls"]]
    stripped["final"] = None
    score = attempt["score"]
    grades: Score = {
        "correct": bool(score.get("correct")),
        "answer_correct": bool(score.get("answer_correct")),
        "citations_valid": bool(score.get("citations_valid")),
        "evidence_sufficient": bool(score.get("evidence_sufficient")),
        "reasons": [SCORING_NOTE] if score.get("reasons") else [],
    }
    out = _allowed(attempt, _ATTEMPT_KEYS)
    out["trace"] = stripped
    out["score"] = grades
    if attempt.get("error"):
        out["error"] = RUN_NOTE
    # the allow-lists name only fields of Attempt and Trace, and every run writes them all
    return cast(Attempt, out)


def _allowed(record: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: record[key] for key in keys if key in record}


def _name_only(call: CallRecord) -> CallRecord:
    kept: CallRecord = {"name": call["name"]}
    if call.get("error"):
        kept["error"] = True
    return kept


def export_metrics(report: Report, raw: bytes) -> Report:
    """The metrics-only report of `report` (whose file bytes are `raw`).

    Raises:
        ValueError: `report` is already a metrics-only export.
    """
    if report.get("metrics_only"):
        raise ValueError("the report is already metrics-only; export from the private original")
    attempts = [strip_attempt(a) for a in report["attempts"]]
    out = build_report(
        report["spec"],
        report["implementation_hashes"],
        attempts,
        report.get("lifecycle", {}),
        generated=report["generated"],
    )
    if "rescored_from_sha256" in report:
        out["rescored_from_sha256"] = report["rescored_from_sha256"]
    if "rescored_at" in report:
        out["rescored_at"] = report["rescored_at"]
    if "scorer_implementation_sha256" in report:
        out["scorer_implementation_sha256"] = report["scorer_implementation_sha256"]
    out["metrics_only"] = True
    out["source_report_sha256"] = digest(raw)
    out["tool_result_tokens"] = out["summary"]["tool_result_tokens"]
    validate_report(out, "metrics-only export")
    return out


def export(private: Path, new: Path) -> Report:
    """Export report PRIVATE as the metrics-only report NEW (a new file).

    Raises:
        ValueError: PRIVATE is not a valid private report, or NEW exists.
    """
    if Path(new).exists():
        raise ValueError(f"{new} already exists; write the metrics-only report to a new file")
    raw, report = read_report(private)
    out = export_metrics(report, raw)
    write_new_report(out, new)
    return out

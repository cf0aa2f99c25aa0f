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
from typing import Any

from .report import (
    RESCORE_FIELDS,
    build_report,
    digest,
    read_report,
    validate_report,
    write_new_report,
)

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
_TRACE_KEYS = ("usage", "usage_total", "usage_complete", "usage_lower_bound", "turns")
_SCORE_FLAGS = ("correct", "answer_correct", "citations_valid", "evidence_sufficient")


def strip_attempt(attempt: Mapping[str, Any]) -> dict[str, Any]:
    """Counts and grades of one attempt; tool calls keep only their name and failure flag."""
    out = {key: attempt[key] for key in _ATTEMPT_KEYS if key in attempt}
    trace = attempt["trace"]
    out["trace"] = {key: trace[key] for key in _TRACE_KEYS if key in trace}
    out["trace"]["calls"] = [{"name": c["name"], **({"error": True} if c.get("error") else {})} for c in trace["calls"]]
    out["trace"]["final"] = None
    score = attempt["score"]
    out["score"] = {key: bool(score.get(key)) for key in _SCORE_FLAGS}
    out["score"]["reasons"] = [SCORING_NOTE] if score.get("reasons") else []
    if attempt.get("error"):
        out["error"] = RUN_NOTE
    return out


def export_metrics(report: Mapping[str, Any], raw: bytes) -> dict[str, Any]:
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
    out.update({key: report[key] for key in RESCORE_FIELDS if key in report})
    out.update(
        metrics_only=True, source_report_sha256=digest(raw), tool_result_tokens=out["summary"]["tool_result_tokens"]
    )
    validate_report(out, "metrics-only export")
    return out


def export(private: Path, new: Path) -> dict[str, Any]:
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

"""Report format `demarkus-eval-report-v1`: summaries recomputed from attempts,
report.json, report.md and chart.png (`chart`, imported only when a run writes its outputs,
since the `demarkus` command imports this module and matplotlib is slow to import).

Two derived kinds keep the format: a rescored report (`rescore`: same traces, new grades,
with `rescored_from_sha256`, `rescored_at` and `scorer_implementation_sha256`) and a
metrics-only export (`metrics`: counts and grades without retrieved text, with
`metrics_only`, `source_report_sha256` and `tool_result_tokens`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from .records import Attempt, Latency, Lifecycle, Report, RunSpec, Summary, Usage, empty_usage, reader_name

FORMAT = "demarkus-eval-report-v1"
RESCORE_FIELDS = ("rescored_from_sha256", "rescored_at", "scorer_implementation_sha256")
_DIGEST = re.compile(r"sha256-[0-9a-f]{64}")
MULTI_DOCUMENT = ("multi-document", "supersession", "lineage", "dependency")


def summarize(attempts: Sequence[Attempt]) -> Summary:
    """Totals over `attempts`; tokens_per_correct_answer is None with 0 correct or incomplete usage."""
    usage = empty_usage()
    by_tool: dict[str, int] = {}
    correct = known_total_tokens = model_turns = tool_calls = protocol_requests = 0
    tool_result_tokens = expansions = failures = answer_correct = citations_valid = evidence_sufficient = 0
    usage_complete, usage_lower_bound = True, False
    cold: list[float] = []
    warm: list[float] = []
    for attempt in attempts:
        trace, score = attempt["trace"], attempt["score"]
        correct += bool(score.get("correct"))
        answer_correct += bool(score.get("answer_correct"))
        citations_valid += bool(score.get("citations_valid"))
        evidence_sufficient += bool(score.get("evidence_sufficient"))
        known_total_tokens += int(trace.get("usage_total", 0))
        usage_complete &= bool(trace.get("usage_complete"))
        usage_lower_bound |= bool(trace.get("usage_lower_bound"))
        model_turns += int(trace.get("turns", 0))
        tool_calls += len(trace.get("calls", []))
        protocol_requests += int(attempt.get("protocol_requests", 0))
        tool_result_tokens += int(attempt.get("tool_result_tokens", 0))
        expansions += int(attempt.get("relation_expansions", 0))
        failures += bool(attempt.get("error")) + sum(1 for c in trace.get("calls", []) if c.get("error"))
        _add_usage(usage, trace.get("usage") or {})
        for name, count in attempt.get("tool_calls_by_tool", {}).items():
            by_tool[name] = by_tool.get(name, 0) + count
        (cold if attempt.get("repeat", 1) == 1 else warm).append(float(attempt.get("elapsed_ms", 0)))
    return {
        "attempts": len(attempts),
        "correct": correct,
        "known_total_tokens": known_total_tokens,
        "usage_complete": usage_complete,
        "usage_lower_bound": usage_lower_bound,
        "model_turns": model_turns,
        "tool_calls": tool_calls,
        "protocol_requests": protocol_requests,
        "tool_result_tokens": tool_result_tokens,
        "relation_expansions": expansions,
        "failures": failures,
        "answer_correct": answer_correct,
        "citations_valid": citations_valid,
        "evidence_sufficient": evidence_sufficient,
        "usage": usage,
        "tool_calls_by_tool": dict(sorted(by_tool.items())),
        "tokens_per_correct_answer": (round(known_total_tokens / correct, 2) if correct and usage_complete else None),
        "result_tokens_per_correct_answer": round(tool_result_tokens / correct, 2) if correct else None,
        "cold_latency": _latency(cold),
        "warm_latency": _latency(warm),
    }


def _add_usage(total: Usage, usage: Usage) -> None:
    total["input"] += int(usage.get("input", 0))
    total["output"] += int(usage.get("output", 0))
    total["reasoning"] += int(usage.get("reasoning", 0))
    cache = usage.get("cache") or {"read": 0, "write": 0}
    total["cache"]["read"] += int(cache.get("read", 0))
    total["cache"]["write"] += int(cache.get("write", 0))


def _latency(samples: list[float]) -> Latency:
    if not samples:
        return {"samples": 0, "mean_ms": None, "min_ms": None, "max_ms": None}
    return {
        "samples": len(samples),
        "mean_ms": round(sum(samples) / len(samples), 1),
        "min_ms": round(min(samples), 1),
        "max_ms": round(max(samples), 1),
    }


def categories(attempts: Sequence[Attempt]) -> dict[str, Summary]:
    names = sorted({a["category"] for a in attempts})
    return {name: summarize([a for a in attempts if a["category"] == name]) for name in names}


def build_report(
    spec: RunSpec,
    hashes: Mapping[str, str],
    attempts: Sequence[Attempt],
    lifecycle: Lifecycle,
    *,
    generated: str,
) -> Report:
    return {
        "format": FORMAT,
        "spec": spec.copy(),
        "generated": generated,
        "implementation_hashes": dict(hashes),
        "attempts": list(attempts),
        "summary": summarize(attempts),
        "categories": categories(attempts),
        "lifecycle": lifecycle.copy(),
    }


def load_report(path: Path) -> Report:
    """Read and validate a report: format, identity, summaries recomputable from attempts.

    Raises:
        ValueError: the file is not a valid report (the message says what is wrong).
    """
    return read_report(path)[1]


def read_report(path: Path) -> tuple[bytes, Report]:
    """The report's bytes (derived reports record their digest) and its validated content.

    Raises:
        ValueError: the file is missing, unreadable or not a valid report.
    """
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read a report ({exc.strerror or exc})") from exc
    try:
        report = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a report: the file is not JSON ({exc})") from exc
    validate_report(report, str(path))
    return raw, cast(Report, report)


def digest(raw: bytes) -> str:
    return "sha256-" + hashlib.sha256(raw).hexdigest()


def is_rescored(report: Mapping[str, object]) -> bool:
    return any(key in report for key in RESCORE_FIELDS)


def validate_report(report: Any, name: str = "report") -> None:
    """Accept `report` (JSON as loaded) as a `Report`: format, identity, hashes, provenance,
    attempts and summaries recomputable from them.

    Raises:
        ValueError: what is wrong, naming `name`.
    """
    if not isinstance(report, dict) or "format" not in report:
        raise ValueError(f'{name}: not a report: a {FORMAT} report is a JSON object with "format": "{FORMAT}"')
    if report["format"] != FORMAT:
        raise ValueError(f"{name}: report format {report['format']!r} is not supported; this version reads {FORMAT}")
    spec = report.get("spec") or {}
    for key in (
        "world",
        "fixture_hashes",
        "reader",
        "reader_policy",
        "reader_prompt_hash",
        "scoring_version",
        "steps",
        "timeout",
        "repeats",
        "expected_attempts",
    ):
        if key not in spec:
            raise ValueError(f"{name}: spec lacks {key}")
    if spec.get("reader") == "opencode":
        for key in ("opencode_version", "reader_config_hash"):
            if not spec.get(key):
                raise ValueError(
                    f"{name}: an opencode run's spec needs {key}, so runs of other OpenCode setups never compare"
                )
    hashes = report.get("implementation_hashes") or {}
    for key in ("server", "mcp", "runner", "reader"):
        if not str(hashes.get(key, "")).startswith("sha256-"):
            raise ValueError(f"{name}: implementation hash {key} missing")
    _validate_derivation(report, name)
    attempts = report.get("attempts") or []
    keys = [(a["task"], a["repeat"]) for a in attempts]
    if len(set(keys)) != len(keys):
        raise ValueError(f"{name}: a task/repeat appears twice")
    if len(attempts) > spec["expected_attempts"]:
        raise ValueError(f"{name}: more attempts than scheduled")
    for attempt in attempts:
        turns = attempt["trace"].get("turn_usage")
        if turns is None:
            continue
        total = empty_usage()
        for usage in turns:
            _add_usage(total, usage)
        if len(turns) != attempt["trace"]["turns"] or total != attempt["trace"]["usage"]:
            raise ValueError(f"{name}: {attempt['task']} r{attempt['repeat']}: its turns' usage does not add up")
    if report.get("summary") != _jsonish(summarize(attempts)) or report.get("categories") != _jsonish(
        categories(attempts)
    ):
        raise ValueError(f"{name}: summaries do not match the attempts")


def _validate_derivation(report: Mapping[str, Any], name: str) -> None:
    """Rescore provenance is all or nothing; a metrics-only export names its source."""
    if is_rescored(report):
        missing = [key for key in RESCORE_FIELDS if not report.get(key)]
        if missing:
            raise ValueError(f"{name}: incomplete rescore provenance (missing {', '.join(missing)})")
        for key in ("rescored_from_sha256", "scorer_implementation_sha256"):
            if not _DIGEST.fullmatch(str(report[key])):
                raise ValueError(f"{name}: {key} is not a sha256- digest")
    if "metrics_only" in report or "source_report_sha256" in report:
        tokens = report.get("tool_result_tokens")
        if (
            report.get("metrics_only") is not True
            or not _DIGEST.fullmatch(str(report.get("source_report_sha256")))
            or isinstance(tokens, bool)
            or not isinstance(tokens, int)
            or tokens < 0
        ):
            raise ValueError(
                f"{name}: a metrics-only report needs metrics_only, source_report_sha256 and tool_result_tokens"
            )


def write_new_report(report: Report, path: Path) -> None:
    """Write report.json content to `path`, which must not exist yet (derived reports never
    replace their source)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    try:
        with Path(path).open("x", encoding="utf-8") as stream:
            stream.write(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    except FileExistsError:
        raise ValueError(f"{path} already exists; write a derived report to a new file") from None


def _jsonish(value: Any) -> Any:
    return json.loads(json.dumps(value))


def write_outputs(report: Report, output: Path) -> None:
    from .chart import arm_label, build_figure, write_png

    output.mkdir(parents=True, exist_ok=True)
    (output / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (output / "report.md").write_text(render_markdown(report), encoding="utf-8")
    write_png(build_figure([(arm_label(report), report)]), output / "chart.png")


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def render_markdown(report: Report) -> str:
    spec, summary = report["spec"], report["summary"]
    bound = " (oracle turn model: a lower bound)" if summary.get("usage_lower_bound") else ""
    lines = [
        f"# Evaluation: {spec['world']}, read by {reader_name(spec)}, policy {spec['reader_policy']}",
        "",
        f"- generated {report['generated']}; scoring {spec['scoring_version']}; steps {spec['steps']}, "
        f"timeout {spec['timeout']} s, repeats {spec['repeats']}",
        f"- prompt {spec['reader_prompt_hash']}"
        + (f"; reader config {spec['reader_config_hash']}" if spec.get("reader_config_hash") else ""),
        "- implementation: " + ", ".join(f"{k} {v[:19]}…" for k, v in report["implementation_hashes"].items()),
        f"- correct {summary['correct']}/{summary['attempts']}; tokens {_fmt(summary['known_total_tokens'])}{bound}; "
        f"tokens per correct {_fmt(summary['tokens_per_correct_answer'])}",
        "",
        "| Category | Correct | Tokens/correct | Turns | Calls | Result tokens | Relation expansions | Explore calls |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = list(report["categories"].items()) + [("**overall**", summary)]
    for name, s in rows:
        lines.append(
            f"| {name} | {s['correct']}/{s['attempts']} | {_fmt(s['tokens_per_correct_answer'])} | {s['model_turns']} | "
            f"{s['tool_calls']} | {_fmt(s['tool_result_tokens'])} | {s['relation_expansions']} | "
            f"{s['tool_calls_by_tool'].get('mark_explore', 0)} |"
        )
    lines += [
        "",
        "| Task | Repeat | Category | Correct | Turns | Calls | Tokens | Result tokens | Reasons |",
        "|---|---:|---|---|---:|---:|---:|---:|---|",
    ]
    for a in report["attempts"]:
        reasons = "; ".join(a["score"].get("reasons") or []) or (a.get("error") or "")
        lines.append(
            f"| {a['task']} | {a['repeat']} | {a['category']} | {'yes' if a['score']['correct'] else 'no'} | "
            f"{a['trace']['turns']} | {len(a['trace']['calls'])} | {_fmt(a['trace']['usage_total'])} | "
            f"{_fmt(a['tool_result_tokens'])} | {reasons.replace('|', '/')} |"
        )
    lines += [
        "",
        (
            "chart.png: tokens per correct answer and turns per attempt by category (`n/a` = no correct "
            "answer); `demarkus eval chart` draws several arms side by side."
        ),
    ]
    return "\n".join(lines) + "\n"

"""Comparisons of two reports (pure rules + rendering).

- `compare BEFORE AFTER` (software): specs deep-equal; server, runner and reader hashes
  equal; the MCP hash differs.
- `compare_policies BEFORE AFTER` (policy ablation): every implementation hash equal;
  each prompt hash is its named policy's; specs equal once policy name and prompt hash
  are blanked; the policies differ.
- `side_by_side A C`: same world and scoring only; a table, never a controlled result.

All three need equal rescore provenance (both reports rescored with the same scorer
implementation, or neither: a grading correction is not an optimisation gain), complete
cohorts (every scheduled attempt, identical task -> category maps) and complete usage,
then report the tokens-per-correct change overall and per category, regressed tasks and
categories, and the acceptance verdict with the feature-exercised gate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NotRequired, TypedDict

from .errors import Refused
from .policies import POLICIES
from .records import Report, Summary
from .report import MULTI_DOCUMENT, RESCORE_FIELDS, is_rescored

NOTE = "Point estimates only: repeats are few and readers vary; a change within noise is not a result."


class CategoryChange(TypedDict):
    before: Summary | None
    after: Summary | None
    tokens_per_correct_change_percent: float | None


class Verdict(TypedDict):
    accepted: bool
    feature_exercised: bool
    after_mark_explore_calls: int
    after_relation_expansions: int
    multi_document_categories: list[str]
    reasons: list[str]


class Comparison(TypedDict):
    """What every rule returns (and `--json` prints)."""

    kind: str
    before: Summary
    after: Summary
    tokens_per_correct_change_percent: float | None
    categories: dict[str, CategoryChange]
    regressed_tasks: list[str]
    regressed_categories: list[str]
    improved_point_estimate: bool
    note: str
    verdict: Verdict
    before_policy: NotRequired[str]
    after_policy: NotRequired[str]
    before_tool_result_tokens: NotRequired[int]
    after_tool_result_tokens: NotRequired[int]


def _tasks(report: Report) -> dict[str, str]:
    return {a["task"]: a["category"] for a in report["attempts"]}


def _check_provenance(before: Report, after: Report) -> None:
    """Rescored on both sides or neither, with complete provenance and the same scorer."""
    for name, report in (("before", before), ("after", after)):
        if is_rescored(report) and not all(report.get(key) for key in RESCORE_FIELDS):
            raise Refused(f"{name} has incomplete rescore provenance (needs {', '.join(RESCORE_FIELDS)})")
    rb, ra = is_rescored(before), is_rescored(after)
    if rb != ra:
        which = "before" if rb else "after"
        raise Refused(f"only {which} is rescored: rescore both reports with the same scorer, or compare the originals")
    if rb and before.get("scorer_implementation_sha256") != after.get("scorer_implementation_sha256"):
        raise Refused("the reports were rescored by different scorer implementations; rescore both with one scorer")


def _check_cohorts(before: Report, after: Report) -> None:
    for name, report in (("before", before), ("after", after)):
        spec = report["spec"]
        if len(report["attempts"]) != spec["expected_attempts"]:
            raise Refused(f"{name} is incomplete: {len(report['attempts'])} of {spec['expected_attempts']} attempts")
        counts: dict[str, int] = {}
        for attempt in report["attempts"]:
            counts[attempt["task"]] = counts.get(attempt["task"], 0) + 1
        if any(c != spec["repeats"] for c in counts.values()):
            raise Refused(f"{name}: not every task has exactly {spec['repeats']} attempts")
        if not report["summary"]["usage_complete"]:
            raise Refused(f"{name}: usage is incomplete; a ratio would hide unknown spend")
    if _tasks(before) != _tasks(after):
        raise Refused("the two reports do not hold the same tasks with the same categories")


def _diff_keys(a: Mapping[str, object], b: Mapping[str, object]) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def compare(before: Report, after: Report) -> Comparison:
    _check_provenance(before, after)
    if before["spec"] != after["spec"]:
        raise Refused("run specs differ in: " + ", ".join(_diff_keys(before["spec"], after["spec"])))
    hb, ha = before["implementation_hashes"], after["implementation_hashes"]
    same = [k for k in ("server", "runner", "reader") if hb[k] != ha[k]]
    if same:
        raise Refused("implementation hashes must be equal except mcp; these differ: " + ", ".join(same))
    if hb["mcp"] == ha["mcp"]:
        raise Refused("the mcp hash is equal: there is no software change to compare (use compare-policies)")
    _check_cohorts(before, after)
    return _comparison("compare", before, after)


def compare_policies(before: Report, after: Report) -> Comparison:
    _check_provenance(before, after)
    for name, report in (("before", before), ("after", after)):
        policy = POLICIES.get(report["spec"]["reader_policy"])
        if policy is None:
            raise Refused(f"{name}: unknown policy {report['spec']['reader_policy']!r}")
        if policy.prompt_hash != report["spec"]["reader_prompt_hash"]:
            raise Refused(f"{name}: prompt hash is not the hash of policy {policy.name}'s prompt")
    differ = _diff_keys(before["implementation_hashes"], after["implementation_hashes"])
    if differ:
        raise Refused(
            "every implementation hash must be equal for a policy ablation; these differ: " + ", ".join(differ)
        )
    blank = {"reader_policy": "", "reader_prompt_hash": ""}
    sb, sa = {**before["spec"], **blank}, {**after["spec"], **blank}
    if sb != sa:
        raise Refused("run specs differ beyond the policy in: " + ", ".join(_diff_keys(sb, sa)))
    if before["spec"]["reader_policy"] == after["spec"]["reader_policy"]:
        raise Refused("both reports use the same policy: nothing to ablate")
    _check_cohorts(before, after)
    result = _comparison("compare-policies", before, after)
    result["before_policy"] = before["spec"]["reader_policy"]
    result["after_policy"] = after["spec"]["reader_policy"]
    result["before_tool_result_tokens"] = before["summary"]["tool_result_tokens"]
    result["after_tool_result_tokens"] = after["summary"]["tool_result_tokens"]
    return result


def side_by_side(a: Report, c: Report) -> Comparison:
    _check_provenance(a, c)
    for key in ("world", "fixture_hashes", "scoring_version"):
        if a["spec"].get(key) != c["spec"].get(key):
            raise Refused(f"side by side needs the same {key}")
    _check_cohorts(a, c)
    result = _comparison("side-by-side", a, c)
    result["note"] = "Side by side only: more than one thing differs, so this is not a controlled comparison. " + NOTE
    return result


def _change(before: float | None, after: float | None) -> float | None:
    if not before or after is None:
        return None
    return round((after / before - 1) * 100, 2)


def _comparison(kind: str, before: Report, after: Report) -> Comparison:
    def correct_by_task(report: Report) -> dict[str, int]:
        out: dict[str, int] = {}
        for attempt in report["attempts"]:
            out[attempt["task"]] = out.get(attempt["task"], 0) + bool(attempt["score"]["correct"])
        return out

    cb, ca = correct_by_task(before), correct_by_task(after)
    regressed_tasks = sorted(t for t in cb if ca.get(t, 0) < cb[t])
    cats: dict[str, CategoryChange] = {}
    for name in sorted(set(before["categories"]) | set(after["categories"])):
        b, a = before["categories"].get(name), after["categories"].get(name)
        cats[name] = {
            "before": b,
            "after": a,
            "tokens_per_correct_change_percent": _change(
                b and b["tokens_per_correct_answer"], a and a["tokens_per_correct_answer"]
            ),
        }
    regressed_categories = sorted(
        n for n, c in cats.items() if c["before"] and c["after"] and c["after"]["correct"] < c["before"]["correct"]
    )
    change = _change(before["summary"]["tokens_per_correct_answer"], after["summary"]["tokens_per_correct_answer"])
    improved = (
        change is not None
        and change < 0
        and not regressed_tasks
        and after["summary"]["correct"] >= before["summary"]["correct"]
    )
    return {
        "kind": kind,
        "before": before["summary"],
        "after": after["summary"],
        "tokens_per_correct_change_percent": change,
        "categories": cats,
        "regressed_tasks": regressed_tasks,
        "regressed_categories": regressed_categories,
        "improved_point_estimate": improved,
        "note": NOTE,
        "verdict": verdict(cats, regressed_tasks, after),
    }


def verdict(cats: Mapping[str, CategoryChange], regressed_tasks: list[str], after: Report) -> Verdict:
    """No regression on `direct`; each multi-document category present: equal-or-better
    correctness and fewer tokens per correct; the graph-navigation claim needs the after
    arm to have exercised the feature (mark_explore calls or relation_expansions > 0)."""
    reasons: list[str] = []
    direct = cats.get("direct")
    if (
        direct
        and direct["before"]
        and direct["after"]
        and (
            direct["after"]["correct"] < direct["before"]["correct"]
            or any(_category_of(after, t) == "direct" for t in regressed_tasks)
        )
    ):
        reasons.append("direct answers regressed")
    multi = [n for n in MULTI_DOCUMENT if n in cats and cats[n]["before"] and cats[n]["after"]]
    for name in multi:
        b, a = cats[name]["before"], cats[name]["after"]
        assert b is not None and a is not None  # `multi` holds only categories of both reports
        if a["correct"] < b["correct"]:
            reasons.append(f"{name}: fewer correct ({b['correct']} -> {a['correct']})")
        tb, ta = b["tokens_per_correct_answer"], a["tokens_per_correct_answer"]
        if ta is None or (tb is not None and ta >= tb):
            reasons.append(f"{name}: tokens per correct not lower ({tb} -> {ta})")
    explore = sum(after["categories"][n]["tool_calls_by_tool"].get("mark_explore", 0) for n in multi)
    expansions = sum(after["categories"][n]["relation_expansions"] for n in multi)
    exercised = explore > 0 or expansions > 0
    if not exercised:
        reasons.append("feature not exercised: no mark_explore calls and no relation expansions in the after arm")
    return {
        "accepted": not reasons,
        "feature_exercised": exercised,
        "after_mark_explore_calls": explore,
        "after_relation_expansions": expansions,
        "multi_document_categories": multi,
        "reasons": reasons,
    }


def _category_of(report: Report, task: str) -> str:
    return _tasks(report).get(task, "")


def _f(value: float | None) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return f"{value:,}"


def verdict_line(kind: str, v: Verdict) -> str:
    """The acceptance line; side by side has none to give (more than one thing differs), so
    its line says only whether the table would meet the gates."""
    if kind == "side-by-side":
        met = "all met" if v["accepted"] else "not met: " + "; ".join(v["reasons"])
        return f"gates on this table (side by side is not a controlled comparison, so it gives no verdict): {met}"
    return f"verdict: {'ACCEPTED' if v['accepted'] else 'NOT ACCEPTED'}" + (
        "" if v["accepted"] else ": " + "; ".join(v["reasons"])
    )


def render(result: Comparison) -> str:
    b, a = result["before"], result["after"]
    lines = [f"# {result['kind']}"]
    if "before_policy" in result:
        lines.append(f"policies: {result['before_policy']} -> {result['after_policy']}")
    lines += [
        "",
        "| Scope | Correct b→a | Tokens/correct b→a | Δ % | Turns b→a | Calls b→a | Result tokens b→a | Explore a | Relation expansions a |",
        "|---|---|---|---:|---|---|---|---:|---:|",
    ]
    rows: list[tuple[str, Summary | None, Summary | None, float | None]] = [
        (n, c["before"], c["after"], c["tokens_per_correct_change_percent"]) for n, c in result["categories"].items()
    ]
    rows.append(("overall", b, a, result["tokens_per_correct_change_percent"]))
    for name, sb, sa in ((r[0], r[1], r[2]) for r in rows):
        change = next(r[3] for r in rows if r[0] == name)
        if sb is None or sa is None:
            lines.append(f"| {name} | only in one report | | | | | | | |")
            continue
        lines.append(
            f"| {name} | {sb['correct']}/{sb['attempts']}→{sa['correct']}/{sa['attempts']} | "
            f"{_f(sb['tokens_per_correct_answer'])}→{_f(sa['tokens_per_correct_answer'])} | {_f(change)} | "
            f"{sb['model_turns']}→{sa['model_turns']} | {sb['tool_calls']}→{sa['tool_calls']} | "
            f"{_f(sb['tool_result_tokens'])}→{_f(sa['tool_result_tokens'])} | "
            f"{sa['tool_calls_by_tool'].get('mark_explore', 0)} | {sa['relation_expansions']} |"
        )
    v = result["verdict"]
    lines += [
        "",
        f"regressed tasks: {', '.join(result['regressed_tasks']) or 'none'}",
        f"regressed categories: {', '.join(result['regressed_categories']) or 'none'}",
        f"feature exercised (after arm, multi-document categories): {'yes' if v['feature_exercised'] else 'no'} "
        f"({v['after_mark_explore_calls']} mark_explore calls, {v['after_relation_expansions']} relation expansions)",
        verdict_line(result["kind"], v),
        "",
        result["note"],
    ]
    return "\n".join(lines) + "\n"

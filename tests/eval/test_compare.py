"""Comparison rules on crafted reports: every mismatch is a refusal."""

from __future__ import annotations

import copy

import pytest

from demarkus.eval import compare as rules
from demarkus.eval.policies import POLICIES
from demarkus.eval.report import build_report, validate_report

H = "sha256-" + "0" * 64


def attempt(task: str, category: str, correct: bool, tokens: int, *, explore: int = 0, expansions: int = 0) -> dict:
    calls = [{"name": "mark_lookup", "input": {}, "output": "x"}] + [
        {"name": "mark_explore", "input": {}, "output": "y"}
    ] * explore
    return {
        "task": task,
        "category": category,
        "repeat": 1,
        "latency_phase": "cold",
        "elapsed_ms": 10.0,
        "protocol_requests": 2,
        "tool_result_tokens": 100,
        "relation_expansions": expansions,
        "tool_calls_by_tool": {"mark_lookup": 1, **({"mark_explore": explore} if explore else {})},
        "trace": {
            "usage": {"input": tokens - 10, "output": 10, "reasoning": 0, "cache": {"read": 0, "write": 0}},
            "usage_total": tokens,
            "usage_complete": True,
            "usage_lower_bound": True,
            "turns": 2 + explore,
            "calls": calls,
            "final": "{}",
        },
        "score": {
            "correct": correct,
            "answer_correct": correct,
            "citations_valid": correct,
            "evidence_sufficient": correct,
            "reasons": [],
        },
    }


def report(
    policy: str = "graph-budget-first-v1",
    mcp: str = "a",
    *,
    tokens: int = 1000,
    direct_ok: bool = True,
    explore: int = 0,
    expansions: int = 0,
    **hashes: str,
) -> dict:
    spec = {
        "suite": "world-answer-v1",
        "world": "demo",
        "fixture_hashes": {"corpus": H, "questions": H, "rubric": H},
        "reader": "oracle",
        "model": "oracle",
        "steps": 8,
        "timeout": 180.0,
        "repeats": 1,
        "case": "",
        "reader_policy": policy,
        "reader_prompt_hash": POLICIES[policy].prompt_hash,
        "scoring_version": "section-provenance-py-v1",
        "expected_attempts": 3,
    }
    impl = {"server": H, "runner": H, "reader": H, "mcp": "sha256-" + mcp * 64}
    impl.update({k: "sha256-" + v * 64 for k, v in hashes.items()})
    attempts = [
        attempt("q1", "direct", direct_ok, 1000),
        attempt("q2", "supersession", True, tokens, explore=explore, expansions=expansions),
        attempt("q3", "lineage", True, tokens, explore=explore, expansions=expansions),
    ]
    built = build_report(spec, impl, attempts, {}, generated="2026-01-01T00:00:00Z")
    validate_report(build_report(spec, impl, attempts, {}, generated="x"))
    return built


def test_compare_accepts_a_software_change_that_helps_and_is_exercised() -> None:
    before = report(mcp="a", tokens=3000, explore=1)
    after = report(mcp="b", tokens=1500, expansions=1)
    result = rules.compare(before, after)
    assert result["tokens_per_correct_change_percent"] < 0
    assert result["verdict"]["accepted"], result["verdict"]
    assert "ACCEPTED" in rules.render(result)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: r["spec"].update(steps=6), "run specs differ in: steps"),
        (lambda r: r["spec"].update(reader_policy="graph-section-first-v1"), "run specs differ"),
        (lambda r: r["implementation_hashes"].update(server="sha256-" + "9" * 64), "these differ: server"),
        (lambda r: r["implementation_hashes"].update(runner="sha256-" + "9" * 64), "these differ: runner"),
        (lambda r: r["implementation_hashes"].update(reader="sha256-" + "9" * 64), "these differ: reader"),
        (lambda r: r["implementation_hashes"].update(mcp="sha256-" + "a" * 64), "mcp hash is equal"),
    ],
)
def test_compare_refuses_mismatches(mutate, message) -> None:  # type: ignore[no-untyped-def]
    before, after = report(mcp="a"), report(mcp="b")
    mutate(after)
    with pytest.raises(rules.Refused, match=message):
        rules.compare(before, after)


def test_compare_refuses_incomplete_cohorts_and_unknown_usage() -> None:
    before, after = report(mcp="a"), report(mcp="b")
    short = copy.deepcopy(after)
    short["attempts"].pop()
    with pytest.raises(rules.Refused, match="incomplete"):
        rules.compare(before, short)
    unknown = copy.deepcopy(after)
    unknown["summary"]["usage_complete"] = False
    with pytest.raises(rules.Refused, match="hide unknown spend"):
        rules.compare(before, unknown)
    moved = copy.deepcopy(after)
    moved["attempts"][1]["category"] = "dependency"
    with pytest.raises(rules.Refused, match="same tasks"):
        rules.compare(before, moved)


def test_compare_policies_needs_equal_hashes_and_a_different_policy() -> None:
    a = report("graph-section-first-v1", explore=1, tokens=3000)
    b = report("graph-budget-first-v1", expansions=1, tokens=1500)
    result = rules.compare_policies(a, b)
    assert result["before_policy"] == "graph-section-first-v1" and result["verdict"]["accepted"]
    with pytest.raises(rules.Refused, match="these differ: mcp"):
        rules.compare_policies(a, report("graph-budget-first-v1", mcp="b"))
    with pytest.raises(rules.Refused, match="same policy"):
        rules.compare_policies(a, report("graph-section-first-v1"))
    forged = report("graph-budget-first-v1")
    forged["spec"]["reader_prompt_hash"] = H
    with pytest.raises(rules.Refused, match="prompt hash"):
        rules.compare_policies(a, forged)
    other = report("graph-budget-first-v1")
    other["spec"]["repeats"] = 2
    with pytest.raises(rules.Refused, match="beyond the policy in: repeats"):
        rules.compare_policies(a, other)


def test_side_by_side_only_needs_the_same_world_and_scoring() -> None:
    a = report("graph-section-first-v1", mcp="a", tokens=3000, explore=1)
    c = report("graph-budget-first-v1", mcp="b", tokens=1500, server="7")
    result = rules.side_by_side(a, c)
    assert "not a controlled comparison" in result["note"]
    c["spec"]["fixture_hashes"] = {"corpus": "sha256-" + "1" * 64}
    with pytest.raises(rules.Refused, match="fixture_hashes"):
        rules.side_by_side(a, c)


def test_verdict_rejects_direct_regressions_costlier_categories_and_unexercised_features() -> None:
    before = report(mcp="a", tokens=1500, explore=1)
    regressed = rules.compare(before, report(mcp="b", tokens=1000, direct_ok=False, expansions=1))
    assert not regressed["verdict"]["accepted"]
    assert regressed["regressed_tasks"] == ["q1"] and regressed["regressed_categories"] == ["direct"]
    costlier = rules.compare(before, report(mcp="b", tokens=2000, explore=1))
    assert any("tokens per correct not lower" in r for r in costlier["verdict"]["reasons"])
    idle = rules.compare(before, report(mcp="b", tokens=1000))
    assert not idle["verdict"]["feature_exercised"] and not idle["verdict"]["accepted"]


def rescored(built: dict, scorer: str = "5") -> dict:
    return {
        **built,
        "rescored_from_sha256": "sha256-" + "4" * 64,
        "rescored_at": "2026-01-02T00:00:00Z",
        "scorer_implementation_sha256": "sha256-" + scorer * 64,
    }


@pytest.mark.parametrize("rule", [rules.compare, rules.compare_policies, rules.side_by_side])
def test_rescored_provenance_must_match_on_both_sides(rule) -> None:  # type: ignore[no-untyped-def]
    before = report(
        "graph-section-first-v1" if rule is rules.compare_policies else "graph-budget-first-v1",
        mcp="a",
        tokens=3000,
        explore=1,
    )
    after = report(mcp="a" if rule is rules.compare_policies else "b", tokens=1500, expansions=1)
    assert rule(rescored(before), rescored(after))["kind"]
    with pytest.raises(rules.Refused, match="only after is rescored"):
        rule(before, rescored(after))
    with pytest.raises(rules.Refused, match="only before is rescored"):
        rule(rescored(before), after)
    with pytest.raises(rules.Refused, match="different scorer implementations"):
        rule(rescored(before), rescored(after, scorer="6"))
    partial = rescored(after)
    del partial["scorer_implementation_sha256"]
    with pytest.raises(rules.Refused, match="incomplete rescore provenance"):
        rule(rescored(before), partial)
    with pytest.raises(ValueError, match="incomplete rescore provenance"):
        validate_report(partial)


def test_a_report_of_another_format_or_shape_is_rejected_by_name() -> None:
    built = report()
    with pytest.raises(ValueError, match="report format 'demarkus-answer-report-v2' is not supported"):
        validate_report({**built, "format": "demarkus-answer-report-v2"})
    with pytest.raises(ValueError, match="not a report"):
        validate_report([built])  # type: ignore[arg-type]


def opencode_report(mcp: str, version: str = "1.18.33", config: str = "c") -> dict:
    built = report(mcp=mcp)
    built["spec"].update(
        reader="opencode",
        model="openai/gpt-5.1",
        opencode_version=version,
        reader_config_hash="sha256-" + config * 64,
    )
    return built


def test_compare_refuses_runs_of_different_opencode_versions_or_reader_configs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from click.testing import CliRunner

    from demarkus.eval.cli import eval_group

    def written(name: str, value: dict) -> str:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(value), encoding="utf-8")
        return str(path)

    before = written("before", opencode_report("a"))
    same = CliRunner().invoke(eval_group, ["compare", before, written("same", opencode_report("b"))])
    assert same.exit_code == 0, same.output
    for name, after, differ in (
        ("version", opencode_report("b", version="1.18.34", config="d"), "opencode_version, reader_config_hash"),
        ("config", opencode_report("b", config="d"), "reader_config_hash"),
    ):
        done = CliRunner().invoke(eval_group, ["compare", before, written(name, after)])
        assert done.exit_code != 0 and f"refused: run specs differ in: {differ}" in done.output, done.output
    policy = opencode_report("a", version="1.18.34")
    policy["spec"].update(reader_policy="graph-section-first-v1")
    policy["spec"]["reader_prompt_hash"] = POLICIES["graph-section-first-v1"].prompt_hash
    done = CliRunner().invoke(eval_group, ["compare-policies", before, written("policy", policy)])
    assert done.exit_code != 0 and "beyond the policy in: opencode_version" in done.output, done.output


def test_an_opencode_report_without_its_version_is_rejected() -> None:
    built = opencode_report("a")
    del built["spec"]["opencode_version"]
    with pytest.raises(ValueError, match="needs opencode_version"):
        validate_report(built)


def test_an_attempts_turn_usage_must_add_up_to_its_usage() -> None:
    built = opencode_report("a")
    trace = built["attempts"][0]["trace"]
    half = {"input": trace["usage"]["input"] // 2, "output": 5, "reasoning": 0, "cache": {"read": 0, "write": 0}}
    rest = {**half, "input": trace["usage"]["input"] - half["input"]}
    trace["turn_usage"] = [half, rest]
    validate_report(built)
    trace["turn_usage"] = [half, half | {"input": rest["input"] + 1}]
    with pytest.raises(ValueError, match="q1 r1: its turns' usage does not add up"):
        validate_report(built)
    trace["turn_usage"] = [half]
    with pytest.raises(ValueError, match="does not add up"):
        validate_report(built)

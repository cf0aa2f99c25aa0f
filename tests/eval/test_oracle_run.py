"""The oracle reads the demo world under both policies, end to end: fresh store, a real
QUIC authority, a real `demarkus mcp` subprocess per attempt, scored reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from demarkus.eval import compare as rules
from demarkus.eval.runner import RunConfig, RunRefused, run_eval
from demarkus.eval.report import load_report
from demarkus.worlds import demo_world_path


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import asyncio

    out: dict[str, Path] = {}
    for policy in ("graph-section-first-v1", "graph-budget-first-v1"):
        folder = tmp_path_factory.mktemp(policy)
        asyncio.run(run_eval(RunConfig(world=demo_world_path(), output=folder / "run", policy=policy, echo=lambda _: None)))
        out[policy] = folder / "run"
    return out


def test_both_policies_answer_every_demo_question(reports: dict[str, Path]) -> None:
    for policy, folder in reports.items():
        report = load_report(folder / "report.json")
        assert report["spec"]["reader_policy"] == policy
        assert report["summary"]["correct"] == 10, [(a["task"], a["score"]["reasons"]) for a in report["attempts"]]
        assert report["lifecycle"]["startup_verified"] and report["lifecycle"]["server_stayed_up"]
        assert report["lifecycle"]["tool_names"] == ["mark_backlinks", "mark_explore", "mark_fetch", "mark_list",
                                                      "mark_lookup", "mark_versions"]
        assert report["summary"]["usage_lower_bound"] and report["summary"]["protocol_requests"] > 0
        for attempt in report["attempts"]:
            first = attempt["trace"]["calls"][0]
            assert first["name"] == "mark_lookup" and first["input"]["limit"] == 3
            assert ("budget" in first["input"]) == (policy == "graph-budget-first-v1")
        assert (folder / "report.md").read_text().startswith("# Evaluation: demo")
        assert (folder / "chart.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_budget_first_spends_fewer_tokens_and_uses_relation_expansions(reports: dict[str, Path]) -> None:
    a = load_report(reports["graph-section-first-v1"] / "report.json")
    b = load_report(reports["graph-budget-first-v1"] / "report.json")
    assert b["summary"]["known_total_tokens"] < a["summary"]["known_total_tokens"]
    assert b["summary"]["relation_expansions"] > 0
    assert a["summary"]["tool_calls_by_tool"].get("mark_explore", 0) > 0
    result = rules.compare_policies(a, b)
    assert result["tokens_per_correct_change_percent"] < 0
    assert result["verdict"]["feature_exercised"]
    with pytest.raises(rules.Refused, match="mcp hash is equal|run specs differ"):
        rules.compare(a, b)


async def test_a_run_refuses_a_used_output_directory(tmp_path: Path) -> None:
    (tmp_path / "old.txt").write_text("x")
    with pytest.raises(RunRefused, match="not empty"):
        await run_eval(RunConfig(world=demo_world_path(), output=tmp_path))

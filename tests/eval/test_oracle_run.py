"""The three arms end to end with the oracle on the demo world (fixtures in conftest): fresh
store, a real QUIC authority, a real `demarkus mcp` subprocess per attempt (v0.1.0's for A
and B, this tree's for C), scored reports, and the three comparisons on those reports."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from demarkus.eval import compare as rules
from demarkus.eval.cli import eval_group
from demarkus.eval.errors import RunRefused
from demarkus.eval.implementation import entry_modules, implementation_hashes, mcp_package_dir, package_dir
from demarkus.eval.report import load_report
from demarkus.eval.runner import RunConfig, run_eval
from demarkus.tokens import count_tokens
from demarkus.worlds import demo_world_path

from .conftest import ARMS, REPO


def test_the_baseline_environment_imports_the_v0_1_0_package(baseline_bin: Path, baseline_commit_id: str) -> None:
    root = baseline_bin.parent.parent
    package = mcp_package_dir(str(baseline_bin))
    assert package.is_relative_to(root.resolve()) and package != package_dir()
    for part in ("mcp/tools.py", "expand/__init__.py", "cli.py"):
        original = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{baseline_commit_id}:src/demarkus/{part}"],
            check=True,
            capture_output=True,
        ).stdout
        assert (package / part).read_bytes() == original, part
    # the command the runner starts is that copy too (not this tree's editable install)
    done = subprocess.run([str(baseline_bin), "mcp", "--help"], check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "Serve the MCP tools" in done.stdout
    baseline, current = implementation_hashes("oracle", str(baseline_bin)), implementation_hashes("oracle", None)
    assert baseline["mcp"] != current["mcp"]
    assert {k: baseline[k] for k in ("server", "runner", "reader")} == {
        k: current[k] for k in ("server", "runner", "reader")
    }


def test_every_arm_answers_every_demo_question(arms: dict[str, Path]) -> None:
    for name, folder in arms.items():
        policy = ARMS[name][0]
        report = load_report(folder / "report.json")
        assert report["spec"]["reader_policy"] == policy
        assert report["summary"]["correct"] == 10, (
            name,
            [(a["task"], a["score"]["reasons"]) for a in report["attempts"]],
        )
        assert report["lifecycle"]["startup_verified"] and report["lifecycle"]["server_stayed_up"]
        assert report["lifecycle"]["tool_names"] == [
            "mark_backlinks",
            "mark_explore",
            "mark_fetch",
            "mark_list",
            "mark_lookup",
            "mark_versions",
        ]
        assert report["summary"]["usage_lower_bound"] and report["summary"]["protocol_requests"] > 0
        for attempt in report["attempts"]:
            first = attempt["trace"]["calls"][0]
            assert first["name"] == "mark_lookup" and first["input"]["limit"] == 3
            assert ("budget" in first["input"]) == (policy == "graph-budget-first-v1")
            # the current software lists a budgeted lookup's decisions beside its text
            assert ("decisions" in first) == (name == "C")
            if name == "C":
                spent = sum(d["tokens"] for d in first["decisions"] if d["action"] not in ("omit", "drop"))
                if ">>> note: weak match: " in first["output"]:  # the table and that note, nothing more
                    assert count_tokens(first["output"]) == spent and ">>> /" not in first["output"]
                else:
                    assert f"; used {spent} of {first['input']['budget']} tokens\n" in first["output"]
        assert (folder / "report.md").read_text().startswith("# Evaluation: demo-harbor-v1, read by oracle, policy")
        assert (folder / "chart.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_the_arms_differ_only_where_each_comparison_needs(arms: dict[str, Path]) -> None:
    a, b, c = (load_report(arms[n] / "report.json") for n in "ABC")
    ha, hb, hc = (r["implementation_hashes"] for r in (a, b, c))
    assert ha == hb, "A and B run the same software"
    assert hb["mcp"] != hc["mcp"] and all(hb[k] == hc[k] for k in ("server", "runner", "reader"))
    assert hc["mcp"] == implementation_hashes("oracle", None)["mcp"]
    assert b["spec"] == c["spec"]
    assert a["spec"]["implementation_entries"] == entry_modules("oracle"), "the spec names what each hash covers"
    assert {k: v for k, v in a["spec"].items() if not k.startswith("reader_p")} == {
        k: v for k, v in b["spec"].items() if not k.startswith("reader_p")
    }


def test_the_three_comparisons_run_on_the_real_reports(arms: dict[str, Path]) -> None:
    a, b, c = (load_report(arms[n] / "report.json") for n in "ABC")
    software = rules.compare(b, c)
    assert software["kind"] == "compare" and software["regressed_tasks"] == []
    assert software["verdict"]["feature_exercised"] and c["summary"]["relation_expansions"] > 0
    ablation = rules.compare_policies(a, b)
    assert (ablation["before_policy"], ablation["after_policy"]) == ("graph-section-first-v1", "graph-budget-first-v1")
    assert ablation["tokens_per_correct_change_percent"] < 0, "budget-first spends less than section-first"
    table = rules.side_by_side(a, c)
    assert "not a controlled comparison" in table["note"] and table["regressed_tasks"] == []
    runner = CliRunner()
    for command, before, after in (("compare", "B", "C"), ("compare-policies", "A", "B"), ("side-by-side", "A", "C")):
        done = runner.invoke(eval_group, [command, str(arms[before] / "report.json"), str(arms[after] / "report.json")])
        assert done.exit_code == 0, done.output
        assert done.output.startswith(f"# {command}")
        if command == "side-by-side":  # a table of two runs gives no verdict
            assert "ACCEPTED" not in done.output and "verdict:" not in done.output, done.output
            assert "not a controlled comparison, so it gives no verdict" in done.output
        else:
            assert "verdict:" in done.output


@pytest.mark.parametrize(
    "rule, before, after, message",
    [
        (rules.compare, "B", "B", "mcp hash is equal"),
        (rules.compare, "A", "B", "run specs differ in: reader_policy, reader_prompt_hash"),
        (rules.compare, "A", "C", "run specs differ in: reader_policy, reader_prompt_hash"),
        (rules.compare_policies, "B", "C", "these differ: mcp"),
        (rules.compare_policies, "A", "C", "these differ: mcp"),
    ],
)
def test_the_real_reports_are_refused_where_the_rules_say(
    arms: dict[str, Path],
    rule,
    before,
    after,  # type: ignore[no-untyped-def]
    message,
) -> None:
    with pytest.raises(rules.Refused, match=message):
        rule(load_report(arms[before] / "report.json"), load_report(arms[after] / "report.json"))


async def test_a_run_refuses_a_used_output_directory(tmp_path: Path) -> None:
    (tmp_path / "old.txt").write_text("x")
    with pytest.raises(RunRefused, match="not empty"):
        await run_eval(RunConfig(world=demo_world_path(), output=tmp_path))


def test_a_run_shows_a_progress_bar_line_per_attempt(arms):
    lines = (arms["C"].parent / "progress.log").read_text(encoding="utf-8").splitlines()
    progress = [line for line in lines if line.startswith("[")]
    total = len(progress)
    assert total == 10
    for done, line in enumerate(progress, start=1):
        bar, rest = line[1:].split("] ", 1)
        assert bar == "#" * (20 * done // total) + "." * (20 - 20 * done // total)
        assert rest.startswith(f"{done}/{total} q")
        assert ": correct, " in rest or ": wrong, " in rest

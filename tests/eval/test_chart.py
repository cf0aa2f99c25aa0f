"""The chart: every label is read back from the matplotlib Figure (title, axes, categories,
legend, bar values, note), bar heights match the reports, the PNG opens at the figure's size
and repeat saves are byte-identical."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from PIL import Image

from demarkus.eval.chart import DPI, NOTE, arm_label, build_figure, write_png
from demarkus.eval.cli import eval_group
from demarkus.eval.report import load_report

NAMES = ("A: v0.1.0, section-first", "B: v0.1.0, budget-first", "C: current, budget-first")
TITLE = "demo-harbor-v1: tokens per correct answer and turns, by category and arm"


def panels(figure: Figure) -> tuple[Axes, Axes]:
    tokens, turns = figure.axes
    return tokens, turns


def ticks(ax: Axes) -> list[str]:
    return [label.get_text() for label in ax.get_xticklabels()]


def value_labels(ax: Axes) -> list[list[str]]:
    """The bar label texts of each arm's bars, in category order."""
    per_arm = len(ax.texts) // len(ax.containers)
    texts = [text.get_text() for text in ax.texts]
    return [texts[a * per_arm : (a + 1) * per_arm] for a in range(len(ax.containers))]


def heights(ax: Axes) -> list[list[float]]:
    return [[bar.get_height() for bar in container] for container in ax.containers]


Values = list[list[float | None]]


def scope(report: dict[str, Any], name: str) -> dict[str, Any] | None:
    return report["summary"] if name == "overall" else report["categories"].get(name)


def expected(reports: list[dict[str, Any]], names: list[str]) -> tuple[Values, Values]:
    """(tokens per correct answer, turns per attempt) per arm per category, straight from the reports."""
    tokens = [[s and s["tokens_per_correct_answer"] for s in (scope(r, n) for n in names)] for r in reports]
    turns = [[s and s["model_turns"] / s["attempts"] for s in (scope(r, n) for n in names)] for r in reports]
    return tokens, turns


def test_the_figure_carries_title_axes_categories_legend_and_values(arms: dict[str, Path]) -> None:
    reports = [load_report(arms[n] / "report.json") for n in "ABC"]
    figure = build_figure(list(zip(NAMES, reports, strict=True)))
    categories = sorted(reports[0]["categories"]) + ["overall"]
    tokens_ax, turns_ax = panels(figure)
    assert figure.get_suptitle() == TITLE
    assert [tokens_ax.get_ylabel(), turns_ax.get_ylabel()] == ["tokens per correct answer", "turns per attempt"]
    assert (tokens_ax.get_xlabel(), turns_ax.get_xlabel()) == ("", "category")
    assert ticks(tokens_ax) == categories and ticks(turns_ax) == categories
    legend = [text.get_text() for text in tokens_ax.get_legend().get_texts()]
    assert legend == [f"{name}: {arm_label(r)}" for name, r in zip(NAMES, reports, strict=True)]
    assert all(", mcp " in entry and entry.endswith(", oracle") for entry in legend), legend
    assert figure.get_supxlabel() == NOTE

    tokens, turns = expected(reports, categories)
    assert heights(tokens_ax) == [[0.0 if v is None else v for v in arm] for arm in tokens]
    assert heights(turns_ax) == [[0.0 if v is None else v for v in arm] for arm in turns]
    counts = [[f"{s['correct']}/{s['attempts']}" for s in (scope(r, n) for n in categories)] for r in reports]
    assert value_labels(tokens_ax) == [
        [("n/a" if v is None else f"{round(v):,}") + "\n" + count for v, count in zip(arm, arm_counts, strict=True)]
        for arm, arm_counts in zip(tokens, counts, strict=True)
    ]
    assert value_labels(turns_ax) == [[f"{v:.1f}" for v in arm] for arm in turns]
    overall = [r["summary"] for r in reports]
    assert [arm[-1] for arm in value_labels(tokens_ax)] == [
        f"{round(s['tokens_per_correct_answer']):,}\n{s['correct']}/{s['attempts']}" for s in overall
    ]
    assert [arm[-1] for arm in value_labels(turns_ax)] == [f"{s['model_turns'] / s['attempts']:.1f}" for s in overall]
    assert tokens_ax.get_ylim()[1] > max(v for arm in tokens for v in arm if v is not None), "the tallest bar fits"


def test_the_png_opens_at_the_figure_size_and_saves_are_identical(arms: dict[str, Path], tmp_path: Path) -> None:
    reports = [load_report(arms[n] / "report.json") for n in "ABC"]
    figure = build_figure(list(zip(NAMES, reports, strict=True)))
    first, second = tmp_path / "first.png", tmp_path / "second.png"
    write_png(figure, first)
    write_png(figure, second)
    again = tmp_path / "again.png"
    write_png(build_figure(list(zip(NAMES, reports, strict=True))), again)
    assert first.read_bytes() == second.read_bytes() == again.read_bytes()
    with Image.open(first) as image:
        image.load()
        assert image.format == "PNG"
        assert image.size == tuple(round(side * DPI) for side in figure.get_size_inches())
        assert "Software" not in image.info
        colors = {color for _, color in image.convert("RGB").getcolors(maxcolors=1 << 20)}
    bar_colors = {
        tuple(round(255 * c) for c in container[0].get_facecolor()[:3]) for container in panels(figure)[0].containers
    }
    assert len(bar_colors) == 3 and bar_colors <= colors, "one bar colour per arm, painted"


def test_a_single_arm_and_an_empty_category_still_draw(tmp_path: Path) -> None:
    summary = {
        "attempts": 2,
        "correct": 0,
        "tokens_per_correct_answer": None,
        "model_turns": 5,
        "usage_lower_bound": False,
    }
    report = {
        "spec": {"world": "w", "fixture_hashes": {"questions": "q"}},
        "summary": summary,
        "categories": {"absent": summary},
        "implementation_hashes": {},
    }
    figure = build_figure([("only", report)], title="custom")
    tokens_ax, turns_ax = panels(figure)
    assert figure.get_suptitle() == "custom"
    assert value_labels(tokens_ax) == [["n/a\n0/2", "n/a\n0/2"]] and value_labels(turns_ax) == [["2.5", "2.5"]]
    assert heights(tokens_ax) == [[0.0, 0.0]] and tokens_ax.get_ylim() == (0.0, 1.0)
    assert figure.get_supxlabel() == "", "no lower-bound note without the oracle's usage"
    write_png(figure, tmp_path / "one.png")
    with Image.open(tmp_path / "one.png") as image:
        image.verify()
    other = {**report, "spec": {"world": "v", "fixture_hashes": {"questions": "q"}}}
    with pytest.raises(ValueError, match="one world and question set"):
        build_figure([("a", report), ("b", other)])
    other_questions = {**report, "spec": {"world": "w", "fixture_hashes": {"questions": "r"}}}
    with pytest.raises(ValueError, match="one world and question set"):
        build_figure([("a", report), ("b", other_questions)])
    with pytest.raises(ValueError, match="at least one report"):
        build_figure([])


def test_the_chart_command_names_the_arms_and_refuses_mixed_worlds(arms: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "chart.png"
    args = [f"{name}={arms[name[0]] / 'report.json'}" for name in NAMES]
    done = CliRunner().invoke(eval_group, ["chart", str(out), *args])
    assert done.exit_code == 0, done.output
    with Image.open(out) as image:
        assert image.format == "PNG" and image.width > 600 and image.height > 400
    other = json.loads((arms["C"] / "report.json").read_text())
    other["spec"]["world"] = "another-world"
    (tmp_path / "other.json").write_text(json.dumps(other))
    refused = tmp_path / "x.png"
    done = CliRunner().invoke(eval_group, ["chart", str(refused), args[0], str(tmp_path / "other.json")])
    assert done.exit_code == 1 and "one world and question set" in done.output
    assert not refused.exists()


def test_every_run_writes_its_chart(arms: dict[str, Path]) -> None:
    for name in "ABC":
        with Image.open(arms[name] / "chart.png") as image:
            assert image.format == "PNG"


def test_the_demarkus_command_does_not_import_matplotlib() -> None:
    """Every `demarkus mcp` subprocess of a run imports the CLI, which imports the eval report
    module; matplotlib (and numpy) load only when a chart is drawn."""
    probe = (
        "import sys, demarkus.cli, demarkus.eval.runner, demarkus.eval.report; "
        "print(sorted(m for m in ('matplotlib', 'numpy', 'PIL') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "[]"

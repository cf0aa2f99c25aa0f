"""The evaluation chart: tokens per correct answer and turns per attempt, by category and arm.

`build_figure` returns a matplotlib `Figure` made directly (no pyplot), so no global state or
screen is involved and tests read every label (title, axis labels, category ticks, legend,
bar values, note) back from the object instead of decoding pixels. `write_png` renders it
with Agg at a fixed dpi and without the Software stamp, so one figure always gives the same
bytes.

Importing this module imports matplotlib (about half a second), so callers on the path of
`demarkus mcp` import it lazily.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import StrMethodFormatter

from .records import Report, Summary, reader_name

DPI = 100
"""Pixels per inch of the PNG: its size in pixels is the figure size in inches times this."""
PANELS = (
    ("tokens per correct answer", "tokens"),
    ("turns per attempt", "turns"),
)
"""(y-axis label, metric) of each panel, top to bottom."""
NOTE = "oracle turn model: token counts are a lower bound, not a model's spend"

_HEADROOM = 1.18
"""The y-axis reaches this much above the tallest bar so its value label fits inside."""


def arm_label(report: Report) -> str:
    """What an arm is: its policy and its software (the start of its MCP hash, and the reader)."""
    mcp = str(report["implementation_hashes"].get("mcp", "")).removeprefix("sha256-")[:8]
    return f"{report['spec'].get('reader_policy', '?')}, mcp {mcp}, {reader_name(report['spec'])}"


def legend_label(name: str, report: Report) -> str:
    """The legend entry of an arm: the name it was given (e.g. `A`), then what it is, so a
    letter never stands alone."""
    label = arm_label(report)
    return label if not name or name == label else f"{name}: {label}"


def _value(scope: Summary | None, metric: str) -> float | None:
    if scope is None:
        return None
    if metric == "tokens":
        return scope["tokens_per_correct_answer"]
    return scope["model_turns"] / scope["attempts"] if scope["attempts"] else None


def _format(value: float | None, metric: str) -> str:
    if value is None:
        return "n/a"
    return f"{round(value):,}" if metric == "tokens" else f"{value:.1f}"


def _bar_label(value: float | None, metric: str, scope: Summary | None) -> str:
    """A bar's value; a tokens bar also says how many attempts were correct of how many."""
    text = _format(value, metric)
    if metric == "tokens" and scope is not None:
        text += f"\n{scope['correct']}/{scope['attempts']}"
    return text


def _check(arms: Sequence[tuple[str, Report]]) -> None:
    """Refuse input that would make a misleading chart: nothing, or arms not answering the same questions."""
    if not arms:
        raise ValueError("a chart needs at least one report")
    identities = {(r["spec"]["world"], r["spec"]["fixture_hashes"].get("questions")) for _, r in arms}
    if len(identities) > 1:
        raise ValueError(
            "a chart shows arms of one world and question set; these reports differ: "
            + ", ".join(sorted(w for w, _ in identities))
        )


def _panel(
    ax: Axes,
    names: list[str],
    arms: Sequence[tuple[str, Report]],
    values: list[list[float | None]],
    labels: list[list[str]],
    axis: str,
    metric: str,
) -> None:
    """Grouped bars on `ax`: one group per category name, one bar per arm, each bar labelled."""
    width = 0.8 / len(arms)
    for a, (arm, _) in enumerate(arms):
        column = [values[g][a] for g in range(len(names))]
        offsets = [g - 0.4 + width * (a + 0.5) for g in range(len(names))]
        bars = ax.bar(offsets, [0.0 if v is None else v for v in column], width * 0.92, label=arm, color=f"C{a % 10}")
        ax.bar_label(bars, labels=[labels[g][a] for g in range(len(names))], padding=2, fontsize=7)
    known = [v for group in values for v in group if v is not None]
    lines = max((label.count("\n") + 1 for group in labels for label in group), default=1)
    ax.set_ylim(0, max(known, default=0) * (_HEADROOM + 0.12 * (lines - 1)) or 1)
    ax.set_xlim(-0.5, len(names) - 0.5)
    ax.set_xticks(range(len(names)), labels=names)
    ax.set_ylabel(axis)
    if metric == "tokens":
        ax.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    ax.grid(axis="y", color="0.88")
    ax.set_axisbelow(True)


def build_figure(arms: Sequence[tuple[str, Report]], title: str | None = None) -> Figure:
    """Grouped bars (one group per category plus `overall`, one bar per arm) in two panels:
    tokens per correct answer, and turns per attempt. Bars with no value are drawn at zero
    height and labelled `n/a`.

    Raises:
        ValueError: no arms, or arms of different worlds or question sets.
    """
    _check(arms)
    names = sorted({c for _, report in arms for c in report["categories"]}) + ["overall"]

    def scope(report: Report, name: str) -> Summary | None:
        return report["summary"] if name == "overall" else report["categories"].get(name)

    values = {
        metric: [[_value(scope(report, name), metric) for _, report in arms] for name in names] for _, metric in PANELS
    }
    labels = {
        metric: [
            [_bar_label(values[metric][g][a], metric, scope(report, name)) for a, (_, report) in enumerate(arms)]
            for g, name in enumerate(names)
        ]
        for _, metric in PANELS
    }
    arms = [(legend_label(arm, report), report) for arm, report in arms]
    world = arms[0][1]["spec"]["world"]
    title = title or f"{world}: tokens per correct answer and turns, by category and arm"
    longest = max(len(line) for m in labels for group in labels[m] for label in group for line in label.split("\n"))
    slot = max(0.3, 0.065 * longest + 0.08)  # inches per bar, so 7 pt value labels do not touch
    group = max(len(arms) * slot / 0.8, 0.085 * max(len(n) for n in names) + 0.2)
    width = max(8.0, 1.4 + len(names) * group, 0.12 * len(title) + 0.6)
    figure = Figure(figsize=(round(width, 2), 7.5), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    figure.suptitle(title, fontsize=13)
    axes = figure.subplots(len(PANELS), 1)
    for ax, (axis, metric) in zip(axes, PANELS, strict=True):
        _panel(ax, names, arms, values[metric], labels[metric], axis, metric)
    axes[-1].set_xlabel("category")
    # Above the top panel rather than a figure legend: constrained layout then keeps it clear of the title.
    axes[0].legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=min(len(arms), 3), frameon=False)
    if any(report["summary"].get("usage_lower_bound") for _, report in arms):
        figure.supxlabel(NOTE, fontsize=8, color="0.3")
    # Constrained layout refines the positions it finds on every draw, so a second save would
    # move the axes by a fraction of a pixel: lay out once here, then keep those positions.
    figure.draw_without_rendering()
    figure.set_layout_engine("none")
    return figure


def write_png(figure: Figure, path: Path) -> None:
    """Render `figure` to the PNG `path`: fixed dpi, no Software stamp, so equal figures give equal bytes."""
    figure.savefig(path, format="png", dpi=DPI, metadata={"Software": None})

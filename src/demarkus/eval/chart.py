"""The evaluation chart: tokens per correct answer and turns per attempt, by category and arm.

`build_figure` is pure: it lays out every box and every text label (title, axis labels,
category ticks, legend, value labels) as data, so tests read the labels without decoding
pixels; `Figure.png` only paints that data (`bitmap`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .bitmap import GLYPH_HEIGHT, Bitmap, Color, text_width

INK: Color = (33, 33, 33)
GRID: Color = (225, 225, 225)
PALETTE: tuple[Color, ...] = ((52, 101, 164), (245, 121, 0), (78, 154, 6), (117, 80, 123), (204, 0, 0), (143, 89, 2))

_LEFT, _RIGHT, _PLOT_H, _PITCH, _TOP = 78, 24, 160, 232, 76
_PANELS = (
    ("tokens per correct answer", "tokens"),
    ("turns per attempt", "turns"),
)


@dataclass(frozen=True, slots=True)
class Label:
    """A text drawn at (x, y): its top-left corner, or bottom-left when vertical."""

    text: str
    x: int
    y: int
    role: str
    """title, legend, axis, tick, category, value or note."""
    color: Color = INK
    scale: int = 1
    vertical: bool = False


@dataclass(frozen=True, slots=True)
class Box:
    x0: int
    y0: int
    x1: int
    y1: int
    color: Color


@dataclass(frozen=True, slots=True)
class Figure:
    width: int
    height: int
    boxes: tuple[Box, ...]
    labels: tuple[Label, ...]

    def texts(self, role: str) -> list[str]:
        """The label texts of one role, in drawing order."""
        return [label.text for label in self.labels if label.role == role]

    def png(self) -> bytes:
        canvas = Bitmap(self.width, self.height)
        for box in self.boxes:
            canvas.fill(box.x0, box.y0, box.x1, box.y1, box.color)
        for label in self.labels:
            canvas.text(label.x, label.y, label.text, label.color, scale=label.scale, vertical=label.vertical)
        return canvas.png()


def arm_label(report: Mapping[str, Any]) -> str:
    """A default arm name for one report: its policy and the start of its MCP hash."""
    mcp = str(report["implementation_hashes"].get("mcp", "")).removeprefix("sha256-")[:8]
    return f"{report['spec']['reader_policy']}, mcp {mcp}"


def _value(scope: Mapping[str, Any] | None, metric: str) -> float | None:
    if scope is None:
        return None
    if metric == "tokens":
        return scope["tokens_per_correct_answer"]
    return scope["model_turns"] / scope["attempts"] if scope["attempts"] else None


def _format(value: float | None, metric: str) -> str:
    if value is None:
        return "n/a"
    return f"{round(value):,}" if metric == "tokens" else f"{value:.1f}"


def _step(top: float) -> float:
    """A 1-2-5 tick step that splits 0..top into at most four intervals."""
    if top <= 0:
        return 1.0
    raw = top / 4
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def build_figure(arms: Sequence[tuple[str, Mapping[str, Any]]], title: str | None = None) -> Figure:
    """Lay out grouped bars (one group per category plus `overall`, one bar per arm) in two
    panels: tokens per correct answer, and turns per attempt.

    Raises:
        ValueError: no arms, or arms of different worlds or question sets.
    """
    if not arms:
        raise ValueError("a chart needs at least one report")
    identities = {(r["spec"]["world"], r["spec"]["fixture_hashes"].get("questions")) for _, r in arms}
    if len(identities) > 1:
        raise ValueError("a chart shows arms of one world and question set; these reports differ: "
                         + ", ".join(sorted(w for w, _ in identities)))
    names = sorted({c for _, report in arms for c in report["categories"]}) + ["overall"]

    def scope(report: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
        return report["summary"] if name == "overall" else report["categories"].get(name)

    values = {
        metric: [[_value(scope(report, name), metric) for _, report in arms] for name in names]
        for _, metric in _PANELS
    }
    texts = [_format(v, metric) for metric in values for group in values[metric] for v in group]
    bar = max(14, max(text_width(t) for t in texts) + 4)
    group = max(len(arms) * bar + 16, max(text_width(n) for n in names) + 10)
    world = arms[0][1]["spec"]["world"]
    title = title or f"{world}: tokens per correct answer and turns, by category and arm"
    legend_width = sum(12 + text_width(name) + 18 for name, _ in arms)
    width = max(_LEFT + len(names) * group + _RIGHT, text_width(title, 2) + 20, legend_width + _LEFT)
    boxes: list[Box] = []
    labels: list[Label] = [Label(title, 10, 10, "title", scale=2)]
    x = _LEFT
    for index, (name, _) in enumerate(arms):
        color = PALETTE[index % len(PALETTE)]
        boxes.append(Box(x, 38, x + 10, 38 + GLYPH_HEIGHT, color))
        labels.append(Label(name, x + 14, 38, "legend"))
        x += 12 + text_width(name) + 18
    for panel, (axis, metric) in enumerate(_PANELS):
        top = _TOP + panel * _PITCH
        base = top + _PLOT_H
        known = [v for group_values in values[metric] for v in group_values if v is not None]
        step = _step(max(known, default=0))
        ceiling = step * max(1, math.ceil(max(known, default=0) / step))
        ticks = range(math.floor(ceiling / step + 1e-9) + 1)
        for tick in ticks:
            y = base - round(_PLOT_H * tick * step / ceiling)
            boxes.append(Box(_LEFT, y, width - _RIGHT, y + 1, GRID if tick else INK))
            text = _format(tick * step, metric) if metric == "tokens" else f"{tick * step:g}"
            labels.append(Label(text, _LEFT - 6 - text_width(text), y - GLYPH_HEIGHT // 2, "tick"))
        labels.append(Label(axis, 8, top + (_PLOT_H + text_width(axis)) // 2, "axis", vertical=True))
        for g, name in enumerate(names):
            x0 = _LEFT + g * group
            labels.append(Label(name, x0 + (group - text_width(name)) // 2, base + 6, "category"))
            start = x0 + (group - len(arms) * bar) // 2
            for a, value in enumerate(values[metric][g]):
                bx = start + a * bar
                text = _format(value, metric)
                height = 0 if value is None else round(_PLOT_H * value / ceiling)
                if height:
                    boxes.append(Box(bx + 1, base - height, bx + bar - 1, base, PALETTE[a % len(PALETTE)]))
                labels.append(Label(text, bx + (bar - text_width(text)) // 2, base - height - GLYPH_HEIGHT - 3, "value"))
    bottom = _TOP + (len(_PANELS) - 1) * _PITCH + _PLOT_H
    labels.append(Label("category", _LEFT + (len(names) * group - text_width("category")) // 2, bottom + 22, "axis"))
    height = bottom + 40
    if any(report["summary"].get("usage_lower_bound") for _, report in arms):
        note = "oracle turn model: token counts are a lower bound, not a model's spend"
        labels.append(Label(note, 10, height - 4, "note"))
        height += 14
    return Figure(width, height, tuple(boxes), tuple(labels))


def chart_png(arms: Sequence[tuple[str, Mapping[str, Any]]], title: str | None = None) -> bytes:
    return build_figure(arms, title).png()

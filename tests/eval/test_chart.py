"""The chart: every label is laid out as data (title, axes, categories, legend, values) and
the PNG decodes with valid chunks and shows them."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from demarkus.eval.bitmap import Bitmap
from demarkus.eval.chart import PALETTE, build_figure
from demarkus.eval.cli import eval_group
from demarkus.eval.report import load_report

NAMES = ("A: v0.1.0, section-first", "B: v0.1.0, budget-first", "C: current, budget-first")


def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, RGB rows) of an 8-bit RGB, filter-0 PNG, checking every chunk's CRC."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = [], 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at:at + 4])
        kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length:at + 12 + length])
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == crc, kind
        chunks.append((kind, body))
        at += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1] == (b"IEND", b"")
    width, height, depth, color, _, _, _ = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (depth, color) == (8, 2)
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    stride = 1 + 3 * width
    assert len(raw) == height * stride
    rows = [raw[y * stride:(y + 1) * stride] for y in range(height)]
    assert all(row[0] == 0 for row in rows)
    return width, height, [row[1:] for row in rows]


def pixel(rows: list[bytes], x: int, y: int) -> tuple[int, int, int]:
    return tuple(rows[y][3 * x:3 * x + 3])  # type: ignore[return-value]


def test_the_figure_carries_title_axes_categories_legend_and_values(arms: dict[str, Path]) -> None:
    reports = [load_report(arms[n] / "report.json") for n in "ABC"]
    figure = build_figure(list(zip(NAMES, reports, strict=True)))
    categories = sorted(reports[0]["categories"]) + ["overall"]
    assert figure.texts("title") == ["demo-harbor-v1: tokens per correct answer and turns, by category and arm"]
    assert figure.texts("axis") == ["tokens per correct answer", "turns per attempt", "category"]
    assert figure.texts("legend") == list(NAMES)
    assert figure.texts("category") == categories * 2
    overall = [r["summary"] for r in reports]
    tokens = [f"{round(s['tokens_per_correct_answer']):,}" for s in overall]
    turns = [f"{s['model_turns'] / s['attempts']:.1f}" for s in overall]
    values = figure.texts("value")
    assert len(values) == 2 * len(categories) * 3
    assert values[len(categories) * 3 - 3:len(categories) * 3] == tokens and values[-3:] == turns
    assert figure.texts("tick")[0] == "0" and len(figure.texts("tick")) >= 4
    assert figure.texts("note") == ["oracle turn model: token counts are a lower bound, not a model's spend"]
    assert all(0 <= label.x < figure.width and 0 <= label.y < figure.height for label in figure.labels)


def test_the_png_is_valid_and_paints_the_labels_and_bars(arms: dict[str, Path]) -> None:
    reports = [load_report(arms[n] / "report.json") for n in "ABC"]
    figure = build_figure(list(zip(NAMES, reports, strict=True)))
    width, height, rows = decode_png(figure.png())
    assert (width, height) == (figure.width, figure.height)
    title = next(label for label in figure.labels if label.role == "title")
    inked = [pixel(rows, x, y) for y in range(title.y, title.y + 14) for x in range(title.x, title.x + 60)]
    assert (33, 33, 33) in inked, "the title is painted"
    colors = {pixel(rows, x, y) for y in range(height) for x in range(0, width, 3)}
    assert set(PALETTE[:3]) <= colors, "one bar colour per arm"


def test_a_single_arm_and_an_empty_category_still_draw(tmp_path: Path) -> None:
    summary = {"attempts": 2, "correct": 0, "tokens_per_correct_answer": None, "model_turns": 5,
               "usage_lower_bound": False}
    report = {"spec": {"world": "w", "fixture_hashes": {"questions": "q"}}, "summary": summary,
              "categories": {"absent": summary}, "implementation_hashes": {}}
    figure = build_figure([("only", report)])
    assert figure.texts("value") == ["n/a", "n/a", "2.5", "2.5"] and figure.texts("note") == []
    decode_png(figure.png())
    other = {**report, "spec": {"world": "v", "fixture_hashes": {"questions": "q"}}}
    with pytest.raises(ValueError, match="one world and question set"):
        build_figure([("a", report), ("b", other)])
    with pytest.raises(ValueError, match="at least one report"):
        build_figure([])


def test_the_chart_command_names_the_arms_and_refuses_mixed_worlds(arms: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "chart.png"
    args = [f"{name}={arms[name[0]] / 'report.json'}" for name in NAMES]
    done = CliRunner().invoke(eval_group, ["chart", str(out), *args])
    assert done.exit_code == 0, done.output
    width, height, _ = decode_png(out.read_bytes())
    assert width > 600 and height > 400
    other = json.loads((arms["C"] / "report.json").read_text())
    other["spec"]["world"] = "another-world"
    (tmp_path / "other.json").write_text(json.dumps(other))
    done = CliRunner().invoke(eval_group, ["chart", str(tmp_path / "x.png"), args[0], str(tmp_path / "other.json")])
    assert done.exit_code == 1 and "one world and question set" in done.output


def test_bitmap_text_paints_glyph_pixels_and_clips() -> None:
    canvas = Bitmap(8, 9)
    canvas.text(1, 1, "|", (0, 0, 0))
    column = [canvas.pixel(3, y) for y in range(9)]
    assert column == [(255, 255, 255)] + [(0, 0, 0)] * 7 + [(255, 255, 255)]
    canvas.text(6, 0, "WWW", (0, 0, 0), scale=3)  # runs off the canvas without error
    decode_png(canvas.png())

"""`demarkus eval`: run, compare, compare-policies, side-by-side, rescore, export-metrics, chart."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import click

from ..errors import ConfigError
from . import compare as rules
from .errors import Refused, RunRefused
from .records import Report
from .report import load_report


@click.group(name="eval")
def eval_group() -> None:
    """Answer-bench runs over a frozen world, and their comparisons."""


@eval_group.command(name="run")
@click.option(
    "--world",
    "world",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A frozen world folder (manifest.json, corpus.jsonl, questions.json, rubric.json).",
)
@click.option("--output", required=True, type=click.Path(path_type=Path), help="A new directory for the report.")
@click.option("--reader", type=click.Choice(["oracle", "openai", "opencode"]), default="oracle", show_default=True)
@click.option(
    "--policy",
    default="graph-section-first-v1",
    show_default=True,
    type=click.Choice(["graph-section-first-v1", "graph-budget-first-v1"]),
)
@click.option("--steps", default=8, show_default=True, help="Model turns per attempt (the last one answers).")
@click.option("--timeout", default=180.0, show_default=True, help="Seconds per attempt.")
@click.option("--repeats", default=1, show_default=True)
@click.option("--case", default=None, help="Only this question id (smoke run).")
@click.option(
    "--mcp-bin",
    default=None,
    help="The `demarkus` executable whose `mcp` command serves the tools "
    "(default: this installation), e.g. the v0.1.0 baseline venv's bin/demarkus.",
)
@click.option(
    "--model",
    default=None,
    help="Model name (openai reader); provider/name for the opencode reader, e.g. openai/gpt-5.1.",
)
@click.option(
    "--base-url",
    default=None,
    help="OpenAI-compatible API base, e.g. https://api.openai.com/v1 (opencode: optional; "
    "without it OpenCode resolves --model from its own catalogue).",
)
@click.option(
    "--api-key-env",
    default="OPENAI_API_KEY",
    show_default=True,
    help="The variable holding the key for --base-url.",
)
@click.option("--max-output-tokens", default=4096, show_default=True)
@click.option("--approve", is_flag=True, help="Allow a paid reader to spend.")
@click.option(
    "--opencode-bin",
    default=None,
    help="The `opencode` executable (default: the one scripts/bootstrap installs, else PATH).",
)
def run_command(
    world: Path,
    output: Path,
    reader: str,
    policy: str,
    steps: int,
    timeout: float,
    repeats: int,
    case: str | None,
    mcp_bin: str | None,
    model: str | None,
    base_url: str | None,
    api_key_env: str,
    max_output_tokens: int,
    approve: bool,
    opencode_bin: str | None,
) -> None:
    """Run every question of WORLD through a real QUIC authority and `demarkus mcp`."""
    from .runner import RunConfig, run_eval

    config = RunConfig(
        world=world,
        output=output,
        reader=reader,
        policy=policy,
        steps=steps,
        timeout=timeout,
        repeats=repeats,
        case=case,
        mcp_bin=mcp_bin,
        model=model or "oracle",
        base_url=base_url,
        api_key_env=api_key_env,
        max_output_tokens=max_output_tokens,
        approve=approve,
        opencode_bin=opencode_bin,
        echo=click.echo,
    )
    try:
        report = asyncio.run(run_eval(config))
    except RunRefused as exc:
        raise click.ClickException(str(exc)) from exc
    s = report["summary"]
    click.echo(
        f"{s['correct']}/{s['attempts']} correct; tokens per correct {s['tokens_per_correct_answer']}; "
        f"report in {output}/report.json"
    )


def _run_rule(rule: Callable[[Report, Report], rules.Comparison], before: Path, after: Path, as_json: bool) -> None:
    try:
        result = rule(load_report(before), load_report(after))
    except (ValueError, Refused) as exc:
        raise click.ClickException(f"refused: {exc}") from exc
    click.echo(json.dumps(result, indent=2) if as_json else rules.render(result))


def _two_reports(command: Callable[..., None]) -> Callable[..., None]:
    """The arguments of every comparison: BEFORE and AFTER report paths, and --json."""
    report = click.Path(exists=True, dir_okay=False, path_type=Path)
    command = click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")(command)
    return click.argument("before", type=report)(click.argument("after", type=report)(command))


@eval_group.command(name="compare")
@_two_reports
def compare_command(before: Path, after: Path, as_json: bool) -> None:
    """Software comparison: same spec, server/runner/reader hashes equal, mcp hash differs."""
    _run_rule(rules.compare, before, after, as_json)


@eval_group.command(name="compare-policies")
@_two_reports
def compare_policies_command(before: Path, after: Path, as_json: bool) -> None:
    """Policy ablation: every implementation hash equal, only the policy differs."""
    _run_rule(rules.compare_policies, before, after, as_json)


@eval_group.command(name="side-by-side")
@_two_reports
def side_by_side_command(before: Path, after: Path, as_json: bool) -> None:
    """A table of two runs of one world (not a controlled comparison)."""
    _run_rule(rules.side_by_side, before, after, as_json)


_file = click.Path(dir_okay=False, path_type=Path)


@eval_group.command(name="rescore")
@click.argument("original", type=_file)
@click.argument("new", type=_file)
@click.option(
    "--world",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The frozen world the run used (default: the packaged demo world, if the report names it).",
)
@click.option("--corpus", type=_file, default=None, help="The corpus.jsonl the run used (its sha256 must match).")
@click.option("--questions", type=_file, default=None, help="The questions.json the run used (its sha256 must match).")
@click.option(
    "--rubric",
    type=_file,
    default=None,
    help="The rubric to grade with, e.g. a corrected one; it becomes the report's rubric fingerprint.",
)
def rescore_command(
    original: Path, new: Path, world: Path | None, corpus: Path | None, questions: Path | None, rubric: Path | None
) -> None:
    """Grade ORIGINAL's traces again with this scorer into the new report NEW (no reader runs)."""
    from .rescore import rescore

    try:
        report = rescore(original, new, world=world, corpus=corpus, questions=questions, rubric=rubric)
    except (ValueError, ConfigError) as exc:
        raise click.ClickException(f"refused: {exc}") from exc
    s = report["summary"]
    click.echo(
        f"{s['correct']}/{s['attempts']} correct after rescoring; tokens per correct "
        f"{s['tokens_per_correct_answer']}; report in {new} (rescored from {report['rescored_from_sha256']})"
    )


@eval_group.command(name="export-metrics")
@click.argument("private", type=_file)
@click.argument("new", type=_file)
def export_metrics_command(private: Path, new: Path) -> None:
    """Write PRIVATE's counts and grades, without retrieved text, arguments, answers or diagnostics, to NEW."""
    from .metrics import export

    try:
        report = export(private, new)
    except (ValueError, ConfigError) as exc:
        raise click.ClickException(f"refused: {exc}") from exc
    click.echo(
        f"metrics-only report in {new} ({report['summary']['attempts']} attempts, "
        f"source {report['source_report_sha256']})"
    )


@eval_group.command(name="chart")
@click.argument("output", type=_file)
@click.argument("arms", nargs=-1, required=True)
@click.option("--title", default=None, help="The chart title (default: the world and what is plotted).")
def chart_command(output: Path, arms: tuple[str, ...], title: str | None) -> None:
    """Draw tokens per correct answer and turns by category for each arm into the PNG OUTPUT.

    Each arm is NAME=REPORT (e.g. "A=runs/A/report.json") or a bare REPORT; its legend entry
    gives the name, then its policy and software (MCP hash, reader), and each tokens bar
    says correct/total.
    """
    from .chart import build_figure, write_png

    loaded = []
    try:
        for arm in arms:
            name, sep, path = arm.rpartition("=")
            report = load_report(Path(path if sep else arm))
            loaded.append((name if sep else "", report))
        figure = build_figure(loaded, title)
    except ValueError as exc:
        raise click.ClickException(f"refused: {exc}") from exc
    output.parent.mkdir(parents=True, exist_ok=True)
    write_png(figure, output)
    click.echo(f"chart of {len(loaded)} arms in {output}")

"""`eval rescore`: grade the traces of an existing report again with the current scorer.

Rescoring never runs a reader: traces, usage, turns and latencies are kept and only the
scores (and the summaries computed from them) change. It needs the very corpus and
questions the run used (their sha256 must equal the report's), may grade with a corrected
rubric (its sha256 becomes the report's rubric fingerprint), and records its provenance:
`rescored_from_sha256` (the original report's bytes), `rescored_at` and
`scorer_implementation_sha256`. Comparisons accept a rescored report only against one
rescored by the same scorer, so a grading correction never reads as an optimisation gain.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..errors import ConfigError
from ..worlds import demo_world_path, open_world
from ..worlds.world import CORPUS, QUESTIONS, RUBRIC, check_rubric, file_sha256
from .implementation import PACKAGE, files_hash, imported_files
from .questions import Question, RubricEntry, parse_questions, parse_rubric
from .records import Attempt, Report
from .report import build_report, digest, read_report, write_new_report
from .scoring import SCORING_VERSION, Corpus, score_attempt

SCORER = ("demarkus.eval.scoring",)
"""The scorer's entry module: its hash covers what it imports (the section parser, the frame parser)."""


@dataclass(frozen=True, slots=True)
class Grading:
    """What the scorer needs: every version body, the questions by id, the rubric and its fingerprint."""

    corpus: Corpus
    questions: Mapping[str, Question]
    rubric: Mapping[str, RubricEntry]
    rubric_sha256: str


def scorer_hash() -> str:
    """The implementation hash of the scorer as this interpreter imports it (`implementation`)."""
    return files_hash(*imported_files(sys.executable, PACKAGE, SCORER))


def grading_files(
    report: Report, world: Path | None, corpus: Path | None, questions: Path | None, rubric: Path | None
) -> tuple[Path, Path, Path]:
    """Corpus, questions and rubric paths: explicit files win, then `world`'s, then the
    packaged demo world's when the report was run on it.

    Raises:
        ValueError: a file is not given and there is no world folder to take it from.
    """
    if world is None:
        if corpus is not None and questions is not None and rubric is not None:
            return corpus, questions, rubric
        world = demo_world_path()
        if open_world(world).id != report["spec"]["world"]:
            raise ValueError(
                f"the report was run on world {report['spec']['world']!r}: pass --world DIR "
                "(or --corpus, --questions and --rubric)"
            )
    return corpus or world / CORPUS, questions or world / QUESTIONS, rubric or world / RUBRIC


def load_grading(report: Report, corpus: Path, questions: Path, rubric: Path) -> Grading:
    """Read the three files, refusing a corpus or question set other than the run's.

    Raises:
        ValueError: a fingerprint differs from the report's, or the rubric misses a task.
        ConfigError: a file is missing, unreadable or malformed.
    """
    hashes = report["spec"]["fixture_hashes"]
    for kind, path in (("corpus", corpus), ("questions", questions)):
        actual = file_sha256(path)
        if actual != hashes.get(kind):
            raise ValueError(
                f"{path} is {actual}, but the report was run on {kind} {hashes.get(kind)}; rescoring "
                f"needs the original {kind} (changed {kind} needs a new run)"
            )
    documents: dict[str, list[str]] = {}
    for line in corpus.read_text(encoding="utf-8").splitlines():
        if line.strip():
            document = json.loads(line)
            documents[document["path"]] = document["versions"]
    by_id = {q.id: q for q in parse_questions(json.loads(questions.read_text(encoding="utf-8")))}
    try:
        entries = json.loads(rubric.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read rubric {rubric} ({exc.strerror or exc})") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{rubric} is not valid JSON: {exc.msg} at line {exc.lineno}") from exc
    check_rubric(rubric, entries)
    missing = sorted({a["task"] for a in report["attempts"]} - set(entries))
    if missing:
        raise ValueError(f"{rubric} has no entry for {', '.join(missing)}")
    return Grading(Corpus(documents), by_id, parse_rubric(entries), file_sha256(rubric))


def rescore_report(report: Report, raw: bytes, grading: Grading, *, scorer: str, rescored_at: str) -> Report:
    """A new report: the same attempts graded again, summaries recomputed, provenance added.

    Raises:
        ValueError: the report is a metrics-only export (its traces are gone).
    """
    _require_traces(report, "the report")
    attempts: list[Attempt] = []
    for attempt in report["attempts"]:
        graded = copy.deepcopy(attempt)
        trace = graded["trace"]
        graded["score"] = score_attempt(
            grading.questions[attempt["task"]],
            grading.rubric[attempt["task"]],
            trace["calls"],
            trace.get("final"),
            grading.corpus,
        )
        attempts.append(graded)
    spec = report["spec"].copy()
    spec["fixture_hashes"] = {**spec["fixture_hashes"], "rubric": grading.rubric_sha256}
    spec["scoring_version"] = SCORING_VERSION
    out = build_report(
        spec, report["implementation_hashes"], attempts, report.get("lifecycle", {}), generated=report["generated"]
    )
    out["rescored_from_sha256"] = digest(raw)
    out["rescored_at"] = rescored_at
    out["scorer_implementation_sha256"] = scorer
    return out


def rescore(
    original: Path,
    new: Path,
    *,
    world: Path | None = None,
    corpus: Path | None = None,
    questions: Path | None = None,
    rubric: Path | None = None,
) -> Report:
    """Rescore report ORIGINAL into the new file NEW and return the new report.

    Raises:
        ValueError: ORIGINAL is not a valid report, NEW exists, or the files do not fit the run.
        ConfigError: a world file is missing or malformed.
    """
    if Path(new).exists():
        raise ValueError(f"{new} already exists; write the rescored report to a new file")
    raw, report = read_report(original)
    _require_traces(report, str(original))
    grading = load_grading(report, *grading_files(report, world, corpus, questions, rubric))
    out = rescore_report(
        report, raw, grading, scorer=scorer_hash(), rescored_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    write_new_report(out, new)
    return out


def _require_traces(report: Report, name: str) -> None:
    if report.get("metrics_only"):
        raise ValueError(f"{name} is a metrics-only report with no traces to grade; rescore the private original")

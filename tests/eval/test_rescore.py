"""`eval rescore` on the real arm reports: same traces, new grades, recorded provenance, and
comparisons that only accept rescored reports in pairs graded by one scorer."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from demarkus.eval import compare as rules
from demarkus.eval.cli import eval_group
from demarkus.eval.report import FORMAT, load_report
from demarkus.eval.rescore import rescore, scorer_hash
from demarkus.worlds import demo_world_path


def corrected_world(tmp_path: Path) -> Path:
    """A copy of the demo world whose rubric expects another answer to q01."""
    world = tmp_path / "world"
    shutil.copytree(demo_world_path(), world)
    rubric = json.loads((world / "rubric.json").read_text())
    field = min(rubric["q01"]["answer"])
    rubric["q01"]["answer"][field] = "a corrected value"
    (world / "rubric.json").write_text(json.dumps(rubric, indent=2))
    return world


def test_rescore_keeps_traces_and_usage_and_records_provenance(arms: dict[str, Path], tmp_path: Path) -> None:
    source = arms["C"] / "report.json"
    original = load_report(source)
    new = tmp_path / "rescored.json"
    done = CliRunner().invoke(eval_group, ["rescore", str(source), str(new)])
    assert done.exit_code == 0, done.output
    rescored = load_report(new)
    assert rescored["rescored_from_sha256"] == "sha256-" + hashlib.sha256(source.read_bytes()).hexdigest()
    assert rescored["scorer_implementation_sha256"] == scorer_hash()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", rescored["rescored_at"])
    assert (
        rescored["spec"] == original["spec"] and rescored["implementation_hashes"] == original["implementation_hashes"]
    )
    for before, after in zip(original["attempts"], rescored["attempts"], strict=True):
        assert after["trace"] == before["trace"] and after["score"] == before["score"]
    assert rescored["summary"] == original["summary"]


def test_a_corrected_rubric_regrades_and_changes_the_rubric_fingerprint(arms: dict[str, Path], tmp_path: Path) -> None:
    world = corrected_world(tmp_path)
    rescored = rescore(arms["C"] / "report.json", tmp_path / "c.json", world=world)
    q01 = next(a for a in rescored["attempts"] if a["task"] == "q01")
    assert not q01["score"]["correct"] and "wrong or missing fields" in q01["score"]["reasons"][0]
    assert rescored["summary"]["correct"] == 9
    assert (
        rescored["spec"]["fixture_hashes"]["rubric"]
        == "sha256-" + hashlib.sha256((world / "rubric.json").read_bytes()).hexdigest()
    )
    # the same correction through an explicit --rubric file, from the packaged world
    other = rescore(arms["B"] / "report.json", tmp_path / "b.json", rubric=world / "rubric.json")
    assert other["spec"]["fixture_hashes"] == rescored["spec"]["fixture_hashes"]
    result = rules.compare(other, rescored)
    assert result["regressed_tasks"] == [] and result["after"]["correct"] == 9


def test_compare_accepts_rescored_reports_only_in_pairs_from_one_scorer(arms: dict[str, Path], tmp_path: Path) -> None:
    b, c = load_report(arms["B"] / "report.json"), load_report(arms["C"] / "report.json")
    rb, rc = (rescore(arms[n] / "report.json", tmp_path / f"{n}.json") for n in "BC")
    assert rules.compare(rb, rc)["kind"] == "compare"
    with pytest.raises(rules.Refused, match="only after is rescored"):
        rules.compare(b, rc)
    with pytest.raises(rules.Refused, match="only before is rescored"):
        rules.compare_policies(rb, c)
    other_scorer = {**rc, "scorer_implementation_sha256": "sha256-" + "e" * 64}
    with pytest.raises(rules.Refused, match="different scorer implementations"):
        rules.side_by_side(rb, other_scorer)
    incomplete = {k: v for k, v in rc.items() if k != "rescored_at"}
    with pytest.raises(rules.Refused, match="incomplete rescore provenance"):
        rules.compare(rb, incomplete)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(incomplete))
    with pytest.raises(ValueError, match="incomplete rescore provenance .missing rescored_at"):
        load_report(broken)


def test_rescore_refuses_another_corpus_or_question_set(arms: dict[str, Path], tmp_path: Path) -> None:
    world = corrected_world(tmp_path)
    questions = json.loads((world / "questions.json").read_text())
    questions[0]["question"] += " Please."
    (world / "questions.json").write_text(json.dumps(questions))
    with pytest.raises(ValueError, match="needs the original questions"):
        rescore(arms["C"] / "report.json", tmp_path / "x.json", world=world)
    with open(world / "corpus.jsonl", "a") as stream:
        stream.write("\n")
    with pytest.raises(ValueError, match="needs the original corpus"):
        rescore(arms["C"] / "report.json", tmp_path / "y.json", world=world)
    assert not (tmp_path / "x.json").exists() and not (tmp_path / "y.json").exists()


def test_rescore_needs_the_world_of_a_report_not_run_on_the_demo(arms: dict[str, Path], tmp_path: Path) -> None:
    report = json.loads((arms["C"] / "report.json").read_text())
    report["spec"]["world"] = "peps-2026-08-v1"
    elsewhere = tmp_path / "peps.json"
    elsewhere.write_text(json.dumps(report))
    done = CliRunner().invoke(eval_group, ["rescore", str(elsewhere), str(tmp_path / "new.json")])
    assert done.exit_code == 1 and "run on world 'peps-2026-08-v1': pass --world DIR" in done.output


def bad_inputs(source: Path, tmp_path: Path) -> list[tuple[Path, str]]:
    """(file, expected error) for a missing file, files that are not reports, and a wrong version."""
    text = tmp_path / "notes.txt"
    text.write_text("not json at all")
    array = tmp_path / "array.json"
    array.write_text("[1, 2]")
    other = json.loads(source.read_text())
    other["format"] = "demarkus-answer-report-v2"
    wrong = tmp_path / "v2.json"
    wrong.write_text(json.dumps(other))
    return [
        (tmp_path / "missing.json", "cannot read a report (No such file or directory)"),
        (text, "not a report: the file is not JSON"),
        (array, f"not a report: a {FORMAT} report is a JSON object"),
        (wrong, f"report format 'demarkus-answer-report-v2' is not supported; this version reads {FORMAT}"),
    ]


@pytest.mark.parametrize("command", ["rescore", "export-metrics"])
def test_derived_reports_refuse_bad_input_with_clear_errors(
    arms: dict[str, Path], tmp_path: Path, command: str
) -> None:
    runner = CliRunner()
    for path, message in bad_inputs(arms["C"] / "report.json", tmp_path):
        done = runner.invoke(eval_group, [command, str(path), str(tmp_path / "out.json")])
        assert done.exit_code == 1 and message in done.output, (path, done.output)
        assert not (tmp_path / "out.json").exists()
    taken = tmp_path / "taken.json"
    taken.write_text("{}")
    done = runner.invoke(eval_group, [command, str(arms["C"] / "report.json"), str(taken)])
    assert done.exit_code == 1 and "already exists" in done.output and taken.read_text() == "{}"

"""`eval export-metrics`: counts and grades survive, private text does not, and the export
still compares like its source."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from demarkus.eval import compare as rules
from demarkus.eval.cli import eval_group
from demarkus.eval.metrics import RUN_NOTE, SCORING_NOTE, export, export_metrics
from demarkus.eval.report import build_report, load_report
from demarkus.eval.rescore import rescore


def test_export_strips_text_arguments_answers_and_diagnostics(arms: dict[str, Path], tmp_path: Path) -> None:
    source = arms["C"] / "report.json"
    private = load_report(source)
    new = tmp_path / "metrics.json"
    done = CliRunner().invoke(eval_group, ["export-metrics", str(source), str(new)])
    assert done.exit_code == 0, done.output
    public = load_report(new)
    assert public["metrics_only"] is True
    assert public["source_report_sha256"] == "sha256-" + hashlib.sha256(source.read_bytes()).hexdigest()
    assert public["tool_result_tokens"] == private["summary"]["tool_result_tokens"] > 0
    assert public["summary"] == private["summary"] and public["categories"] == private["categories"]
    text = new.read_text()
    for attempt in private["attempts"]:
        for call in attempt["trace"]["calls"]:
            for line in call["output"].splitlines():
                if len(line) > 30:
                    assert line not in text, "retrieved text leaked"
            for value in call["input"].values():
                assert not (isinstance(value, str) and len(value) > 12 and value in text), "an argument leaked"
        assert attempt["trace"]["final"] not in text, "an answer leaked"
    for attempt in public["attempts"]:
        assert attempt["trace"]["final"] is None
        assert all(set(call) == {"name"} for call in attempt["trace"]["calls"])
        assert attempt["score"]["reasons"] in ([], [SCORING_NOTE])


def test_an_export_compares_like_its_source(arms: dict[str, Path], tmp_path: Path) -> None:
    b, c = load_report(arms["B"] / "report.json"), load_report(arms["C"] / "report.json")
    eb, ec = (export(arms[n] / "report.json", tmp_path / f"{n}.json") for n in "BC")
    private, public = rules.compare(b, c), rules.compare(eb, ec)
    assert public == private


def test_failures_keep_their_count_but_not_their_details(arms: dict[str, Path]) -> None:
    report = json.loads((arms["C"] / "report.json").read_text())
    attempts = copy.deepcopy(report["attempts"])
    attempts[0]["error"] = "TimeoutError: secret detail"
    attempts[0]["trace"]["errors"] = ["secret detail"]
    attempts[0]["trace"]["calls"][0]["error"] = True
    attempts[0]["score"]["reasons"] = ["citation /x.md/v1#y: quote 'secret detail' not inside"]
    failed = build_report(
        report["spec"], report["implementation_hashes"], attempts, report["lifecycle"], generated=report["generated"]
    )
    public = export_metrics(failed, b"raw")
    first = public["attempts"][0]
    assert first["error"] == RUN_NOTE and first["score"]["reasons"] == [SCORING_NOTE]
    assert first["trace"]["calls"][0] == {"name": "mark_lookup", "error": True} and "errors" not in first["trace"]
    assert "secret" not in json.dumps(public)
    assert public["summary"]["failures"] == failed["summary"]["failures"] == 2


def test_a_metrics_only_report_is_neither_exported_again_nor_rescored(arms: dict[str, Path], tmp_path: Path) -> None:
    public = tmp_path / "metrics.json"
    export(arms["C"] / "report.json", public)
    with pytest.raises(ValueError, match="already metrics-only"):
        export(public, tmp_path / "again.json")
    with pytest.raises(ValueError, match="metrics-only report with no traces"):
        rescore(public, tmp_path / "rescored.json")
    forged = json.loads(public.read_text())
    del forged["source_report_sha256"]
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    with pytest.raises(ValueError, match="metrics-only report needs"):
        load_report(tmp_path / "forged.json")

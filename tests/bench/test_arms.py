"""Two-arm benches: an arm imports the `demarkus` of its own `src`, never the editable
install of this tree, and returns raw texts for the parent to score."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OWN_DEMARKUS = "from bench import arms; print(arms.own_demarkus())"


def run_in_arm(pythonpath: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run(
        [sys.executable, "-c", OWN_DEMARKUS], capture_output=True, text=True, env=env, cwd=REPO, timeout=60
    )


def test_an_arm_imports_demarkus_from_its_pythonpath(tmp_path: Path) -> None:
    (tmp_path / "src" / "demarkus").mkdir(parents=True)
    (tmp_path / "src" / "demarkus" / "__init__.py").write_text('"""another version"""\n')
    done = run_in_arm(tmp_path / "src")
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == (tmp_path / "src").resolve()


def test_an_arm_whose_src_has_no_demarkus_refuses_the_editable_install(tmp_path: Path) -> None:
    done = run_in_arm(tmp_path)
    assert done.returncode != 0
    assert "not from its PYTHONPATH" in done.stderr


def test_the_context_arm_returns_every_case_unscored() -> None:
    import json

    from bench import arms, context_bench

    texts = arms.run("context_arm", arms.CURRENT_SRC, str(context_bench.FIXTURE))
    cases = json.loads(context_bench.FIXTURE.read_text(encoding="utf-8"))["cases"]
    assert sorted(texts) == sorted(case["name"] for case in cases)
    for text in texts.values():
        assert set(text) == {"head", "expansion", "fetched"}
        assert text["head"].startswith("status: ok\n")
    assert any(">>> " in text["expansion"] for text in texts.values())

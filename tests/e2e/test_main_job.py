"""The README's first command: serves the demo world and says how to reach it."""

from __future__ import annotations

from pathlib import Path

from .processes import REPO, cli, running


def test_readme_main_job_serves_the_demo_world(tmp_path: Path):
    env = {"DEMARKUS_HOME": str(tmp_path / "home")}
    command = [str(REPO / "scripts" / "demo"), "--port", "0", "--dir", str(tmp_path / "demo")]
    with running(command, env=env) as (proc, url):
        index = cli("fetch", f"{url}/index.md", env=env)
        assert index.returncode == 0, index.stderr
        assert index.stdout.startswith("# ")
        found = cli("lookup", f"{url}/runbooks", "quorum check voters", "--match", "body", "--meta", env=env)
        assert "match: body" in found.stdout and "/runbooks/" in found.stdout
        listing = cli("list", f"{url}/", env=env)
        assert "index.md" in listing.stdout
        refused = cli("publish", f"{url}/x.md", "-", "--token", "guess", env=env, stdin="x")
        assert refused.returncode != 0
    assert proc.returncode is not None

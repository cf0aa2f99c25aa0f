"""`demarkus import` as a subprocess: into a real QUIC server (a publish token) and into a
local store (--root); exit codes and summary lines."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from demarkus import auth

from .processes import DEMARKUS, cli, running


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    top = tmp_path / "notes"
    (top / "adr").mkdir(parents=True)
    (top / "adr" / "one.md").write_text("---\ntitle: One\ntags: [adr]\nsuperseded-by: two.md\n---\n# One\n\nFirst.\n")
    (top / "adr" / "two.md").write_text("---\nsupersedes: one.md\n---\n# Two\n\nSecond.\n")
    return top


@pytest.fixture
def served(tmp_path: Path):
    tokens = tmp_path / "tokens.toml"
    writer = auth.generate_token()
    auth.add_grant(tokens, "notes", writer, ["/notes/**"], ["publish"])
    env = {"DEMARKUS_HOME": os.environ["DEMARKUS_HOME"]}
    args = [*DEMARKUS, "serve", "--root", str(tmp_path / "served"), "--create", "--port", "0", "--tokens", str(tokens)]
    with running(args, env=env) as (_proc, url):
        yield url, writer, env


def test_import_into_a_quic_authority_with_a_publish_token(served, folder: Path):
    url, writer, env = served
    done = cli("import", str(folder), f"{url}/", "--prefix", "/notes", "--token", writer, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "2 created, 0 updated, 0 unchanged, 0 archived, 0 skipped, 0 refused; 2 versions added\n"
    fetched = cli("fetch", f"{url}/notes/adr/two.md", "--meta", env=env)
    assert "rel-supersedes: /notes/adr/one.md\n" in fetched.stdout and "title: Two\n" in fetched.stdout
    assert fetched.stdout.endswith("\n# Two\n\nSecond.\n")

    again = cli("import", str(folder), f"{url}/notes", "--token", writer, env=env)
    assert again.returncode == 0 and again.stdout.startswith("0 created, 0 updated, 2 unchanged,")

    (folder / "adr" / "two.md").unlink()
    (folder / "adr" / "bad.md").write_text("---\ntitle: [x\n---\nbody\n")
    archived = cli("import", str(folder), f"{url}/notes", "--token", writer, "--archive-missing", env=env)
    assert archived.returncode == 1
    assert archived.stdout.splitlines() == [
        "0 created, 0 updated, 1 unchanged, 1 archived, 0 skipped, 1 refused; 0 versions added",
        "refused adr/bad.md: the frontmatter is not valid YAML at line 3 of the file, column 1 "
        "(did not find expected ',' or ']'); fix it (quote values that contain `: `)",
    ]
    assert cli("fetch", f"{url}/notes/adr/two.md", env=env).returncode == 1


def test_a_token_that_does_not_cover_the_prefix_refuses_each_file(served, folder: Path):
    url, writer, env = served
    done = cli("import", str(folder), f"{url}/", "--prefix", "/elsewhere", "--token", writer, env=env)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0].startswith("0 created, 0 updated, 0 unchanged, 0 archived, 0 skipped, 2 refused;")
    assert all(line.startswith("refused adr/") for line in lines[1:]) and len(lines) == 3


def test_a_remote_import_records_the_commit_time_as_metadata(served, tmp_path: Path):
    url, writer, env = served
    repo = tmp_path / "repo"
    (repo / "n").mkdir(parents=True)
    (repo / "n" / "a.md").write_text("# A\n")
    git_env = {
        **os.environ,
        "HOME": str(tmp_path),
        "GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Ann",
        "GIT_AUTHOR_EMAIL": "ann@example.org",
        "GIT_COMMITTER_NAME": "Ann",
        "GIT_COMMITTER_EMAIL": "ann@example.org",
        "GIT_AUTHOR_DATE": "@1700000000 +0000",
        "GIT_COMMITTER_DATE": "@1700000000 +0000",
    }
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "a"]):
        subprocess.run(["git", *args], cwd=repo, env=git_env, check=True, timeout=60, capture_output=True)
    done = cli("import", str(repo / "n"), f"{url}/notes", "--git", "--token", writer, env={**env, **git_env})
    assert done.returncode == 0, done.stdout + done.stderr
    meta = cli("fetch", f"{url}/notes/a.md", "--meta", env=env).stdout
    assert "git-time: 2023-11-14T22:13:20Z\n" in meta and "git-author: Ann <ann@example.org>\n" in meta
    assert "modified: 2023-" not in meta  # the server's clock dates the version


def test_import_into_a_local_store_creates_it(folder: Path, tmp_path: Path):
    root = tmp_path / "new" / "store"
    done = cli("import", str(folder), "--root", str(root), "--prefix", "/kb")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("2 created, 0 updated, 0 unchanged, 0 archived, 0 skipped, 0 refused;")
    history = cli("versions", "/kb/adr/one.md", "--root", str(root))
    assert "chain-valid: true" in history.stdout and "total: 1" in history.stdout
    assert (root / ".demarkus" / "graph.sqlite").is_file()


def test_import_with_wikilinks_stores_links_to_the_notes_they_name(folder: Path, tmp_path: Path):
    (folder / "log.md").write_text(
        "---\nrelated: '[[two]]'\n---\n# Log\n\n[[One|The first]], then [[adr/two#Second]].\n"
    )
    root = tmp_path / "store"
    done = cli("import", str(folder), "--root", str(root), "--prefix", "/kb", "--wikilinks")
    assert done.returncode == 0, done.stderr
    log = cli("fetch", "/kb/log.md", "--root", str(root), "--meta").stdout
    assert (
        "rel-related: /kb/adr/two.md\n" in log
        and "[The first](adr/one.md), then [adr/two#Second](adr/two.md#second)." in log
    )
    plain = tmp_path / "plain"
    assert cli("import", str(folder), "--root", str(plain), "--prefix", "/kb").returncode == 0
    assert "[[One|The first]]" in cli("fetch", "/kb/log.md", "--root", str(plain)).stdout  # only when asked


def test_import_with_a_site_stores_links_to_the_notes_themselves(folder: Path, tmp_path: Path):
    site = "https://github.com/org/notes/blob/main/"
    (folder / "adr" / "three.md").write_text(
        f"---\nsupersedes: {site}adr/two.md\n---\n# Three\n\nAfter [two]({site}adr/two.md#second) "
        "and [one](https://notes.example.org/decisions/one.html).\n"
    )
    root = tmp_path / "store"
    rendered = "https://notes.example.org/decisions=adr"
    done = cli(
        "import", str(folder), "--root", str(root), "--prefix", "/kb", "--site", site.rstrip("/"), "--site", rendered
    )
    assert done.returncode == 0, done.stderr
    three = cli("fetch", "/kb/adr/three.md", "--root", str(root), "--meta").stdout
    assert "rel-supersedes: /kb/adr/two.md\n" in three and "After [two](two.md#second) and [one](one.md).\n" in three


def test_import_stores_links_to_myst_targets_as_links_to_their_sections(folder: Path, tmp_path: Path):
    (folder / "adr" / "two.md").write_text("---\nsupersedes: one.md\n---\n# Two\n\n(second-why)=\n## Why\n\nSecond.\n")
    (folder / "log.md").write_text("# Log\n\nSee [](#second-why), [the reason](second-why) and [x](#elsewhere).\n")
    root = tmp_path / "store"
    done = cli("import", str(folder), "--root", str(root), "--prefix", "/kb")
    assert done.returncode == 0, done.stderr
    log = cli("fetch", "/kb/log.md", "--root", str(root)).stdout
    assert "See [Why](adr/two.md#why), [the reason](adr/two.md#why) and [x](#elsewhere).\n" in log
    assert "(second-why)=\n## Why\n" in cli("fetch", "/kb/adr/two.md", "--root", str(root)).stdout  # as written


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--root", "store", "--site", "ftp://example.org/"], "is not a web address"),
        (["--root", "store", "--site", "https://example.org/=../up"], "names a folder outside the one imported"),
        ([], "exactly one of --root STORE or a mark://"),
        (["http://example.org/"], "not a mark:// URL"),
        (["mark://localhost:1/"], "needs a publish token"),
        (["mark://localhost:1/a", "--prefix", "/b", "--token", "t"], "give the folder once"),
    ],
)
def test_usage_errors_say_what_to_give(folder: Path, args: list[str], fragment: str):
    done = cli("import", str(folder), *args)
    assert done.returncode != 0 and fragment in done.stderr, done.stderr

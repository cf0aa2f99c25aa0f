"""The `demarkus` command against a real server subprocess on 127.0.0.1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from demarkus import auth

from .processes import DEMARKUS, cli, running


@pytest.fixture
def served(tmp_path: Path):
    tokens = tmp_path / "tokens.toml"
    writer = auth.generate_token()
    auth.add_grant(tokens, "writer", writer, ["/**"], ["publish"])
    root = tmp_path / "store"
    env = {"DEMARKUS_HOME": os.environ["DEMARKUS_HOME"]}
    with running(
        [*DEMARKUS, "serve", "--root", str(root), "--create", "--port", "0", "--tokens", str(tokens)], env=env
    ) as (proc, url):
        yield url, writer, env


def test_publish_fetch_list_versions_lookup_append_archive_through_the_cli(served, tmp_path: Path):
    url, writer, env = served
    doc = tmp_path / "a.md"
    doc.write_text("# Alpha\n\nHello.\n")
    published = cli(
        "publish",
        f"{url}/docs/a.md",
        str(doc),
        "--meta",
        "title=Alpha",
        "--meta",
        "tags=greeting",
        "--token",
        writer,
        env=env,
    )
    assert published.returncode == 0, published.stderr
    assert "status: created" in published.stdout and "version: 1" in published.stdout
    fetched = cli("fetch", f"{url}/docs/a.md", env=env)
    assert fetched.returncode == 0 and fetched.stdout == "# Alpha\n\nHello.\n"
    assert cli("fetch", f"{url}/docs/%61.md", env=env).stdout == fetched.stdout  # read as a link: decoded
    meta = cli("fetch", f"{url}/docs/a.md", "--meta", env=env)
    assert "title: Alpha" in meta.stdout
    listed = cli("list", f"{url}/docs", env=env)
    assert "[a.md](a.md)" in listed.stdout
    appended = cli(
        "append", f"{url}/docs/a.md", "-", "--expected-version", "1", "--token", writer, env=env, stdin="More.\n"
    )
    assert appended.returncode == 0, appended.stderr
    history = cli("versions", f"{url}/docs/a.md", env=env)
    assert "chain-valid: true" in history.stdout and "[v2]" in history.stdout
    found = cli("lookup", f"{url}/", "greeting", env=env)
    assert "/docs/a.md" in found.stdout
    budgeted = cli("lookup", f"{url}/", "greeting", "--budget", "300", "--explain", env=env)
    assert budgeted.returncode == 0, budgeted.stderr
    assert ">>> /docs/a.md/v2#alpha\n\n# Alpha\n\nHello.\n" in budgeted.stdout and "More." in budgeted.stdout
    assert (
        "\ndecisions: " in budgeted.stdout
        and " block      /docs/a.md/v2#alpha — row 1: the document whole\n" in budgeted.stdout
    )
    assert cli("archive", f"{url}/docs/a.md", "--token", writer, env=env).returncode == 0
    gone = cli("fetch", f"{url}/docs/a.md", env=env)
    assert gone.returncode == 1
    assert gone.stderr.startswith("error: ") and len(gone.stderr.strip().splitlines()) == 1
    assert "archived" in gone.stderr


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["fetch", "{url}/missing.md"], "no document at /missing.md"),
        (["publish", "{url}/x.md", "-"], "token"),
        (["lookup", "{url}/", "a"], "at least 2 characters"),
        (["fetch", "http://example.org/x"], "not a mark:// URL"),
    ],
    ids=["not-found", "no-token", "short-query", "bad-url"],
)
def test_cli_errors_are_one_line_and_exit_non_zero(served, args, fragment):
    url, _, env = served
    result = cli(*[a.format(url=url) for a in args], env=env, stdin="body")
    assert result.returncode != 0
    assert fragment in result.stderr
    assert len([ln for ln in result.stderr.splitlines() if ln.strip()]) <= 2


def test_a_budgeted_lookup_prints_what_mark_lookup_prints_then_why(demo_root: Path):
    from ..mcp.test_tools import GOLDEN

    args = ["lookup", "/", "lease heartbeat interval", "--match", "body", "--limit", "3", "--root", str(demo_root)]
    plain = cli(*args, "--budget", "600")
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == (GOLDEN / "lookup-budget.txt").read_text(encoding="utf-8")
    explained = cli(*args, "--budget", "600", "--explain")
    result, _, decisions = explained.stdout.partition("\n\ndecisions: ")
    assert result + "\n" == plain.stdout
    lines = decisions.splitlines()
    assert lines[0] == "580 of 600 tokens spent; a figure in brackets was not spent"
    spent = [int(line.split()[0]) for line in lines[1:] if not line.split()[0].startswith("(")]
    assert sum(spent) == 580  # the closing count: "used 580 of 600 tokens"
    assert "  (184)  omit       /operations/configuration.md#example — row 2: did not fit" in explained.stdout
    refused = cli(*args, "--explain")
    assert refused.returncode == 2 and "--explain needs --budget" in refused.stderr


def test_token_generate_prints_the_token_once_and_stores_its_hash(tmp_path: Path):
    tokens = tmp_path / "t.toml"
    result = cli(
        "token", "generate", "--tokens", str(tokens), "--label", "laptop", "--paths", "/docs/**", "--ops", "publish"
    )
    assert result.returncode == 0, result.stderr
    raw = result.stdout.strip()
    stored = tokens.read_text()
    assert raw not in stored and auth.hash_token(raw) in stored
    again = cli("token", "generate", "--tokens", str(tokens), "--label", "laptop", "--paths", "/docs/**")
    assert again.returncode != 0 and "laptop" in again.stderr


def test_embedded_root_works_without_a_network(tmp_path: Path):
    root = tmp_path / "store"
    root.mkdir()
    assert cli("publish", "/n.md", "-", "--root", str(root), stdin="# Note\n").returncode == 0
    assert cli("fetch", "/n.md", "--root", str(root)).stdout == "# Note\n"
    assert cli("publish", "/my%20note.md", "-", "--root", str(root), stdin="# Mine\n").returncode == 0
    assert cli("fetch", "/my note.md", "--root", str(root)).stdout == "# Mine\n"
    assert "[my note.md](my%20note.md)" in cli("list", "/", "--root", str(root)).stdout


def test_world_load_publishes_every_version_and_refuses_a_tampered_world(tmp_path: Path):
    import shutil

    from demarkus.store import FileStore
    from demarkus.worlds import demo_world_path, open_world

    world = open_world(demo_world_path())
    root = tmp_path / "store"
    loaded = cli("world", "load", str(demo_world_path()), "--root", str(root))
    assert loaded.returncode == 0, loaded.stderr
    assert f"{world.documents_count} documents, {world.versions_count} versions" in loaded.stderr
    store = FileStore(root)
    assert len(store.documents()) == world.documents_count
    assert sum(store.current_version(p) for p in store.documents()) == world.versions_count
    assert all(store.verify(p) is None for p in store.documents())
    assert not (root / ".demarkus.filling").exists()  # filled, then made durable once
    again = cli("world", "load", str(demo_world_path()), "--root", str(root))
    assert again.returncode == 0 and "already present" in again.stderr
    tampered = tmp_path / "tampered"
    shutil.copytree(demo_world_path(), tampered)
    corpus = tampered / "corpus.jsonl"
    corpus.write_bytes(corpus.read_bytes().replace(b"Harborwick", b"Harborwock", 1))
    refused = cli("world", "load", str(tampered), "--root", str(tmp_path / "other"))
    assert refused.returncode != 0
    assert "corpus.jsonl" in refused.stderr and "sha256" in refused.stderr


def test_a_world_load_killed_part_way_leaves_a_store_that_is_checked_and_kept(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    import signal
    import subprocess
    import time

    from demarkus.store import FileStore

    from ..conftest import PEPS_WORLD

    if not PEPS_WORLD.is_dir():
        pytest.skip(f"the PEPs world is not at {PEPS_WORLD}")
    root = tmp_path / "store"
    versions = root / "peps" / "versions"
    load = subprocess.Popen(
        [*DEMARKUS, "world", "load", str(PEPS_WORLD), "--root", str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (versions.is_dir() and len(os.listdir(versions)) >= 200):  # part way
            assert load.poll() is None, "the load ended before it could be stopped"
            assert time.monotonic() < deadline, "the load wrote nothing in a minute"
            time.sleep(0.01)
        os.killpg(load.pid, signal.SIGKILL)  # no clean-up: the marker stays, unlocked
    finally:
        load.wait(timeout=30)
    assert (root / ".demarkus.filling").exists()
    store = FileStore(root)
    assert not (root / ".demarkus.filling").exists()
    assert "was being filled when it stopped" in caplog.text
    documents = store.documents()
    assert 0 < len(documents) < 736
    assert all(store.verify(path) is None for path in documents)

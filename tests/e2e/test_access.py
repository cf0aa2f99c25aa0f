"""Access made visible through the `demarkus` command and a real server on 127.0.0.1:
token list, revoke and the warnings, and the hidden-rows note of lookup and list."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from demarkus import auth

from .processes import DEMARKUS, cli, running

NOTE = "need a read token; pass --token (or DEMARKUS_AUTH)"


# --- token list / revoke / generate --------------------------------------------------


def generate(tokens: Path, label: str, paths: str, ops: str, *extra: str) -> tuple[str, str]:
    made = cli("token", "generate", "--tokens", str(tokens), "--label", label, "--paths", paths, "--ops", ops, *extra)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip(), made.stderr


def test_token_list_shows_every_grant_and_never_a_token_or_hash(tmp_path: Path):
    tokens = tmp_path / "tokens.toml"
    writer, _ = generate(tokens, "writer", "/**", "publish")
    old, _ = generate(tokens, "old", "/notes/*,/private/**", "read", "--expires", "2020-01-01T00:00:00Z")
    listed = cli("token", "list", "--tokens", str(tokens))
    assert listed.returncode == 0 and listed.stderr == ""
    assert listed.stdout == (
        "LABEL   PATHS                 OPERATIONS  EXPIRES               STATE\n"
        "old     /notes/*,/private/**  read        2020-01-01T00:00:00Z  expired\n"
        "writer  /**                   publish     never                 valid\n"
    )
    as_json = cli("token", "list", "--tokens", str(tokens), "--json")
    assert [g["label"] for g in json.loads(as_json.stdout)] == ["old", "writer"]
    for text in (listed.stdout, as_json.stdout):
        assert writer not in text and old not in text and "sha256-" not in text


def test_token_list_of_an_empty_or_missing_file(tmp_path: Path):
    empty = tmp_path / "empty.toml"
    empty.write_text("# nothing\n")
    listed = cli("token", "list", "--tokens", str(empty))
    assert listed.returncode == 0 and listed.stdout == ""
    assert listed.stderr == f"{empty} holds no tokens; add one with demarkus token generate\n"
    missing = cli("token", "list", "--tokens", str(tmp_path / "nope.toml"))
    assert missing.returncode == 1 and "is missing" in missing.stderr


def test_token_revoke_of_an_unknown_label_names_those_there_and_exits_non_zero(tmp_path: Path):
    tokens = tmp_path / "tokens.toml"
    generate(tokens, "writer", "/**", "publish")
    generate(tokens, "ci", "/docs/**", "publish")
    before = tokens.read_text()
    refused = cli("token", "revoke", "laptop", "--tokens", str(tokens))
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr == (
        f"error: {tokens} has no token labelled 'laptop'; its tokens are: ci, writer "
        f"(see demarkus token list --tokens {tokens})\n"
    )
    assert tokens.read_text() == before


def test_generate_warns_when_a_read_grant_makes_public_paths_private(tmp_path: Path):
    tokens = tmp_path / "tokens.toml"
    _, quiet = generate(tokens, "writer", "/**", "publish")
    assert "warning" not in quiet
    _, warned = generate(tokens, "team", "/team/**", "read")
    assert warned.splitlines()[-1] == (
        "warning: /team/** is private now: reads there were public (no read grant covered all of it), and "
        "anonymous readers now see nothing there; they need a read token (demarkus token generate --ops read)"
    )
    _, covered = generate(tokens, "team-docs", "/team/docs/*", "read,publish")
    assert "warning" not in covered
    revoked = cli("token", "revoke", "team", "--tokens", str(tokens))
    assert revoked.returncode == 0
    assert revoked.stderr.splitlines() == [
        f"revoked [team] in {tokens}; its token no longer works",
        "warning: /team/** is public again where no other read grant covers it: anyone can read there now, "
        "without a token",
    ]


# --- a served store with read grants ---------------------------------------------------

DOCS = {
    "/guide.md": "# Guide\n\nThe public report guide.\n",
    "/private/plan.md": "# Plan\n\nThe report plan.\n",
    "/private/team/notes.md": "# Notes\n\nReport notes.\n",
    "/private/team/todo.md": "# Todo\n\nReport todo.\n",
}


@dataclass(frozen=True)
class Served:
    url: str
    tokens: Path
    writer: str
    reader: str
    env: dict[str, str]


def serve(tmp_path: Path, read_paths: list[str]) -> Iterator[Served]:
    tokens = tmp_path / "tokens.toml"
    writer, reader = auth.generate_token(), auth.generate_token()
    auth.add_grant(tokens, "writer", writer, ["/**"], ["publish"])
    auth.add_grant(tokens, "reader", reader, read_paths, ["read"])
    env = {"DEMARKUS_HOME": os.environ["DEMARKUS_HOME"]}
    root = tmp_path / "store"
    command = [*DEMARKUS, "serve", "--root", str(root), "--create", "--port", "0", "--tokens", str(tokens)]
    with running(command, env=env) as (_, url):
        for path, body in DOCS.items():
            published = cli(
                "publish", f"{url}{path}", "-", "--meta", "tags=report", "--token", writer, stdin=body, env=env
            )
            assert published.returncode == 0, published.stderr
        yield Served(url, tokens, writer, reader, env)


@pytest.fixture
def everything_private(tmp_path: Path) -> Iterator[Served]:
    """A read grant on /**: an anonymous reader sees nothing at all."""
    yield from serve(tmp_path, ["/**"])


@pytest.fixture
def subtree_private(tmp_path: Path) -> Iterator[Served]:
    """A read grant on /private/**: three of the four documents."""
    yield from serve(tmp_path, ["/private/**"])


def test_anonymous_lookup_and_list_say_how_many_rows_need_a_read_token(everything_private: Served):
    s = everything_private
    found = cli("lookup", f"{s.url}/", "report", env=s.env)
    assert found.returncode == 0
    assert "| /" not in found.stdout  # no rows
    assert found.stderr == f"hidden: 4 documents under / {NOTE}\n"
    listed = cli("list", f"{s.url}/", env=s.env)
    assert listed.returncode == 0 and "guide.md" not in listed.stdout and "private" not in listed.stdout
    assert listed.stderr == f"hidden: 2 entries of / {NOTE}\n"
    meta = cli("lookup", f"{s.url}/", "report", "--meta", env=s.env)
    assert "hidden: 4\n" in meta.stdout  # the count itself, with the metadata
    budgeted = cli("lookup", f"{s.url}/", "report", "--budget", "400", env=s.env)
    assert budgeted.returncode == 0
    assert f"\nhidden: 4 documents under / {NOTE}\n" in budgeted.stdout


def test_with_the_read_token_the_rows_appear_and_no_note(everything_private: Served):
    s = everything_private
    found = cli("lookup", f"{s.url}/", "report", "--token", s.reader, env=s.env)
    assert found.returncode == 0 and found.stderr == ""
    assert all(f"| {path} |" in found.stdout for path in DOCS)
    listed = cli("list", f"{s.url}/", env={**s.env, "DEMARKUS_AUTH": s.reader})
    assert listed.stderr == "" and "guide.md" in listed.stdout and "private/" in listed.stdout


def test_a_subtree_grant_hides_only_its_documents(subtree_private: Served):
    s = subtree_private
    found = cli("lookup", f"{s.url}/", "report", "--match", "body", env=s.env)
    assert "| /guide.md" in found.stdout and "/private" not in found.stdout
    assert found.stderr == f"hidden: 3 documents under / {NOTE}\n"
    narrow = cli("lookup", f"{s.url}/private/team", "*", env=s.env)
    assert narrow.stderr == f"hidden: 2 documents under /private/team {NOTE}\n"
    public = cli("lookup", f"{s.url}/", "guide", env=s.env)
    assert public.stderr == f"hidden: 3 documents under / {NOTE}\n"  # the same count, whatever the query
    listed = cli("list", f"{s.url}/private", env=s.env)
    assert listed.returncode == 0 and listed.stderr == f"hidden: 2 entries of /private {NOTE}\n"
    assert cli("list", f"{s.url}/", env=s.env).stderr == ""  # /private itself is listed, not covered
    other = auth.generate_token()
    auth.add_grant(s.tokens, "other", other, ["/elsewhere/**"], ["read"])
    wrong = cli("lookup", f"{s.url}/", "report", "--token", other, env=s.env)
    assert wrong.stderr == (
        "hidden: 3 documents under / need a read token that covers them; pass --token (or DEMARKUS_AUTH)\n"
    )


def test_revoking_a_token_while_the_server_runs_makes_it_stop_working(everything_private: Served):
    s = everything_private
    auth.add_grant(s.tokens, "keeper", auth.generate_token(), ["/**"], ["read"])  # /** stays private
    assert cli("fetch", f"{s.url}/guide.md", "--token", s.reader, env=s.env).returncode == 0
    revoked = cli("token", "revoke", "reader", "--tokens", str(s.tokens))
    assert revoked.returncode == 0, revoked.stderr
    assert "warning" not in revoked.stderr  # keeper still covers /**
    deadline = time.monotonic() + 20
    while True:  # the server reloads on the next request; bounded in case it lags
        refused = cli("fetch", f"{s.url}/guide.md", "--token", s.reader, env=s.env)
        if refused.returncode != 0 or time.monotonic() > deadline:
            break
    assert refused.returncode == 1 and "does not know the token" in refused.stderr
    found = cli("lookup", f"{s.url}/", "report", "--token", s.reader, env=s.env)
    assert "| /" not in found.stdout
    assert found.stderr == (
        "hidden: 4 documents under / need a read token that covers them; pass --token (or DEMARKUS_AUTH)\n"
    )

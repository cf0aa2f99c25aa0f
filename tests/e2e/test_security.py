"""Regressions of the adversarial review, through the real QUIC server on 127.0.0.1:
path spellings and read grants, token-file rewrites, a full index disk, a second
writer, scope in the MCP server, and the small malformed inputs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client as MCPClient
from mcp import StdioServerParameters

from demarkus import auth
from demarkus.client import Client
from demarkus.errors import BadRequestError
from demarkus.protocol import MAX_PATH_DEPTH, MAX_QUERY_TERMS, parse_response
from demarkus.server.quic import MarkServer, serve_mark
from demarkus.service import Service
from demarkus.store import FileStore

from ..conftest import Tokens, call
from .processes import DEMARKUS, cli, running
from .test_quic_server import raw_request

PROTECTED = "# Private\n\nThe protected text.\n"


async def raw(server: MarkServer, cert: Path, line: str, meta: str = "") -> tuple[str, str]:
    data = line.encode() + b"\n" + (f"---\n{meta}---\n".encode() if meta else b"")
    response = parse_response(await raw_request(server.port, cert, data))
    return response.status, response.text


@pytest.fixture
async def private(client: Client, tokens: Tokens) -> Client:
    """/private/a.md and /private/sub/b.md (read grant /private/**), plus exact and
    `*.md` grants on /exact/doc.md and /secret/*.md."""
    for path in ("/private/a.md", "/private/sub/b.md", "/exact/doc.md", "/secret/x.md"):
        assert (await client.publish(path, PROTECTED, token=tokens.writer)).ok
    auth.add_grant(tokens.file, "exact", auth.generate_token(), ["/exact/doc.md", "/secret/*.md"], ["read"])
    return client


# --- item 1: one canonical path --------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "FETCH //private/a.md",
        "FETCH ///private///sub///b.md",
        "FETCH //private/a.md/v1",
        "VERSIONS //private/a.md",
        "FETCH /exact/doc.md/",
        "FETCH /secret//x.md",
        "FETCH /private/a.md/",
        "VERSIONS ///exact//doc.md//",
    ],
)
async def test_no_spelling_of_a_protected_path_is_served_without_a_token(
    private: Client, server: MarkServer, tls_files: tuple[Path, Path], line: str
):
    status, text = await raw(server, tls_files[0], line)
    assert status == "unauthorized", text
    assert "protected text" not in text


@pytest.mark.parametrize("line", ["FETCH //private", "LIST //private/", "LIST ///private//", "FETCH /private/"])
async def test_folder_listings_of_a_protected_folder_name_nothing_under_any_spelling(
    private: Client, server: MarkServer, tls_files: tuple[Path, Path], line: str
):
    status, text = await raw(server, tls_files[0], line)
    assert status == "ok", text
    assert "a.md" not in text and "sub" not in text


async def test_the_reader_token_reads_every_spelling_as_the_canonical_path(
    private: Client, server: MarkServer, tls_files: tuple[Path, Path], tokens: Tokens
):
    status, text = await raw(server, tls_files[0], "FETCH //private//a.md/", f"auth: {tokens.reader}\n")
    assert status == "ok" and text == PROTECTED


async def test_dot_segments_are_refused(private: Client, server: MarkServer, tls_files: tuple[Path, Path]):
    status, text = await raw(server, tls_files[0], "FETCH /private/./a.md")
    assert status == "bad-request" and "`.` segment" in text


async def test_demarkus_fetch_and_mcp_host_refuse_the_spellings_too(
    private: Client, server: MarkServer, tls_files: tuple[Path, Path], tmp_path: Path
):
    cert = tls_files[0]
    url = f"mark://localhost:{server.port}"
    env = {"DEMARKUS_HOME": os.environ["DEMARKUS_HOME"]}
    fetched = await asyncio.to_thread(cli, "fetch", f"{url}//private/a.md", "--ca", str(cert), env=env)
    assert fetched.returncode == 1 and "protected text" not in fetched.stdout
    assert "needs a token" in fetched.stderr
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "demarkus", "mcp", "--host", url, "--ca", str(cert), "--read-only"],
        env={**os.environ, "DEMARKUS_HOME": str(tmp_path / "home")},
    )
    async with MCPClient(params) as mcp:
        for spelled in ("//private/a.md", "/private//sub/b.md/", f"{url}//private/a.md"):
            text, failed = await call(mcp, "mark_fetch", url=spelled)
            assert "protected text" not in text, spelled
            assert text.startswith("status: unauthorized") and not failed, text


# --- item 5: a token file rewritten in place -------------------------------------------


async def test_an_in_place_rewrite_of_the_token_file_never_opens_a_protected_path(
    private: Client, server: MarkServer, tls_files: tuple[Path, Path], tokens: Tokens
):
    text = tokens.file.read_text()
    stop = threading.Event()

    def rewrite() -> None:  # truncate, then write: the window the review found
        while not stop.is_set():
            with open(tokens.file, "r+", encoding="utf-8") as handle:
                handle.truncate(0)
                handle.flush()
                os.fsync(handle.fileno())
                handle.write(text)

    writer = threading.Thread(target=rewrite)
    writer.start()
    try:
        with open(tokens.file, "r+", encoding="utf-8") as handle:
            handle.truncate(0)  # an empty file in the middle of it all, for certain
        answers = [await private.fetch("/private/a.md") for _ in range(300)]
    finally:
        stop.set()
        writer.join(timeout=10)
    leaked = [r for r in answers if r.status == "ok"]
    assert not leaked, f"{len(leaked)} of {len(answers)} token-less fetches got the protected text"
    assert {r.status for r in answers} == {"unauthorized"}


# --- item 6: a full disk at the index after the version file is stored ----------------


@contextlib.contextmanager
def tiny_disk(folder: Path, size: str = "2m") -> Iterator[Path]:
    """A real, small file system at `folder` (tmpfs), unmounted afterwards."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"this machine cannot mount a small file system here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> Path:
    """Take every free byte of the file system holding `folder`."""
    filler = folder / "filler"
    with open(filler, "wb") as handle:
        with contextlib.suppress(OSError):
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
    return filler


async def test_a_full_index_disk_keeps_the_write_tells_the_truth_and_catches_up(
    tmp_path: Path, tls_files: tuple[Path, Path], tokens: Tokens
):
    root = tmp_path / "store"
    root.mkdir()
    cert, key = tls_files
    with tiny_disk(root / ".demarkus") as index_disk:
        service = Service.open(root, tokens=tokens.file)
        try:
            async with serve_mark(service, port=0, cert=cert, key=key) as server:
                async with Client(f"mark://localhost:{server.port}", ca=cert, dial_host="127.0.0.1") as client:
                    assert (await client.publish("/warm.md", "# Warm\n\nwarm words.\n", token=tokens.writer)).ok
                    filler = fill(index_disk)
                    body = "# Zebra\n\n" + "zebra quagga okapi giraffe " * 4000 + "\n"
                    answer = await client.publish("/z.md", body, token=tokens.writer)
                    assert answer.status == "created", answer.text
                    assert "index behind" in answer.text and "do not send it again" in answer.text
                    again = await client.publish("/z.md", body, token=tokens.writer)
                    assert again.status == "ok"  # the same body again is no new version, no conflict
                    assert (await client.fetch("/z.md")).body == body.encode()
                    filler.unlink()
                    async with asyncio.timeout(30):  # the index retries by itself, about once a second
                        while "/z.md" not in (await client.lookup("/", "quagga okapi", match="body")).text:
                            await asyncio.sleep(0.2)
        finally:
            service.close()


# --- item 7: one writer per store --------------------------------------------------------


def test_a_second_writer_on_a_served_store_is_refused_with_the_holder_named(tmp_path: Path):
    root = tmp_path / "store"
    env = {"DEMARKUS_HOME": os.environ["DEMARKUS_HOME"]}
    with running([*DEMARKUS, "serve", "--root", str(root), "--create", "--port", "0"], env=env) as (proc, url):
        note = tmp_path / "n.md"
        note.write_text("# Second\n")
        refused = cli("publish", "/n.md", str(note), "--root", str(root), env=env)
        assert refused.returncode == 1
        assert f"in use by process {proc.pid}" in refused.stderr and "serve" in refused.stderr
        assert not (root / "n.md").exists()
        # reading beside the server is fine
        assert cli("list", "/", "--root", str(root), env=env).returncode == 0


async def test_a_content_hash_never_returns_other_bytes(client: Client, tokens: Tokens, service: Service):
    await client.publish("/h.md", "# One\n", token=tokens.writer)
    old = (await client.fetch("/h.md")).metadata["content-hash"]
    # another program writing the store behind the service's back (the lock stops ours)
    other = Service(FileStore(service.store.root), trusted=True)
    await other.publish("/h.md", "# Two\n")
    answer = await client.fetch(f"/{old}")
    assert answer.status == "not-found", answer.text  # "# One" is no document's current body


# --- item 8: scope filters the relation graph -----------------------------------------


async def test_mcp_scope_hides_titles_and_paths_outside_it_in_explore_and_backlinks(tmp_path: Path):
    from demarkus.worlds import demo_world_path

    root = tmp_path / "demo"
    assert cli("world", "load", str(demo_world_path()), "--root", str(root)).returncode == 0  # seeds the graph

    def params(scope: str) -> StdioServerParameters:
        return StdioServerParameters(
            command=sys.executable,
            args=[
                "-m",
                "demarkus",
                "mcp",
                "--root",
                str(root),
                "--read-only",
                "--scope",
                scope,
                "--authority",
                "mark://demo.world",
            ],
            env={**os.environ, "DEMARKUS_HOME": str(tmp_path / "home")},
        )

    url = "/runbooks/verify-cluster-health.md"
    outside = ("(/operations/", "(/index.md)", "Monitoring", "Harborwick documentation")
    async with MCPClient(params("/")) as wide:
        everything, _ = await call(wide, "mark_backlinks", url=url)
    assert all(name in everything for name in outside)  # the graph does know them
    async with MCPClient(params("/runbooks")) as narrow:
        backlinks, _ = await call(narrow, "mark_backlinks", url=url)
        explored, _ = await call(narrow, "mark_explore", url=url, direction="both")
    relations = explored[explored.index("## Relations") : explored.index("## Siblings")]
    for text in (backlinks, relations):
        assert not [name for name in outside if name in text], text
        assert "(/runbooks/take-snapshot.md)" in text


# --- item 10: small malformed inputs -----------------------------------------------------


@pytest.mark.parametrize("value", ["²", "٣", "1" * 5000, "-1", " 2", "0x3"])
@pytest.mark.parametrize("key, line", [("expected-version", "PUBLISH /n.md"), ("page-size", "LIST /")])
async def test_numbers_are_ascii_digits_or_a_bad_request(
    server: MarkServer, tls_files: tuple[Path, Path], tokens: Tokens, key: str, line: str, value: str
):
    data = f'{line}\n---\nauth: {tokens.writer}\n{key}: "{value}"\n---\n# N\n'.encode()
    response = parse_response(await raw_request(server.port, tls_files[0], data))
    assert response.status == "bad-request", response.text
    assert "whole number" in response.text


@pytest.mark.parametrize(
    "data, fragment",
    [
        (b"FETCH /" + b"d/" * 2040 + b"a.md\n", "segments"),
        (b"FETCH /" + b"x" * 1100 + b"\n", "bytes"),
        (b"PUBLISH /a.md\n---\nauth: one\nauth: two\n---\nbody", "given twice"),
        (b"PUBLISH /a.md\n---\nexpected-version: '0'\nexpected-version: '3'\n---\nbody", "given twice"),
    ],
    ids=["deep-path", "long-path", "duplicate-auth", "duplicate-expected-version"],
)
async def test_deep_long_and_duplicate_inputs_are_bad_requests_in_one_log_line(
    server: MarkServer, tls_files: tuple[Path, Path], data: bytes, fragment: str, caplog: pytest.LogCaptureFixture
):
    response = parse_response(await raw_request(server.port, tls_files[0], data))
    assert response.status == "bad-request" and fragment in response.text, response.text
    assert sum(len(r.getMessage()) for r in caplog.records) < 2048


async def test_publishing_deeper_than_the_limit_is_refused_and_the_limit_itself_works(client: Client, tokens: Tokens):
    inside = "/" + "/".join(["d"] * (MAX_PATH_DEPTH - 1)) + "/a.md"
    assert (await client.publish(inside, "# Deep\n", token=tokens.writer)).status == "created"
    beyond = "/" + "/".join(["d"] * MAX_PATH_DEPTH) + "/a.md"
    with pytest.raises(BadRequestError, match="folders deep"):
        await client.publish(beyond, "# Deeper\n", token=tokens.writer)


async def test_too_many_query_terms_is_a_bad_request_naming_the_limit(client: Client, tokens: Tokens):
    await client.publish("/q.md", "# Q\n\nwords here.\n", token=tokens.writer)
    words = " ".join(f"w{i}x" for i in range(600))
    for match in ("body", "catalog"):
        answer = await client.lookup("/", words, match=match)
        assert answer.status == "bad-request" and str(MAX_QUERY_TERMS) in answer.text, answer.text
    exactly = " ".join(f"w{i}x" for i in range(MAX_QUERY_TERMS))
    assert (await client.lookup("/", exactly, match="body")).status == "ok"


def test_serve_refuses_a_store_that_does_not_exist_unless_asked_to_create_it(tmp_path: Path):
    missing = tmp_path / "nowhere"
    refused = cli("serve", "--root", str(missing), "--port", "0")
    assert refused.returncode == 1 and "does not exist" in refused.stderr and "--create" in refused.stderr
    assert not missing.exists()
    assert "Traceback" not in refused.stderr


def test_a_damaged_index_file_is_named_and_index_rebuild_recreates_it(tmp_path: Path):
    root = tmp_path / "store"
    root.mkdir()
    doc = tmp_path / "a.md"
    doc.write_text("# Alpha\n\nalpha words.\n")
    assert cli("publish", "/a.md", str(doc), "--root", str(root)).returncode == 0
    index = root / ".demarkus" / "index.sqlite"
    for name in ("index.sqlite-wal", "index.sqlite-shm"):
        (root / ".demarkus" / name).unlink(missing_ok=True)
    index.write_bytes(b"this is not a database" * 100)
    for args in (
        ["fetch", "/a.md", "--root", str(root)],
        ["lookup", "/", "alpha", "--match", "body", "--root", str(root)],
    ):
        broken = cli(*args)
        assert broken.returncode == 1, broken.stdout
        assert "Traceback" not in broken.stderr and "index rebuild" in broken.stderr and str(index) in broken.stderr
    rebuilt = cli("index", "rebuild", "--root", str(root))
    assert rebuilt.returncode == 0, rebuilt.stderr
    found = cli("lookup", "/", "alpha", "--match", "body", "--root", str(root))
    assert found.returncode == 0 and "/a.md" in found.stdout
    with sqlite3.connect(index) as db:
        assert db.execute("SELECT count(*) FROM documents").fetchone()[0] == 1
    shutil.rmtree(root)

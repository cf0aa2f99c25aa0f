"""Every verb through the Backend protocol, in process and over a real QUIC connection."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from demarkus.backend import Backend
from demarkus.client import Client
from demarkus.server.quic import serve_mark
from demarkus.service import Service
from demarkus.store import FileStore

from .conftest import Tokens


@pytest.fixture(params=["in-process", "quic"])
async def backend(
    request: pytest.FixtureRequest, service: Service, tls_files: tuple[Path, Path]
) -> AsyncIterator[Backend]:
    if request.param == "in-process":
        yield service
        return
    cert, key = tls_files
    async with serve_mark(service, port=0, cert=cert, key=key) as server:
        async with Client(f"mark://localhost:{server.port}", ca=cert, dial_host="127.0.0.1") as client:
            yield client


async def test_publish_then_fetch_returns_body_and_metadata(backend: Backend, tokens: Tokens):
    created = await backend.publish(
        "/docs/a.md", "# Alpha\n\nFirst.\n", metadata={"title": "Alpha", "tags": "x,y"}, token=tokens.writer
    )
    assert created.status == "created" and created.metadata["version"] == "1"
    fetched = await backend.fetch("/docs/a.md")
    assert fetched.status == "ok"
    assert fetched.body == b"# Alpha\n\nFirst.\n"
    assert fetched.metadata["title"] == "Alpha"
    assert fetched.metadata["tags"] == "x,y"
    assert fetched.metadata["version"] == "1"
    assert fetched.metadata["content-hash"] == "sha256-" + hashlib.sha256(fetched.body).hexdigest()
    assert len(fetched.metadata["etag"]) == 64


async def test_identical_publish_creates_no_new_version(backend: Backend, tokens: Tokens):
    await backend.publish("/a.md", "same", metadata={"title": "A"}, token=tokens.writer)
    again = await backend.publish("/a.md", "same", metadata={"title": "A"}, token=tokens.writer)
    assert again.status == "ok" and again.metadata["version"] == "1"
    changed = await backend.publish("/a.md", "same", metadata={"title": "B"}, token=tokens.writer)
    assert changed.status == "created" and changed.metadata["version"] == "2"


async def test_a_history_publishes_every_version_in_order(backend: Backend, tokens: Tokens):
    # in process one store write, over QUIC one PUBLISH per version: the same answer
    stored = await backend.publish_history(
        "/h.md",
        ["# One\n", "# Two\n", b"# Three\n\nthe newest words\n"],
        metadata={"title": "H"},
        expected_version=0,
        token=tokens.writer,
    )
    assert stored.status == "created" and stored.metadata["version"] == "3"
    assert (await backend.fetch("/h.md/v2")).body == b"# Two\n"
    listed = await backend.lookup("/", "newest", match="body")
    assert "/h.md" in listed.text
    repeated = await backend.publish_history(
        "/r.md", ["# A\n", "# A\n", "# B\n"], expected_version=0, token=tokens.writer
    )
    assert repeated.status == "created" and repeated.metadata["version"] == "2"  # as successive PUBLISHes
    again = await backend.publish_history("/h.md", ["# Four\n"], expected_version=0, token=tokens.writer)
    assert again.status == "conflict" and "create only" in again.text
    for bodies in ([], ["# E\n", ""]):
        empty = await backend.publish_history("/e.md", bodies, token=tokens.writer)
        assert empty.status == "bad-request" and "history of /e.md" in empty.text
    assert (await backend.fetch("/e.md")).status == "not-found"
    refused = await backend.publish_history("/n.md", ["# N\n"], token=None)
    assert refused.status == "unauthorized"
    assert (await backend.fetch("/n.md")).status == "not-found"


async def test_versions_are_pinned_and_listed_newest_first(backend: Backend, tokens: Tokens):
    for text in ("one", "two", "three"):
        await backend.publish("/d.md", text, token=tokens.writer)
    old = await backend.fetch("/d.md/v1")
    assert old.body == b"one" and old.metadata["current-version"] == "3" and "etag" not in old.metadata
    history = await backend.versions("/d.md")
    assert history.metadata == {"total": "3", "current": "3", "chain-valid": "true"}
    lines = [ln for ln in history.text.splitlines() if ln.startswith("- ")]
    assert [ln.split("]")[0] for ln in lines] == ["- [v3", "- [v2", "- [v1"]
    missing = await backend.fetch("/d.md/v9")
    assert missing.status == "not-found"


async def test_conditional_fetch_answers_not_modified(backend: Backend, tokens: Tokens):
    await backend.publish("/c.md", "body", token=tokens.writer)
    first = await backend.fetch("/c.md")
    again = await backend.fetch("/c.md", if_none_match=first.metadata["etag"])
    assert again.status == "not-modified" and again.body == b""
    since = await backend.fetch("/c.md", if_modified_since=first.metadata["modified"])
    assert since.status == "not-modified"
    stale = await backend.fetch("/c.md", if_none_match="0" * 64)
    assert stale.status == "ok"
    bad = await backend.fetch("/c.md", if_modified_since="yesterday")
    assert bad.status == "bad-request"


async def test_fetch_by_content_hash_and_health(backend: Backend, tokens: Tokens):
    await backend.publish("/h.md", "hashed body", token=tokens.writer)
    digest = hashlib.sha256(b"hashed body").hexdigest()
    by_hash = await backend.fetch(f"/sha256-{digest}")
    assert by_hash.status == "ok" and by_hash.body == b"hashed body"
    assert (await backend.fetch("/sha256-" + "0" * 64)).status == "not-found"
    health = await backend.fetch("/health")
    assert health.status == "ok" and b"healthy" in health.body


async def test_directory_serves_index_or_a_listing(backend: Backend, tokens: Tokens):
    await backend.publish("/docs/b.md", "b", token=tokens.writer)
    await backend.publish("/docs/sub/c.md", "c", token=tokens.writer)
    listing = await backend.fetch("/docs")
    assert listing.status == "ok"
    assert listing.text == "\n# Index of /docs/\n\n- [b.md](b.md)\n- [sub/](sub/)\n"
    await backend.publish("/docs/index.md", "# Docs index\n", token=tokens.writer)
    index = await backend.fetch("/docs/")
    assert index.body == b"# Docs index\n"


async def test_list_pages_with_a_cursor_and_hides_archived(backend: Backend, tokens: Tokens):
    for name in ("a", "b", "c", "d"):
        await backend.publish(f"/l/{name}.md", name, token=tokens.writer)
    await backend.archive("/l/d.md", token=tokens.writer)
    first = await backend.list("/l", page_size=2)
    assert first.metadata["complete"] == "false" and first.metadata["entries"] == "2"
    second = await backend.list("/l", page_size=2, cursor=first.metadata["next-cursor"])
    assert second.metadata["complete"] == "true"
    assert "[c.md]" in second.text and "d.md" not in second.text
    everything = await backend.list("/l", include_archived=True)
    assert "[d.md]" in everything.text
    assert (await backend.list("/l", cursor="%%%")).status == "bad-request"
    assert (await backend.list("/l", page_size=0)).status == "bad-request"
    assert (await backend.list("/l/a.md")).status == "not-found"


async def test_list_hides_a_folder_whose_documents_are_all_archived(backend: Backend, tokens: Tokens):
    await backend.publish("/f/live/a.md", "a", token=tokens.writer)
    await backend.publish("/f/mixed/b.md", "b", token=tokens.writer)
    await backend.publish("/f/mixed/deep/c.md", "c", token=tokens.writer)
    await backend.publish("/f/gone/d.md", "d", token=tokens.writer)
    await backend.publish("/f/gone/deep/e.md", "e", token=tokens.writer)
    for path in ("/f/mixed/b.md", "/f/gone/d.md", "/f/gone/deep/e.md"):
        await backend.archive(path, token=tokens.writer)
    listing = await backend.list("/f")
    assert "[live/]" in listing.text and "[mixed/]" in listing.text  # one active document is enough, at any depth
    assert "gone/" not in listing.text and listing.metadata["entries"] == "2"
    assert "[gone/]" in (await backend.list("/f", include_archived=True)).text
    assert "[f/]" in (await backend.list("/")).text
    await backend.archive("/f/live/a.md", token=tokens.writer)
    await backend.archive("/f/mixed/deep/c.md", token=tokens.writer)
    assert "f/" not in (await backend.list("/")).text  # nothing active left under it
    await backend.publish("/f/gone/deep/e.md", "", token=tokens.writer)  # restored
    assert "[gone/]" in (await backend.list("/f")).text and "[f/]" in (await backend.list("/")).text


async def test_expected_version_creates_only_and_guards_updates(backend: Backend, tokens: Tokens):
    assert (await backend.publish("/e.md", "v1", expected_version=0, token=tokens.writer)).status == "created"
    clash = await backend.publish("/e.md", "again", expected_version=0, token=tokens.writer)
    assert clash.status == "conflict" and clash.metadata["server-version"] == "1"
    stale = await backend.publish("/e.md", "v2", expected_version=5, token=tokens.writer)
    assert stale.status == "conflict"
    assert stale.metadata == {"your-version": "5", "server-version": "1"}
    assert b"fetch" in stale.body.lower()
    ok = await backend.publish("/e.md", "v2", expected_version=1, token=tokens.writer)
    assert ok.status == "created" and ok.metadata["version"] == "2"


@pytest.mark.parametrize("value", ["-1", "abc", "1.5", " "])
async def test_malformed_expected_version_is_a_bad_request(backend: Backend, tokens: Tokens, value: str):
    from demarkus.protocol import Request, Verb

    response = await backend.request(
        Request(Verb.PUBLISH, "/x.md", {"auth": tokens.writer, "expected-version": value}, b"x")
    )
    assert response.status == "bad-request"
    assert b"expected-version" in response.body


async def test_append_extends_the_version_it_names(backend: Backend, tokens: Tokens):
    await backend.publish("/log.md", "# Log\n\n- one", metadata={"title": "Log"}, token=tokens.writer)
    appended = await backend.append("/log.md", "- two\n", expected_version=1, token=tokens.writer)
    assert appended.status == "created" and appended.metadata["version"] == "2"
    doc = await backend.fetch("/log.md")
    assert doc.body == b"# Log\n\n- one\n- two\n"
    assert doc.metadata["title"] == "Log"
    stale = await backend.append("/log.md", "- three\n", expected_version=1, token=tokens.writer)
    assert stale.status == "conflict"
    from demarkus.protocol import Request, Verb

    missing = await backend.request(Request(Verb.APPEND, "/log.md", {"auth": tokens.writer}, b"x"))
    assert missing.status == "bad-request"
    empty = await backend.append("/log.md", "", expected_version=2, token=tokens.writer)
    assert empty.status == "bad-request"
    absent = await backend.append("/none.md", "x", expected_version=1, token=tokens.writer)
    assert absent.status == "not-found"


async def test_archive_hides_the_document_and_an_empty_publish_restores_it(backend: Backend, tokens: Tokens):
    await backend.publish("/old.md", "old text", metadata={"title": "Old"}, token=tokens.writer)
    archived = await backend.archive("/old.md", token=tokens.writer)
    assert archived.metadata == {"version": "1", "archived": "true"}
    gone = await backend.fetch("/old.md")
    assert gone.status == "archived" and b"/old.md/v1" in gone.body
    assert (await backend.fetch("/old.md/v1")).body == b"old text"
    refused = await backend.publish("/old.md", "new", token=tokens.writer)
    assert refused.status == "archived"
    assert (await backend.lookup("/", "old")).metadata["matches"] == "0"
    restored = await backend.publish("/old.md", "", token=tokens.writer)
    assert restored.status == "ok" and restored.metadata["version"] == "1"
    assert (await backend.fetch("/old.md")).body == b"old text"
    assert (await backend.lookup("/", "old")).metadata["matches"] == "1"
    assert (await backend.publish("/never.md", "", token=tokens.writer)).status == "not-found"


async def test_writes_need_a_token_that_covers_the_path(backend: Backend, tokens: Tokens):
    assert (await backend.publish("/a.md", "x")).status == "unauthorized"
    assert (await backend.publish("/a.md", "x", token="wrong")).status == "unauthorized"
    assert (await backend.publish("/a.md", "x", token=tokens.docs_writer)).status == "not-permitted"
    assert (await backend.publish("/docs/a.md", "x", token=tokens.docs_writer)).status == "created"
    assert (await backend.publish("/docs/a.md", "y", token=tokens.reader)).status == "not-permitted"
    assert (await backend.archive("/docs/a.md")).status == "unauthorized"


async def test_read_tokens_protect_the_paths_they_cover(backend: Backend, tokens: Tokens):
    await backend.publish("/private/p.md", "secret", metadata={"title": "Private plan"}, token=tokens.writer)
    await backend.publish("/public.md", "open", metadata={"title": "Public plan"}, token=tokens.writer)
    assert (await backend.fetch("/private/p.md")).status == "unauthorized"
    assert (await backend.fetch("/private/p.md", token=tokens.docs_writer)).status == "not-permitted"
    assert (await backend.fetch("/private/p.md", token=tokens.reader)).body == b"secret"
    assert (await backend.fetch("/private/p.md/v1")).status == "unauthorized"
    digest = hashlib.sha256(b"secret").hexdigest()
    assert (await backend.fetch(f"/sha256-{digest}")).status == "unauthorized"
    anonymous = await backend.lookup("/", "plan")
    assert anonymous.metadata["matches"] == "1" and b"private" not in anonymous.body
    allowed = await backend.lookup("/", "plan", token=tokens.reader)
    assert allowed.metadata["matches"] == "2"
    assert b"p.md" not in (await backend.list("/private")).body
    assert b"[p.md]" in (await backend.list("/private", token=tokens.reader)).body


async def test_writes_are_refused_without_a_token_store(store_root: Path):
    service = Service(FileStore(store_root))
    refused = await service.publish("/a.md", "x", token="anything")
    assert refused.status == "not-permitted"
    assert b"--tokens" in refused.body


async def test_catalog_lookup_ranks_by_terms_then_importance(backend: Backend, tokens: Tokens):
    docs = {
        "/adr/one.md": {"title": "Retention policy", "tags": "adr,storage", "importance": "0.9"},
        "/adr/two.md": {"title": "Retention of logs", "tags": "ops", "importance": "0.3"},
        "/adr/three.md": {"title": "Queue design", "tags": "adr,retention", "importance": "0.5"},
        "/other/four.md": {"title": "Retention elsewhere", "tags": "adr"},
    }
    for path, meta in docs.items():
        await backend.publish(path, f"# {meta['title']}\n", metadata=meta, token=tokens.writer)
    response = await backend.lookup("/adr", "retention adr")
    assert response.metadata["matches"] == "3"
    rows = [ln.split(" | ")[0].lstrip("| ") for ln in response.text.splitlines() if ln.startswith("| /")]
    assert rows == ["/adr/one.md", "/adr/three.md", "/adr/two.md"]
    assert response.text.startswith(
        '\n# Lookup matches for "retention adr" in /adr\n\n| Path | Importance | Title | Tags |\n'
    )
    assert "| /adr/one.md | 0.90 | Retention policy | adr, storage |" in response.text
    limited = await backend.lookup("/", "retention", limit=1)
    assert limited.metadata["matches"] == "1"
    filtered = await backend.lookup("/", "retention", filter="tag=ops")
    assert filtered.metadata["matches"] == "1"
    every = await backend.lookup("/", "*")
    assert every.metadata["matches"] == "4"


@pytest.mark.parametrize(
    "query, options, fragment",
    [
        ("", {}, b"empty"),
        ("a", {}, b"at least 2"),
        ("retention", {"match": "fuzzy"}, b"match `fuzzy`"),
        ("retention", {"filter": "tag"}, b"malformed"),
        ("retention", {"filter": "modified-after=soon"}, b"YYYY-MM-DD"),
        ("retention", {"limit": "ten"}, b"whole number"),
        ("retention", {"limit": "0"}, b"below 1"),
    ],
    ids=["empty", "one-letter", "match", "filter", "date", "limit-text", "limit-zero"],
)
async def test_bad_lookups_are_bad_requests_that_say_what_to_do(
    backend: Backend, query: str, options: dict[str, str], fragment: bytes
):
    from demarkus.protocol import Request, Verb

    response = await backend.request(Request(Verb.LOOKUP, "/", {"query": query, **options}))
    assert response.status == "bad-request"
    assert fragment in response.body


async def test_reserved_and_malformed_metadata_is_refused(backend: Backend, tokens: Tokens):
    assert (await backend.publish("/m.md", "x", metadata={"etag": "x"}, token=tokens.writer)).status == "bad-request"
    assert (await backend.publish("/m.md", "x", metadata={"Bad_Key": "x"}, token=tokens.writer)).status == "bad-request"
    assert (await backend.publish("/sha256-" + "a" * 64, "x", token=tokens.writer)).status == "bad-request"
    assert (await backend.fetch("/m.md")).status == "not-found"


async def test_non_utf8_bodies_are_refused(backend: Backend, tokens: Tokens):
    response = await backend.publish("/bin.md", b"\xff\xfe\x00", token=tokens.writer)
    assert response.status == "bad-request"


async def test_paths_escaping_the_root_are_not_found(
    backend: Backend, tokens: Tokens, store_root: Path, tmp_path: Path
):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret")
    (store_root / "escape").symlink_to(outside)
    assert (await backend.fetch("/escape/secret.md")).status == "not-found"
    assert (await backend.publish("/escape/new.md", "x", token=tokens.writer)).status == "not-found"
    assert not (outside / "new.md").exists()


async def test_row_etags_name_the_rows_then_the_readable_documents_they_relate_to(backend: Backend, tokens: Tokens):
    async def publish(path: str, body: str, **metadata: str) -> str:
        response = await backend.publish(path, body, metadata=metadata, token=tokens.writer)
        response.raise_for_status()
        return (await backend.fetch(path, token=tokens.reader)).metadata["etag"]

    old = await publish("/notes/old.md", "# Old\n\nThe old rule.\n")
    secret = await publish("/private/older.md", "# Older\n\nThe oldest rule.\n")
    await publish("/notes/links.md", "# Links\n\nSee also.\n")
    new = await publish(
        "/notes/new.md",
        "# New\n\nThe quorum rule.\n",
        **{"rel-supersedes": "/notes/old.md, /private/older.md", "rel-see-also": "/notes/links.md"},
    )

    def etags(response) -> dict[str, str]:  # type: ignore[no-untyped-def]
        return json.loads(response.metadata["row-etags"])

    anonymous = await backend.lookup("/notes", "quorum", match="body", row_etags=True)
    # the row first, then what it supersedes (an evidence predicate) that the caller may read
    assert list(etags(anonymous).items()) == [("/notes/new.md", new), ("/notes/old.md", old)]
    reader = await backend.lookup("/notes", "quorum", match="body", row_etags=True, token=tokens.reader)
    assert etags(reader) == {"/notes/new.md": new, "/notes/old.md": old, "/private/older.md": secret}


async def test_a_body_lookup_says_how_much_of_the_query_its_best_row_holds(backend: Backend, tokens: Tokens):
    for i in range(12):  # filler, so that "notes" is common and the rest are informative
        await backend.publish(f"/n/{i}.md", f"# Note {i}\n\nPlain notes, number {i}.\n", token=tokens.writer)
    await backend.publish("/n/q.md", "# Q\n\n## Raft\n\nThe quorum of notes needs a zorbex.\n", token=tokens.writer)
    answer = await backend.lookup("/", "quorum zorbex notes kafka", match="body")
    assert answer.metadata["informative"] == "2/3"  # quorum and zorbex; kafka is in no row
    assert answer.metadata["informative-words"] == "quorum zorbex kafka"  # as asked; notes is common
    plural = await backend.lookup("/", "quorums zorbex quorum notes", match="body")
    assert plural.metadata["informative-words"] == "quorums zorbex quorum"  # one term, both spellings
    long = await backend.lookup("/", "quorum zorbex " + "k" * 65, match="body")
    assert long.metadata["informative-words"] == "quorum zorbex"  # a word no reader writes is not sent
    common = await backend.lookup("/", "plain notes number", match="body")
    assert "informative-words" not in common.metadata  # every word common: the key says nothing
    for other in (await backend.lookup("/", "quorum"), await backend.lookup("/", "kafka", match="body")):
        assert "informative" not in other.metadata and "informative-words" not in other.metadata  # catalog; no rows


async def test_a_full_disk_or_a_fault_in_a_write_is_answered_and_the_service_keeps_serving(
    service: Service,
    tokens: Tokens,
    monkeypatch,  # type: ignore[no-untyped-def]
):
    import errno

    def full(*_args, **_kwargs):  # type: ignore[no-untyped-def]
        raise OSError(errno.ENOSPC, "No space left on device")

    def broken(*_args, **_kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("a bug")

    for fault, says in ((full, "disk is full"), (broken, "server failed")):
        monkeypatch.setattr(service.store, "write", fault)
        monkeypatch.setattr(service.store, "write_history", fault)
        one = await service.publish("/a.md", "# A\n", token=tokens.writer)
        many = await service.publish_history("/b.md", ["# B\n", "# C\n"], token=tokens.writer)
        for answer in (one, many):
            assert answer.status == "server-error" and says in answer.text
    monkeypatch.undo()
    assert (await service.publish("/a.md", "# A\n", token=tokens.writer)).status == "created"


async def test_a_history_takes_no_version_time_even_from_the_stores_own_process(store_root: Path):
    dating = Service(FileStore(store_root), trusted=True, dates_versions=True)
    dated = await dating.publish_history("/d.md", ["# One\n", "# Two\n"], metadata={"modified": "2020-01-01T00:00:00Z"})
    assert dated.status == "bad-request" and "publish dated versions one by one" in dated.text
    assert (await dating.fetch("/d.md")).status == "not-found"


async def test_graph_md_lists_the_links_between_the_documents_a_caller_may_read(backend: Backend, tokens: Tokens):
    a = "# A\n\nSee [the B notes](b.md#setup), [the web](https://example.org/) and [B](/docs/b.md).\n"
    await backend.publish("/docs/a.md", a, metadata={"title": "A", "rel-supersedes": "old.md"}, token=tokens.writer)
    await backend.publish("/docs/b.md", "# B\n", metadata={"title": "B"}, token=tokens.writer)
    await backend.publish("/private/p.md", "[A](/docs/a.md)", metadata={"title": "Plan"}, token=tokens.writer)
    public = await backend.fetch("/graph.md")
    assert public.status == "ok" and len(public.metadata["etag"]) == 64
    text = public.text
    assert text.startswith("# Document Graph\n\n> Exported: ")
    assert "| /docs/a.md | /docs/b.md#setup |  | the B notes | a | 2 |\n" in text
    assert "| /docs/a.md | /docs/old.md | supersedes |  |  | 1 |\n" in text
    assert "| [/docs/a.md](/docs/a.md) | A | ok | 2 |\n" in text
    assert "| [/docs/old.md](/docs/old.md) |  | unknown | 0 |\n" in text  # no such document
    assert "example.org" not in text and "private" not in text and "Plan" not in text
    reader = (await backend.fetch("/graph.md", token=tokens.reader)).text
    assert "| /private/p.md | /docs/a.md |  | A |  | 1 |\n" in reader and "| Plan |" in reader
    unchanged = await backend.fetch("/graph.md", if_none_match=public.metadata["etag"])
    assert unchanged.status == "not-modified"
    b = "# B\n\nBack to [A](a.md).\n"
    await backend.publish("/docs/b.md", b, metadata={"title": "B"}, token=tokens.writer)
    await backend.archive("/docs/a.md", token=tokens.writer)
    after = await backend.fetch("/graph.md", if_none_match=public.metadata["etag"])
    assert after.status == "ok"
    assert "| /docs/b.md | /docs/a.md |  | A | b | 1 |\n" in after.text  # the new version's link
    assert "\n| /docs/a.md |" not in after.text  # the archived document's links are gone
    assert "| [/docs/a.md](/docs/a.md) |  | unknown | 0 |\n" in after.text


async def test_a_document_stored_at_graph_md_is_served_as_it_was_stored(backend: Backend, tokens: Tokens):
    await backend.publish("/graph.md", "# Graph theory\n\nNotes.\n", token=tokens.writer)
    assert (await backend.fetch("/graph.md")).body == b"# Graph theory\n\nNotes.\n"

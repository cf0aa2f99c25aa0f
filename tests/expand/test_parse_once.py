"""A version is parsed once per process and sent once per caller: the second budgeted
lookup of the same rows parses nothing and transfers no body, over a real QUIC authority;
a document that changed in between is sent and parsed again."""

from __future__ import annotations

from pathlib import Path

from demarkus.client import Client
from demarkus.expand.document import Fetched
from demarkus.expand.held import HeldDocuments
from demarkus.expand.parsecache import PARSES, ParseCache
from demarkus.graph import GraphStore
from demarkus.mcp.server import LocalResolver
from demarkus.mcp.tools import Tools
from demarkus.server.quic import serve_mark
from demarkus.service import Service

AUTHORITY = "mark://notes.world"
QUERY = "lease heartbeat interval"


async def _publish(service: Service, path: str, body: str) -> None:
    (await service.publish(path, body)).raise_for_status()


async def test_a_repeated_lookup_parses_nothing_and_is_sent_no_body(tmp_path: Path, tls_files) -> None:
    service = Service.open(tmp_path, trusted=True)
    for name in ("alpha", "beta", "gamma"):
        body = (
            f"# {name.title()}\n\n## Lease\n\nThe {name} lease heartbeat interval is 5 s.\n\n## Other\n\nUnrelated.\n"
        )
        await _publish(service, f"/notes/{name}.md", body)
    cert, key = tls_files
    PARSES.clear()
    async with (
        serve_mark(service, host="127.0.0.1", port=0, cert=cert, key=key) as server,
        Client(f"mark://localhost:{server.port}", ca=cert, dial_host="127.0.0.1") as client,
    ):
        tools = Tools(LocalResolver(client, AUTHORITY, GraphStore(None), scope="/"))
        first = await tools.lookup(QUERY, "/notes", None, 3, "body", 600)
        parses, bodies = PARSES.parses, tools.held.bodies
        assert bodies == 3 and parses == 3, (bodies, parses)  # three rows, three documents

        again = await tools.lookup(QUERY, "/notes", None, 3, "body", 600)
        assert again == first
        assert (PARSES.parses, tools.held.bodies) == (parses, bodies)  # nothing parsed, no body sent
        assert tools.held.unchanged == 3

        await _publish(service, "/notes/beta.md", "# Beta\n\n## Lease\n\nThe beta lease heartbeat interval is 9 s.\n")
        changed = await tools.lookup(QUERY, "/notes", None, 3, "body", 600)
        assert "interval is 9 s" in changed and "interval is 5 s" in changed
        assert tools.held.bodies == bodies + 1  # only the changed document was sent
        assert PARSES.parses == parses + 1  # and parsed
    service.close()


def test_the_parse_cache_drops_the_least_recently_used_beyond_its_bytes() -> None:
    cache = ParseCache(max_bytes=100)
    bodies = [f"# Doc {i}\n\n{'x' * 30}\n".encode() for i in range(4)]  # 40 bytes each
    for body in bodies:
        cache.get(body)
    assert cache.parses == 4
    cache.get(bodies[3])  # still held
    cache.get(bodies[0])  # dropped: parsed again
    assert (cache.parses, cache.hits) == (5, 1)
    huge = b"# Huge\n\n" + b"y" * 200
    assert cache.get(huge).outline.body == huge  # over the bound: parsed, not held
    cache.get(huge)
    assert cache.parses == 7


def test_held_documents_stay_within_their_bytes_and_forget_what_has_no_etag() -> None:
    held = HeldDocuments(max_bytes=100)
    for i in range(3):
        held.keep(f"/d{i}.md", f"e{i}", Fetched(f"/d{i}.md", b"z" * 40))
    assert held.etag("/d0.md") is None  # dropped: 120 bytes would pass the bound
    assert (held.etag("/d1.md"), held.etag("/d2.md")) == ("e1", "e2")
    held.keep("/d1.md", None, Fetched("/d1.md", b"new"))  # a body without an etag replaces the old
    assert held.etag("/d1.md") is None
    held.keep("/big.md", "eb", Fetched("/big.md", b"b" * 101))
    assert held.etag("/big.md") is None
    assert held.bodies == 5


async def test_a_long_body_is_parsed_beside_the_event_loop(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import threading

    from demarkus.expand import document

    service = Service.open(tmp_path, trusted=True)
    await _publish(service, "/notes/short.md", f"# Short\n\n## Lease\n\n{QUERY} is short.\n")
    filler = "A paragraph of the long document, unrelated.\n\n" * (document.PARSE_INLINE_MAX // 40)
    await _publish(service, "/notes/long.md", f"# Long\n\n## Lease\n\n{QUERY} is long.\n\n{filler}")
    seen: dict[int, str] = {}
    real_get = PARSES.get

    def watched(body: bytes):  # type: ignore[no-untyped-def]
        seen[len(body)] = threading.current_thread().name
        return real_get(body)

    PARSES.clear()
    monkeypatch.setattr(PARSES, "get", watched)
    tools = Tools(LocalResolver(service, AUTHORITY, GraphStore(None), scope="/"))
    await tools.lookup(QUERY, "/notes", None, 3, "body", 600)
    main = threading.current_thread().name
    long = [size for size in seen if size > document.PARSE_INLINE_MAX]
    short = [size for size in seen if size <= document.PARSE_INLINE_MAX]
    assert long and short, seen
    assert all(seen[size] == main for size in short)  # a short body is parsed in place
    assert all(seen[size] != main for size in long)  # a long one on a worker thread
    PARSES.clear()

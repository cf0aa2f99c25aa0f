"""A version is parsed once per process and sent once per caller: the second budgeted
lookup of the same rows parses nothing and transfers no body, over a real QUIC authority
(the lookup's answer names its rows' etags, so held documents are not even asked for; an
authority that names none is asked with `if-none-match`); a document that changed in
between is sent and parsed again."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from demarkus import auth
from demarkus.client import Client
from demarkus.errors import DemarkusError
from demarkus.expand.document import Fetched
from demarkus.expand.held import HeldDocuments
from demarkus.expand.parsecache import PARSES, ParseCache
from demarkus.graph import GraphStore
from demarkus.mcp.server import LocalResolver
from demarkus.mcp.tools import Tools
from demarkus.protocol import ROW_ETAGS, Response, parse_row_etags
from demarkus.server.quic import serve_mark
from demarkus.service import Service

from ..conftest import count_fetches

AUTHORITY = "mark://notes.world"
QUERY = "lease heartbeat interval"


async def _publish(service: Service, path: str, body: str) -> None:
    (await service.publish(path, body)).raise_for_status()


async def _notes(tmp_path: Path) -> Service:
    service = Service.open(tmp_path, trusted=True)
    for name in ("alpha", "beta", "gamma"):
        body = (
            f"# {name.title()}\n\n## Lease\n\nThe {name} lease heartbeat interval is 5 s.\n\n## Other\n\nUnrelated.\n"
        )
        await _publish(service, f"/notes/{name}.md", body)
    return service


@contextlib.asynccontextmanager
async def _over_quic(service: Service, tls_files: tuple[Path, Path]) -> AsyncIterator[Client]:
    """A client of `service` served on loopback, with an empty parse cache."""
    cert, key = tls_files
    PARSES.clear()
    async with (
        serve_mark(service, host="127.0.0.1", port=0, cert=cert, key=key) as server,
        Client(f"mark://localhost:{server.port}", ca=cert, dial_host="127.0.0.1") as client,
    ):
        yield client


class _OlderAuthority:
    """A client whose authority does not know `row-etags` (it answers without them)."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def lookup(self, *args: Any, **kwargs: Any) -> Response:
        response = await self._client.lookup(*args, **kwargs)
        meta = {k: v for k, v in response.metadata.items() if k != ROW_ETAGS}
        return Response(response.status, meta, response.body)


async def test_a_repeated_lookup_parses_nothing_and_is_sent_no_body(tmp_path: Path, tls_files) -> None:
    service = await _notes(tmp_path)
    fetches = count_fetches(service)
    async with _over_quic(service, tls_files) as client:
        tools = Tools(LocalResolver(client, AUTHORITY, GraphStore(None), scope="/"))
        first = await tools.lookup(QUERY, "/notes", None, 3, "body", 600)
        parses, bodies = PARSES.parses, tools.held.bodies
        assert bodies == 3 and parses == 3, (bodies, parses)  # three rows, three documents
        assert len(fetches) == 3

        again = await tools.lookup(QUERY, "/notes", None, 3, "body", 600)
        assert again == first
        assert (PARSES.parses, tools.held.bodies) == (parses, bodies)  # nothing parsed, no body sent
        assert len(fetches) == 3  # not even asked: the lookup named the etags the caller holds
        assert (tools.held.current, tools.held.unchanged) == (3, 0)

        await _publish(service, "/notes/beta.md", "# Beta\n\n## Lease\n\nThe beta lease heartbeat interval is 9 s.\n")
        changed = await tools.lookup(QUERY, "/notes", None, 3, "body", 600)
        assert "interval is 9 s" in changed and "interval is 5 s" in changed
        assert tools.held.bodies == bodies + 1  # only the changed document was sent
        assert PARSES.parses == parses + 1  # and parsed
        assert fetches[3:] == ["/notes/beta.md"]
    service.close()


async def test_without_row_etags_the_held_documents_are_asked_for_if_none_match(tmp_path: Path, tls_files) -> None:
    service = await _notes(tmp_path)
    fetches = count_fetches(service)
    async with _over_quic(service, tls_files) as client:
        tools = Tools(LocalResolver(_OlderAuthority(client), AUTHORITY, GraphStore(None), scope="/"))  # type: ignore[arg-type]
        first = await tools.lookup(QUERY, "/notes", None, 3, "body", 600)
        again = await tools.lookup(QUERY, "/notes", None, 3, "body", 600)
        assert again == first
        assert len(fetches) == 6  # asked again, answered `not-modified`
        assert (tools.held.bodies, tools.held.unchanged, tools.held.current) == (3, 3, 0)
    service.close()


async def test_a_lookup_names_its_rows_etags_only_when_asked(tmp_path: Path) -> None:
    service = await _notes(tmp_path)
    plain = await service.lookup("/notes", QUERY, match="body")
    assert ROW_ETAGS not in plain.metadata
    asked = await service.lookup("/notes", QUERY, match="body", limit=2, row_etags=True)
    etags = parse_row_etags(asked.metadata[ROW_ETAGS])
    assert len(etags) == 2  # the documents of the two rows, no others
    for path, etag in etags.items():
        assert (await service.fetch(path)).metadata["etag"] == etag
    catalog = await service.lookup("/notes", "alpha", row_etags=True)
    assert list(parse_row_etags(catalog.metadata[ROW_ETAGS])) == ["/notes/alpha.md"]
    none = await service.lookup("/notes", "zebra", match="body", row_etags=True)
    assert ROW_ETAGS not in none.metadata  # no rows, no etags
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


async def test_callers_sharing_what_was_fetched_get_a_body_only_as_the_authority_vouches(
    tmp_path: Path, tls_files
) -> None:
    """A gateway's callers share one `HeldDocuments`: a body one fetched is not sent again
    for another who may read it, and one who may not is refused by the authority."""
    file = tmp_path / "tokens.toml"
    writer, alice, bob, carol = (auth.generate_token() for _ in range(4))
    auth.add_grant(file, "writer", writer, ["/**"], ["publish"])
    auth.add_grant(file, "alice", alice, ["/notes/**"], ["read"])
    auth.add_grant(file, "bob", bob, ["/notes/**"], ["read"])
    auth.add_grant(file, "carol", carol, ["/notes/alpha.md", "/notes/beta.md"], ["read"])
    (tmp_path / "store").mkdir()
    service = Service.open(tmp_path / "store", tokens=file)
    for name in ("alpha", "beta", "gamma"):
        body = f"# {name.title()}\n\n## Lease\n\nThe {name} lease heartbeat interval is 5 s.\n"
        (await service.publish(f"/notes/{name}.md", body, token=writer)).raise_for_status()
    fetches = count_fetches(service)
    shared = HeldDocuments()
    async with _over_quic(service, tls_files) as client:

        def tools(token: str) -> Tools:
            return Tools(LocalResolver(client, AUTHORITY, GraphStore(None), token=token, scope="/"), shared)

        first = await tools(alice).lookup(QUERY, "/notes", None, 3, "body", 600)
        assert shared.bodies == 3 and len(fetches) == 3
        again = await tools(bob).lookup(QUERY, "/notes", None, 3, "body", 600)
        assert again == first  # the same rows, printed from what alice's lookup fetched
        assert (shared.bodies, shared.current, len(fetches)) == (3, 3, 3)  # bob's lookup named the etags

        assert "gamma" not in await tools(carol).lookup(QUERY, "/notes", None, 3, "body", 600)
        fetch = tools(carol)._fetcher()  # asked for gamma, held for the others: carol is refused
        with pytest.raises(DemarkusError):
            await fetch("/notes/gamma.md")
        assert fetches[-1] == "/notes/gamma.md" and shared.bodies == 3
    service.close()

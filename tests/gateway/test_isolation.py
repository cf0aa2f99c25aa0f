"""Isolation: Alice and Bob each have a private world and share one; Alice's documents
relate to Bob's and Bob's to Alice's. Across every read tool, budgeted expansion included,
no response reveals anything of the other's private world, none misses the caller's own
sources, and every upstream request carries the calling caller's own token."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from demarkus import auth
from demarkus.backend import VerbMethods
from demarkus.gateway import create_app
from demarkus.protocol import Request, Response
from demarkus.service import Service

from ..conftest import call
from .conftest import BASE, make_config, serving, session

ALICE, BOB, EXPIRED = auth.generate_token(), auth.generate_token(), auth.generate_token()
ALICE_SHARED, BOB_SHARED = "alice-shared-capability", "bob-shared-capability"
ALICE_PRIVATE, BOB_PRIVATE = "alice-private-capability", "bob-private-capability"

ALICE_SECRETS = ("zebracorn", "narwhal", "alice-private/notes/todo", "Alice's plan")
"""Text only Alice's scope can produce: her private bodies, titles and paths, her shared area's text."""
BOB_SECRETS = ("quokkafish", "axolotl", "bob-private/journal", "Bob's journal")

DOCUMENTS: dict[str, dict[str, tuple[str, dict[str, str]]]] = {
    "alice-private": {
        "/notes/plan.md": (
            "# Alice's plan\n\nThe zebracorn rollout follows the shared protocol; see [the protocol]"
            "(mark://shared/specs/protocol.md#leases) and [Bob's profile](mark://bob-private/profile.md).\n\n"
            "## Steps\n\nStep one of the zebracorn protocol plan: renew leases.\n",
            {
                "title": "Alice's plan",
                "tags": "protocol,plan",
                "importance": "0.9",
                "rel-depends-on": "/notes/todo.md, mark://shared/specs/protocol.md",
                "rel-related": "mark://bob-private/profile.md",
            },
        ),
        "/notes/todo.md": (
            "# Todo\n\nZebracorn todo: review the protocol lease timings.\n",
            {"title": "Zebracorn todo", "tags": "protocol,todo", "importance": "0.5"},
        ),
    },
    "bob-private": {
        "/journal.md": (
            "# Bob's journal\n\nQuokkafish notes on the protocol: leases renew too often. "
            "Compare [the other plan](mark://alice-private/notes/plan.md).\n",
            {
                "title": "Bob's journal",
                "tags": "protocol,journal",
                "importance": "0.9",
                "rel-supersedes": "mark://alice-private/notes/plan.md",
                "rel-depends-on": "/profile.md, mark://shared/specs/protocol.md",
            },
        ),
        "/profile.md": (
            "# Profile\n\nQuokkafish keeper, protocol reviewer.\n",
            {"title": "Quokkafish profile", "tags": "protocol,profile", "importance": "0.4"},
        ),
    },
    "shared": {
        "/specs/protocol.md": (
            "# Protocol\n\nThe shared protocol for every team.\n\n## Leases\n\nA protocol lease lasts 45 seconds.\n",
            {"title": "Protocol", "tags": "protocol,spec", "importance": "0.8"},
        ),
        "/alice-area/notes.md": (
            "# Narwhal notes\n\nNarwhal protocol notes, see [the protocol](/specs/protocol.md).\n",
            {
                "title": "Narwhal notes",
                "tags": "protocol,notes",
                "importance": "0.6",
                "rel-derived-from": "/specs/protocol.md",
            },
        ),
        "/bob-area/notes.md": (
            "# Axolotl notes\n\nAxolotl protocol notes, see [the protocol](/specs/protocol.md).\n",
            {
                "title": "Axolotl notes",
                "tags": "protocol,notes",
                "importance": "0.6",
                "rel-derived-from": "/specs/protocol.md",
            },
        ),
    },
}


class Recording(VerbMethods):
    """A backend that remembers the token of every request it answers."""

    def __init__(self, inner: Service) -> None:
        self.inner = inner
        self.seen: list[tuple[str, str, str | None]] = []

    async def request(self, request: Request) -> Response:
        self.seen.append((request.verb.value, request.path, request.metadata.get("auth")))
        return await self.inner.request(request)


@dataclass
class Worlds:
    roots: dict[str, Path]
    tokens: Path
    backends: dict[str, Recording] = field(default_factory=dict)


@pytest.fixture
def worlds(tmp_path: Path) -> Worlds:
    tokens = tmp_path / "shared-tokens.toml"
    auth.add_grant(tokens, "alice", ALICE_SHARED, ["/alice-area/**"], ["read"])
    auth.add_grant(tokens, "bob", BOB_SHARED, ["/bob-area/**"], ["read"])
    roots: dict[str, Path] = {}
    for world, docs in DOCUMENTS.items():
        root = roots[world] = tmp_path / world
        root.mkdir()
        service = Service.open(root, trusted=True)
        for path, (body, metadata) in docs.items():
            asyncio.run(service.publish(path, body, metadata=metadata, expected_version=0)).raise_for_status()
        service.close()
    found = Worlds(roots, tokens)
    for world, root in roots.items():
        found.backends[world] = Recording(
            Service.open(root, tokens=tokens if world == "shared" else None, trusted=world != "shared")
        )
    return found


def config_for(worlds: Worlds, **gateway: object):  # type: ignore[no-untyped-def]
    return make_config(
        {
            "alice-private": {"root": worlds.roots["alice-private"]},
            "bob-private": {"root": worlds.roots["bob-private"]},
            "shared": {"root": worlds.roots["shared"], "tokens": worlds.tokens},
        },
        {
            "alice": {
                "token": ALICE,
                "read": ["alice-private", "shared"],
                "write": ["alice-private"],
                "upstream": {"alice-private": ALICE_PRIVATE, "shared": ALICE_SHARED},
            },
            "bob": {
                "token": BOB,
                "read": ["bob-private", "shared"],
                "upstream": {"bob-private": BOB_PRIVATE, "shared": BOB_SHARED},
            },
            "carol": {"token": EXPIRED, "read": ["shared"], "expires": "2020-01-01T00:00:00Z"},
        },
        **gateway,
    )


def script(own: str, other: str) -> list[tuple[str, dict[str, object]]]:
    """The calls one caller makes: every read tool, on its own, the shared and the other's world."""
    mine = f"mark://{own}-private"
    home = "/notes/plan.md" if own == "alice" else "/journal.md"
    return [
        ("mark_worlds", {}),
        ("mark_fetch", {"url": f"{mine}{home}"}),
        ("mark_explore", {"url": f"{mine}{home}"}),
        ("mark_fetch", {"url": f"mark://shared/{own}-area/notes.md"}),
        ("mark_explore", {"url": "mark://shared/specs/protocol.md"}),
        ("mark_backlinks", {"url": "mark://shared/specs/protocol.md"}),
        ("mark_backlinks", {"url": f"{mine}{home}"}),
        ("mark_lookup", {"query": "protocol", "url": f"{mine}/", "budget": 3000}),
        ("mark_lookup", {"query": "protocol notes", "url": "mark://shared/", "match": "body", "budget": 3000}),
        ("mark_lookup_all", {"query": "protocol", "limit": 20}),
        ("mark_lookup_all", {"query": "protocol", "match": "body", "budget": 4000}),
        ("mark_list", {"url": "mark://shared/"}),
        ("mark_list", {"url": f"mark://shared/{other}-area/"}),
        ("mark_fetch", {"url": f"mark://shared/{other}-area/notes.md"}),
        # the other's private world: every tool refuses
        ("mark_fetch", {"url": f"mark://{other}-private/profile.md"}),
        ("mark_explore", {"url": f"mark://{other}-private/notes/plan.md"}),
        ("mark_backlinks", {"url": f"mark://{other}-private/journal.md"}),
        ("mark_lookup", {"query": "protocol", "url": f"mark://{other}-private/", "budget": 2000}),
        ("mark_versions", {"url": f"mark://{other}-private/journal.md"}),
        ("mark_list", {"url": f"mark://{other}-private/"}),
        ("mark_fetch", {"url": "mark://nowhere/x.md"}),
    ]


REFUSED_FROM = 14
"""Index of the first call that names the other's private world (or an unknown one)."""


async def run_script(app, token: str, own: str, other: str) -> list[tuple[str, bool]]:  # type: ignore[no-untyped-def]
    async with session(app, token, mode="legacy") as client:
        return [await call(client, tool, **args) for tool, args in script(own, other)]


def check_caller(texts: list[tuple[str, bool]], own: str, other: str) -> None:
    secrets = BOB_SECRETS if own == "alice" else ALICE_SECRETS
    leaks = [(i, s) for i, (text, _) in enumerate(texts) for s in secrets if s.lower() in text.lower()]
    assert leaks == []
    # the other's read-protected area of the shared world is named only by the shared
    # world's own listing (the authority lists folders) and where the caller named it itself
    assert [i for i, (text, _) in enumerate(texts) if f"{other}-area" in text] == [11, 12, 13]
    for index, (text, is_error) in enumerate(texts):
        if index >= REFUSED_FROM:
            assert is_error, text
            assert "is not one of your worlds" in text
    assert [i for i, (_, err) in enumerate(texts[:REFUSED_FROM]) if err] == []
    other_area_list, other_area_fetch = texts[12][0], texts[13][0]
    assert "notes.md" not in other_area_list
    assert other_area_fetch.startswith("status: not-permitted")
    mine = f"mark://{own}-private"
    home = f"{mine}/notes/plan.md" if own == "alice" else f"{mine}/journal.md"
    (
        worlds,
        fetched,
        explored,
        area,
        spec_card,
        spec_back,
        home_back,
        lookup,
        shared_lookup,
        all_rows,
        all_budget,
        listing,
        other_list,
    ) = (t for t, _ in texts[:13])
    assert f"{mine}/" in worlds and "mark://shared/" in worlds and f"{other}-private" not in worlds
    own_marker = "zebracorn" if own == "alice" else "quokkafish"
    area_marker = "narwhal" if own == "alice" else "axolotl"
    assert own_marker in fetched.lower()
    assert area_marker in area.lower()
    # own sources: backlinks and incoming relations of the shared spec name both own documents
    for card in (spec_card, spec_back):
        assert home in card and f"mark://shared/{own}-area/notes.md" in card
    # the expansion printed own evidence, related hop included (same world only)
    assert f">>> {home}" in lookup and own_marker in lookup.lower()
    if own == "alice":
        assert ">>> mark://alice-private/notes/todo.md" in lookup  # depends-on, one hop
        assert "mark://bob-private/profile.md" in fetched  # her own document's relation keeps its line
    assert f">>> mark://shared/{own}-area/notes.md" in shared_lookup and area_marker in shared_lookup.lower()
    for rows in (all_rows, all_budget):
        assert (
            f"| {home}" in rows
            and f"| mark://shared/{own}-area/notes.md" in rows
            and "| mark://shared/specs/protocol.md" in rows
        )
        assert "failed: 0" in rows
    assert f">>> {home}" in all_budget
    assert f"{own}-area" in listing
    assert "status: ok" in home_back or "No backlinks" in home_back


def check_upstream_tokens(worlds: Worlds) -> None:
    """Every upstream request carried a token of its world's own callers, never another's."""
    expected = {"alice-private": {ALICE_PRIVATE}, "bob-private": {BOB_PRIVATE}, "shared": {ALICE_SHARED, BOB_SHARED}}
    for world, backend in worlds.backends.items():
        assert backend.seen, world
        assert {token for _, _, token in backend.seen} <= expected[world], world


async def test_callers_see_their_own_worlds_and_nothing_of_each_others(worlds: Worlds):
    app = create_app(config_for(worlds), backends=worlds.backends)
    async with serving(app):
        # Bob first, so his graph holds edges into Alice's world before she explores.
        bob_first = await run_script(app, BOB, "bob", "alice")
        alice = await run_script(app, ALICE, "alice", "bob")
        bob = await run_script(app, BOB, "bob", "alice")
    check_caller(alice, "alice", "bob")
    check_caller(bob_first, "bob", "alice")
    check_caller(bob, "bob", "alice")
    check_upstream_tokens(worlds)
    # Bob's journal supersedes Alice's plan: Bob's explore of it (refused) and Alice's own
    # explore card never show that edge, which only Bob's graph holds.
    assert "journal" not in alice[2][0]


async def test_an_escaped_path_names_what_its_decoded_path_names_and_widens_nothing(worlds: Worlds):
    app = create_app(config_for(worlds), backends=worlds.backends)
    async with serving(app):
        async with session(app, ALICE, mode="legacy") as client:
            plain = await call(client, "mark_fetch", url="mark://shared/alice-area/notes.md")
            escaped = await call(client, "mark_fetch", url="mark://shared/alice%2Darea/notes%2Emd", force=True)
            other = await call(client, "mark_fetch", url="mark://shared/bob%2Darea/notes.md")
            other_plain = await call(client, "mark_fetch", url="mark://shared/bob-area/notes.md")
            climbed = await call(client, "mark_fetch", url="mark://shared/alice-area/%2E%2E/bob-area/notes.md")
    assert not plain[1] and escaped == plain
    assert other == other_plain and other[0].startswith("status: not-permitted")  # as the plain path is
    assert climbed[1] and "`..`" in climbed[0]
    assert not any(s.lower() in text.lower() for text, _ in (other, climbed) for s in BOB_SECRETS)


async def test_concurrent_callers_stay_apart(worlds: Worlds):
    app = create_app(config_for(worlds), backends=worlds.backends)
    async with serving(app):
        runs = await asyncio.gather(
            *(
                run_script(app, token, own, other)
                for token, own, other in [(ALICE, "alice", "bob"), (BOB, "bob", "alice")] * 3
            )
        )
    for texts, own, other in zip(runs, ["alice", "bob"] * 3, ["bob", "alice"] * 3, strict=True):
        check_caller(texts, own, other)
    check_upstream_tokens(worlds)


async def test_writes_go_only_where_the_caller_may_write(worlds: Worlds):
    app = create_app(config_for(worlds), backends=worlds.backends)
    async with serving(app):
        async with session(app, ALICE) as alice:
            created, err = await call(
                alice, "mark_publish", url="mark://alice-private/notes/new.md", body="# New\n", expected_version=0
            )
            assert not err and created.startswith("status: created"), created
            refused, err = await call(
                alice, "mark_publish", url="mark://shared/specs/new.md", body="# New\n", expected_version=0
            )
            assert not err and refused.startswith("status: not-permitted") and "read-only for you" in refused
            appended, err = await call(alice, "mark_append", url="mark://shared/specs/protocol.md", body="more\n")
            assert appended.startswith("status: not-permitted")
        async with session(app, BOB) as bob:
            text, err = await call(bob, "mark_publish", url="mark://alice-private/notes/evil.md", body="# x\n")
            assert err and "is not one of your worlds" in text
    assert [p for verb, p, _ in worlds.backends["shared"].seen if verb in ("PUBLISH", "APPEND")] == []


async def test_a_document_named_with_a_hash_is_printed_escaped_and_read_back_as_printed(worlds: Worlds):
    """`C#.md` in a world: a lookup's rows and evidence name it `mark://<world>/.../C%23.md`,
    which a fetch passed back reads, where `C#.md` would name a section of `C`."""
    app = create_app(config_for(worlds), backends=worlds.backends)
    body = "# C sharp\n\n## Usage\n\nThe zebrafish compiler runs here.\n"
    async with serving(app):
        async with session(app, ALICE) as alice:
            created, err = await call(alice, "mark_publish", url="mark://alice-private/notes/C%23.md", body=body)
            assert not err and created.startswith("status: created"), created
            page, err = await call(
                alice, "mark_lookup", query="zebrafish compiler", url="mark://alice-private/", match="body", budget=600
            )
            assert not err and "| mark://alice-private/notes/C%23.md#usage |" in page, page
            assert ">>> mark://alice-private/notes/C%23.md/v1#usage\n\n## Usage\n" in page, page
            text, err = await call(alice, "mark_fetch", url="mark://alice-private/notes/C%23.md/v1#usage")
            assert not err and "The zebrafish compiler runs here." in text, text


# --- bearer tokens ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers, error",
    [
        ({}, None),
        ({"Authorization": "Bearer not-a-known-token"}, "invalid_token"),
        ({"Authorization": f"Basic {ALICE}"}, None),
        ({"Authorization": f"Bearer {EXPIRED}"}, "invalid_token"),
    ],
    ids=["missing", "wrong", "not-bearer", "expired"],
)
@pytest.mark.parametrize("path", ["/mcp/", "/mcp"])
async def test_requests_without_a_valid_bearer_token_get_401_with_a_challenge(
    worlds: Worlds, headers, error, path, caplog
):
    app = create_app(config_for(worlds), backends=worlds.backends)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    caplog.set_level(logging.INFO, logger="demarkus.gateway.access")
    async with serving(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
            answer = await http.post(
                path, json=body, headers={**headers, "Accept": "application/json, text/event-stream"}
            )
            health = await http.get("/healthz")
    assert answer.status_code == 401
    challenge = answer.headers["WWW-Authenticate"]
    assert challenge.startswith('Bearer realm="demarkus"')
    assert (f'error="{error}"' in challenge) if error else ("error=" not in challenge)
    assert health.status_code == 200
    # counts only, no world names: this request has no valid token
    assert health.json() == {"status": "ok", "worlds": {"up": 3, "down": 0, "unknown": 0}}
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "demarkus.gateway.access"]
    assert [line["status"] for line in lines] == [401]
    assert ALICE not in caplog.text and EXPIRED not in caplog.text


async def test_a_valid_token_is_refused_on_a_session_opened_by_another_caller(worlds: Worlds):
    app = create_app(config_for(worlds), backends=worlds.backends)
    async with serving(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
            accept = {"Accept": "application/json, text/event-stream"}
            opened = await http.post(
                "/mcp/",
                headers={**accept, "Authorization": f"Bearer {ALICE}"},
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"},
                    },
                },
            )
            assert opened.status_code == 200
            sid = opened.headers["mcp-session-id"]
            stolen = await http.post(
                "/mcp/",
                headers={
                    **accept,
                    "Authorization": f"Bearer {BOB}",
                    "mcp-session-id": sid,
                    "mcp-protocol-version": "2025-11-25",
                },
                json={"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
            )
    assert stolen.status_code == 404


# --- the access log -----------------------------------------------------------------------


async def test_the_access_log_names_caller_tool_world_and_status_without_text_or_tokens(worlds: Worlds, caplog):
    caplog.set_level(logging.INFO, logger="demarkus.gateway.access")
    app = create_app(config_for(worlds), backends=worlds.backends)
    async with serving(app):
        async with session(app, ALICE) as alice:
            await call(alice, "mark_fetch", url="mark://alice-private/notes/plan.md")
            await call(alice, "mark_lookup", query="zebracorn protocol", url="mark://alice-private/", budget=2000)
            await call(alice, "mark_fetch", url="mark://bob-private/journal.md")
            await call(alice, "mark_lookup_all", query="protocol")
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "demarkus.gateway.access"]
    assert [(line["caller"], line["tool"], line["world"], line["status"]) for line in lines] == [
        ("alice", "mark_fetch", "alice-private", "ok"),
        ("alice", "mark_lookup", "alice-private", "ok"),
        ("alice", "mark_fetch", "bob-private", "error"),
        ("alice", "mark_lookup_all", "*", "ok"),
    ]
    assert all(set(line) == {"ts", "event", "caller", "tool", "world", "status", "ms"} for line in lines)
    text = caplog.text
    for secret in (ALICE, ALICE_SHARED, ALICE_PRIVATE, "zebracorn", "notes/plan.md", "Alice's plan"):
        assert secret not in text


def test_documents_fixture_shapes_the_leak_checks():
    # The secrets only appear where their owner's scope can read them.
    everything: Mapping[str, str] = {
        f"{world}{path}": body + json.dumps(meta)
        for world, docs in DOCUMENTS.items()
        for path, (body, meta) in docs.items()
    }
    for name, text in everything.items():
        owner = (
            "alice"
            if name.startswith("alice-private") or "alice-area" in name
            else "bob"
            if name.startswith("bob-private") or "bob-area" in name
            else ""
        )
        foreign = BOB_SECRETS if owner == "alice" else ALICE_SECRETS if owner == "bob" else ALICE_SECRETS + BOB_SECRETS
        assert not [s for s in foreign if s in text], name


async def test_no_spelling_of_a_path_reads_past_the_callers_upstream_token(worlds: Worlds, tls_files):
    """Item 1 through the gateway: the shared world served by a real QUIC authority; Alice's
    upstream token reads /alice-area/** only, however she spells Bob's path."""
    from demarkus.server.quic import serve_mark

    cert, key = tls_files
    async with serve_mark(
        Service.open(worlds.roots["shared"], tokens=worlds.tokens, writable=False), port=0, cert=cert, key=key
    ) as authority:
        config = make_config(
            {"shared": {"authority": f"mark://localhost:{authority.port}", "ca": cert, "dial": "127.0.0.1"}},
            {"alice": {"token": ALICE, "read": ["shared"], "upstream": {"shared": ALICE_SHARED}}},
        )
        async with serving(create_app(config)) as app, session(app, ALICE) as alice:
            own, _ = await call(alice, "mark_fetch", url="mark://shared//alice-area//notes.md/")
            assert "narwhal" in own.lower()
            for spelled in (
                "mark://shared//bob-area/notes.md",
                "mark://shared///bob-area///notes.md/",
                "mark://shared//bob-area/notes.md/v1",
            ):
                for tool in ("mark_fetch", "mark_versions", "mark_explore"):
                    text, _ = await call(alice, tool, url=spelled)
                    assert "axolotl" not in text.lower(), (tool, spelled, text)
            listing, _ = await call(alice, "mark_list", url="mark://shared//bob-area//")
            assert "notes.md" not in listing

"""The `hidden:` line of mark_lookup (budgeted too) and mark_list, through the SDK's
in-memory client over a service with read grants: a count and what to pass, never a path
or a title of what was left out."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from demarkus import auth
from demarkus.graph import GraphStore
from demarkus.mcp.server import LocalResolver, build_server
from demarkus.mcp.tools import Tools
from demarkus.service import Service

from ..conftest import call

READER = "reader-capability"
SECRETS = ("Quarterly plan", "plan.md", "team", "The secret plan")
DOCS = {
    "/guide.md": ("# Guide\n\nThe public plan guide.\n", "Guide"),
    "/private/plan.md": ("# Quarterly plan\n\nThe secret plan.\n", "Quarterly plan"),
    "/private/team/plan.md": ("# Team plan\n\nThe secret plan of the team.\n", "Team plan"),
}


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    tokens, root = tmp_path / "tokens.toml", tmp_path / "store"
    root.mkdir()
    auth.add_grant(tokens, "writer", "writer-capability", ["/**"], ["publish"])
    auth.add_grant(tokens, "reader", READER, ["/private/**"], ["read"])
    opened = Service.open(root, tokens=tokens)
    for path, (body, title) in DOCS.items():
        published = opened.publish(path, body, metadata={"title": title, "tags": "plan"}, token="writer-capability")
        asyncio.run(published).raise_for_status()
    yield opened
    opened.close()


def server_for(service: Service, token: str | None):  # type: ignore[no-untyped-def]
    tools = Tools(LocalResolver(service, "mark://test.world", GraphStore(None), token=token))
    return build_server(lambda: tools)


async def test_mark_lookup_and_mark_list_say_what_was_hidden(service: Service):
    async with Client(server_for(service, None)) as client:
        found, failed = await call(client, "mark_lookup", query="plan")
        assert not failed
        assert found.startswith(
            "status: ok\nmatches: 1\nhidden: 2 documents under / need a read token; pass --token (or DEMARKUS_AUTH)\n\n"
        )
        body, _ = await call(client, "mark_lookup", query="secret plan", match="body", budget=600)
        assert "\nhidden: 2 documents under / need a read token; pass --token (or DEMARKUS_AUTH)\n" in body
        assert ">>> /guide.md" in body
        verbose, _ = await call(client, "mark_lookup", query="plan", verbose=True)
        assert verbose.count("hidden:") == 1  # the words, not the bare count as well
        listed, _ = await call(client, "mark_list", url="/private")
        assert listed == (
            "status: ok\nentries: 0\ncomplete: true\n"
            "hidden: 2 entries of /private need a read token; pass --token (or DEMARKUS_AUTH)\n\n"
            "# Index of /private/\n\n"
        )
        for text in (found, body, verbose, listed):
            assert not [s for s in SECRETS if s in text], text


async def test_with_a_read_token_every_row_is_there_and_no_hidden_line(service: Service):
    async with Client(server_for(service, READER)) as client:
        found, _ = await call(client, "mark_lookup", query="plan")
        assert "hidden" not in found and "| /private/team/plan.md |" in found
        body, _ = await call(client, "mark_lookup", query="secret plan", match="body", budget=600)
        assert "hidden" not in body and ">>> /private/plan.md" in body
        listed, _ = await call(client, "mark_list", url="/private")
        assert "hidden" not in listed and "plan.md" in listed

"""The gateway passes on how many rows a world left out for lack of a read token: mark_lookup,
mark_list and mark_lookup_all print a `hidden:` line that tells the caller whom to ask, and
nothing of what was hidden."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from demarkus import auth
from demarkus.gateway import create_app
from demarkus.service import Service

from ..conftest import call
from .conftest import make_config, serving, session

ANNE, BEN = auth.generate_token(), auth.generate_token()
ANNE_UPSTREAM = "anne-reads-private"
ADVICE = "ask the gateway's operator to give your caller entry a read token for that world"


@pytest.fixture
def app(tmp_path: Path):  # type: ignore[no-untyped-def]
    tokens = tmp_path / "tokens.toml"
    auth.add_grant(tokens, "anne", ANNE_UPSTREAM, ["/private/**"], ["read"])
    roots = {"docs": tmp_path / "docs", "open": tmp_path / "open"}
    for world, root in roots.items():
        root.mkdir()
        service = Service.open(root, trusted=True)
        for path in ("/guide.md", "/private/plan.md", "/private/team/plan.md"):
            body = f"# Plan {world}{path}\n\nThe plan.\n"
            asyncio.run(service.publish(path, body, metadata={"tags": "plan"})).raise_for_status()
        service.close()
    config = make_config(
        {"docs": {"root": roots["docs"], "tokens": tokens}, "open": {"root": roots["open"]}},
        {
            "anne": {"token": ANNE, "read": ["docs", "open"], "upstream": {"docs": ANNE_UPSTREAM}},
            "ben": {"token": BEN, "read": ["docs", "open"]},
        },
    )
    return create_app(config)


async def test_a_caller_without_the_read_token_is_told_how_many_and_whom_to_ask(app):  # type: ignore[no-untyped-def]
    async with serving(app), session(app, BEN) as ben:
        found, failed = await call(ben, "mark_lookup", query="plan", url="mark://docs/")
        assert not failed
        assert f"\nhidden: 2 documents under mark://docs/ need a read token; {ADVICE}\n" in found
        assert "private" not in found
        listed, _ = await call(ben, "mark_list", url="mark://docs/private")
        assert f"\nhidden: 2 entries of mark://docs/private need a read token; {ADVICE}\n" in listed
        merged, _ = await call(ben, "mark_lookup_all", query="plan", budget=800)
        assert f"\nhidden: 2 documents under / in docs need a read token; {ADVICE}\n" in merged
        assert "mark://docs/private" not in merged and "mark://open/private/plan.md" in merged
        open_world, _ = await call(ben, "mark_lookup", query="plan", url="mark://open/")
        assert "hidden" not in open_world


async def test_a_caller_whose_upstream_token_reads_it_sees_every_row_and_no_line(app):  # type: ignore[no-untyped-def]
    async with serving(app), session(app, ANNE) as anne:
        found, _ = await call(anne, "mark_lookup", query="plan", url="mark://docs/")
        assert "hidden" not in found and "mark://docs/private/team/plan.md" in found
        merged, _ = await call(anne, "mark_lookup_all", query="plan")
        assert "hidden" not in merged

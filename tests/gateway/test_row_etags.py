"""Through the gateway, a caller's second budgeted lookup of the same rows asks its world
for no document: the lookup's answer names the etags of the rows' documents and of those
they relate to, and the session holds them. Both mark_lookup and mark_lookup_all; a row's
document changed in between is asked for again, and only it."""

from __future__ import annotations

from pathlib import Path

from demarkus import auth
from demarkus.gateway import create_app
from demarkus.service import Service

from ..conftest import call, count_fetches
from .conftest import fresh_copy, make_config, serving, session

TOKEN = auth.generate_token()
ARGUMENTS = {"query": "snapshot quorum", "match": "body", "limit": 3, "budget": 1500}


def _row_documents(text: str) -> set[str]:
    """The documents of a lookup table's rows, as the world names them."""
    return {
        line.split("|")[1].strip().removeprefix("mark://demo").partition("#")[0]
        for line in text.splitlines()
        if line.startswith("| mark://demo/")
    }


async def test_a_repeated_budgeted_lookup_asks_the_world_for_no_document(demo_root: Path, tmp_path: Path) -> None:
    root = fresh_copy(demo_root, tmp_path)
    service = Service.open(root, trusted=True)
    fetches = count_fetches(service)
    config = make_config({"demo": {"root": root}}, {"agent": {"token": TOKEN, "read": ["demo"]}})
    try:
        async with (
            serving(create_app(config, backends={"demo": service})) as app,
            session(app, TOKEN, mode="legacy") as client,
        ):
            for tool, arguments in (
                ("mark_lookup", {**ARGUMENTS, "url": "mark://demo/"}),
                ("mark_lookup_all", ARGUMENTS),
            ):
                first, error = await call(client, tool, **arguments)
                assert not error and ">>> mark://demo/" in first, first
                asked = len(fetches)
                assert asked > 0
                again, _ = await call(client, tool, **arguments)
                assert again == first
                assert fetches[asked:] == [], tool  # the rows' documents and the related one

            changed = fetches[0]
            current = service.store.read(changed)
            (await service.publish(changed, current.body + b"\nOne more line.\n")).raise_for_status()
            asked = len(fetches)
            text, _ = await call(client, "mark_lookup", **{**ARGUMENTS, "url": "mark://demo/"})
            assert changed in _row_documents(text)
            assert fetches[asked:] == [changed]
    finally:
        service.close()

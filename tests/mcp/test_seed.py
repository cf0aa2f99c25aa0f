"""The tools' graph learns what an authority publishes at `/graph.md`: `mark_explore` and
`mark_backlinks` name documents linking to one that this session never read, asking for
the export once an interval, and answering as before when there is none."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from demarkus.errors import TransportError
from demarkus.graph import GraphStore
from demarkus.mcp import tools as tools_module
from demarkus.mcp.server import LocalResolver
from demarkus.mcp.tools import Tools
from demarkus.protocol import Request, Response, Status, Verb
from demarkus.service import Service

from ..conftest import AUTHORITY

OLD = "/decisions/adr-0003-sqlite-job-store.md"
NEWER = "/decisions/adr-0007-segment-log.md"
"""As the local server names it: a bare path, whatever the authority's address."""


@pytest.fixture
def service(demo_root: Path) -> Iterator[Service]:
    opened = Service.open(demo_root, writable=False)
    yield opened
    opened.close()


def answered(service: Service) -> list[tuple[str, str, str]]:
    """(path, if-none-match, status) of every FETCH `service` answers from now on."""
    seen: list[tuple[str, str, str]] = []
    handle = service.handle

    def counted(request: Request) -> Response:
        response = handle(request)
        if request.verb == Verb.FETCH:
            seen.append((request.path, request.metadata.get("if-none-match", ""), response.status))
        return response

    service.handle = counted  # type: ignore[method-assign]
    return seen


def tools_over(backend: Any) -> Tools:
    return Tools(LocalResolver(backend, AUTHORITY, GraphStore(None), scope="/"))


async def test_backlinks_name_a_document_this_session_never_read(service: Service):
    tools = tools_over(service)
    found = await tools.backlinks(OLD)
    assert found.startswith(f"Backlinks for {OLD} (")
    assert f"[ADR-0007: Append-only segment log]({NEWER}) [supersedes]" in found
    card = await tools.explore(OLD, direction="incoming")
    assert f"- [ADR-0007: Append-only segment log]({NEWER})\n" in card
    assert f"  - incoming [supersedes]; [source]({NEWER})\n" in card


async def test_the_export_is_asked_for_once_an_interval_then_only_if_changed(
    service: Service, monkeypatch: pytest.MonkeyPatch
):
    fetches = answered(service)
    tools = tools_over(service)
    await tools.explore(OLD)
    await tools.backlinks(OLD)
    await tools.explore("/decisions/adr-0007-segment-log.md")
    exports = [f for f in fetches if f[0] == "/graph.md"]
    assert len(exports) == 1 and exports[0][1:] == ("", "ok")
    monkeypatch.setattr(tools_module, "SEED_INTERVAL", 0.0)
    await tools.backlinks(OLD)
    again = [f for f in fetches if f[0] == "/graph.md"][1]
    assert again[1] and again[2] == "not-modified"  # the etag taken in last, and no body


class _Older:
    """An authority that publishes no export (as v0.1.0), or whose /graph.md fails."""

    def __init__(self, service: Service, answer: Response | None) -> None:
        self._service = service
        self._answer = answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._service, name)

    async def fetch(self, path: str, **kwargs: Any) -> Response:
        if path != "/graph.md":
            return await self._service.fetch(path, **kwargs)
        if self._answer is None:
            raise TransportError("the authority did not answer in time; try again")
        return self._answer


@pytest.mark.parametrize(
    "answer",
    [
        Response(Status.NOT_FOUND, {}, b"no document at /graph.md"),
        Response(Status.OK, {}, b"# Graph theory\n\n| From | To |\n"),  # a note of that name
        None,
    ],
    ids=["not-found", "a-note-of-that-name", "unavailable"],
)
async def test_without_an_export_the_graph_holds_what_the_session_read(service: Service, answer: Response | None):
    tools = tools_over(_Older(service, answer))
    assert (await tools.backlinks(OLD)).startswith("No backlinks found")
    await tools.fetch("/decisions/adr-0007-segment-log.md")
    assert NEWER in await tools.backlinks(OLD)

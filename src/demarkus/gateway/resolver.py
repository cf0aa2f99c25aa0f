"""One caller's worlds: `mark://<world>/<path>` tool URLs resolved to that world's backend,
with that caller's upstream token, and refused for any world the caller cannot read.

Every upstream request made on a caller's behalf (tool calls, lookup expansion, related
documents, explore's sibling listing) goes through `GatewayResolver.resolve`, so scope
never widens: the request carries the caller's own token for that world, and a world
outside the caller's read list cannot be named at all (an unknown world gets the same
answer, so a refusal does not reveal which worlds exist).

The relation graph is one in-memory store per caller, across that caller's worlds: edges
learned for one caller are never shown to another, and a caller's own documents in one
world show up in the backlinks of the documents they relate to in another. Node identity
is `mark://<world><path>`, the URL the tools print. A relation into a world the caller
cannot read keeps its line (explore, backlinks, expansion) and is never fetched.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from ..backend import VerbMethods
from ..errors import BadRequestError, NotPermittedError
from ..graph import GraphStore
from ..mcp.tools import Target
from ..protocol import (
    WRITE_VERBS,
    Request,
    Response,
    linked_path,
    parse_mark_url,
    response_for_error,
    unbracketed,
)
from ..render import written_path
from .config import WORLD_NAME, CallerConfig
from .qualify import SCHEME, world_of, world_prefix
from .upstream import Upstream


class ScopedBackend(VerbMethods):
    """One caller's view of one world: every request carries the caller's upstream token
    (whatever the tool passed), and writes pass only where the caller may write."""

    def __init__(self, upstream: Upstream, token: str | None, writable: bool) -> None:
        self.upstream = upstream
        self.world = upstream.world
        self._token = token
        self.writable = writable

    async def request(self, request: Request) -> Response:
        if request.verb in WRITE_VERBS and not self.writable:
            return response_for_error(
                NotPermittedError(f"world {self.world} is read-only for you; mark_worlds shows where you may write")
            )
        metadata = {k: v for k, v in request.metadata.items() if k != "auth"}
        if self._token:
            metadata["auth"] = self._token
        return await self.upstream.request(Request(request.verb, request.path, metadata, request.body))


class GatewayResolver:
    """The `Resolver` of one caller (shared by all of its sessions)."""

    token_advice = "ask the gateway's operator to give your caller entry a read token for that world"

    def __init__(self, caller: CallerConfig, upstreams: dict[str, Upstream]) -> None:
        self.caller = caller
        self.worlds: tuple[str, ...] = tuple(sorted(caller.read))
        self._backends = {
            world: ScopedBackend(upstreams[world], caller.upstream.get(world), world in caller.write)
            for world in self.worlds
        }
        self._graph = GraphStore(None)
        self.default_scope = f"{world_prefix(self.worlds[0])}/" if len(self.worlds) == 1 else ""

    def writable(self, world: str) -> bool:
        return self._backends[world].writable

    def graph(self, target: Target) -> GraphStore:
        return self._graph

    def within(self, target: Target) -> str | None:
        """No narrowing: this caller's graph holds only what this caller has read."""
        return None

    def name(self, scope: Target, path: str) -> str:
        """`mark://<world><path>`, in the world `scope` is in."""
        return world_prefix(world_of(scope.url)) + written_path(path)

    def close(self) -> None:
        self._graph.close()

    def _yours(self) -> str:
        return ", ".join(self.worlds) if self.worlds else "none"

    def resolve(self, url: str) -> Target:
        """Map `mark://<world>/<path>[#anchor]` to the world's backend and the caller's token.

        Raises:
            BadRequestError: not a world URL (bare path, port, user info, bad world name).
            NotPermittedError: a world the caller cannot read (unknown worlds answer the same).
            NotFoundError: a `..` segment.
        """
        text = unbracketed(url)
        if not text:
            raise BadRequestError(
                f"the url is empty; on the gateway name a world: mark://<world>/path (your worlds: {self._yours()}), "
                "or use mark_lookup_all to search them all"
            )
        if not text.lower().startswith(SCHEME):
            example = text if text.startswith("/") else "/" + text
            raise BadRequestError(
                f"`{text[:120]}` names no world; the gateway serves several, so write "
                f"mark://<world>{example[:120]} (your worlds: {self._yours()})"
            )
        netloc = urlsplit(text).netloc
        if "@" in netloc or ":" in netloc:
            raise BadRequestError(
                f"`{text[:120]}` has a port or user info; a world URL is mark://<world>/path, e.g. mark://{self.worlds[0] if self.worlds else 'world'}/index.md"
            )
        parsed = parse_mark_url(text)
        world = parsed.host
        if not WORLD_NAME.fullmatch(world) or world not in self._backends:
            raise NotPermittedError(
                f"world {world[:63]} is not one of your worlds; you can read: {self._yours()} (mark_worlds lists them)"
            )
        path = linked_path(parsed.path)
        location = f"{world_prefix(world)}{path}"
        backend = self._backends[world]
        shown = f"{world_prefix(world)}{written_path(path)}"
        return Target(backend, path, parsed.fragment, shown, location, self.caller.upstream.get(world))

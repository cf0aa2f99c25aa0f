"""The async `Backend` seam: every verb, implemented once by `Service` (in process) and once
by `Client` (over QUIC), so tools, expansion and evaluation run unchanged against either.

Both implement `request(Request) -> Response`; the verb methods here only build requests.
Verb methods return the authority's `Response` whatever its status: a `not-found` is an
answer, not an exception. Only a transport failure raises.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from .errors import BadRequestError
from .protocol import Request, Response, Verb, response_for_error


class Backend(Protocol):
    async def request(self, request: Request) -> Response: ...

    async def fetch(
        self,
        path: str,
        *,
        token: str | None = None,
        if_none_match: str | None = None,
        if_modified_since: str | None = None,
    ) -> Response: ...

    async def list(
        self,
        path: str,
        *,
        token: str | None = None,
        include_archived: bool = False,
        cursor: str | None = None,
        page_size: int | None = None,
    ) -> Response: ...

    async def versions(self, path: str, *, token: str | None = None) -> Response: ...

    async def publish(
        self,
        path: str,
        body: bytes | str,
        *,
        metadata: Mapping[str, str] | None = None,
        expected_version: int | None = None,
        token: str | None = None,
    ) -> Response: ...

    async def publish_history(
        self,
        path: str,
        bodies: Sequence[bytes | str],
        *,
        metadata: Mapping[str, str] | None = None,
        expected_version: int | None = None,
        token: str | None = None,
    ) -> Response: ...

    async def append(
        self,
        path: str,
        body: bytes | str,
        *,
        expected_version: int,
        token: str | None = None,
    ) -> Response: ...

    async def archive(self, path: str, *, token: str | None = None) -> Response: ...

    async def lookup(
        self,
        path: str,
        query: str,
        *,
        filter: str | None = None,
        limit: int | None = None,
        match: str | None = None,
        token: str | None = None,
        row_etags: bool = False,
    ) -> Response: ...


def _meta(token: str | None, **items: str | None) -> dict[str, str]:
    out = {k.replace("_", "-"): v for k, v in items.items() if v is not None}
    if token:
        out["auth"] = token
    return out


def publish_request(
    path: str,
    body: bytes | str,
    metadata: Mapping[str, str] | None,
    expected_version: int | None,
    token: str | None,
) -> Request:
    meta = dict(metadata or {})
    meta.update(_meta(token, expected_version=str(expected_version) if expected_version is not None else None))
    return Request(Verb.PUBLISH, path, meta, body_bytes(body))


def check_history(path: str, bodies: Sequence[bytes | str]) -> None:
    """A history to publish holds at least one version and no empty body (an empty
    PUBLISH means "unarchive", not a version).

    Raises:
        BadRequestError: it does not.
    """
    if not bodies:
        raise BadRequestError(f"the history of {path} holds no version; send the bodies oldest first")
    if not all(bodies):
        raise BadRequestError(f"a version of the history of {path} is empty; every version needs a markdown body")


def body_bytes(body: bytes | str) -> bytes:
    return body.encode("utf-8") if isinstance(body, str) else body


class VerbMethods:
    """Builds the request for each verb and hands it to `self.request`."""

    async def request(self, request: Request) -> Response:  # pragma: no cover - abstract
        raise NotImplementedError

    async def fetch(
        self,
        path: str,
        *,
        token: str | None = None,
        if_none_match: str | None = None,
        if_modified_since: str | None = None,
    ) -> Response:
        meta = _meta(token, if_none_match=if_none_match, if_modified_since=if_modified_since)
        return await self.request(Request(Verb.FETCH, path, meta))

    async def list(
        self,
        path: str,
        *,
        token: str | None = None,
        include_archived: bool = False,
        cursor: str | None = None,
        page_size: int | None = None,
    ) -> Response:
        meta = _meta(
            token,
            include_archived="true" if include_archived else None,
            cursor=cursor,
            page_size=str(page_size) if page_size is not None else None,
        )
        return await self.request(Request(Verb.LIST, path, meta))

    async def versions(self, path: str, *, token: str | None = None) -> Response:
        return await self.request(Request(Verb.VERSIONS, path, _meta(token)))

    async def publish(
        self,
        path: str,
        body: bytes | str,
        *,
        metadata: Mapping[str, str] | None = None,
        expected_version: int | None = None,
        token: str | None = None,
    ) -> Response:
        return await self.request(publish_request(path, body, metadata, expected_version, token))

    async def publish_history(
        self,
        path: str,
        bodies: Sequence[bytes | str],
        *,
        metadata: Mapping[str, str] | None = None,
        expected_version: int | None = None,
        token: str | None = None,
    ) -> Response:
        """Publish `bodies` as successive versions of `path`, oldest first, each with
        `metadata`, the first at `expected_version` and each later one at the version
        before it; the answer to the last, or to the first that is refused. Over the wire
        that is one PUBLISH per version; an embedded `Service` stores them in one write."""
        try:
            check_history(path, bodies)
        except BadRequestError as exc:
            return response_for_error(exc)
        expected = expected_version
        for body in bodies:
            response = await self.publish(path, body, metadata=metadata, expected_version=expected, token=token)
            if not response.ok:
                return response
            if expected is not None:  # the version stored (an unchanged body keeps it)
                expected = int(response.metadata.get("version", expected + 1))
        return response

    async def append(
        self,
        path: str,
        body: bytes | str,
        *,
        expected_version: int,
        token: str | None = None,
    ) -> Response:
        meta = _meta(token, expected_version=str(expected_version))
        return await self.request(Request(Verb.APPEND, path, meta, body_bytes(body)))

    async def archive(self, path: str, *, token: str | None = None) -> Response:
        return await self.request(Request(Verb.ARCHIVE, path, _meta(token)))

    async def lookup(
        self,
        path: str,
        query: str,
        *,
        filter: str | None = None,
        limit: int | None = None,
        match: str | None = None,
        token: str | None = None,
        row_etags: bool = False,
    ) -> Response:
        meta = _meta(
            token,
            query=query,
            filter=filter,
            limit=str(limit) if limit is not None and limit > 0 else None,
            match=match,
            row_etags="true" if row_etags else None,
        )
        return await self.request(Request(Verb.LOOKUP, path, meta))

"""Publish a frozen world into a store through any `Backend`, every version in order.

Loading is idempotent: each first version is published create-only, and a document the
store already holds with the same number of versions and the same current body is skipped.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from ..backend import Backend
from ..errors import ConflictError, DemarkusError
from .world import World, WorldDocument


@dataclass(frozen=True, slots=True)
class LoadReport:
    documents: int
    versions: int
    skipped: int


async def load_world(
    world: World,
    backend: Backend,
    *,
    token: str | None = None,
    progress: Callable[[int], None] | None = None,
    read: Callable[[WorldDocument], None] | None = None,
) -> LoadReport:
    """Publish every document of `world`; `read(doc)` is called as each document is read
    (before it is published), `progress(n)` after each document.

    Raises:
        DemarkusError: a publish was refused (the message names the document).
    """
    documents = versions = skipped = 0
    for doc in world.documents():
        if read is not None:
            read(doc)
        if await _already_loaded(doc, backend, token):
            skipped += 1
        else:
            versions += await _publish_versions(doc, backend, token)
            documents += 1
        if progress is not None:
            progress(1)
    return LoadReport(documents=documents, versions=versions, skipped=skipped)


async def _already_loaded(doc: WorldDocument, backend: Backend, token: str | None) -> bool:
    # the current version first: absent, it settles the question without listing every
    # version file of the folder (quadratic over a world kept in one folder)
    current = await backend.fetch(doc.path, token=token)
    if current.status == "not-found":
        return False
    history = await backend.versions(doc.path, token=token)
    history.raise_for_status()
    if int(history.metadata.get("total", "0")) != len(doc.versions):
        raise ConflictError(
            f"{doc.path} already exists with {history.metadata.get('total')} versions, but the "
            f"world has {len(doc.versions)}; load the world into an empty store"
        )
    current.raise_for_status()
    want = "sha256-" + hashlib.sha256(doc.versions[-1].encode("utf-8")).hexdigest()
    if current.metadata.get("content-hash") != want:
        raise ConflictError(f"{doc.path} already exists with different content; load the world into an empty store")
    return True


async def _publish_versions(doc: WorldDocument, backend: Backend, token: str | None) -> int:
    response = await backend.publish_history(
        doc.path, doc.versions, metadata=doc.metadata, expected_version=0, token=token
    )
    try:
        response.raise_for_status()
    except DemarkusError as exc:
        raise type(exc)(f"loading {doc.path} ({len(doc.versions)} versions): {exc.message}") from exc
    return int(response.metadata.get("version", len(doc.versions)))

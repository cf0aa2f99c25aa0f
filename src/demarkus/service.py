"""Every verb, once, over the store, the catalog and token auth. No sockets.

The QUIC server and the embedded MCP server both call `Service.handle`; the wire status
of every failure comes from the error's class (see `errors.py`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import errno
import hashlib
import logging
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from .access import HIDDEN
from .auth import Authorizer
from .backend import VerbMethods, body_bytes, check_history, publish_request
from .catalog import (
    Catalog,
    make_entry,
    parse_filter,
    parse_limit,
    query_terms,
)
from .errors import (
    ArchivedError,
    BadRequestError,
    DemarkusError,
    IntegrityError,
    NotFoundError,
    NotPermittedError,
)
from .graph.export import EXPORT_PATH
from .graph.published import PublishedGraph
from .index import Index, SectionIndex, content_words, reconcile
from .markdown import PREFERRED, parse_relations
from .protocol import (
    INFORMATIVE,
    INFORMATIVE_WORDS,
    MAX_BODY,
    MAX_INFORMATIVE_WORD,
    MAX_QUERY_TERMS,
    ROW_ETAGS,
    Request,
    Response,
    Status,
    Verb,
    encode_row_etags,
    error_response,
    normalize_scope,
    parse_count,
    publisher_metadata,
    response_for_error,
    validate_publisher_metadata,
)
from .render import ListingEntry, LookupRow, format_time, render_listing, render_lookup, render_versions
from .store import FileStore, StoredVersion, WriteResult
from .store.owner import StoreOwner, claim, held_elsewhere

log = logging.getLogger("demarkus.service")

HEALTH_BODY = b"# Health Check\n\nServer is healthy.\n"
MANIFEST_PATH = "/.well-known/agent-manifest.md"
MAX_PAGE = 1000
WORKERS = 4
"""Threads that answer the requests that may take long. SQLite and file reads release the
GIL, so a slow lookup and quick fetches overlap on two cores; more threads would only
queue behind the GIL."""
INLINE = frozenset({Verb.FETCH, Verb.LIST})
"""Verbs answered on the caller's event loop: each is bounded by one document or one
folder, and most are answered from memory in tens of microseconds, while a hop to a
worker thread costs about 300 us of CPU a request under load (`bench/quic_fetch.py`: 0.66
of the bare echo at 16 streams inline, 0.49 through the threads). LOOKUP, VERSIONS (its
chain check reads every version) and the writes (their fsyncs) go to the workers."""
INDEX_RETRY = 1.0
"""Seconds between attempts to bring a section index that failed (a full disk) back in
step: often enough to catch up soon after space returns, rarely enough to cost nothing."""
_VERSION_SEGMENT = re.compile(r"v([1-9][0-9]{0,8})")
_HASH_PATH = re.compile(r"/sha256-([0-9a-f]{64})")
_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _parse_expected(value: str | None, *, required: bool) -> int | None:
    if value is None or value == "":
        if required:
            raise BadRequestError("APPEND needs `expected-version`: the version you read (see VERSIONS `current`)")
        return None
    number = parse_count(
        "expected-version",
        value,
        "use 0 to create a new document or the current version number to update it",
    )
    if required and number < 1:
        raise BadRequestError("APPEND needs expected-version 1 or higher: the version you read")
    return number


def _parse_modified(value: str) -> datetime:
    """The version time a trusted publisher gives (an import of older history).

    Only the store's owner may date a version, through a service opened with
    `dates_versions`: from anyone else `modified` stays a reserved key and is refused. The store keeps it between the previous version's time
    and now.
    """
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BadRequestError(f"modified `{value[:40]}` is not RFC 3339; write e.g. 2026-01-31T12:00:00Z") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


INDEX_FILE = ".demarkus/index.sqlite"


def open_index(root: Path) -> SectionIndex:
    """The section index beside the store; hidden from LIST and FETCH by its dot-folder."""
    path = root / INDEX_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    return SectionIndex(path)


class Service(VerbMethods):
    """The authority's behaviour. `trusted` skips token checks, for the store's own owner.

    `handle` is safe from several threads at once: writes take one lock, reads take none
    (version files are immutable, the catalog and the section index guard themselves).
    `request`, the async seam, runs `handle` on a small pool of worker threads for every
    verb that may take long, so a slow request never stalls the event loop that serves
    everyone else. `writable=False`
    refuses every write (a reader beside the process that owns the store)."""

    def __init__(
        self,
        store: FileStore,
        authorizer: Authorizer | None = None,
        *,
        trusted: bool = False,
        clock: Callable[[], datetime] = _utcnow,
        index: Index | None = None,
        writable: bool = True,
        owner: StoreOwner | None = None,
        dates_versions: bool = False,
    ) -> None:
        self.store = store
        self.authorizer = authorizer or Authorizer(None)
        self.trusted = trusted
        self.dates_versions = trusted and dates_versions
        """Take a publisher's `modified` as the version's time (an import of older history
        by the store's owner); only a trusted service does, and only when asked to."""
        self.clock = clock
        self.catalog = Catalog()
        self.index = index
        self.graph = PublishedGraph(store)
        """The edges of the current documents, for `/graph.md`; parsed when first asked."""
        self.writable = writable
        # The claim ends with close(), or when the service is dropped without one.
        self._owner = owner
        self._release = weakref.finalize(self, owner.collected) if owner is not None else None
        self._defer_index = False
        self._lock = threading.RLock()
        self._behind: set[str] = set()
        """Documents the section index failed to take in (a full disk); retried."""
        self._retry_at = 0.0
        self._workers = ThreadPoolExecutor(WORKERS, thread_name_prefix="demarkus-service")
        """Its threads start on first use, so a service that only answers inline has none."""
        for path in store.documents():
            self._refresh_catalog(path)

    @classmethod
    def open(
        cls,
        root: Path,
        *,
        tokens: Path | None = None,
        trusted: bool = False,
        writable: bool = True,
        dates_versions: bool = False,
    ) -> Service:
        """A service over a store directory, with its section index in `root/.demarkus/`.

        A writable service claims the store (see `store.owner`); a read-only one leaves
        the index to the process that owns the store, if any.

        Raises:
            ConfigError: another process writes this store, or the token file is invalid.
            NotFoundError: `root` is not a directory.
        """
        root = Path(root)
        if not root.is_dir():
            raise NotFoundError(
                f"the store {root} does not exist; create the directory first (or pass --create to demarkus serve)"
            )
        authorizer = Authorizer(tokens) if tokens else None
        owner = claim(root) if writable else None
        try:
            store = FileStore(root)
            index = open_index(root)
            try:
                if owner is not None or not held_elsewhere(root):
                    reconcile(index, store)
            except BaseException:
                index.close()
                raise
        except BaseException:
            if owner is not None:
                owner.release()
            raise
        return cls(
            store,
            authorizer,
            trusted=trusted,
            index=index,
            writable=writable,
            owner=owner,
            dates_versions=dates_versions,
        )

    def as_owner(self) -> Service:
        """This service as the store's owner sees it: trusted, taking a publisher's
        `modified` (see `dates_versions`), sharing the same store, catalog, index and write
        lock, so what it writes is served at once. For a folder kept in sync beside the
        authority that serves it (`demarkus serve --docs`); only this one closes."""
        view = copy.copy(self)
        view.trusted = view.dates_versions = True
        view._release = None
        return view

    def close(self) -> None:
        self._workers.shutdown(wait=True)
        if self.index is not None:
            self.index.close()
        if self._release is not None and self._release.detach() is not None and self._owner is not None:
            self._owner.release()

    @contextlib.contextmanager
    def deferred_index(self) -> Iterator[None]:
        """Skip the section index during a bulk load and bring it in step once at the end
        (a world load publishes every old version; only current ones are searchable)."""
        self._defer_index = True
        try:
            yield
        finally:
            self._defer_index = False
            if self.index is not None:
                with self.index.bulk():
                    reconcile(self.index, self.store)

    # --- the seam -------------------------------------------------------------------------

    @staticmethod
    def quick(request: Request) -> bool:
        """Whether `request` is answered on the caller's loop (`INLINE`; not `/graph.md`,
        which may parse every document): a caller that may block its loop for that long
        can call `handle` directly and skip a task."""
        return request.verb in INLINE and request.path != EXPORT_PATH

    async def request(self, request: Request) -> Response:
        """`handle`, on a worker thread unless the request is quick: a slow request never
        stalls the caller's event loop."""
        if self.quick(request):
            return self.handle(request)
        return await asyncio.get_running_loop().run_in_executor(self._workers, self.handle, request)

    async def publish_history(
        self,
        path: str,
        bodies: Sequence[bytes | str],
        *,
        metadata: Mapping[str, str] | None = None,
        expected_version: int | None = None,
        token: str | None = None,
    ) -> Response:
        """`VerbMethods.publish_history` as one store write (`FileStore.write_history`): the
        versions are made durable together and the catalog and index refreshed once, so a
        world load pays per document what a PUBLISH pays per version."""
        request = publish_request(path, b"", metadata, expected_version, token)
        stored = [body_bytes(body) for body in bodies]
        return await asyncio.get_running_loop().run_in_executor(self._workers, self._history, request, stored)

    def handle(self, request: Request) -> Response:
        """Answer one request; every failure becomes a status with an explanatory body."""
        try:
            self._catch_up()
            return self._handlers[request.verb](self, request)
        except Exception as exc:  # the top of a request: answer, keep serving
            return self._failure(request, exc)

    def _history(self, request: Request, bodies: Sequence[bytes]) -> Response:
        """`handle` for a history (`publish_history`)."""
        try:
            self._catch_up()
            return self._publish_history(request, bodies)
        except Exception as exc:
            return self._failure(request, exc)

    def _failure(self, request: Request, exc: Exception) -> Response:
        """The answer to a request that raised `exc`."""
        if isinstance(exc, DemarkusError):
            return response_for_error(exc)
        if isinstance(exc, OSError) and exc.errno in _DISK_FULL:
            log.error("disk full while answering %s %s: %s", request.verb, request.path, exc)
            return error_response(
                Status.SERVER_ERROR,
                "The authority's disk is full, so nothing was stored. Retry after its operator has freed space.",
            )
        return self._failed(request)

    def _failed(self, request: Request) -> Response:
        log.exception("request failed: %s %s", request.verb, request.path[:200])
        return error_response(
            Status.SERVER_ERROR,
            "The server failed while answering this request. Retry once; if it fails again, "
            "report it to the authority's operator.",
        )

    # --- auth -----------------------------------------------------------------------------

    def _check_read(self, token: str | None, path: str) -> None:
        if not self.trusted:
            self.authorizer.check_read(token, path)

    def _check_write(self, token: str | None, path: str) -> None:
        if not self.writable:
            raise NotPermittedError(
                f"this store was opened read-only, so {path} cannot be changed here; send "
                "the write to the authority that serves the store"
            )
        if not self.trusted:
            self.authorizer.check_write(token, path)

    def _readable(self, token: str | None) -> Callable[[str], bool]:
        """Whether the caller may read a path: the rule `_check_read` applies, as a yes or no
        against the grants in force now, for filtering the rows of one answer."""
        if self.trusted:
            return lambda _path: True
        return self.authorizer.reader(token)

    def _hidden_documents(self, scope: str, visible: Callable[[str], bool]) -> int:
        """Current documents in ``scope`` the caller may not read: what a LOOKUP left out,
        whatever its query and filter (a count that depended on them would tell, a word at a
        time, what the hidden titles and texts hold)."""
        if self.trusted or not self.authorizer.protects_reads():
            return 0
        return self.catalog.count(scope, lambda path: not visible(path))

    # --- catalog upkeep -------------------------------------------------------------------

    def _refresh_catalog(self, path: str) -> StoredVersion | None:
        try:
            doc = self.store.read(path)
        except NotFoundError:
            self.catalog.remove(path)
            return None
        if doc.archived:
            self.catalog.remove(path)
            return None
        self.catalog.put(make_entry(path, doc.metadata, doc.body, doc.modified))
        return doc

    def _refresh(self, path: str) -> bool:
        """Bring the catalog and the section index in step with the store after a write.

        The store holds the truth and the write there is done: when the index cannot take
        it in (a full disk), the write still stands, the document is remembered, and the
        index catches up by itself (`_catch_up`). Returns False while it is behind."""
        doc = self._refresh_catalog(path)
        if self.index is None or self._defer_index:
            return True
        try:
            if doc is None:
                self.index.remove(path)
            else:
                self.index.update(path, doc.version, doc.metadata, doc.body, doc.modified)
        except Exception as exc:  # derived data: never undo an acknowledged write for it
            if path not in self._behind:
                log.error("the section index could not take in %s (%s); it will catch up", path, exc)
            self._behind.add(path)
            self._retry_at = time.monotonic() + INDEX_RETRY
            return False
        self._behind.discard(path)
        return True

    def _catch_up(self) -> None:
        """Retry the documents the section index missed, at most once per `INDEX_RETRY`."""
        if not self._behind or time.monotonic() < self._retry_at:
            return
        with self._lock:
            for path in sorted(self._behind):
                if not self._refresh(path):
                    return
            log.info("the section index caught up")

    @staticmethod
    def _written(status: str, doc: StoredVersion, indexed: bool, **meta: str) -> Response:
        """A write's answer; while the index is behind, its body says so (the truth)."""
        meta = {"version": str(doc.version), **(meta or {"modified": format_time(doc.modified)})}
        if indexed:
            return Response(status, meta)
        note = (
            f"\n# Stored, index behind\n\nVersion {doc.version} of {doc.path} is stored. The "
            "section index could not take it in yet, so body lookups may miss it until it "
            "catches up by itself; do not send it again.\n"
        )
        return Response(status, meta, note.encode("utf-8"))

    # --- FETCH ----------------------------------------------------------------------------

    def _fetch(self, request: Request) -> Response:
        path, token = request.path, request.metadata.get("auth")
        if path == "/health":
            return Response(Status.OK, {}, HEALTH_BODY)
        hashed = _HASH_PATH.fullmatch(path)
        if hashed:
            digest = f"sha256-{hashed.group(1)}"
            target = self.store.resolve_hash(digest)
            if target is not None:
                addressed = self.store.read(target)
                if addressed.content_hash == digest:  # a content address never serves other bytes
                    self._check_read(token, target)
                    return self._document_response(addressed, request)
            raise NotFoundError(
                f"no current document has content hash {digest}; "
                "it may have changed or been archived; fetch it by path instead"
            )
        pinned = self._split_version(path)
        if pinned is not None:
            base, number = pinned
            self._check_read(token, base)
            doc = self.store.read(base, number)
            meta = self._document_metadata(doc)
            meta.pop("etag", None)
            meta["current-version"] = str(self.store.current_version(base))
            return Response(Status.OK, meta, doc.body)
        try:
            doc = self.store.read(path)
        except NotFoundError:
            pass
        else:
            self._check_read(token, path)
            return self._document_response(doc, request)
        if path == EXPORT_PATH:
            self._check_read(token, path)
            return self._graph_export(request)
        if self.store.is_directory(path):
            index = path.rstrip("/") + "/index.md"
            if self.store.is_document(index):
                self._check_read(token, index)
                return self._document_response(self.store.read(index), request)
            self._check_read(token, path)
            return self._listing(request)
        raise NotFoundError(f"no document at {path}; use LIST on its directory or LOOKUP to find the right path")

    def _graph_export(self, request: Request) -> Response:
        """`/graph.md` when no document is stored there: the edges of the current documents
        the caller may read (`graph.export`), so a client's explore card shows the documents
        linking to one it has not read them from."""
        visible = self._readable(request.metadata.get("auth"))
        generation = self.catalog.generation
        body = self.graph.render(generation, self.catalog.entries(), visible, MAX_BODY)
        etag = hashlib.sha256(body).hexdigest()
        if request.metadata.get("if-none-match", "").strip('"') == etag:
            return Response(Status.NOT_MODIFIED)
        return Response(Status.OK, {"etag": etag}, body)

    def _split_version(self, path: str) -> tuple[str, int] | None:
        base, _, last = path.rpartition("/")
        found = _VERSION_SEGMENT.fullmatch(last)
        if found and base and self.store.current_version(base) > 0:
            return base, int(found.group(1))
        return None

    def _document_metadata(self, doc: StoredVersion) -> dict[str, str]:
        meta = dict(doc.metadata)
        meta.update(
            {
                "version": str(doc.version),
                "modified": format_time(doc.modified),
                "etag": doc.etag,
                "content-hash": doc.content_hash,
            }
        )
        return meta

    def _document_response(self, doc: StoredVersion, request: Request) -> Response:
        if doc.archived:
            raise ArchivedError(
                f"{doc.path} is archived (its last version is v{doc.version}); fetch "
                f"{doc.path}/v{doc.version} to read it, or publish an empty body to restore it"
            )
        if_none_match = request.metadata.get("if-none-match")
        if if_none_match:
            if if_none_match.strip('"') == doc.etag:
                return Response(Status.NOT_MODIFIED)
        else:
            since = request.metadata.get("if-modified-since")
            if since:
                try:
                    moment = datetime.fromisoformat(since.replace("Z", "+00:00"))
                except ValueError:
                    raise BadRequestError(
                        f"if-modified-since `{since}` is not RFC 3339; write e.g. 2026-01-31T12:00:00Z"
                    ) from None
                if moment.tzinfo is None:
                    moment = moment.replace(tzinfo=UTC)
                if doc.modified <= moment:
                    return Response(Status.NOT_MODIFIED)
        return Response(Status.OK, self._document_metadata(doc), doc.body)

    # --- LIST -----------------------------------------------------------------------------

    def _list(self, request: Request) -> Response:
        path, token = request.path, request.metadata.get("auth")
        if not self.store.is_directory(path):
            raise NotFoundError(f"{path} is not a directory; LIST a folder such as `/` or `/docs/`")
        self._check_read(token, path)
        return self._listing(request)

    def _listing(self, request: Request) -> Response:
        path, meta = request.path, request.metadata
        token = meta.get("auth")
        include_archived = meta.get("include-archived", "").lower() == "true"
        page_size = MAX_PAGE
        if meta.get("page-size"):
            usage = f"use a whole number from 1 to {MAX_PAGE}"
            page_size = parse_count("page-size", meta["page-size"], usage)
            if not 1 <= page_size <= MAX_PAGE:
                raise BadRequestError(f"page-size `{page_size}` is out of range; {usage}")
        after = ""
        if meta.get("cursor"):
            text = meta["cursor"]
            try:
                padded = text + "=" * (-len(text) % 4)
                after = base64.b64decode(padded, altchars=b"-_", validate=True).decode("utf-8")
            except (ValueError, UnicodeDecodeError):
                raise BadRequestError("the cursor is not one this server issued; LIST again without a cursor") from None
        base = path.rstrip("/")
        visible = self._readable(token)
        rows: list[ListingEntry] = []
        hidden = 0
        active = set() if include_archived else self.catalog.active_folders(base)
        for entry in self.store.list_dir(path):
            child = f"{base}/{entry.name}"
            if not include_archived and (entry.archived or entry.is_dir and self._all_archived(child, active)):
                continue
            if not visible(child):
                hidden += 1
                continue
            rows.append(ListingEntry(entry.name, entry.is_dir))
        rows = [r for r in rows if r.name > after]
        page, more = rows[:page_size], len(rows) > page_size
        out = {"entries": str(len(page)), "complete": "false" if more else "true"}
        if more:
            out["next-cursor"] = base64.urlsafe_b64encode(page[-1].name.encode()).decode().rstrip("=")
        if hidden:  # of the whole folder, on every page
            out[HIDDEN] = str(hidden)
        body = render_listing(path, page, truncated=more)
        return Response(Status.OK, out, body.encode("utf-8"))

    def _all_archived(self, folder: str, active: set[str]) -> bool:
        """A folder that holds documents, every one archived: LIST hides it like one.
        `active` names the folders beside it that hold an active document."""
        return folder.rsplit("/", 1)[-1] not in active and self.store.has_documents(folder)

    # --- VERSIONS -------------------------------------------------------------------------

    def _versions(self, request: Request) -> Response:
        path, token = request.path, request.metadata.get("auth")
        self._check_read(token, path)
        history = self.store.versions(path)
        problem = self.store.verify(path)
        meta = {
            "total": str(len(history)),
            "current": str(history[0].version),
            "chain-valid": "false" if problem else "true",
        }
        if problem:
            log.error("hash chain broken for %s: %s", path, problem)
            meta["chain-error"] = "chain integrity check failed"
        body = render_versions(path, [(v.version, v.modified) for v in history])
        return Response(Status.OK, meta, body.encode("utf-8"))

    # --- PUBLISH / APPEND / ARCHIVE -------------------------------------------------------

    def _publish(self, request: Request) -> Response:
        path, expected, meta, modified = self._publish_target(request)
        with self._lock:
            if not request.body:
                return self._publish_empty(path)
            result = self.store.write(path, request.body, meta, expected, modified=modified)
            return self._stored(path, result)

    def _publish_history(self, request: Request, bodies: Sequence[bytes]) -> Response:
        path, expected, meta, modified = self._publish_target(request)
        check_history(path, bodies)
        if modified is not None:
            raise BadRequestError(f"a history of {path} takes no `modified`; publish dated versions one by one")
        with self._lock:
            return self._stored(path, self.store.write_history(path, bodies, meta, expected))

    def _publish_target(self, request: Request) -> tuple[str, int | None, dict[str, str], datetime | None]:
        """A PUBLISH's path, expected version, metadata and time, once the caller may write."""
        path, token = request.path, request.metadata.get("auth")
        if _HASH_PATH.fullmatch(path) or path.startswith("/sha256-"):
            raise BadRequestError(f"{path} is reserved for content-hash reads; publish under another name")
        self._check_write(token, path)
        expected = _parse_expected(request.metadata.get("expected-version"), required=False)
        given = dict(publisher_metadata(request.metadata))
        modified = _parse_modified(given.pop("modified")) if self.dates_versions and "modified" in given else None
        return path, expected, validate_publisher_metadata(given), modified

    def _stored(self, path: str, result: WriteResult) -> Response:
        """A write's answer, the catalog and index brought in step first (under the lock)."""
        indexed = self._refresh(path) if result.changed else path not in self._behind
        status = Status.CREATED if result.changed else Status.OK
        return self._written(status, result.document, indexed)

    def _publish_empty(self, path: str) -> Response:
        """An empty body restores an archived document and is a no-op on an active one."""
        if not self.store.is_document(path):
            raise NotFoundError(
                f"no document at {path} to restore; an empty body only unarchives. "
                "Send a non-empty markdown body to create it"
            )
        doc = self.store.read(path)
        indexed = path not in self._behind
        if doc.archived:
            doc = self.store.unarchive(path)
            indexed = self._refresh(path)
        return self._written(Status.OK, doc, indexed)

    def _append(self, request: Request) -> Response:
        path, token = request.path, request.metadata.get("auth")
        self._check_write(token, path)
        expected = _parse_expected(request.metadata.get("expected-version"), required=True)
        assert expected is not None
        if not request.body:
            raise BadRequestError("APPEND needs a non-empty body: the markdown to add at the end")
        with self._lock:
            current = self.store.read(path)
            if current.archived:
                raise ArchivedError(f"{path} is archived; publish an empty body to restore it before appending")
            base = self.store.read(path, expected) if expected != current.version else current
            joiner = b"" if not base.body or base.body.endswith(b"\n") else b"\n"
            body = base.body + joiner + request.body
            if len(body) > MAX_BODY:
                raise BadRequestError(
                    f"appending would make {path} {len(body)} bytes; documents are limited to "
                    f"{MAX_BODY} bytes; start a new document and link it"
                )
            result = self.store.write(path, body, current.metadata, expected)
            indexed = self._refresh(path)
        return self._written(Status.CREATED, result.document, indexed)

    def _archive(self, request: Request) -> Response:
        path, token = request.path, request.metadata.get("auth")
        self._check_write(token, path)
        with self._lock:
            doc = self.store.archive(path)
            indexed = self._refresh(path)
        return self._written(Status.OK, doc, indexed, archived="true")

    # --- LOOKUP ---------------------------------------------------------------------------

    def _lookup(self, request: Request) -> Response:
        meta = request.metadata
        token = meta.get("auth")
        query = meta.get("query", "").strip()
        flt = parse_filter(meta.get("filter"))
        limit = parse_limit(meta.get("limit"))
        match = meta.get("match", "catalog") or "catalog"
        if match not in ("catalog", "body"):
            raise BadRequestError(
                f"match `{match}` is unknown; use `catalog` (tags and titles) or `body` (section text)"
            )
        scope = normalize_scope(request.path)
        terms = query_terms(query)
        body_match = match == "body" and self.index is not None and terms != ["*"]
        searched = len(content_words(query)) if body_match else len(terms)
        if searched > MAX_QUERY_TERMS:
            raise BadRequestError(
                f"the query has {searched} distinct {'content ' if body_match else ''}words; at most "
                f"{MAX_QUERY_TERMS} are searched; keep the words that name what you are looking for"
            )
        visible = self._readable(token)
        out: dict[str, str]
        if body_match:
            assert self.index is not None
            hits = self.index.search(query, scope, limit=limit, flt=flt, visible=visible)
            rows = [LookupRow(h.path, h.importance, h.title, h.tags, h.anchor, h.heading, h.snippet) for h in hits]
            out = {"matches": str(len(rows)), "match": "body"}
            if hits:
                held, asked = hits[0].informative
                out[INFORMATIVE] = f"{held}/{asked}"
                telling = [word for word in hits[0].telling if len(word) <= MAX_INFORMATIVE_WORD]
                if telling:
                    out[INFORMATIVE_WORDS] = " ".join(telling)
        else:
            entries = self.catalog.search(terms, scope, flt, limit, visible)
            rows = [LookupRow(e.path, e.importance, e.title, e.tags) for e in entries]
            out = {"matches": str(len(rows))}
        hidden = self._hidden_documents(scope, visible)
        if hidden:
            out[HIDDEN] = str(hidden)
        if meta.get(ROW_ETAGS) == "true" and rows:
            out[ROW_ETAGS] = encode_row_etags(self._etags([row.path for row in rows], visible))
        body = render_lookup(query, scope, rows, body_match=body_match)
        return Response(Status.OK, out, body.encode("utf-8"))

    def _etags(self, paths: Sequence[str], visible: Callable[[str], bool]) -> dict[str, str]:
        """The current etag of each document named (rows the caller may read), in order, then
        of the documents on this authority they relate to by an evidence predicate (the
        targets of the one hop) that the caller may read. One gone, archived or damaged
        meanwhile is left out: the caller then asks for it and is told."""
        out: dict[str, str] = {}
        related: list[str] = []
        for path in paths:
            doc = self._current(path) if path not in out else None
            if doc is not None:
                out[path] = doc.etag
                relations, _ = parse_relations(doc.metadata, path)
                related += [r.target for r in relations if r.authority is None and r.predicate in PREFERRED]
        for path in related:
            if path not in out and visible(path):
                doc = self._current(path)
                if doc is not None:
                    out[path] = doc.etag
        return out

    def _current(self, path: str) -> StoredVersion | None:
        """The current version of a document, None when it is gone, archived or damaged."""
        try:
            doc = self.store.read(path)
        except (NotFoundError, IntegrityError, BadRequestError):
            return None
        return None if doc.archived else doc

    _handlers: dict[Verb, Callable[[Service, Request], Response]] = {
        Verb.FETCH: _fetch,
        Verb.LIST: _list,
        Verb.VERSIONS: _versions,
        Verb.PUBLISH: _publish,
        Verb.APPEND: _append,
        Verb.ARCHIVE: _archive,
        Verb.LOOKUP: _lookup,
    }

"""Capability tokens: the hashed token file, path globs, and the read/write rules.

The token file is TOML and holds only hashes, so a leaked file grants nothing::

    [tokens.fritz-laptop]                  # label: the operator's name for the grant
    hash = "sha256-<64 lowercase hex>"     # sha256 of the raw token a client sends
    paths = ["/docs/*", "/notes/**"]       # globs, see match_path
    operations = ["read", "publish"]
    expires = "2026-12-31T23:59:59Z"       # optional, RFC 3339

Reads are public unless some read grant covers the path; writes always need a
publish grant, and an authority started without a token file accepts none.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import logging
import os
import re
import secrets
import stat
import tempfile
import threading
import time
import tomllib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from demarkus.errors import ConfigError, NotPermittedError, UnauthorizedError

READ = "read"
PUBLISH = "publish"
OPERATIONS = frozenset({READ, PUBLISH})
MANIFEST_PATH = "/.well-known/agent-manifest.md"
"""Always publicly readable: it is how an agent learns what the authority offers."""

logger = logging.getLogger("demarkus.auth")

_HASH_RE = re.compile(r"sha256-[0-9a-f]{64}")
_LABEL_RE = re.compile(r"[A-Za-z0-9_-]+")
_REQUIRED = ("hash", "paths", "operations")
_FIELDS = (*_REQUIRED, "expires")
_ASK = "ask the authority's operator for"


def generate_token() -> str:
    """A new raw token: 32 random bytes, url-safe so it survives metadata and env vars."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The form kept in the token file: ``sha256-`` + hex SHA-256 of the UTF-8 token."""
    return "sha256-" + hashlib.sha256(token.encode("utf-8")).hexdigest()


def match_path(pattern: str, path: str) -> bool:
    """Whether ``path`` matches the token glob ``pattern`` (invalid pattern: ValueError).

    Without ``**`` this is Go's ``path.Match``: ``*`` is a run of non-``/`` characters,
    ``?`` one non-``/`` character, the rest literal. ``/prefix/**`` matches anything
    strictly under prefix; ``/prefix/**/suffix`` matches when suffix matches a tail
    starting at a segment boundary. ``[...]`` and ``\\`` are rejected, not supported:
    Go lets ``[^a]`` match ``/``, which would quietly widen a grant.
    """
    return _compile(pattern).fullmatch(path) is not None


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot be a token glob (a phrase to follow "which"), or None."""
    if not pattern.startswith("/"):
        return "is not an absolute path starting with /"
    if any(c in pattern for c in "[]\\"):
        return "uses [, ] or \\, which token globs do not support; use * and ? only"
    segments = pattern.split("/")
    if any("**" in s and s != "**" for s in segments):
        return "has ** inside a segment; ** must stand alone between slashes (/a/** or /a/**/b)"
    if segments.count("**") > 1:
        return "uses ** more than once; a pattern may use it once"
    if pattern.endswith("/**/"):
        return "ends in /**/ and so matches nothing; end it with /** to cover all under the prefix"
    return None


@functools.lru_cache(maxsize=4096)
def _compile(pattern: str) -> re.Pattern[str]:
    problem = pattern_problem(pattern)
    if problem is not None:
        raise ValueError(f"path pattern {pattern!r} {problem}")
    if pattern.endswith("/**"):
        return re.compile(_translate(pattern[:-3]) + "/.+", re.DOTALL)
    prefix, globstar, suffix = pattern.partition("/**/")
    if globstar:
        # (?:.*/)? starts the tail at a segment boundary; (?=.) keeps it non-empty, as in Go.
        return re.compile(_translate(prefix) + "/(?:.*/)?(?=.)" + _translate(suffix), re.DOTALL)
    return re.compile(_translate(pattern), re.DOTALL)


def _translate(glob: str) -> str:
    return "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in glob)


def pattern_covers(outer: str, inner: str) -> bool:
    """Whether every path ``inner`` matches is matched by ``outer`` as well (both valid).

    Sound, not complete: True is always right, False may be said of a pattern that is in
    fact covered (say, by a wildcard segment that happens to match). Callers use it to warn
    about paths a grant newly covers, so a doubt is answered with a warning. Paths are
    canonical, so none ends in ``/`` except the root itself.
    """
    if outer == inner:
        return True
    if not any(c in inner for c in "*?"):
        return match_path(outer, inner)
    if outer.endswith("/**"):
        prefix = outer[:-3] + "/"
        rest = inner[len(prefix) :]
        # "/*" also matches "/", which "/**" does not; below the root "x/" is no path.
        return inner.startswith(prefix) and rest != "" and not (prefix == "/" and set(rest) == {"*"})
    if "**" in outer or "**" in inner:
        return False
    outer_parts, inner_parts = outer.split("/"), inner.split("/")
    return len(outer_parts) == len(inner_parts) and all(
        o == i or o == "*" or (not any(c in i for c in "*?") and match_path("/" + o, "/" + i))
        for o, i in zip(outer_parts, inner_parts, strict=True)
    )


def uncovered(patterns: Sequence[str], by: Sequence[str]) -> tuple[str, ...]:
    """The ``patterns`` that no pattern of ``by`` covers (see `pattern_covers`), in order."""
    return tuple(p for p in patterns if not any(pattern_covers(q, p) for q in by))


@dataclass(frozen=True, slots=True)
class TokenGrant:
    """One labelled token: what its holder may do, where, and until when."""

    label: str
    hash: str
    paths: tuple[str, ...]
    operations: frozenset[str]
    expires: datetime | None = None

    def covers(self, path: str) -> bool:
        """Whether one of the grant's patterns matches ``path``."""
        return any(match_path(pattern, path) for pattern in self.paths)

    def expired(self, now: datetime) -> bool:
        """Whether the grant has lapsed; like Go, it is still valid at the expiry instant."""
        return self.expires is not None and now > self.expires


@dataclass(frozen=True, slots=True)
class TokenStore:
    """The grants of one token file (hashes unique, as ``parse`` ensures)."""

    grants: tuple[TokenGrant, ...] = ()
    _by_hash: dict[str, TokenGrant] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_hash", {g.hash: g for g in self.grants})

    @classmethod
    def load(cls, path: Path) -> TokenStore:
        """Read and validate a token file; ConfigError names file, label and problem."""
        return cls.parse(_read_tokens(path), source=str(path))

    @classmethod
    def parse(cls, text: str, source: str = "<tokens>") -> TokenStore:
        """Parse token-file text; ``source`` names it in each ConfigError."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{source} is not valid TOML ({exc}); fix the syntax") from exc
        tables = data.get("tokens", {})
        if set(data) - {"tokens"} or not isinstance(tables, dict):
            keys = ", ".join(sorted(data))
            raise ConfigError(f"{source} must hold only [tokens.<label>] tables, not: {keys}")
        grants: dict[str, TokenGrant] = {}
        for label, table in tables.items():
            grant = _parse_grant(source, label, table)
            if grant.hash in grants:
                first = grants[grant.hash].label
                raise ConfigError(
                    f"{source}: token {label!r} has the same hash as token {first!r}; "
                    "each grant needs its own token: remove one or give it a new token"
                )
            grants[grant.hash] = grant
        return cls(tuple(grants.values()))

    def authorize(self, token: str | None, path: str, operation: str, now: datetime) -> TokenGrant:
        """The grant that lets ``token`` perform ``operation`` on ``path`` at ``now``.

        Raises:
            UnauthorizedError: no token, an unknown token, or an expired one.
            NotPermittedError: a valid token without this operation or path.
        """
        if operation not in OPERATIONS:
            raise ValueError(f"unknown operation {operation!r}")
        if not token:
            raise UnauthorizedError(
                f"{path} needs a token with {operation} access and the request carried none; "
                f"retry with your token, or {_ASK} one."
            )
        grant = self._by_hash.get(hash_token(token))
        if grant is None:
            raise UnauthorizedError(
                "this authority does not know the token that was sent; check that it was copied "
                f"whole and is meant for this authority, or {_ASK} one."
            )
        if grant.expires is not None and grant.expired(now):
            when = _rfc3339(grant.expires)
            raise UnauthorizedError(f"the token {grant.label!r} expired at {when}; {_ASK} another.")
        if operation not in grant.operations:
            granted = ", ".join(sorted(grant.operations))
            raise NotPermittedError(
                f"the token {grant.label!r} grants {granted} but not {operation}; "
                f"{_ASK} a token with {operation} access to {path}."
            )
        if not grant.covers(path):
            raise NotPermittedError(
                f"the token {grant.label!r} does not cover {path} (its paths: "
                f"{', '.join(grant.paths)}); {_ASK} a token whose paths cover {path}."
            )
        return grant

    def read_protected(self, path: str) -> bool:
        """Whether a read grant covers ``path``; expired ones count, so expiry never opens it."""
        return any(READ in g.operations and g.covers(path) for g in self.grants)

    def read_patterns(self, without: str | None = None) -> tuple[str, ...]:
        """The path patterns of every read grant (expired ones too), but the one labelled ``without``."""
        return tuple(p for g in self.grants if READ in g.operations and g.label != without for p in g.paths)

    def reader(self, token: str | None, now: datetime) -> Callable[[str], bool]:
        """Whether ``token`` (or none) may read a path at ``now``: `Authorizer.check_read` as
        a yes or no, for filtering many rows (the token is looked up once, not per row)."""
        grant = self._by_hash.get(hash_token(token)) if token else None
        if grant is not None and (grant.expired(now) or READ not in grant.operations):
            grant = None
        protecting = tuple(g for g in self.grants if READ in g.operations)

        def readable(path: str) -> bool:
            if path == MANIFEST_PATH or not any(g.covers(path) for g in protecting):
                return True
            return grant is not None and grant.covers(path)

        return readable


def _read_tokens(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"token file {path} is missing; create it or fix --tokens") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"token file {path} cannot be read: {exc}") from exc


def _parse_grant(source: str, label: str, table: object) -> TokenGrant:
    def fail(problem: str) -> ConfigError:
        return ConfigError(f"{source}: token {label!r} {problem}")

    if not isinstance(table, dict):
        raise fail("must be a table with hash, paths and operations")
    unknown, missing = set(table) - set(_FIELDS), [k for k in _REQUIRED if k not in table]
    if unknown or missing:
        raise fail(f"must have hash, paths, operations, maybe expires; has {', '.join(table)}")
    digest = table["hash"]
    # The value is never echoed: an operator may have pasted the raw token there.
    if not isinstance(digest, str) or not _HASH_RE.fullmatch(digest):
        raise fail("has a malformed hash: use 'sha256-' + 64 lowercase hex, never the token itself")
    paths, operations = _string_list(table["paths"]), _string_list(table["operations"])
    if paths is None or operations is None:
        raise fail("needs paths and operations as non-empty lists of strings")
    for pattern in paths:
        problem = pattern_problem(pattern)
        if problem is not None:
            raise fail(f"has path pattern {pattern!r}, which {problem}")
    bad_ops = sorted(set(operations) - OPERATIONS)
    if bad_ops:
        raise fail(f"has unknown operation(s) {', '.join(bad_ops)}; use read and/or publish")
    expires = table.get("expires")
    if expires is not None:
        try:
            expires = _parse_expires(expires)
        except ValueError as exc:
            raise fail(f"has expires {expires!r}, which {exc}") from None
    return TokenGrant(label, digest, paths, frozenset(operations), expires)


def _string_list(value: object) -> tuple[str, ...] | None:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        return None
    return tuple(value)


def _parse_expires(value: object) -> datetime:
    try:  # a TOML offset date-time arrives already parsed
        when = datetime.fromisoformat(value) if isinstance(value, str) else value
    except ValueError:
        when = None
    if not isinstance(when, datetime):
        raise ValueError("is not an RFC 3339 timestamp such as 2026-12-31T23:59:59Z")
    if when.tzinfo is None:
        raise ValueError("has no UTC offset; add Z or +hh:mm")
    return when


def _rfc3339(when: datetime) -> str:
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _toml_string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\u{ord(m.group()):04x}", escaped) + '"'


def add_grant(
    path: Path,
    label: str,
    token: str,
    paths: Sequence[str],
    operations: Sequence[str],
    expires: datetime | None = None,
) -> TokenGrant:
    """Append a grant for ``token`` to the token file, storing only its hash.

    The new file is parsed whole, then atomically replaces the old one, so a hot
    reload never sees a half-written or invalid file. Two at once do not lose one's
    grant: the read-modify-write holds a lock on the file's directory.

    Raises:
        ConfigError: a taken or non-bare label, a token already granted, a bad pattern
            or operation, or a broken existing file.
    """
    if isinstance(paths, str) or isinstance(operations, str) or not token:
        raise ValueError("paths and operations must be lists of strings, and token non-empty")
    if expires is not None and expires.tzinfo is None:
        raise ValueError("expires must be timezone-aware")
    if not _LABEL_RE.fullmatch(label):
        raise ConfigError(f"{path}: label {label!r} may use only letters, digits, - and _")
    with _directory_lock(path.parent):
        return _add_grant(path, label, token, paths, operations, expires)


@contextlib.contextmanager
def _directory_lock(directory: Path) -> Iterator[None]:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _add_grant(
    path: Path,
    label: str,
    token: str,
    paths: Sequence[str],
    operations: Sequence[str],
    expires: datetime | None,
) -> TokenGrant:
    try:
        old, mode = path.read_text(encoding="utf-8"), stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        old, mode = "", 0o600
    store = TokenStore.parse(old, source=str(path))
    if any(g.label == label for g in store.grants):
        raise ConfigError(f"{path}: token {label!r} already exists; choose another label")
    clash = store._by_hash.get(hash_token(token))
    if clash is not None:
        raise ConfigError(f"{path}: the token is already granted as {clash.label!r}; use a new one")
    separator = "" if not old else "\n" if old.endswith("\n") else "\n\n"
    text = old + separator + _table(label, hash_token(token), paths, operations, expires)
    grant = next(g for g in TokenStore.parse(text, source=str(path)).grants if g.label == label)
    _write_atomic(path, text, mode)
    return grant


def _table(label: str, digest: str, paths: Sequence[str], operations: Sequence[str], expires: datetime | None) -> str:
    """One ``[tokens.<label>]`` table as `add_grant` writes it (a label that is not a bare
    key, possible in a file written by hand, is quoted)."""
    key = label if _LABEL_RE.fullmatch(label) else _toml_string(label)
    lines = [
        f"[tokens.{key}]",
        f"hash = {_toml_string(digest)}",
        f"paths = [{', '.join(map(_toml_string, paths))}]",
        f"operations = [{', '.join(map(_toml_string, operations))}]",
    ]
    if expires is not None:
        lines.append(f"expires = {_toml_string(_rfc3339(expires))}")
    return "\n".join(lines) + "\n"


REVOKED_ALL = "# every token was revoked; this comment keeps the empty file from looking half-written\n"
"""What `revoke_grant` leaves when the last grant goes: a reload keeps the last good grants
over a file that is blank (see `Authorizer`), so an empty token file needs a line."""


@dataclass(frozen=True, slots=True)
class Revocation:
    """What `revoke_grant` did: the grant removed and the grants left."""

    grant: TokenGrant
    remaining: TokenStore
    rewritten: bool
    """True when the file had to be written out anew (its comments and layout gone),
    because the grant's table could not be cut out of the text alone."""


def revoke_grant(path: Path, label: str) -> Revocation:
    """Remove the grant labelled ``label`` from the token file, atomically and under the
    same lock as `add_grant`: a running server reloads the file and the token stops working.

    The grant's table is cut out of the text, so comments and the other tables stay as they
    were; the result must parse to exactly the other grants, else the file is written anew.

    Raises:
        ConfigError: no grant has that label (the message lists those that exist), or the
            file is missing or broken.
    """
    with _directory_lock(path.parent):
        text, mode = _read_tokens(path), stat.S_IMODE(path.stat().st_mode)
        store = TokenStore.parse(text, source=str(path))
        grant = next((g for g in store.grants if g.label == label), None)
        if grant is None:
            labels = sorted(g.label for g in store.grants)
            held = f"its tokens are: {', '.join(labels)}" if labels else "it holds no tokens"
            raise ConfigError(
                f"{path} has no token labelled {label!r}; {held} (see demarkus token list --tokens {path})"
            )
        remaining = TokenStore(tuple(g for g in store.grants if g.label != label))
        cut = _cut_table(text, label)
        rewritten = cut is None or _parsed_grants(cut, path) != remaining.grants
        if rewritten:
            cut = "\n".join(_table(g.label, g.hash, g.paths, sorted(g.operations), g.expires) for g in remaining.grants)
        assert cut is not None
        _write_atomic(path, cut if cut.strip() else REVOKED_ALL, mode)
    return Revocation(grant, remaining, rewritten)


def _parsed_grants(text: str, path: Path) -> tuple[TokenGrant, ...] | None:
    try:
        return TokenStore.parse(text, source=str(path)).grants
    except ConfigError:
        return None


def _cut_table(text: str, label: str) -> str | None:
    """``text`` without the ``[tokens.<label>]`` table: from the comment lines right above
    its header (unless they open the file) to the next header, less the comments and blank
    lines that open the next table. None: no such header, or more than one."""
    names = [re.escape(_toml_string(label)), "'" + re.escape(label) + "'"]
    if _LABEL_RE.fullmatch(label):
        names.append(re.escape(label))
    header = re.compile(r"\s*\[\s*tokens\s*\.\s*(?:" + "|".join(names) + r")\s*\]\s*(?:#.*)?")
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if header.fullmatch(line.rstrip("\r\n"))]
    if len(starts) != 1:
        return None
    start = above = starts[0]
    while above > 0 and lines[above - 1].lstrip().startswith("#"):
        above -= 1
    if above > 0:
        start = above
    end = next((i for i in range(starts[0] + 1, len(lines)) if _HEADER.match(lines[i])), len(lines))
    while end > starts[0] + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1
    before, after = lines[:start], lines[end:]
    while after and not after[0].strip() and (not before or not before[-1].strip()):
        after = after[1:]  # one blank line between tables, not two
    return "".join(before + after)


_HEADER = re.compile(r"\s*\[")


def _write_atomic(path: Path, text: str, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _utc_now() -> datetime:
    return datetime.now(UTC)


_UNWARNED = object()
SETTLE = 1.0
"""Seconds a token file changed in place (same inode) must stay untouched before it is
read: an in-place rewrite truncates first, and the empty or half-written file in between
would otherwise load as a store without the read grants, opening protected paths. An
atomic replace (a new inode, as `add_grant` and most editors do) loads at once."""


@dataclass(frozen=True, slots=True)
class _Signature:
    mtime_ns: int
    size: int
    inode: int


def _signature(path: Path) -> _Signature | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return _Signature(st.st_mtime_ns, st.st_size, st.st_ino)


class Authorizer:
    """Applies the read/write rules, reloading the token file when it changes.

    A reload never weakens protection by accident: a file that is missing, unparsable,
    empty (when grants were in force), still being rewritten in place (see `SETTLE`), or
    changed while it was read keeps the last good grants; each is logged once."""

    def __init__(
        self,
        tokens_path: Path | None,
        clock: Callable[[], datetime] = _utc_now,
        wall: Callable[[], float] = time.time,
    ) -> None:
        """Load the token file, if any; ConfigError when it is missing or invalid."""
        self._path, self._clock, self._wall, self._lock = tokens_path, clock, wall, threading.Lock()
        # Stat before reading, so a change made during the read is seen next time.
        self._seen = _signature(tokens_path) if tokens_path else None
        self._store = TokenStore.load(tokens_path) if tokens_path else None
        self._warned: object = _UNWARNED

    def current(self) -> TokenStore | None:
        """The store in force after picking up any change to the file; None without a file."""
        if self._path is None:
            return None
        with self._lock:
            signature = _signature(self._path)
            if signature == self._seen:
                return self._store
            if (
                signature is not None
                and self._seen is not None
                and signature.inode == self._seen.inode
                and self._wall() - signature.mtime_ns / 1e9 < SETTLE
            ):
                return self._store  # being rewritten in place: look again once it settles
            problem = self._reload(signature)
            if problem is not None and signature != self._warned:
                self._warned = signature
                logger.warning("%s; the last good grants stay in force until it loads", problem)
            return self._store

    def _reload(self, signature: _Signature | None) -> str | None:
        """Adopt the file's grants; what is wrong with it instead, if anything."""
        assert self._path is not None
        try:
            text = _read_tokens(self._path)
            loaded = TokenStore.parse(text, source=str(self._path))
        except ConfigError as exc:
            self._seen = signature
            return str(exc)
        if _signature(self._path) != signature:
            return f"token file {self._path} changed while it was read"  # read it again next time
        self._seen = signature
        if not text.strip() and self._store is not None and self._store.grants:
            return f"token file {self._path} is empty (to remove every grant on purpose, leave a comment line in it)"
        logger.info("token file %s reloaded", self._path)
        self._store = loaded
        return None

    def check_read(self, token: str | None, path: str) -> None:
        """Allow a read: public unless a read grant covers the path (raises as ``authorize``)."""
        if path == MANIFEST_PATH:
            return
        store = self.current()
        if store is None or not store.read_protected(path):
            return
        store.authorize(token, path, READ, self._clock())

    def protects_reads(self) -> bool:
        """Whether any read grant is in force, so that some path is private."""
        store = self.current()
        return store is not None and bool(store.read_patterns())

    def reader(self, token: str | None) -> Callable[[str], bool]:
        """Whether ``token`` may read a path, against the grants in force now: one reload
        check for a whole listing or lookup rather than one per row."""
        store = self.current()
        if store is None or not store.read_patterns():
            return lambda _path: True
        return store.reader(token, self._clock())

    def check_write(self, token: str | None, path: str) -> None:
        """Allow a write with a publish grant covering the path; no token file, no writes."""
        store = self.current()
        if store is None:
            raise NotPermittedError(
                "this authority accepts no writes: it was started without a token file; start it with --tokens FILE"
            )
        store.authorize(token, path, PUBLISH, self._clock())

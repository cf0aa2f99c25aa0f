"""The gateway's configuration file (TOML), parsed once into frozen values.

```toml
[gateway]
rate_per_minute = 600          # tool calls per caller per minute (token bucket)
max_upstream = 32              # upstream requests in flight, all worlds together
max_upstream_per_world = 24    # ... and per world (default: three quarters of max_upstream)
upstream_wait = 5.0            # seconds a request may wait for a free slot, then a tool error
upstream_timeout = 5.0         # seconds a world may stay silent (QUIC connect, or no packet at
                               # all while answers are awaited) before it counts as down
upstream_answer_timeout = 30.0 # seconds one answer may take from a world that is up but busy
max_sessions_per_caller = 16   # live MCP sessions per caller; one more closes its least
                               # recently used idle session
session_idle_timeout = 900.0   # seconds a session may go without a request before it ends
cert = "gateway.pem"           # TLS for the HTTPS endpoint; both or neither
key = "gateway-key.pem"

[worlds.peps]                  # world name = DNS label: mark://peps/<path> in tool URLs
authority = "mark://localhost:7000"   # a Mark authority over QUIC ...
ca = "ca.pem"                         # ... trusted with this CA (optional; insecure = true for development)
dial = "127.0.0.1"                    # optional: the address to connect to, if not the authority's name
[worlds.notes]
root = "/srv/notes"                   # ... or an embedded store on this machine
tokens = "notes-tokens.toml"          # optional: check upstream tokens like `demarkus serve --tokens`

[callers.alice]
hash = "sha256-..."                   # auth.hash_token(<the caller's bearer token>)
read = ["peps", "notes"]
write = ["notes"]                     # every written world is also read
expires = 2027-01-01T00:00:00Z        # optional (TOML date-time or RFC 3339 string)
rate_per_minute = 120                 # optional, overrides [gateway]
[callers.alice.upstream]
peps = "<capability token the gateway presents to peps for alice>"
```
Relative paths are relative to the file. Errors name the file, the table and the field.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..errors import BadRequestError, ConfigError
from ..protocol import parse_mark_url

WORLD_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
"""A DNS label: lowercase letters, digits and hyphens, at most 63, no hyphen at either end."""
_CALLER_NAME = re.compile(r"[A-Za-z0-9_-]+")
_HASH = re.compile(r"sha256-[0-9a-f]{64}")

SESSIONS_PER_CALLER = 16
"""Default live MCP sessions per caller. An agent needs one; a few subagents sharing a token,
a handful. Sixteen leaves room for that, and with the callers configured, at most 16 x callers
sessions exist at all (the SDK keeps about 40 KiB and two tasks for each)."""
SESSION_IDLE_TIMEOUT = 900.0
"""Default seconds an MCP session may go without a request before it ends (15 minutes). An
agent pauses for seconds to minutes between tool calls (a model thinking, a person answering);
a session its client forgot (a crash, no DELETE) gives its memory back within a quarter of an
hour. An expired session costs its client one new initialize (its id answers 404)."""

_GATEWAY_KEYS = frozenset(
    {
        "rate_per_minute",
        "max_upstream",
        "max_upstream_per_world",
        "upstream_wait",
        "upstream_timeout",
        "upstream_answer_timeout",
        "max_sessions_per_caller",
        "session_idle_timeout",
        "cert",
        "key",
    }
)
_WORLD_KEYS = frozenset({"authority", "root", "ca", "insecure", "dial", "tokens"})
_CALLER_KEYS = frozenset({"hash", "read", "write", "expires", "upstream", "rate_per_minute"})


@dataclass(frozen=True, slots=True)
class WorldConfig:
    """How the gateway reaches one world: a QUIC authority or an embedded store."""

    name: str
    authority: str | None = None
    """`mark://host[:port]` of the world's authority (over QUIC)."""
    root: Path | None = None
    """Or the directory of an embedded store."""
    ca: Path | None = None
    """CA certificate that signs the authority's certificate."""
    insecure: bool = False
    """Skip verifying the authority's certificate (development only)."""
    dial: str | None = None
    """Connect to this host instead of the authority's name (e.g. 127.0.0.1 for localhost);
    the certificate is still checked against the authority's name."""
    tokens: Path | None = None
    """Embedded store only: check upstream tokens against this token file. Without it the
    gateway's own read/write lists are the whole policy for that store."""


@dataclass(frozen=True, slots=True)
class CallerConfig:
    """One caller: its bearer token's hash, its worlds, and what it presents upstream."""

    name: str
    """The label in the access log; never the token."""
    hash: str
    read: tuple[str, ...]
    write: tuple[str, ...] = ()
    expires: datetime | None = None
    upstream: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """World name -> the capability token presented to that world on this caller's behalf."""
    rate_per_minute: int | None = None

    def expired(self, now: datetime) -> bool:
        """Still valid at the expiry instant, like the authority's tokens."""
        return self.expires is not None and now > self.expires


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    source: str
    """The file this came from, for messages."""
    worlds: Mapping[str, WorldConfig]
    callers: Mapping[str, CallerConfig]
    rate_per_minute: int = 600
    max_upstream: int = 32
    max_upstream_per_world: int = 24
    upstream_wait: float = 5.0
    upstream_timeout: float = 5.0
    upstream_answer_timeout: float = 30.0
    max_sessions_per_caller: int = SESSIONS_PER_CALLER
    session_idle_timeout: float = SESSION_IDLE_TIMEOUT
    cert: Path | None = None
    key: Path | None = None
    _by_hash: Mapping[str, CallerConfig] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_hash", MappingProxyType({c.hash: c for c in self.callers.values()}))

    def caller_by_hash(self, digest: str) -> CallerConfig | None:
        return self._by_hash.get(digest)

    @classmethod
    def load(cls, path: Path) -> GatewayConfig:
        """Read and validate a gateway configuration file.

        Raises:
            ConfigError: the file is missing, not TOML, or a field is wrong (named in the message).
        """
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"gateway config {path} is missing; create it or fix --config") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"gateway config {path} cannot be read: {exc}") from exc
        return cls.parse(text, source=str(path), base=path.resolve().parent)

    @classmethod
    def parse(cls, text: str, *, source: str = "<gateway config>", base: Path | None = None) -> GatewayConfig:
        """Parse configuration text; relative paths are taken from `base` (the file's folder)."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{source} is not valid TOML ({exc}); fix the syntax") from exc
        return _Parser(source, base or Path.cwd()).config(data)


class _Parser:
    def __init__(self, source: str, base: Path) -> None:
        self.source = source
        self.base = base

    def fail(self, where: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.source}: {where} {problem}")

    def config(self, data: dict[str, Any]) -> GatewayConfig:
        unknown = sorted(set(data) - {"gateway", "worlds", "callers"})
        if unknown:
            raise self.fail(
                "the file",
                f"has unknown table(s) {', '.join(unknown)}; use [gateway], [worlds.<name>], [callers.<name>]",
            )
        gateway = self.table(data.get("gateway", {}), "[gateway]", _GATEWAY_KEYS)
        worlds_table = self.table(data.get("worlds", {}), "[worlds]", None)
        if not worlds_table:
            raise self.fail("[worlds]", "is empty; add at least one [worlds.<name>] with authority or root")
        worlds = {name: self.world(name, table) for name, table in sorted(worlds_table.items())}
        callers_table = self.table(data.get("callers", {}), "[callers]", None)
        callers: dict[str, CallerConfig] = {}
        seen: dict[str, str] = {}
        for name, table in sorted(callers_table.items()):
            caller = self.caller(name, table, worlds)
            if caller.hash in seen:
                raise self.fail(
                    f"[callers.{name}] hash",
                    f"is the same as [callers.{seen[caller.hash]}]'s; give each caller its own token",
                )
            seen[caller.hash] = name
            callers[name] = caller
        max_upstream = self.positive_int(gateway, "max_upstream", "[gateway]", 32)
        per_world_default = max(1, max_upstream - max_upstream // 4)
        per_world = self.positive_int(gateway, "max_upstream_per_world", "[gateway]", per_world_default)
        cert, key = self.path(gateway, "cert", "[gateway]"), self.path(gateway, "key", "[gateway]")
        if (cert is None) != (key is None):
            raise self.fail("[gateway]", "needs both cert and key for TLS, or neither for plain HTTP on loopback")
        return GatewayConfig(
            source=self.source,
            worlds=MappingProxyType(worlds),
            callers=MappingProxyType(callers),
            rate_per_minute=self.positive_int(gateway, "rate_per_minute", "[gateway]", 600),
            max_upstream=max_upstream,
            max_upstream_per_world=min(per_world, max_upstream),
            upstream_wait=self.seconds(gateway, "upstream_wait", 5.0, allow_zero=True),
            upstream_timeout=self.seconds(gateway, "upstream_timeout", 5.0, allow_zero=False),
            upstream_answer_timeout=self.seconds(gateway, "upstream_answer_timeout", 30.0, allow_zero=False),
            max_sessions_per_caller=self.positive_int(
                gateway, "max_sessions_per_caller", "[gateway]", SESSIONS_PER_CALLER
            ),
            session_idle_timeout=self.seconds(gateway, "session_idle_timeout", SESSION_IDLE_TIMEOUT, allow_zero=False),
            cert=cert,
            key=key,
        )

    # --- tables ---------------------------------------------------------------------------

    def table(self, value: object, where: str, keys: frozenset[str] | None) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, "must be a table")
        if keys is not None:
            unknown = sorted(set(value) - keys)
            if unknown:
                raise self.fail(where, f"has unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(keys))}")
        return value

    def world(self, name: str, value: object) -> WorldConfig:
        where = f"[worlds.{name}]"
        if not WORLD_NAME.fullmatch(name):
            raise self.fail(
                where, "is not a world name: use a DNS label (lowercase letters, digits, inner hyphens, at most 63)"
            )
        table = self.table(value, where, _WORLD_KEYS)
        authority, root = table.get("authority"), table.get("root")
        if (authority is None) == (root is None):
            raise self.fail(where, 'needs exactly one of authority = "mark://host:port" or root = "/path/to/store"')
        insecure = table.get("insecure", False)
        if not isinstance(insecure, bool):
            raise self.fail(f"{where} insecure", "must be true or false")
        if authority is not None:
            if not isinstance(authority, str):
                raise self.fail(f"{where} authority", 'must be a string such as "mark://localhost:6309"')
            try:
                parsed = parse_mark_url(authority)
            except BadRequestError as exc:
                raise self.fail(f"{where} authority", f"is not a mark:// URL ({exc})") from None
            if parsed.path not in ("", "/"):
                raise self.fail(f"{where} authority", "must name only host and port, e.g. mark://localhost:6309")
            if table.get("tokens") is not None:
                raise self.fail(
                    f"{where} tokens", "applies to an embedded root only; the authority checks its own tokens"
                )
            dial = table.get("dial")
            if dial is not None and (not isinstance(dial, str) or not dial or "/" in dial):
                raise self.fail(f"{where} dial", 'must be a host name or address such as "127.0.0.1"')
            return WorldConfig(
                name, authority=parsed.authority, ca=self.path(table, "ca", where), insecure=insecure, dial=dial
            )
        root_path = self.path(table, "root", where)
        assert root_path is not None
        if not root_path.is_dir():
            raise self.fail(f"{where} root", f"{root_path} is not a directory; load a store there first")
        if table.get("ca") is not None or insecure or table.get("dial") is not None:
            raise self.fail(where, "ca, insecure and dial apply to an authority, not an embedded root")
        return WorldConfig(name, root=root_path, tokens=self.path(table, "tokens", where))

    def caller(self, name: str, value: object, worlds: Mapping[str, WorldConfig]) -> CallerConfig:
        where = f"[callers.{name}]"
        if not _CALLER_NAME.fullmatch(name):
            raise self.fail(where, "is not a caller name: use letters, digits, _ and -")
        table = self.table(value, where, _CALLER_KEYS)
        digest = table.get("hash")
        # The value is never echoed: an operator may have pasted the raw token there.
        if not isinstance(digest, str) or not _HASH.fullmatch(digest):
            raise self.fail(
                f"{where} hash",
                "must be 'sha256-' + 64 lowercase hex of the caller's token (auth.hash_token), never the token itself",
            )
        read = self.world_list(table, "read", where, worlds)
        write = self.world_list(table, "write", where, worlds)
        for world in write:
            if world not in read:
                raise self.fail(f"{where} write", f"names {world}, which is not in read; add it to read too")
        upstream_table = self.table(table.get("upstream", {}), f"{where}.upstream", None)
        upstream: dict[str, str] = {}
        for world, token in sorted(upstream_table.items()):
            if world not in worlds:
                raise self.fail(f"{where}.upstream", f"names unknown world {world}; configured: {', '.join(worlds)}")
            if world not in read:
                raise self.fail(
                    f"{where}.upstream",
                    f"has a token for {world}, which is not in read; add it to read or drop the token",
                )
            if not isinstance(token, str) or not token:
                raise self.fail(f"{where}.upstream {world}", "must be a non-empty string (the capability token)")
            upstream[world] = token
        expires = table.get("expires")
        when: datetime | None = None
        if expires is not None:
            try:
                when = datetime.fromisoformat(expires.replace("Z", "+00:00")) if isinstance(expires, str) else expires
            except ValueError:
                when = None
            if not isinstance(when, datetime) or when.tzinfo is None:
                raise self.fail(
                    f"{where} expires", "must be an RFC 3339 date-time with an offset, e.g. 2027-01-01T00:00:00Z"
                )
        rate = table.get("rate_per_minute")
        if rate is not None:
            rate = self.positive_int(table, "rate_per_minute", where, 1)
        return CallerConfig(name, digest, read, write, when, MappingProxyType(upstream), rate)

    # --- fields ---------------------------------------------------------------------------

    def world_list(
        self, table: dict[str, Any], key: str, where: str, worlds: Mapping[str, WorldConfig]
    ) -> tuple[str, ...]:
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(f"{where} {key}", 'must be a list of world names, e.g. ["peps"]')
        for world in value:
            if world not in worlds:
                raise self.fail(f"{where} {key}", f"names unknown world {world}; configured: {', '.join(worlds)}")
        return tuple(sorted(set(value)))

    def positive_int(self, table: dict[str, Any], key: str, where: str, default: int) -> int:
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.fail(f"{where} {key}", f"must be a whole number of at least 1, not {value!r}")
        return value

    def seconds(self, table: dict[str, Any], key: str, default: float, *, allow_zero: bool) -> float:
        value = table.get(key, default)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
            or (value == 0 and not allow_zero)
        ):
            least = "0 or more" if allow_zero else "more than 0"
            raise self.fail(f"[gateway] {key}", f"must be a number of seconds, {least}, not {value!r}")
        return float(value)

    def path(self, table: dict[str, Any], key: str, where: str) -> Path | None:
        """A path relative to the file's folder; files other than a store root must exist."""
        value = table.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise self.fail(f"{where} {key}", "must be a path string")
        path = Path(value).expanduser()
        path = path if path.is_absolute() else self.base / path
        if key != "root" and not path.is_file():
            raise self.fail(f"{where} {key}", f"{path} is not a file")
        return path

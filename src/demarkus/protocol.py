"""The Mark Protocol wire codec: requests, responses, statuses, limits and URLs. No I/O.

Request::

    VERB /path\\n
    [---\\n
    key: value\\n
    ---\\n]
    [body]

Response::

    ---\\n
    status: <value>\\n
    key: value\\n
    ---\\n
    [markdown body]

Metadata is a flat YAML map of strings in both directions; keys come out sorted.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from urllib.parse import unquote, urljoin, urlsplit

import yaml

from .errors import (
    STATUS_ERRORS,
    BadRequestError,
    ConflictError,
    DemarkusError,
    NotFoundError,
)
from .render import unescape_cell

DEFAULT_PORT = 6309
ALPN = "mark"
SCHEME = "mark"

MAX_REQUEST_LINE = 4096
"""Bytes in the request line, including the terminating newline."""
MAX_METADATA = 64 * 1024
"""Bytes in a metadata block, delimiters excluded."""
MAX_BODY = 1024 * 1024
"""Bytes in a request or document body."""
MAX_REQUEST = MAX_REQUEST_LINE + MAX_METADATA + MAX_BODY + 64
"""The most a server reads from one stream."""
MAX_RESPONSE = MAX_BODY + MAX_METADATA + 2048
"""The most a client reads from one stream (a version file may carry store frontmatter)."""

MAX_PATH = 1024
"""Bytes in a canonical request path. The store adds its root, `versions/` and `.v<N>` to
it, and Linux refuses file names over 4096 bytes: this leaves room for a deep store root."""
MAX_PATH_DEPTH = 32
"""Segments in a request path: deeper trees cost a directory check per level on every
request and break the file system's own limits long before they help anyone."""
MAX_QUERY_TERMS = 64
"""Distinct words in a LOOKUP query. A question is a sentence; every word costs one term
match per candidate row, so a pasted page of text is refused with this number."""

ROW_ETAGS = "row-etags"
"""LOOKUP request key (`true`): answer, under the same key, with a JSON object from path to
etag: each row's document, then the documents on the authority they relate to by an
evidence predicate (`markdown.PREFERRED`, the one hop's) that the caller may read. A caller
holding a document with that etag uses it without asking for it again; an authority that
does not know the key sends none, and the caller asks with `if-none-match` as before."""
MAX_ROW_ETAGS_BYTES = 16 * 1024
"""The row etags an answer carries, as JSON: the first documents, whole pairs only."""
INFORMATIVE = "informative"
"""LOOKUP answer key of a body match with rows, `held/asked`: of the query's informative
words (those in at most a fifth of the index's rows), how many the best row holds, and how
many the query has. A budgeted lookup prints no evidence for a weak match."""
INFORMATIVE_WORDS = "informative-words"
"""LOOKUP answer key of a body match with rows: the query's informative words as asked,
separated by spaces (none when no word is). A budgeted lookup chooses every section and
paragraph it prints by them, and prints only the relation line of a related document
holding none."""

MAX_PUBLISHER_KEYS = 50
MAX_PUBLISHER_BYTES = 1024
"""Sum of key and value lengths (UTF-8 bytes) over publisher metadata."""


class Verb(StrEnum):
    FETCH = "FETCH"
    LIST = "LIST"
    VERSIONS = "VERSIONS"
    PUBLISH = "PUBLISH"
    APPEND = "APPEND"
    ARCHIVE = "ARCHIVE"
    LOOKUP = "LOOKUP"


WRITE_VERBS = frozenset({Verb.PUBLISH, Verb.APPEND, Verb.ARCHIVE})


class Status(StrEnum):
    OK = "ok"
    CREATED = "created"
    NOT_MODIFIED = "not-modified"
    NOT_FOUND = "not-found"
    ARCHIVED = "archived"
    UNAUTHORIZED = "unauthorized"
    NOT_PERMITTED = "not-permitted"
    CONFLICT = "conflict"
    BAD_REQUEST = "bad-request"
    RATE_LIMITED = "rate-limited"
    SERVER_ERROR = "server-error"


CONTROL_KEYS = frozenset(
    {
        "auth",
        "expected-version",
        "if-none-match",
        "if-modified-since",
        "query",
        "filter",
        "limit",
        "match",
        "include-archived",
        "cursor",
        "page-size",
    }
)
"""Request keys that steer a verb; they are never stored as publisher metadata."""

RESERVED_KEYS = frozenset(
    {
        "version",
        "modified",
        "etag",
        "content-hash",
        "current-version",
        "server-version",
        "your-version",
        "total",
        "current",
        "chain-valid",
        "chain-error",
        "archived",
        "entries",
        "status",
        "previous-hash",
        "matches",
        "complete",
        "next-cursor",
        "hidden",
    }
)
"""Keys the server owns; a publisher may not set them."""

_KEY_RE = re.compile(r"[a-z0-9-]+")
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f]")
"""A control character other than tab (CR and LF are refused first, with their own message)."""


@dataclass(frozen=True, slots=True)
class Request:
    """One request. Its path is canonical by construction (see `canonical_path`), so no
    layer can check one spelling and serve another.

    Raises:
        BadRequestError, NotFoundError: the path cannot be made canonical.
    """

    verb: Verb
    path: str
    metadata: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", canonical_path(self.path))


@dataclass(frozen=True, slots=True)
class Response:
    status: str
    metadata: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def ok(self) -> bool:
        return self.status in (Status.OK, Status.CREATED, Status.NOT_MODIFIED)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def raise_for_status(self) -> Response:
        """Return self when the status is a success, else raise the matching error."""
        if self.ok:
            return self
        cls = STATUS_ERRORS.get(self.status, DemarkusError)
        message = _error_message(self.text) or f"the authority answered {self.status}"
        if cls is ConflictError:
            raise ConflictError(
                message,
                your_version=_int_or_none(self.metadata.get("your-version")),
                server_version=_int_or_none(self.metadata.get("server-version")),
            )
        raise cls(message)


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _error_message(body: str) -> str:
    lines = [ln for ln in body.strip().splitlines() if ln.strip()]
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    return " ".join(ln.strip() for ln in lines)


# --- metadata ---------------------------------------------------------------------------


_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./+=@~-]*(?: [A-Za-z0-9_./+=@~-]+)*")
_YAML_WORDS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"})
_LINE = re.compile(r"([a-z0-9][a-z0-9-]*): (.*)")
_QUOTED_AS_IS = re.compile(r'"([^"\\\x00-\x1f]*)"')
"""A double-quoted value with no escape and no control character: JSON decodes it to
what stands between the quotes (dates and numbers, as `encode_metadata` writes them)."""


def _scalar(value: str) -> str:
    """A YAML scalar that every YAML reader decodes back to exactly `value`."""
    if _PLAIN.fullmatch(value) and value.lower() not in _YAML_WORDS:
        return value
    quoted = json.dumps(value, ensure_ascii=False)
    if quoted.isprintable():
        return quoted
    # YAML readers refuse non-printable characters raw; escape them the YAML way.
    return "".join(
        ch if ch.isprintable() else f"\\U{ord(ch):08x}" if ord(ch) > 0xFFFF else f"\\u{ord(ch):04x}" for ch in quoted
    )


def encode_metadata(metadata: Mapping[str, str]) -> str:
    """YAML for a flat map of strings, keys sorted (so output is stable byte for byte).

    Values are plain when unambiguous, else double-quoted with JSON escapes (a subset
    of YAML's), so numbers, dates and URLs come out quoted: `matches: "2"`.
    """
    return "".join(f"{key}: {_scalar(str(metadata[key]))}\n" for key in sorted(metadata))


def _parse_simple(text: str) -> dict[str, str] | None:
    """Fast path for what `encode_metadata` writes; None sends the caller to full YAML."""
    out: dict[str, str] = {}
    for line in text.split("\n"):
        if not line:
            continue
        found = _LINE.fullmatch(line)
        if found is None or found.group(1) in out:
            return None
        key, value = found.groups()
        if value.startswith('"'):
            as_is = _QUOTED_AS_IS.fullmatch(value)
            if as_is is not None:
                out[key] = as_is.group(1)
                continue
            try:
                decoded = json.loads(value)
            except ValueError:
                return None
            if not isinstance(decoded, str):
                return None
            out[key] = decoded
        elif _PLAIN.fullmatch(value) and value.lower() not in _YAML_WORDS:
            out[key] = value
        else:
            return None
    return out


class _StrictLoader(yaml.CBaseLoader):
    """YAML's base loader (every scalar a string) that refuses a key given twice: with
    `auth` or `expected-version` twice, which one counts would be the reader's guess."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
        seen: set[str] = set()
        for key_node, _value in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str):
                continue  # refused by parse_metadata, with a message of its own
            if key in seen:
                raise BadRequestError(f"metadata key `{key[:80]}` is given twice; send each key once")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def parse_metadata(text: str) -> dict[str, str]:
    """Parse a metadata block into strings only (`yes` stays "yes", `010` stays "010").

    Raises:
        BadRequestError: the block is not a flat map of scalars, or a key appears twice.
    """
    if not text.strip():
        return {}
    simple = _parse_simple(text)
    if simple is not None:
        return simple
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        raise BadRequestError(
            f"the metadata block is not valid YAML ({_first_line(str(exc))}); send one `key: value` pair per line"
        ) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BadRequestError("the metadata block must be a map of `key: value` lines")
    out: dict[str, str] = {}
    for key, value in data.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise BadRequestError(
                f"metadata key {key!r} must map to a plain string; nested lists and maps "
                "are not allowed (join several values with commas)"
            )
        out[key] = value
    return out


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def well_formed_key(key: str) -> bool:
    """Whether a publisher metadata key is spelled by the rules: lowercase letters, digits
    and hyphens."""
    return _KEY_RE.fullmatch(key) is not None


def validate_publisher_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    """Check publisher metadata against the key, value and size rules; return a copy.

    Raises:
        BadRequestError: a reserved or malformed key, a CR/LF in a value, or too much metadata.
    """
    total = 0
    for key, value in metadata.items():
        if key in RESERVED_KEYS:
            raise BadRequestError(f"metadata key `{key}` is reserved for the server; remove it or choose another name")
        if not well_formed_key(key):
            raise BadRequestError(
                f"metadata key `{key}` is malformed: keys use only lowercase letters, digits and "
                "hyphens (for a relation write `rel-<predicate>`)"
            )
        if "\r" in value or "\n" in value:
            raise BadRequestError(f"metadata value of `{key}` contains a line break; values are single lines")
        if _CONTROL.search(value):
            raise BadRequestError(f"metadata value of `{key}` contains a control character")
        total += len(key.encode("utf-8")) + len(value.encode("utf-8"))
    if len(metadata) > MAX_PUBLISHER_KEYS:
        raise BadRequestError(f"{len(metadata)} metadata keys given; at most {MAX_PUBLISHER_KEYS} are allowed")
    if total > MAX_PUBLISHER_BYTES:
        raise BadRequestError(
            f"publisher metadata is {total} bytes; at most {MAX_PUBLISHER_BYTES} bytes "
            "(keys plus values) are allowed; shorten the values or drop keys"
        )
    return dict(metadata)


_COUNT = re.compile(r"[0-9]{1,9}")


def parse_count(key: str, value: str, usage: str) -> int:
    """A whole number from request metadata: ASCII digits only, at most nine of them.

    `int()` alone would read `٣` as 3 and fail on `²` and on 5,000 digits with errors no
    caller expects; nine digits hold every count this protocol has. `usage` says what to
    send instead, e.g. "use 1 to 1000".

    Raises:
        BadRequestError: anything else.
    """
    if not _COUNT.fullmatch(value):
        raise BadRequestError(f"{key} `{value[:40]}` is not a whole number; {usage}")
    return int(value)


def publisher_metadata(request_metadata: Mapping[str, str]) -> dict[str, str]:
    """The part of a PUBLISH request's metadata that is stored with the document."""
    return {k: v for k, v in request_metadata.items() if k not in CONTROL_KEYS}


# --- paths ------------------------------------------------------------------------------


def canonical_path(path: str) -> str:
    """The one spelling of a request path that every check, the store and the index see.

    Runs of `/` collapse and a trailing `/` goes (`//docs//a.md/` is `/docs/a.md`): the
    file system reads them as one place, so a grant matched against any other spelling
    would not protect it. They are accepted rather than refused because they name that
    place unambiguously and people write them (`LIST /docs/`, a base joined to `/a.md`).
    Dot segments are refused instead: they belong to relative links, which a client
    resolves before it sends.

    Raises:
        BadRequestError: not absolute, a control character, a `.` segment, too long or deep.
        NotFoundError: a `..` segment (refused before auth, so it cannot probe scope).
    """
    if not path.startswith("/"):
        raise BadRequestError(f"path `{path[:80]}` must start with `/`, like `/docs/readme.md`")
    for ch in path:
        if (ord(ch) < 32 and ch != "\t") or ch == "\x7f":
            raise BadRequestError("the path contains a control character; percent-encode or remove it")
    segments = [s for s in path.split("/") if s]
    if ".." in segments:
        raise NotFoundError(f"`{path[:200]}` leaves the document root; `..` segments are not served")
    if "." in segments:
        raise BadRequestError(
            f"`{path[:200]}` has a `.` segment; resolve relative links before sending, "
            "e.g. `/docs/./a.md` is `/docs/a.md`"
        )
    if len(segments) > MAX_PATH_DEPTH:
        raise BadRequestError(
            f"the path has {len(segments)} segments; at most {MAX_PATH_DEPTH} folders deep are served; flatten the tree"
        )
    canonical = "/" + "/".join(segments)
    size = len(canonical.encode("utf-8", "surrogatepass"))
    if size > MAX_PATH:
        raise BadRequestError(f"the path is {size} bytes; at most {MAX_PATH} are allowed; shorten the names")
    return canonical


def linked_path(path: str) -> str:
    """A path a caller copied from a table or a link (a tool's `url`), as `canonical_path`
    spells it. First the backslashes a table's cell puts before markdown punctuation are
    dropped (a lookup's row `/pages/Changelog\\_07\\_09.md` names `/pages/Changelog_07_09.md`;
    a name holding a backslash before such a character is named as the cell writes it, the
    backslash doubled, or with the backslash percent-encoded, `%5C`); then the
    percent-escapes are decoded, as a link's are (a LIST entry links `My note.md` as
    `My%20note.md`), so every check sees the decoded path and an escaped `..` is refused
    like a plain one.

    Raises:
        BadRequestError, NotFoundError: as `canonical_path`.
    """
    return canonical_path(unquote(unescape_cell(path)))


def unbracketed(url: str) -> str:
    """A url as a tool was given it, without the angle brackets a lookup's frames and an
    explore card write around a location holding a space (`</pages/My note.md/v1#x>`)."""
    text = url.strip()
    return text[1:-1].strip() if text.startswith("<") and text.endswith(">") else text


def split_anchor(location: str) -> tuple[str, str]:
    """(path, anchor) of `/path#anchor` as a caller writes it; a `#` a table's cell escaped
    (`/notes/C\\# basics.md`) belongs to the path."""
    path, *anchor = _ANCHOR_MARK.split(location, maxsplit=1)
    return path, anchor[0] if anchor else ""


_ANCHOR_MARK = re.compile(r"(?<!\\)#")
"""The `#` that starts an anchor: one no backslash escapes."""


def normalize_scope(path: str) -> str:
    """`/docs/` and `/docs` are the same scope; the root is `/`."""
    cleaned = posixpath.normpath("/" + path.strip("/")) if path.strip("/") else "/"
    return cleaned


def in_scope(path: str, scope: str) -> bool:
    scope = normalize_scope(scope)
    return scope == "/" or path == scope or path.startswith(scope + "/")


# --- requests ---------------------------------------------------------------------------


def _split_frontmatter(data: bytes) -> tuple[bytes | None, bytes]:
    """Split `---\\n<yaml>\\n---\\n<body>`; None when there is no block."""
    if not data.startswith(b"---\n"):
        return None, data
    end = data.find(b"\n---\n", 3)
    if end >= 0:
        return data[4 : end + 1] if end > 3 else b"", data[end + 5 :]
    if data.endswith(b"\n---"):
        return data[4 : len(data) - 3], b""
    if data == b"---\n---":
        return b"", b""
    raise BadRequestError("the metadata block opened with `---` is never closed by a `---` line")


def parse_request(data: bytes) -> Request:
    """Decode one request from the bytes of a stream.

    Raises:
        BadRequestError: any framing, limit, encoding or verb problem.
        NotFoundError: a `..` path segment.
    """
    newline = data.find(b"\n")
    if newline < 0:
        if len(data) >= MAX_REQUEST_LINE:
            raise BadRequestError(f"the request line exceeds {MAX_REQUEST_LINE} bytes")
        raise BadRequestError("the request line must end with a newline: `VERB /path\\n`")
    if newline + 1 > MAX_REQUEST_LINE:
        raise BadRequestError(f"the request line is {newline + 1} bytes; at most {MAX_REQUEST_LINE} are allowed")
    try:
        line = data[:newline].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequestError("the request line is not valid UTF-8; send the path as UTF-8") from exc
    verb_text, sep, path = line.partition(" ")
    if not sep or not path:
        raise BadRequestError("the request line must be `VERB /path`, separated by one space")
    try:
        verb = Verb(verb_text)
    except ValueError:
        known = ", ".join(v.value for v in Verb)
        raise BadRequestError(f"unknown verb `{verb_text[:40]}`; known verbs: {known}") from None
    path = canonical_path(path)  # before the metadata: a bad path costs no YAML parse
    rest = data[newline + 1 :]
    block, body = _split_frontmatter(rest)
    metadata: dict[str, str] = {}
    if block is not None:
        if len(block) > MAX_METADATA:
            raise BadRequestError(f"the metadata block is {len(block)} bytes; at most {MAX_METADATA} are allowed")
        try:
            metadata = parse_metadata(block.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise BadRequestError("the metadata block is not valid UTF-8") from exc
    if len(body) > MAX_BODY:
        raise BadRequestError(
            f"the body is {len(body)} bytes; at most {MAX_BODY} (1 MiB) are allowed; split the document"
        )
    return Request(verb=verb, path=path, metadata=metadata, body=body)


def encode_request(request: Request) -> bytes:
    """Serialise a request; the codec's inverse of `parse_request`.

    Raises:
        BadRequestError: a limit `parse_request` would refuse, found before a byte is sent
            (an authority closes a connection that keeps sending oversized requests).
    """
    head = f"{request.verb.value} {request.path}\n"
    if len(head.encode("utf-8")) > MAX_REQUEST_LINE:
        raise BadRequestError(f"the request line exceeds {MAX_REQUEST_LINE} bytes; shorten the path")
    if len(request.body) > MAX_BODY:
        raise BadRequestError(
            f"the body is {len(request.body)} bytes; at most {MAX_BODY} (1 MiB) are allowed; split the document"
        )
    meta = encode_metadata(request.metadata)
    if len(meta.encode("utf-8")) > MAX_METADATA:
        raise BadRequestError(f"the metadata is {len(meta.encode('utf-8'))} bytes; at most {MAX_METADATA} are allowed")
    # A body that itself opens with `---` needs a (possibly empty) block in front of it.
    needs_block = bool(request.metadata) or request.body.startswith(b"---\n")
    block = f"---\n{meta}---\n" if needs_block else ""
    return (head + block).encode("utf-8") + request.body


# --- responses --------------------------------------------------------------------------


def encode_response(response: Response) -> bytes:
    meta = encode_metadata({**response.metadata, "status": response.status})
    return f"---\n{meta}---\n".encode() + response.body


def parse_response(data: bytes) -> Response:
    """Decode a response.

    Raises:
        BadRequestError: the bytes are not a Mark response.
    """
    block, body = _split_frontmatter(data)
    if block is None:
        raise BadRequestError("the response does not start with a `---` frontmatter block")
    try:
        metadata = parse_metadata(block.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadRequestError("the response frontmatter is not valid UTF-8") from exc
    status = metadata.pop("status", None)
    if not status:
        raise BadRequestError("the response frontmatter has no `status`")
    return Response(status=status, metadata=metadata, body=body)


def status_title(status: str) -> str:
    """`not-found` -> `Not found`."""
    text = status.replace("-", " ")
    return text[:1].upper() + text[1:]


def error_response(status: str, message: str, metadata: Mapping[str, str] | None = None) -> Response:
    """An error answer: one markdown paragraph under a title, saying what to do."""
    body = f"\n# {status_title(status)}\n\n{message}\n".encode()
    return Response(status=status, metadata=dict(metadata or {}), body=body)


def response_for_error(exc: DemarkusError) -> Response:
    meta: dict[str, str] = {}
    if isinstance(exc, ConflictError):
        if exc.your_version is not None:
            meta["your-version"] = str(exc.your_version)
        if exc.server_version is not None:
            meta["server-version"] = str(exc.server_version)
    return error_response(exc.status, exc.message, meta)


# --- mark:// URLs -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MarkURL:
    """A parsed `mark://host[:port]/path[#fragment]`."""

    host: str
    port: int
    path: str
    fragment: str = ""

    @property
    def authority(self) -> str:
        """Identity: `mark://host`, with `:port` only when it is not 6309."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        if self.port == DEFAULT_PORT:
            return f"{SCHEME}://{host}"
        return f"{SCHEME}://{host}:{self.port}"

    @property
    def dial_address(self) -> tuple[str, int]:
        return self.host, self.port

    def __str__(self) -> str:
        frag = f"#{self.fragment}" if self.fragment else ""
        return f"{self.authority}{self.path}{frag}"


def parse_mark_url(url: str) -> MarkURL:
    """Parse a `mark://` URL; query and userinfo never reach a request.

    Raises:
        BadRequestError: wrong scheme, no host, or a bad port.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() != SCHEME:
        raise BadRequestError(f"`{url[:120]}` is not a mark:// URL; write mark://host[:port]/path")
    if not parts.hostname:
        raise BadRequestError(f"`{url[:120]}` has no host; write mark://host[:port]/path")
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError as exc:
        raise BadRequestError(f"`{url[:120]}` has an invalid port") from exc
    path = parts.path or "/"
    return MarkURL(host=parts.hostname.lower(), port=port, path=path, fragment=parts.fragment)


def canonical_url(url: str) -> str:
    """Strip the default port from a mark:// URL; other strings pass through unchanged."""
    if not url.lower().startswith(f"{SCHEME}://"):
        return url
    try:
        return str(parse_mark_url(url))
    except BadRequestError:
        return url


def resolve_reference(base: str, reference: str) -> str:
    """Resolve a link or relation target against a document path or URL (RFC 3986).

    `base` is a bare path (`/docs/a.md`) or a mark:// URL. A reference containing `://`
    is returned canonicalised and as is. A bare base gives a bare path back unless the
    reference names another authority.
    """
    if "://" in reference:
        return canonical_url(reference)
    # urljoin only resolves schemes it knows; borrow http's rules, which are RFC 3986's.
    if base.lower().startswith(f"{SCHEME}://"):
        joined = urljoin("http://" + base[len(SCHEME) + 3 :], reference)
        return canonical_url(f"{SCHEME}://" + joined[len("http://") :])
    joined = urljoin("http://local.invalid" + base, reference)
    if joined.startswith("http://local.invalid/"):
        return joined[len("http://local.invalid") :]
    return canonical_url(f"{SCHEME}://" + joined[len("http://") :])


def encode_row_etags(etags: Mapping[str, str]) -> str:
    """`path -> etag`, in the order given, as one line of JSON within `MAX_ROW_ETAGS_BYTES`
    (the later documents are left out, never half a pair)."""
    kept: dict[str, str] = {}
    size = 2
    for path, etag in etags.items():
        size += len(json.dumps(path)) + len(json.dumps(etag)) + 2
        if size > MAX_ROW_ETAGS_BYTES:
            break
        kept[path] = etag
    return json.dumps(kept, separators=(",", ":"))


def parse_informative(value: str | None) -> tuple[int, int] | None:
    """The `informative` of a LOOKUP answer as (held, asked); None when absent or malformed
    (an authority that does not send it is never judged weak); each number read as
    `parse_count` reads one, ASCII digits only."""
    held, slash, asked = (value or "").partition("/")
    if not slash or not _COUNT.fullmatch(held) or not _COUNT.fullmatch(asked) or int(held) > int(asked):
        return None
    return int(held), int(asked)


MAX_INFORMATIVE_WORD = 64
"""Characters of one informative word: a query word longer than this is no name a reader uses."""
_INFORMATIVE_WORD = re.compile(rf"[^\W_]{{1,{MAX_INFORMATIVE_WORD}}}")


def parse_informative_words(value: str | None) -> frozenset[str] | None:
    """The `informative-words` of a LOOKUP answer; None when absent or malformed (then every
    query word counts, as before the key): at most `MAX_QUERY_TERMS` words, each one
    lowercase run of letters and digits of at most `MAX_INFORMATIVE_WORD` characters."""
    if not value:
        return None
    found = value.split(" ")
    if len(found) > MAX_QUERY_TERMS or not all(_INFORMATIVE_WORD.fullmatch(w) and w == w.lower() for w in found):
        return None
    return frozenset(found)


def parse_row_etags(value: str | None) -> dict[str, str]:
    """The `row-etags` of a LOOKUP answer; empty when absent or not a JSON object of strings
    (it only saves requests, so a malformed one costs nothing but them)."""
    if not value:
        return {}
    try:
        loaded = json.loads(value)
    except ValueError:
        return {}
    if not isinstance(loaded, dict):
        return {}
    return {k: v for k, v in loaded.items() if isinstance(k, str) and isinstance(v, str)}

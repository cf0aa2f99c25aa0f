"""The version-file codec and the hash-chain check. Pure: bytes in, values out.

A version file is store frontmatter followed by the publisher's body, verbatim::

    ---
    version: 3
    archived: false
    previous-hash: sha256-<hex SHA-256 of the complete raw bytes of v2>   (absent for v1)
    description: ...          <- Open Knowledge Format keys are written bare,
    meta.rel-supersedes: ...  <- every other publisher key as `meta.<key>`,
    title: ...                   all sorted by their on-disk key
    ---
    <body>

Each `previous-hash` pins the exact bytes of the version before it, so changing any old
version breaks the chain at the next one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import yaml

from ..errors import IntegrityError

OKF_KEYS = frozenset({"type", "title", "description", "resource", "tags", "timestamp"})
"""Open Knowledge Format fields, stored without the `meta.` prefix."""

_STORE_FIELDS = ("version", "archived", "previous-hash")
_DELIMITER = b"---\n"
_KEY_RE = re.compile(r"[a-z0-9-]+")
_HASH_RE = re.compile(r"sha256-[0-9a-f]{64}")
_VERSION_RE = re.compile(r"[1-9][0-9]*")
_SURROGATE = re.compile("[\ud800-\udfff]")
_LINE_KEY_RE = re.compile(r"([^\s:]+):(?: |$)")
_ARCHIVED_LINE_RE = re.compile(rb"---\nversion: [1-9][0-9]*\narchived: (true|false)\n")
# Plain scalars only from characters that mean nothing to YAML in a block mapping value;
# a colon or space is allowed only when something other than space follows it.
_PLAIN_RE = re.compile(r"[A-Za-z0-9_/](?:[A-Za-z0-9_./,+=()-]|:(?=[^\s:])| (?=[^\s]))*")
# Characters a YAML stream may carry raw inside a double-quoted scalar on one line.
_RAW_RANGES = ((0x20, 0x7E), (0xA0, 0x2027), (0x202A, 0xD7FF), (0xE000, 0xFEFE), (0xFF00, 0xFFFD))


@dataclass(frozen=True, slots=True)
class VersionFile:
    """One stored version: store fields, publisher metadata (bare keys) and the body."""

    version: int
    archived: bool
    previous_hash: str | None
    metadata: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""


def sha256_tag(data: bytes) -> str:
    """The `sha256-<hex>` form used for `previous-hash` and content hashes."""
    return "sha256-" + hashlib.sha256(data).hexdigest()


def disk_key(key: str) -> str:
    """The frontmatter key a publisher key is stored under."""
    return key if key in OKF_KEYS else f"meta.{key}"


def stored_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    """`metadata` as `parse_version` gives it back: the same pairs, in the order their
    keys are written (sorted by `disk_key`)."""
    return dict(sorted(metadata.items(), key=lambda item: disk_key(item[0])))


def serialize_version(vf: VersionFile) -> bytes:
    """Encode a version file; `parse_version` is its exact inverse.

    Raises:
        ValueError: the value breaks an invariant the caller should have checked
            (a version below 1, a previous hash on v1 or none on later versions,
            a malformed key, a value with a line break).
    """
    if vf.version < 1:
        raise ValueError(f"version must be 1 or more, got {vf.version}")
    if (vf.previous_hash is None) != (vf.version == 1):
        raise ValueError("previous_hash is required for every version after v1 and absent on v1")
    if vf.previous_hash is not None and not _HASH_RE.fullmatch(vf.previous_hash):
        raise ValueError(f"previous_hash {vf.previous_hash!r} is not sha256-<64 lowercase hex>")
    lines = [f"version: {vf.version}", f"archived: {'true' if vf.archived else 'false'}"]
    if vf.previous_hash is not None:
        lines.append(f"previous-hash: {vf.previous_hash}")
    for key, value in stored_metadata(vf.metadata).items():
        if not _KEY_RE.fullmatch(key):
            raise ValueError(f"metadata key {key!r} must match [a-z0-9-]+")
        if "\r" in value or "\n" in value or _SURROGATE.search(value):
            raise ValueError(f"metadata value of {key!r} contains a line break or a lone surrogate")
        lines.append(f"{disk_key(key)}: {_scalar(value)}")
    head = "---\n" + "\n".join(lines) + "\n---\n"
    return head.encode("utf-8") + vf.body


def _scalar(value: str) -> str:
    """A YAML scalar that CBaseLoader reads back as exactly `value`: plain when safe."""
    if _PLAIN_RE.fullmatch(value):
        return value
    out = ['"']
    for ch in value:
        code = ord(ch)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif any(lo <= code <= hi for lo, hi in _RAW_RANGES) or code >= 0x10000:
            out.append(ch)
        elif code <= 0xFF:
            out.append(f"\\x{code:02x}")
        else:
            out.append(f"\\u{code:04x}")
    out.append('"')
    return "".join(out)


def parse_version(data: bytes) -> VersionFile:
    """Decode a version file strictly: fixed store fields, known keys, sorted publisher keys.

    Raises:
        IntegrityError: the bytes are not a well-formed version file.
    """
    if not data.startswith(_DELIMITER):
        raise IntegrityError("the version file does not start with a `---` line")
    end = data.find(b"\n---\n", len(_DELIMITER) - 1)
    if end < 0:
        raise IntegrityError("the version file's frontmatter is never closed by a `---` line")
    block, body = data[len(_DELIMITER) : end + 1], data[end + 5 :]
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise IntegrityError("the version file's frontmatter is not valid UTF-8") from exc
    if not text:
        raise IntegrityError("the version file's frontmatter is empty")
    keys = []
    for line in text[:-1].split("\n"):
        match = _LINE_KEY_RE.match(line)
        if match is None:
            raise IntegrityError(f"frontmatter line {line[:60]!r} is not a `key: value` line")
        keys.append(match.group(1))
    try:
        loaded = yaml.load(text, Loader=yaml.CBaseLoader)
    except yaml.YAMLError as exc:
        raise IntegrityError(f"the version file's frontmatter is not valid YAML ({exc})") from exc
    if not isinstance(loaded, dict) or len(loaded) != len(keys) or set(loaded) != set(keys):
        raise IntegrityError("the version file's frontmatter has repeated or multi-line fields")
    return _decode_fields(keys, loaded, body)


def _decode_fields(keys: list[str], loaded: dict[str, object], body: bytes) -> VersionFile:
    """Check the store fields' order and shape, then gather the publisher keys."""
    store_keys = [k for k in keys if k in _STORE_FIELDS]
    in_order = store_keys == list(_STORE_FIELDS[: len(store_keys)])
    if keys[: len(store_keys)] != store_keys or not in_order:
        raise IntegrityError("store fields must come first, in the order version, archived, previous-hash")
    if len(store_keys) < 2:
        raise IntegrityError("the version file lacks its `version` or `archived` field")
    version_text, archived_text = loaded["version"], loaded["archived"]
    if not isinstance(version_text, str) or not _VERSION_RE.fullmatch(version_text):
        raise IntegrityError(f"`version: {version_text}` is not a positive whole number")
    if archived_text not in ("true", "false"):
        raise IntegrityError(f"`archived: {archived_text}` is neither true nor false")
    version = int(version_text)
    previous = loaded.get("previous-hash")
    if version == 1 and previous is not None:
        raise IntegrityError("version 1 must not carry a `previous-hash`")
    if version > 1 and (not isinstance(previous, str) or not _HASH_RE.fullmatch(previous)):
        raise IntegrityError(f"version {version} lacks a valid `previous-hash: sha256-<hex>`")
    publisher_keys = keys[len(store_keys) :]
    if publisher_keys != sorted(publisher_keys) or len(set(publisher_keys)) != len(publisher_keys):
        raise IntegrityError("publisher keys in the version file are not sorted")
    metadata: dict[str, str] = {}
    for raw_key in publisher_keys:
        key = raw_key[len("meta.") :] if raw_key.startswith("meta.") else raw_key
        if not (raw_key in OKF_KEYS or (raw_key.startswith("meta.") and _KEY_RE.fullmatch(key))):
            raise IntegrityError(f"unknown field `{raw_key}` in the version file")
        if key in metadata:
            raise IntegrityError(f"key `{key}` appears both bare and as `meta.{key}`")
        metadata[key] = _string_value(key, loaded[raw_key])
    return VersionFile(
        version=version,
        archived=archived_text == "true",
        previous_hash=previous if isinstance(previous, str) else None,
        metadata=metadata,
        body=body,
    )


def _string_value(key: str, value: object) -> str:
    """Values are strings; a `tags` flow list (older stores) reads back comma-joined."""
    if isinstance(value, str):
        return value
    if key == "tags" and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return ",".join(value)
    raise IntegrityError(f"the value of `{key}` in the version file is not a plain string")


def verify_chain(raw_versions: Sequence[bytes]) -> str | None:
    """Check raw version files ordered v1..vN; None when every link holds, else what broke."""
    previous_raw: bytes | None = None
    for index, raw in enumerate(raw_versions):
        number = index + 1
        try:
            vf = parse_version(raw)
        except IntegrityError as exc:
            return f"v{number}: {exc}"
        if vf.version != number:
            return f"v{number}: the file says version {vf.version}"
        if previous_raw is not None and vf.previous_hash != sha256_tag(previous_raw):
            return f"v{number}: previous-hash does not match v{number - 1}"
        previous_raw = raw
    return None


def read_archived(head: bytes) -> bool:
    """The `archived` flag from the first bytes of a version file (cheap, for listings).

    Raises:
        IntegrityError: the file does not open with `version` and `archived` lines.
    """
    match = _ARCHIVED_LINE_RE.match(head)
    if match is None:
        raise IntegrityError("the version file does not open with `version` and `archived` lines")
    return match.group(1) == b"true"


def set_archived(raw: bytes, archived: bool) -> bytes:
    """Rewrite only the `archived:` line, leaving every other byte as it was.

    Raises:
        IntegrityError: the file does not open with `version` and `archived` lines.
    """
    match = _ARCHIVED_LINE_RE.match(raw)
    if match is None:
        raise IntegrityError("the version file does not open with `version` and `archived` lines")
    start, stop = match.span(1)
    return raw[:start] + (b"true" if archived else b"false") + raw[stop:]

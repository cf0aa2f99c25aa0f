"""Frozen worlds (`demarkus-world-v1`): open, verify and stream them.

A world is a folder of four files (see `shared/worlds/FORMAT.md`)::

    manifest.json    identity, counts and the sha256 fingerprints of the other three
    corpus.jsonl     one document per line: {"path", "metadata", "versions"}
    questions.json   what the reader is asked
    rubric.json      expected answers and evidence (scorer only)

`open_world` reads the manifest and verifies every fingerprint before anything else
happens, so two runs that open the same world read the same bytes. The corpus can be
large (the PEPs world is 39 MB), so `World.documents` streams it line by line and
validates each line only when it is reached.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..errors import BadRequestError, ConfigError, DemarkusError
from ..protocol import MAX_BODY, canonical_path, validate_publisher_metadata

FORMAT = "demarkus-world-v1"
MANIFEST = "manifest.json"
CORPUS = "corpus.jsonl"
QUESTIONS = "questions.json"
RUBRIC = "rubric.json"

CATEGORIES = frozenset(
    {
        "direct",
        "section-selection",
        "multi-document",
        "supersession",
        "lineage",
        "dependency",
        "historical",
        "absent",
    }
)
"""Question categories a world may use."""
FIELD_TYPES = frozenset({"string", "number", "boolean", "array of strings"})
"""Answer field types a question may declare."""

_DIGEST_RE = re.compile(r"sha256-[0-9a-f]{64}")
_CHUNK = 1 << 20
_DOCUMENT_KEYS = frozenset({"path", "metadata", "versions"})


@dataclass(frozen=True, slots=True)
class WorldDocument:
    """One document of a world: its path, publisher metadata and bodies, oldest first."""

    path: str
    metadata: Mapping[str, str]
    versions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class World:
    """An opened world whose fingerprints have been verified."""

    root: Path
    id: str
    authority: str
    documents_count: int
    versions_count: int
    corpus_sha256: str
    questions_sha256: str
    rubric_sha256: str
    source: str = ""

    def documents(self) -> Iterator[WorldDocument]:
        """Stream the corpus, one validated document per line, in file order.

        The bytes are hashed while they are read; when the stream ends, the digest and
        the document and version counts are checked against the manifest again, so a
        file replaced after `open_world` cannot pass unnoticed.

        Raises:
            ConfigError: a line is not a valid document (the message names the line
                number), a path repeats, or the file no longer matches the manifest.
        """
        path = self.root / CORPUS
        digest = hashlib.sha256()
        seen: set[str] = set()
        documents = versions = 0
        try:
            stream = path.open("rb")
        except OSError as exc:
            raise ConfigError(
                f"world `{self.id}`: cannot read {path} ({exc.strerror or exc}); "
                "restore the file or open the world again"
            ) from exc
        with stream:
            for number, raw in enumerate(stream, start=1):
                digest.update(raw)
                document = _parse_line(path, number, raw)
                if document.path in seen:
                    raise ConfigError(
                        f"{path} line {number}: path `{document.path}` already appeared on an "
                        "earlier line; every document must have exactly one line"
                    )
                seen.add(document.path)
                documents += 1
                versions += len(document.versions)
                yield document
        actual = "sha256-" + digest.hexdigest()
        if actual != self.corpus_sha256:
            raise ConfigError(_mismatch_message(path, self.corpus_sha256, actual))
        if documents != self.documents_count or versions != self.versions_count:
            raise ConfigError(
                f"{path} holds {documents} documents and {versions} versions, but "
                f"{self.root / MANIFEST} declares {self.documents_count} documents and "
                f"{self.versions_count} versions; fix the manifest counts"
            )

    def questions(self) -> list[dict[str, Any]]:
        """The question set, as stored (each item has id, category, question, fields[, scope]).

        Raises:
            ConfigError: the file changed since it was opened, or its shape is wrong.
        """
        path = self.root / QUESTIONS
        data = _load_verified_json(path, self.questions_sha256)
        return _check_questions(path, data)

    def rubric(self) -> dict[str, Any]:
        """The rubric, keyed by question id (answer, evidence, abstain per question).

        Raises:
            ConfigError: the file changed since it was opened, or its shape is wrong.
        """
        path = self.root / RUBRIC
        data = _load_verified_json(path, self.rubric_sha256)
        return check_rubric(path, data)


def open_world(path: Path) -> World:
    """Open the world in folder `path`: read the manifest and verify the three fingerprints.

    Raises:
        ConfigError: a file is missing or unreadable, the manifest is not valid JSON or
            not a `demarkus-world-v1` manifest, or a fingerprint does not match.
    """
    root = Path(path)
    if not root.is_dir():
        raise ConfigError(f"world folder {root} does not exist; pass the folder holding {MANIFEST}")
    manifest_path = root / MANIFEST
    manifest = _load_json(manifest_path, _read_bytes(manifest_path))
    if not isinstance(manifest, dict):
        raise ConfigError(f"{manifest_path} must hold a JSON object")
    fmt = manifest.get("format")
    if fmt != FORMAT:
        raise ConfigError(
            f"{manifest_path}: format is {fmt!r}, expected {FORMAT!r}; this loader reads only that format"
        )
    world_id = _manifest_str(manifest_path, manifest, "id")
    authority = _manifest_str(manifest_path, manifest, "authority")
    if not authority.startswith("mark://") or len(authority) == len("mark://"):
        raise ConfigError(f"{manifest_path}: authority {authority!r} must look like `mark://host`")
    source = manifest.get("source", "")
    if not isinstance(source, str):
        raise ConfigError(f"{manifest_path}: `source` must be a string")
    documents = _manifest_count(manifest_path, manifest, "documents")
    versions = _manifest_count(manifest_path, manifest, "versions")
    digests: dict[str, str] = {}
    for key, name in (
        ("corpus_sha256", CORPUS),
        ("questions_sha256", QUESTIONS),
        ("rubric_sha256", RUBRIC),
    ):
        expected = _manifest_str(manifest_path, manifest, key)
        if not _DIGEST_RE.fullmatch(expected):
            raise ConfigError(
                f"{manifest_path}: `{key}` is {expected!r}; expected `sha256-` followed by 64 lowercase hex digits"
            )
        file_path = root / name
        actual = file_sha256(file_path)
        if actual != expected:
            raise ConfigError(_mismatch_message(file_path, expected, actual))
        digests[key] = expected
    return World(
        root=root,
        id=world_id,
        authority=authority,
        documents_count=documents,
        versions_count=versions,
        corpus_sha256=digests["corpus_sha256"],
        questions_sha256=digests["questions_sha256"],
        rubric_sha256=digests["rubric_sha256"],
        source=source,
    )


def demo_world_path() -> Path:
    """The folder of the demo world shipped inside the package (`demarkus/worlds/demo`)."""
    folder = importlib.resources.files(__package__) / "demo"
    if not isinstance(folder, os.PathLike):  # a zipped install: resources are not plain files
        raise ConfigError(
            "the bundled demo world is not on the file system (zipped install?); install demarkus as a regular package"
        )
    return Path(os.fspath(folder))


def file_sha256(path: Path) -> str:
    """`sha256-<hex>` of a file's bytes, read in chunks.

    Raises:
        ConfigError: the file is missing or unreadable.
    """
    digest = hashlib.sha256()
    try:
        with path.open("rb") as stream:
            while chunk := stream.read(_CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise _unreadable(path, exc) from exc
    return "sha256-" + digest.hexdigest()


# --- helpers ----------------------------------------------------------------------------


def _unreadable(path: Path, exc: OSError) -> ConfigError:
    if isinstance(exc, FileNotFoundError):
        return ConfigError(f"world file {path} is missing; a world needs {_file_list()}")
    return ConfigError(f"cannot read world file {path} ({exc.strerror or exc})")


def _file_list() -> str:
    return ", ".join((MANIFEST, CORPUS, QUESTIONS, RUBRIC))


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise _unreadable(path, exc) from exc


def _load_json(path: Path, data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not valid UTF-8 (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc


def _load_verified_json(path: Path, expected: str) -> Any:
    data = _read_bytes(path)
    actual = "sha256-" + hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise ConfigError(_mismatch_message(path, expected, actual))
    return _load_json(path, data)


def _mismatch_message(path: Path, expected: str, actual: str) -> str:
    return (
        f"world file {path} does not match its fingerprint: the manifest expects {expected}, "
        f"the file has {actual}; restore the original file or rebuild the world and its manifest"
    )


def _manifest_str(path: Path, manifest: Mapping[str, Any], key: str) -> str:
    value = manifest.get(key)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{path}: `{key}` must be a non-empty string, found {value!r}")
    return value


def _manifest_count(path: Path, manifest: Mapping[str, Any], key: str) -> int:
    value = manifest.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{path}: `{key}` must be a non-negative integer, found {value!r}")
    return value


def _parse_line(path: Path, number: int, raw: bytes) -> WorldDocument:
    where = f"{path} line {number}"
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where} is not valid UTF-8 (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where} is not valid JSON: {exc.msg} at column {exc.colno}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be a JSON object with path, metadata and versions")
    missing = sorted(_DOCUMENT_KEYS - data.keys())
    if missing:
        raise ConfigError(f"{where} lacks {', '.join(missing)}")
    extra = sorted(data.keys() - _DOCUMENT_KEYS)
    if extra:
        raise ConfigError(
            f"{where} has unknown keys {', '.join(extra)}; a document line holds only path, metadata and versions"
        )
    doc_path = data["path"]
    if not (isinstance(doc_path, str) and doc_path.startswith("/") and doc_path.endswith(".md")):
        raise ConfigError(f"{where}: path {doc_path!r} must start with `/` and end in `.md`")
    try:
        canonical_path(doc_path)
    except DemarkusError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    metadata = data["metadata"]
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise ConfigError(f"{where}: metadata must be a flat map of strings to strings")
    try:
        validate_publisher_metadata(metadata)
    except BadRequestError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    versions = data["versions"]
    if not isinstance(versions, list) or not versions or not all(isinstance(v, str) for v in versions):
        raise ConfigError(f"{where}: versions must be a non-empty list of markdown bodies (strings)")
    for index, body in enumerate(versions, start=1):
        size = len(body.encode("utf-8"))
        if size > MAX_BODY:
            raise ConfigError(f"{where}: version {index} is {size} bytes; a body may hold at most {MAX_BODY}")
    return WorldDocument(path=doc_path, metadata=MappingProxyType(dict(metadata)), versions=tuple(versions))


def _check_questions(path: Path, data: Any) -> list[dict[str, Any]]:
    if not isinstance(data, list):
        raise ConfigError(f"{path} must hold a JSON array of questions")
    ids: set[str] = set()
    for index, item in enumerate(data):
        where = f"{path} item {index}"
        if not isinstance(item, dict):
            raise ConfigError(f"{where} must be an object")
        qid = item.get("id")
        if not isinstance(qid, str) or not qid:
            raise ConfigError(f"{where}: `id` must be a non-empty string")
        if qid in ids:
            raise ConfigError(f"{where}: id `{qid}` repeats")
        ids.add(qid)
        if item.get("category") not in CATEGORIES:
            raise ConfigError(
                f"{where} ({qid}): category {item.get('category')!r} is not one of {', '.join(sorted(CATEGORIES))}"
            )
        if not isinstance(item.get("question"), str) or not item["question"]:
            raise ConfigError(f"{where} ({qid}): `question` must be a non-empty string")
        fields = item.get("fields")
        if not isinstance(fields, dict) or not all(isinstance(k, str) and v in FIELD_TYPES for k, v in fields.items()):
            raise ConfigError(f"{where} ({qid}): `fields` must map names to one of {', '.join(sorted(FIELD_TYPES))}")
        scope = item.get("scope", "/")
        if not isinstance(scope, str) or not scope.startswith("/"):
            raise ConfigError(f"{where} ({qid}): `scope` must be a path starting with `/`")
    return data


def check_rubric(path: Path, data: Any) -> dict[str, Any]:
    """The rubric `data` read from `path`, once its shape is valid (public: `demarkus eval
    rescore` grades with a corrected rubric that no manifest fingerprints yet).

    Raises:
        ConfigError: an entry lacks answer, evidence or abstain, or evidence is malformed.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object keyed by question id")
    for qid, entry in data.items():
        where = f"{path} entry {qid}"
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("answer"), dict)
            or not isinstance(entry.get("evidence"), dict)
            or not isinstance(entry.get("abstain"), bool)
        ):
            raise ConfigError(f"{where} needs `answer` (object), `evidence` (object) and `abstain` (bool)")
        for field, items in entry["evidence"].items():
            if not isinstance(items, list) or not all(
                isinstance(e, dict)
                and isinstance(e.get("path"), str)
                and isinstance(e.get("version"), int)
                and not isinstance(e.get("version"), bool)
                and isinstance(e.get("anchor"), str)
                and isinstance(e.get("quote"), str)
                for e in items
            ):
                raise ConfigError(
                    f"{where}: evidence for `{field}` must be a list of {{path, version, anchor, quote}} objects"
                )
    return data

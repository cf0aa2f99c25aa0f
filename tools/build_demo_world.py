#!/usr/bin/env python3
"""Build the bundled demo world `demo-harbor-v1` from the sources in tools/demo_world/.

Sources:

    tools/demo_world/documents.toml   world identity and the metadata table of every document
    tools/demo_world/questions.toml   questions together with their rubric entries
    tools/demo_world/docs/            the markdown bodies; a document with several versions
                                      has one file per version: <name>.v1.md, <name>.v2.md, ...

Output (the `demarkus-world-v1` format of shared/worlds/FORMAT.md):

    manifest.json  corpus.jsonl  questions.json  rubric.json

Usage:

    python tools/build_demo_world.py              # rewrite src/demarkus/worlds/demo/
    python tools/build_demo_world.py --out DIR    # write into DIR instead
    python tools/build_demo_world.py --check      # exit 1 if the bundled files are stale
    python tools/build_demo_world.py --source DIR # read the sources from DIR

The output is deterministic: documents sorted by path, questions by id, JSON with sorted
keys, UTF-8, `\\n` line endings. Before writing, the sources are checked (metadata rules,
relation targets, body links and anchors, evidence quotes, absent terms), so a broken
world is never written.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from demarkus.markdown import Outline, Section, extract_links, parse_outline, parse_relations
from demarkus.worlds.world import CATEGORIES, FIELD_TYPES, FORMAT

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tools" / "demo_world"
DEFAULT_OUT = ROOT / "src" / "demarkus" / "worlds" / "demo"

REQUIRED_METADATA = ("title", "tags", "importance", "type")
MIN_WORDS, MAX_WORDS = 150, 900
MAX_METADATA_BYTES = 1000  # keys plus values, UTF-8; the protocol allows 1024

_KEY_RE = re.compile(r"[a-z0-9-]+")
_IMPORTANCE_RE = re.compile(r"0\.\d\d|1\.00")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_DASH_LINE_RE = re.compile(r"^ {0,3}-+[ \t]*$")
_HEADING_MARKUP = set("`*_[]<>\\")


class BuildError(Exception):
    """The sources do not make a valid world."""


# --- markdown ----------------------------------------------------------------------------
#
# Sections, anchors and links come from `demarkus.markdown`, the code the server and the
# world loader use, so an anchor the build accepts is an anchor the served world has.


def _outline(body: str) -> Outline:
    return parse_outline(body.encode("utf-8"))


def anchors(body: str) -> set[str]:
    return {section.anchor for section in _outline(body).sections}


def section_text(body: str, anchor: str) -> str | None:
    """The section (with its sub-sections) whose anchor is exactly `anchor`: a rubric names
    the anchor the server prints, not a spelling `Outline.find` would also accept."""
    outline = _outline(body)
    for section in outline.sections:
        if section.anchor == anchor:
            return outline.text(section).decode("utf-8")
    return None


def heading_lines(outline: Outline, section: Section) -> str:
    """The heading as written (the `#` line, or a setext heading with its underline):
    `Section.title` has the markup already stripped, and the check is that there was none."""
    return outline.body[section.start : section.heading_end].decode("utf-8")


# --- sources -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Document:
    path: str
    metadata: dict[str, str]
    versions: tuple[str, ...]


def _version_files(docs: Path, path: str, count: int) -> list[Path]:
    relative = path.lstrip("/")
    if count == 1:
        return [docs / relative]
    stem = relative[: -len(".md")]
    return [docs / f"{stem}.v{n}.md" for n in range(1, count + 1)]


def load_documents(source: Path) -> tuple[dict[str, Any], list[Document]]:
    table = tomllib.loads((source / "documents.toml").read_text(encoding="utf-8"))
    world = table["world"]
    docs_dir = source / "docs"
    documents: list[Document] = []
    used_files: set[Path] = set()
    for entry in table["document"]:
        path = entry["path"]
        count = entry["versions"]
        if not isinstance(count, int) or count < 1:
            raise BuildError(f"{path}: versions must be a positive integer")
        bodies = []
        for file in _version_files(docs_dir, path, count):
            if not file.is_file():
                raise BuildError(f"{path}: missing source file {file.relative_to(source)}")
            used_files.add(file)
            raw = file.read_bytes()
            if b"\r" in raw:
                raise BuildError(f"{file}: use \\n line endings only")
            bodies.append(raw.decode("utf-8"))
        metadata = {str(k): str(v) for k, v in entry["metadata"].items()}
        documents.append(Document(path, metadata, tuple(bodies)))
    orphans = sorted(str(f.relative_to(source)) for f in docs_dir.rglob("*.md") if f not in used_files)
    if orphans:
        raise BuildError(f"source files not listed in documents.toml: {', '.join(orphans)}")
    documents.sort(key=lambda d: d.path)
    return world, documents


def load_questions(source: Path) -> list[dict[str, Any]]:
    table = tomllib.loads((source / "questions.toml").read_text(encoding="utf-8"))
    return sorted(table["question"], key=lambda q: q["id"])


# --- checks ------------------------------------------------------------------------------


def check_documents(world: Mapping[str, Any], documents: list[Document]) -> None:
    from demarkus.protocol import validate_publisher_metadata

    authority = world["authority"]
    by_path = {d.path: d for d in documents}
    if len(by_path) != len(documents):
        raise BuildError("a document path repeats")
    current_anchors = {d.path: anchors(d.versions[-1]) for d in documents}
    for doc in documents:
        where = doc.path
        if not doc.path.startswith("/") or not doc.path.endswith(".md"):
            raise BuildError(f"{where}: a path starts with `/` and ends in `.md`")
        for key in REQUIRED_METADATA:
            if not doc.metadata.get(key):
                raise BuildError(f"{where}: metadata `{key}` is required")
        validate_publisher_metadata(doc.metadata)
        size = sum(len(k.encode()) + len(v.encode()) for k, v in doc.metadata.items())
        if size >= MAX_METADATA_BYTES:
            raise BuildError(f"{where}: metadata is {size} bytes; keep it under 1000")
        if not _IMPORTANCE_RE.fullmatch(doc.metadata["importance"]):
            raise BuildError(f"{where}: importance must be 0.00 .. 1.00 with two decimals")
        tags = doc.metadata["tags"].split(",")
        if not any(t.startswith("status:") for t in tags) or not any(t.startswith("type:") for t in tags):
            raise BuildError(f"{where}: tags need a `status:` and a `type:` axis")
        # Resolved as the loader resolves them: against the document's mark:// URL, so a
        # reference to this world's own authority is checked like a bare path.
        base = authority + doc.path
        check_relations(where, doc.metadata, base, by_path, current_anchors)
        for number, body in enumerate(doc.versions, start=1):
            check_body(f"{where} v{number}", body)
            current = number == len(doc.versions)
            for link in extract_links(body.encode("utf-8"), base):
                if link.external or link.target.startswith("mark://"):
                    continue  # the web, or another authority
                written = f"{link.target}#{link.fragment}" if link.fragment else link.target
                if link.target not in by_path:
                    raise BuildError(f"{where} v{number}: link {written} has no target")
                if current and link.fragment and link.fragment not in current_anchors[link.target]:
                    raise BuildError(f"{where} v{number}: link {written}: no such anchor")


def check_relations(
    where: str,
    metadata: Mapping[str, str],
    base: str,
    by_path: Mapping[str, Document],
    current_anchors: Mapping[str, set[str]],
) -> None:
    """Every `rel-*` reference names a document of this world (and an anchor of its current
    version), or another authority. The loader drops a bad reference and carries on; a
    world we ship must not have one."""
    for key, value in sorted(metadata.items()):
        if key.startswith("rel-") and any(not piece.strip() for piece in value.split(",")):
            raise BuildError(f"{where}: {key} has an empty reference")
    relations, rejected = parse_relations(metadata, base)
    for reject in rejected:
        raise BuildError(f"{where}: {reject.key} reference {reject.value!r} is rejected ({reject.reason})")
    for relation in relations:
        if relation.authority is not None:
            continue
        if relation.target not in by_path:
            raise BuildError(f"{where}: rel-{relation.predicate} target {relation.target} does not exist")
        if relation.fragment and relation.fragment not in current_anchors[relation.target]:
            raise BuildError(f"{where}: rel-{relation.predicate} anchor #{relation.fragment} not in {relation.target}")


def check_body(where: str, body: str) -> None:
    if not body.endswith("\n") or body.endswith("\n\n"):
        raise BuildError(f"{where}: a body ends with exactly one newline")
    if body.startswith("---"):
        raise BuildError(f"{where}: a body must not start with a frontmatter fence")
    words = len(body.split())
    if not MIN_WORDS <= words <= MAX_WORDS:
        raise BuildError(f"{where}: {words} words; keep between {MIN_WORDS} and {MAX_WORDS}")
    outline = _outline(body)
    found = outline.sections
    if not found or found[0].start != 0 or found[0].level != 1:
        raise BuildError(f"{where}: a body starts with its level-1 title")
    for section in found:
        heading = heading_lines(outline, section)
        if _HEADING_MARKUP & set(heading):
            raise BuildError(f"{where}: heading {heading.strip()!r} contains inline markup")
    fence: str | None = None
    for line in body.splitlines():
        if line != line.rstrip():
            raise BuildError(f"{where}: trailing whitespace in {line!r}")
        if "\t" in line:
            raise BuildError(f"{where}: tab in {line!r}")
        if fence is not None:
            if line.strip().startswith(fence) and set(line.strip()) == {fence[0]}:
                fence = None
            continue
        match = _FENCE_RE.match(line)
        if match:
            fence = match.group(1)
        elif _DASH_LINE_RE.match(line):
            raise BuildError(f"{where}: a line of dashes is ambiguous (rule or heading)")
    if fence is not None:
        raise BuildError(f"{where}: a code fence is never closed")


def _matches_type(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def check_questions(questions: list[dict[str, Any]], documents: list[Document]) -> None:
    by_path = {d.path: d for d in documents}
    ids = [q["id"] for q in questions]
    if len(set(ids)) != len(ids):
        raise BuildError("a question id repeats")
    for q in questions:
        where = q["id"]
        if q["category"] not in CATEGORIES:
            raise BuildError(f"{where}: unknown category {q['category']}")
        fields = q["fields"]
        if not fields or any(kind not in FIELD_TYPES for kind in fields.values()):
            raise BuildError(f"{where}: fields need one of {sorted(FIELD_TYPES)}")
        scope = q.get("scope", "/")
        if q["category"] == "absent":
            if q["answer"] or q["evidence"] or q["abstain"] is not True:
                raise BuildError(f"{where}: absent questions have no answer and abstain")
            for term in q.get("absent_terms", []):
                pattern = re.compile(rf"\b{re.escape(term)}\b", re.IGNORECASE)
                for doc in documents:
                    for body in doc.versions:
                        if pattern.search(body) or any(pattern.search(v) for v in doc.metadata.values()):
                            raise BuildError(f"{where}: `{term}` occurs in {doc.path}")
            continue
        if q["abstain"] is not False:
            raise BuildError(f"{where}: answered questions have abstain = false")
        if set(q["answer"]) != set(fields) or set(q["evidence"]) != set(fields):
            raise BuildError(f"{where}: answer and evidence must cover exactly the fields")
        for name, kind in fields.items():
            if not _matches_type(q["answer"][name], kind):
                raise BuildError(f"{where}: answer {name} is not a {kind}")
            items = q["evidence"][name]
            if not items:
                raise BuildError(f"{where}: field {name} has no evidence")
            for item in items:
                check_evidence(f"{where}.{name}", item, by_path, scope)
        paths = {item["path"] for items in q["evidence"].values() for item in items}
        if q["category"] in ("multi-document", "supersession", "lineage", "dependency"):
            if len(paths) < 2:
                raise BuildError(f"{where}: a {q['category']} question needs two documents")


def check_evidence(where: str, item: Mapping[str, Any], by_path: Mapping[str, Document], scope: str) -> None:
    if set(item) != {"path", "version", "anchor", "quote"}:
        raise BuildError(f"{where}: evidence has path, version, anchor and quote")
    doc = by_path.get(item["path"])
    if doc is None:
        raise BuildError(f"{where}: no document {item['path']}")
    if scope != "/" and not doc.path.startswith(scope.rstrip("/") + "/"):
        raise BuildError(f"{where}: {doc.path} is outside the scope {scope}")
    version = item["version"]
    if not 1 <= version <= len(doc.versions):
        raise BuildError(f"{where}: {doc.path} has no version {version}")
    text = section_text(doc.versions[version - 1], item["anchor"])
    if text is None:
        raise BuildError(f"{where}: {doc.path} v{version} has no section #{item['anchor']}")
    count = text.count(item["quote"])
    if count != 1:
        raise BuildError(
            f"{where}: quote occurs {count} times in {doc.path} v{version} #{item['anchor']}: {item['quote']!r}"
        )


# --- output ------------------------------------------------------------------------------


def _json(data: Any) -> bytes:
    return (json.dumps(data, ensure_ascii=False, sort_keys=True, indent=2) + "\n").encode()


def render(world: Mapping[str, Any], documents: list[Document], questions: list[dict[str, Any]]):
    """The four files of the world, as bytes, keyed by file name."""
    corpus = b"".join(
        (
            json.dumps(
                {"path": d.path, "metadata": d.metadata, "versions": list(d.versions)},
                ensure_ascii=False,
                sort_keys=True,
                separators=(",", ":"),
            )
            + "\n"
        ).encode()
        for d in documents
    )
    public = [{k: q[k] for k in ("id", "category", "question", "fields", "scope") if k in q} for q in questions]
    rubric = {q["id"]: {"answer": q["answer"], "evidence": q["evidence"], "abstain": q["abstain"]} for q in questions}
    files = {"corpus.jsonl": corpus, "questions.json": _json(public), "rubric.json": _json(rubric)}

    def digest(name: str) -> str:
        return "sha256-" + hashlib.sha256(files[name]).hexdigest()

    manifest = {
        "format": FORMAT,
        "id": world["id"],
        "authority": world["authority"],
        "source": world["source"],
        "documents": len(documents),
        "versions": sum(len(d.versions) for d in documents),
        "corpus_sha256": digest("corpus.jsonl"),
        "questions_sha256": digest("questions.json"),
        "rubric_sha256": digest("rubric.json"),
    }
    files["manifest.json"] = _json(manifest)
    return dict(sorted(files.items()))


def build(source: Path = SOURCE) -> dict[str, bytes]:
    world, documents = load_documents(source)
    questions = load_questions(source)
    check_documents(world, documents)
    check_questions(questions, documents)
    return render(world, documents, questions)


def _stale(files: Mapping[str, bytes], out: Path) -> Iterable[str]:
    for name, data in files.items():
        path = out / name
        if not path.is_file() or path.read_bytes() != data:
            yield name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=SOURCE, help="source folder")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    try:
        files = build(args.source)
    except BuildError as exc:
        print(f"build_demo_world: {exc}", file=sys.stderr)
        return 2
    if args.check:
        stale = list(_stale(files, args.out))
        if stale:
            print(f"build_demo_world: stale in {args.out}: {', '.join(stale)}", file=sys.stderr)
            return 1
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (args.out / name).write_bytes(data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The bundled demo world `demo-harbor-v1`: shape, relations, versions and rubric evidence.

Sections are computed here with a small ATX/setext splitter of our own (bytes in, byte
ranges out), independent of the build script; a second test cross-checks every anchor and
quote with `demarkus.markdown.parse_outline`.
"""

from __future__ import annotations

import json
import posixpath
import re
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import pytest

from demarkus.protocol import validate_publisher_metadata
from demarkus.worlds import World, WorldDocument, demo_world_path, open_world

from .rubric import assert_quote_in_section, has_kind
from .rubric import evidence as rubric_evidence

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "tools" / "build_demo_world.py"
QUESTION_SOURCE = REPO / "tools" / "demo_world" / "questions.toml"
AUTHORITY = "mark://demo.world"

EXPECTED_CATEGORIES = {
    "direct": 2,
    "section-selection": 1,
    "multi-document": 1,
    "supersession": 2,
    "lineage": 1,
    "dependency": 1,
    "historical": 1,
    "absent": 1,
}
MULTI_DOCUMENT = {"multi-document", "supersession", "lineage", "dependency"}


# --- a small section splitter (CommonMark ATX and setext headings, fences skipped) --------

_ATX = re.compile(rb"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(rb"^ {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(rb"^ {0,3}(=+|-+)[ \t]*$")
_NOT_PARAGRAPH = re.compile(rb"^ {0,3}(?:[-*+] |\d+[.)] |>|\|)|^ {4}")


def split_sections(body: bytes) -> dict[str, tuple[int, int, int]]:
    """anchor -> (level, start, end) byte range of each section, sub-sections included."""
    headings: list[tuple[int, str, int]] = []
    lines = body.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    fence = None
    paragraph_line: int | None = None
    for i, raw in enumerate(lines):
        line = raw.rstrip(b"\n")
        if fence is not None:
            if line.strip().startswith(fence) and not line.strip().strip(fence[:1]):
                fence = None
            continue
        if m := _FENCE.match(line):
            fence, paragraph_line = m.group(1), None
            continue
        if m := _ATX.match(line):
            text = (m.group(2) or b"").strip().decode()
            if text:
                headings.append((len(m.group(1)), text, starts[i]))
            paragraph_line = None
            continue
        if (m := _SETEXT.match(line)) and paragraph_line is not None:
            level = 1 if m.group(1).startswith(b"=") else 2
            headings.append((level, lines[paragraph_line].strip().decode(), starts[paragraph_line]))
            paragraph_line = None
            continue
        if not line.strip() or _NOT_PARAGRAPH.match(line):
            paragraph_line = None
        elif paragraph_line is None:
            paragraph_line = i
    result: dict[str, tuple[int, int, int]] = {}
    for n, (level, text, start) in enumerate(headings):
        end = next((s for lv, _, s in headings[n + 1 :] if lv <= level), len(body))
        base = "".join("-" if c.isspace() else c for c in text.lower() if c.isalnum() or c in "_-" or c.isspace())
        anchor, k = base, 0
        while anchor in result:
            k += 1
            anchor = f"{base}-{k}"
        result[anchor] = (level, start, end)
    return result


def test_splitter_follows_the_format_rules() -> None:
    body = (
        b"Title\n=====\n\nintro\n\n## Notes\n\na\n\n### Deep\n\nb\n\n"
        b"```bash\n# not a heading\n```\n\n## Notes\n\nc\n\n## Notes-1\n\n## What's new? (v2)\n"
    )
    sections = split_sections(body)
    assert list(sections) == ["title", "notes", "deep", "notes-1", "notes-1-1", "whats-new-v2"]
    level, start, end = sections["notes"]
    assert level == 2
    assert body[start:end] == b"## Notes\n\na\n\n### Deep\n\nb\n\n```bash\n# not a heading\n```\n\n"
    assert sections["title"][1:] == (0, len(body))


# --- the world, loaded once ---------------------------------------------------------------


@cache
def world() -> World:
    return open_world(demo_world_path())


@cache
def documents() -> Mapping[str, WorldDocument]:
    return {doc.path: doc for doc in world().documents()}


@cache
def sections_of(path: str, version: int) -> dict[str, tuple[int, int, int]]:
    return split_sections(documents()[path].versions[version - 1].encode())


def resolve(base: str, ref: str) -> tuple[str, str, str]:
    """(authority, path, fragment) of a relation value or link written in document `base`."""
    ref, _, fragment = ref.partition("#")
    if ref.startswith("mark://"):
        host, _, rest = ref[len("mark://") :].partition("/")
        return "mark://" + host, "/" + rest, fragment
    if not ref:
        return AUTHORITY, base, fragment
    joined = ref if ref.startswith("/") else posixpath.join(posixpath.dirname(base), ref)
    return AUTHORITY, posixpath.normpath(joined), fragment


def relations(predicate: str) -> list[tuple[str, str, str, str]]:
    """(source, authority, target, fragment) for every reference of `rel-<predicate>`."""
    out = []
    for doc in documents().values():
        for ref in doc.metadata.get(f"rel-{predicate}", "").split(","):
            if ref.strip():
                out.append((doc.path, *resolve(doc.path, ref.strip())))
    return out


# --- identity and shape -------------------------------------------------------------------


def test_demo_world_opens_with_valid_fingerprints() -> None:
    w = world()
    assert w.id == "demo-harbor-v1"
    assert w.authority == AUTHORITY
    assert w.root == demo_world_path()
    manifest = json.loads((w.root / "manifest.json").read_text())
    assert manifest["format"] == "demarkus-world-v1"
    assert w.documents_count == len(documents())
    assert w.versions_count == sum(len(d.versions) for d in documents().values())


def test_about_thirty_documents_in_several_areas() -> None:
    paths = list(documents())
    assert 28 <= len(paths) <= 36
    assert paths == sorted(paths)
    assert "/index.md" in paths
    areas = {p.split("/")[1] for p in paths if p.count("/") > 1}
    assert {"decisions", "runbooks", "architecture", "operations", "reference"} <= areas


def test_every_document_has_complete_metadata() -> None:
    for doc in documents().values():
        meta = dict(doc.metadata)
        assert {"title", "tags", "importance", "type"} <= set(meta), doc.path
        assert re.fullmatch(r"0\.\d\d|1\.00", meta["importance"]), doc.path
        tags = meta["tags"].split(",")
        assert any(t.startswith("status:") for t in tags), doc.path
        assert any(t.startswith("type:") for t in tags), doc.path
        validate_publisher_metadata(meta)
        assert sum(len(k.encode()) + len(v.encode()) for k, v in meta.items()) < 1000, doc.path


def test_bodies_are_plain_markdown_of_reasonable_length() -> None:
    for doc in documents().values():
        for n, body in enumerate(doc.versions, start=1):
            assert not body.startswith("---"), (doc.path, n)
            assert "\r" not in body
            assert 150 <= len(body.split()) <= 900, (doc.path, n, len(body.split()))
            sections = split_sections(body.encode())
            assert len(sections) >= 3, (doc.path, n)
            assert next(iter(sections.values()))[:2] == (1, 0), (doc.path, n)


def test_section_edge_cases_are_present() -> None:
    bodies = [b for d in documents().values() for b in d.versions]
    assert any({"notes", "notes-1"} <= set(split_sections(b.encode())) for b in bodies)
    setext = re.compile(r"^[^\n#].*\n=+\n", re.MULTILINE)
    assert any(setext.match(b) for b in bodies)
    in_fence = re.compile(r"^```[a-z]*\n(?:(?!```).*\n)*# not a heading\n", re.MULTILINE)
    assert any(in_fence.search(b) for b in bodies)
    for body in bodies:
        assert "not-a-heading" not in split_sections(body.encode())


# --- relations ---------------------------------------------------------------------------


def test_every_same_authority_relation_target_exists() -> None:
    checked = 0
    for doc in documents().values():
        for key, value in doc.metadata.items():
            if not key.startswith("rel-"):
                continue
            for ref in value.split(","):
                authority, target, fragment = resolve(doc.path, ref.strip())
                if authority != AUTHORITY:
                    continue
                assert target in documents(), (doc.path, key, ref)
                assert target != doc.path, (doc.path, key)
                if fragment:
                    current = len(documents()[target].versions)
                    assert fragment in sections_of(target, current), (doc.path, key, ref)
                checked += 1
    assert checked >= 20


def test_one_relation_points_to_another_authority() -> None:
    foreign = [(s, a, t) for s, a, t, _ in relations("related") if a != AUTHORITY]
    assert foreign == [("/decisions/adr-0008-pier-framing.md", "mark://partner.world", "/specs/wire.md")]


def test_a_supersession_chain_of_three_declared_in_both_directions() -> None:
    supersedes = {(s, t) for s, _, t, _ in relations("supersedes")}
    superseded_by = {(s, t) for s, _, t, _ in relations("superseded-by")}
    assert {(old, new) for new, old in supersedes} == superseded_by
    chains = [(a, b, c) for c, b in supersedes for b2, a in supersedes if b2 == b]
    assert (
        "/decisions/adr-0003-sqlite-job-store.md",
        "/decisions/adr-0007-segment-log.md",
        "/decisions/adr-0012-replicated-segment-log.md",
    ) in chains
    for path in {p for pair in supersedes for p in pair}:
        tags = documents()[path].metadata["tags"].split(",")
        replaced = any(s == path for s, _ in superseded_by)
        assert ("status:superseded" in tags) == replaced, path


def test_runbooks_depend_on_runbooks_and_one_on_a_section() -> None:
    edges = relations("depends-on")
    assert len(edges) >= 5
    assert all(s.startswith("/runbooks/") and t.startswith("/runbooks/") for s, _, t, _ in edges)
    with_fragment = [(s, t, f) for s, _, t, f in edges if f]
    assert (
        "/runbooks/restore-from-snapshot.md",
        "/runbooks/verify-cluster-health.md",
        "quorum-check",
    ) in with_fragment


def test_derived_and_implementing_documents() -> None:
    derived = relations("derived-from")
    assert {s for s, *_ in derived} >= {"/faq.md", "/summaries/storage-history.md"}
    implements = {(s, t) for s, _, t, _ in relations("implements")}
    assert (
        "/architecture/replicated-log.md",
        "/decisions/adr-0012-replicated-segment-log.md",
    ) in implements


def test_body_links_resolve_inside_the_world() -> None:
    link = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
    fence = re.compile(r"^ {0,3}```.*?^ {0,3}```", re.MULTILINE | re.DOTALL)
    absolute = relative = 0
    for doc in documents().values():
        for n, body in enumerate(doc.versions, start=1):
            text = re.sub(r"`[^`\n]*`", "", fence.sub("", body))
            for ref in link.findall(text):
                authority, target, fragment = resolve(doc.path, ref)
                if authority != AUTHORITY:
                    continue
                assert target in documents(), (doc.path, n, ref)
                absolute += ref.startswith("/")
                relative += not ref.startswith("/")
                if fragment and n == len(doc.versions):
                    current = len(documents()[target].versions)
                    assert fragment in sections_of(target, current), (doc.path, ref)
    assert absolute >= 10 and relative >= 10


# --- versions ----------------------------------------------------------------------------


def test_at_least_five_documents_have_two_to_four_versions() -> None:
    multi = {p: d.versions for p, d in documents().items() if len(d.versions) > 1}
    assert len(multi) >= 5
    for path, versions in multi.items():
        assert 2 <= len(versions) <= 4, path
        assert len(set(versions)) == len(versions), path


def test_facts_change_between_versions() -> None:
    retention = documents()["/operations/retention.md"].versions
    assert "kept for 3 days" in retention[0] and "kept for 7 days" in retention[-1]
    config = documents()["/operations/configuration.md"].versions
    assert "127.0.0.1:7421" in config[0] and "127.0.0.1:9420" in config[-1]


# --- questions and rubric ----------------------------------------------------------------


def test_questions_cover_the_categories() -> None:
    questions = world().questions()
    assert len(questions) == 10
    assert Counter(q["category"] for q in questions) == EXPECTED_CATEGORIES
    assert [q["id"] for q in questions] == [f"q{n:02d}" for n in range(1, 11)]
    for q in questions:
        assert set(q) == {"id", "category", "question", "fields", "scope"}
        scope = q["scope"]
        assert scope == "/" or scope.rstrip("/") in {p.rsplit("/", 1)[0] for p in documents()}


def test_rubric_matches_the_questions() -> None:
    rubric = world().rubric()
    questions = {q["id"]: q for q in world().questions()}
    assert set(rubric) == set(questions)
    for qid, entry in rubric.items():
        q = questions[qid]
        assert set(entry) == {"answer", "evidence", "abstain"}
        if q["category"] == "absent":
            assert entry == {"answer": {}, "evidence": {}, "abstain": True}
            continue
        assert entry["abstain"] is False
        assert set(entry["answer"]) == set(q["fields"]) == set(entry["evidence"])
        for field, kind in q["fields"].items():
            assert has_kind(entry["answer"][field], kind), (qid, field)
            assert entry["evidence"][field], (qid, field)


def test_every_quote_occurs_once_in_its_section() -> None:
    evidence = rubric_evidence(world())
    assert len(evidence) >= 20
    for qid, item in evidence:
        doc = documents()[item["path"]]
        assert 1 <= item["version"] <= len(doc.versions), (qid, item)
        sections = sections_of(item["path"], item["version"])
        assert item["anchor"] in sections, (qid, item["anchor"])
        _, start, end = sections[item["anchor"]]
        body = doc.versions[item["version"] - 1].encode()
        assert body[start:end].count(item["quote"].encode()) == 1, (qid, item["quote"])


def test_quotes_agree_with_parse_outline() -> None:
    markdown = pytest.importorskip("demarkus.markdown")
    for qid, item in rubric_evidence(world()):
        assert_quote_in_section(documents(), qid, item)
    for doc in documents().values():
        for body in doc.versions:
            ours = split_sections(body.encode())
            theirs = markdown.parse_outline(body.encode()).sections
            assert [(s.anchor, s.level, s.start, s.end) for s in theirs] == [
                (a, lv, s, e) for a, (lv, s, e) in ours.items()
            ], doc.path


def test_questions_stay_inside_their_scope() -> None:
    rubric = world().rubric()
    for q in world().questions():
        scope = q["scope"].rstrip("/") + "/"
        for items in rubric[q["id"]]["evidence"].values():
            for item in items:
                assert q["scope"] == "/" or item["path"].startswith(scope), (q["id"], item)


def test_multi_document_questions_need_two_related_documents() -> None:
    linked: set[frozenset[str]] = set()
    for doc in documents().values():
        for key, value in doc.metadata.items():
            if key.startswith("rel-"):
                for ref in value.split(","):
                    authority, target, _ = resolve(doc.path, ref.strip())
                    if authority == AUTHORITY:
                        linked.add(frozenset({doc.path, target}))
    rubric = world().rubric()
    for q in world().questions():
        if q["category"] not in MULTI_DOCUMENT:
            continue
        paths = {i["path"] for items in rubric[q["id"]]["evidence"].values() for i in items}
        assert len(paths) >= 2, q["id"]
        assert any(frozenset({a, b}) in linked for a in paths for b in paths if a < b), q["id"]


def test_historical_question_needs_an_old_version() -> None:
    rubric = world().rubric()
    for q in world().questions():
        if q["category"] == "historical":
            items = [i for items in rubric[q["id"]]["evidence"].values() for i in items]
            assert all(i["version"] < len(documents()[i["path"]].versions) for i in items)


def test_absent_question_is_not_answered_anywhere() -> None:
    source = tomllib.loads(QUESTION_SOURCE.read_text(encoding="utf-8"))
    absent = [q for q in source["question"] if q["category"] == "absent"]
    assert len(absent) == 1 and absent[0]["absent_terms"]
    for term in absent[0]["absent_terms"]:
        pattern = re.compile(rf"\b{re.escape(term)}\b", re.IGNORECASE)
        for doc in documents().values():
            assert not any(pattern.search(b) for b in doc.versions), (term, doc.path)
            assert not any(pattern.search(v) for v in doc.metadata.values()), (term, doc.path)


# --- the build script --------------------------------------------------------------------


def test_build_script_reproduces_the_bundled_files(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(BUILD_SCRIPT), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    bundled = demo_world_path()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["corpus.jsonl", "manifest.json", "questions.json", "rubric.json"]
    for name in names:
        assert (tmp_path / name).read_bytes() == (bundled / name).read_bytes(), name
        assert b"\r" not in (tmp_path / name).read_bytes()


def test_build_script_refuses_a_broken_quote(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(REPO / "tools" / "demo_world", source)
    text = (source / "questions.toml").read_text(encoding="utf-8")
    assert text.count("A payload may be at most 256 KiB.") == 1
    (source / "questions.toml").write_text(
        text.replace("A payload may be at most 256 KiB.", "A payload may be at most 512 KiB."),
        encoding="utf-8",
    )
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, str(BUILD_SCRIPT), "--source", str(source), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "q01.max_payload_kib: quote occurs 0 times" in result.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("file", "old", "new", "message"),
    [
        (
            "docs/runbooks/disk-pressure.md",
            "replicated-log.md#compaction)",
            "replicated-log.md#compactions)",
            "/runbooks/disk-pressure.md v1: link /architecture/replicated-log.md#compactions: no such anchor",
        ),
        (
            "documents.toml",
            'verify-cluster-health.md#quorum-check"',
            'verify-cluster-health.md#quorum"',
            "rel-depends-on anchor #quorum not in /runbooks/verify-cluster-health.md",
        ),
        (
            "documents.toml",
            'rel-depends-on = "take-snapshot.md,',
            'rel-depends-on = "restore-from-snapshot.md,',
            "rel-depends-on reference 'restore-from-snapshot.md' is rejected (self reference)",
        ),
        ("docs/faq.md", "\n## Workers\n", "\n## The `worker` process\n", "contains inline markup"),
    ],
)
def test_build_script_refuses_broken_anchors_relations_and_headings(
    tmp_path: Path, file: str, old: str, new: str, message: str
) -> None:
    """The build finds sections, anchors, links and relations with `demarkus.markdown`, so
    what it refuses is what the served world would get wrong."""
    source = tmp_path / "src"
    shutil.copytree(REPO / "tools" / "demo_world", source)
    text = (source / file).read_text(encoding="utf-8")
    assert text.count(old) == 1
    (source / file).write_text(text.replace(old, new), encoding="utf-8")
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, str(BUILD_SCRIPT), "--source", str(source), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert message in result.stderr
    assert not out.exists()

"""open_world: fingerprints, manifest checks and lazy line validation."""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from demarkus.errors import ConfigError
from demarkus.worlds import World, WorldDocument, demo_world_path, open_world

PEPS = Path(__file__).resolve().parents[3] / "shared" / "worlds" / "peps"
if not PEPS.is_dir():
    PEPS = Path("/work/shared/worlds/peps")
needs_peps = pytest.mark.skipif(not PEPS.is_dir(), reason="the shared PEPs world is not present")

FILES = ("manifest.json", "corpus.jsonl", "questions.json", "rubric.json")
FINGERPRINTED = ("corpus.jsonl", "questions.json", "rubric.json")


def _digest(data: bytes) -> str:
    return "sha256-" + hashlib.sha256(data).hexdigest()


def _line(path: str = "/a.md", **overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"path": path, "metadata": {"title": "A"}, "versions": ["# A\n"]}
    doc.update(overrides)
    return doc


def write_world(
    root: Path,
    lines: list[Any] | None = None,
    *,
    raw_corpus: bytes | None = None,
    questions: bytes | None = None,
    rubric: bytes | None = None,
    **manifest_overrides: Any,
) -> Path:
    """A small valid world in `root`, with the manifest computed from the files."""
    root.mkdir(parents=True, exist_ok=True)
    if lines is None:
        lines = [_line("/a.md"), _line("/b/c.md", versions=["# C\n", "# C\n\nv2\n"])]
    corpus = raw_corpus
    if corpus is None:
        corpus = b"".join((x if isinstance(x, bytes) else json.dumps(x).encode()) + b"\n" for x in lines)
    if questions is None:
        questions = json.dumps(
            [
                {
                    "id": "q1",
                    "category": "direct",
                    "question": "What is A?",
                    "fields": {"a": "string"},
                    "scope": "/",
                }
            ]
        ).encode()
    if rubric is None:
        rubric = json.dumps(
            {
                "q1": {
                    "answer": {"a": "A"},
                    "evidence": {"a": [{"path": "/a.md", "version": 1, "anchor": "a", "quote": "A"}]},
                    "abstain": False,
                }
            }
        ).encode()
    (root / "corpus.jsonl").write_bytes(corpus)
    (root / "questions.json").write_bytes(questions)
    (root / "rubric.json").write_bytes(rubric)
    docs = [x for x in lines if isinstance(x, dict)]
    manifest = {
        "format": "demarkus-world-v1",
        "id": "tiny-v1",
        "authority": "mark://tiny.world",
        "source": "tests",
        "documents": len(docs),
        "versions": sum(len(d.get("versions", [])) for d in docs),
        "corpus_sha256": _digest(corpus),
        "questions_sha256": _digest(questions),
        "rubric_sha256": _digest(rubric),
    }
    manifest.update(manifest_overrides)
    manifest = {k: v for k, v in manifest.items() if v is not None}
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return root


def _flip_one_byte(path: Path, offset: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    index = len(data) // 2 if offset is None else offset
    # replace a byte by another printable byte so that the file stays valid text
    data[index] = ord("x") if data[index] != ord("x") else ord("y")
    path.write_bytes(bytes(data))


# --- the shared PEPs world -----------------------------------------------------------------


@needs_peps
def test_peps_world_opens_with_matching_fingerprints() -> None:
    world = open_world(PEPS)
    manifest = json.loads((PEPS / "manifest.json").read_text())
    assert world.root == PEPS
    assert world.id == "peps-2026-08-v1"
    assert world.authority == "mark://peps.world"
    assert (world.documents_count, world.versions_count) == (736, 2014)
    assert world.corpus_sha256 == manifest["corpus_sha256"]
    assert world.questions_sha256 == manifest["questions_sha256"]
    assert world.rubric_sha256 == manifest["rubric_sha256"]
    assert world.source.startswith("Python Enhancement Proposals")


@needs_peps
def test_peps_documents_stream_every_line() -> None:
    world = open_world(PEPS)
    stream = world.documents()
    assert inspect.isgenerator(stream)
    documents = versions = 0
    paths = set()
    for doc in stream:
        assert isinstance(doc, WorldDocument)
        assert doc.path.startswith("/peps/") and doc.path.endswith(".md")
        assert isinstance(doc.versions, tuple) and doc.versions
        paths.add(doc.path)
        documents += 1
        versions += len(doc.versions)
    assert (documents, versions) == (736, 2014)
    assert len(paths) == 736


@needs_peps
def test_peps_questions_and_rubric() -> None:
    world = open_world(PEPS)
    questions = world.questions()
    rubric = world.rubric()
    assert len(questions) == 16
    assert {q["id"] for q in questions} == set(rubric)
    assert rubric["q16"]["abstain"] is True


@needs_peps
@pytest.mark.parametrize("name", FINGERPRINTED)
def test_peps_copy_with_one_changed_byte_is_refused(tmp_path: Path, name: str) -> None:
    copy = tmp_path / "peps"
    shutil.copytree(PEPS, copy)
    for file in copy.iterdir():
        file.chmod(0o644)
    open_world(copy)  # the untouched copy opens
    _flip_one_byte(copy / name)
    with pytest.raises(ConfigError) as info:
        open_world(copy)
    message = str(info.value)
    manifest = json.loads((copy / "manifest.json").read_text())
    expected = manifest[name.split(".")[0] + "_sha256"]
    assert name in message
    assert expected in message
    assert _digest((copy / name).read_bytes()) in message


# --- fingerprints on a small world -------------------------------------------------------


@pytest.mark.parametrize("name", FINGERPRINTED)
def test_one_changed_byte_is_refused(tmp_path: Path, name: str) -> None:
    root = write_world(tmp_path / "w")
    _flip_one_byte(root / name, offset=5)
    with pytest.raises(ConfigError, match="does not match its fingerprint") as info:
        open_world(root)
    assert name in str(info.value)
    assert _digest((root / name).read_bytes()) in str(info.value)


def test_changed_fingerprint_in_manifest_is_refused(tmp_path: Path) -> None:
    root = write_world(tmp_path / "w")
    manifest = json.loads((root / "manifest.json").read_text())
    digest = manifest["rubric_sha256"]
    manifest["rubric_sha256"] = digest[:-1] + ("0" if digest[-1] != "0" else "1")
    (root / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="rubric.json"):
        open_world(root)


def test_small_world_opens_and_streams(tmp_path: Path) -> None:
    root = write_world(tmp_path / "w")
    world = open_world(root)
    assert isinstance(world, World)
    assert (world.id, world.authority, world.source) == ("tiny-v1", "mark://tiny.world", "tests")
    docs = list(world.documents())
    assert [d.path for d in docs] == ["/a.md", "/b/c.md"]
    assert docs[1].versions == ("# C\n", "# C\n\nv2\n")
    assert dict(docs[0].metadata) == {"title": "A"}
    with pytest.raises(TypeError):
        docs[0].metadata["title"] = "B"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        docs[0].path = "/x.md"  # type: ignore[misc]
    assert world.questions()[0]["id"] == "q1"
    assert world.rubric()["q1"]["answer"] == {"a": "A"}


def test_open_world_accepts_a_string_path(tmp_path: Path) -> None:
    root = write_world(tmp_path / "w")
    assert open_world(str(root)).root == root  # type: ignore[arg-type]


# --- missing files, bad JSON, bad manifest ------------------------------------------------


@pytest.mark.parametrize("name", FILES)
def test_missing_file_is_refused(tmp_path: Path, name: str) -> None:
    root = write_world(tmp_path / "w")
    (root / name).unlink()
    with pytest.raises(ConfigError, match="is missing") as info:
        open_world(root)
    assert name in str(info.value)


def test_missing_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        open_world(tmp_path / "nowhere")


def test_manifest_that_is_not_json_is_refused(tmp_path: Path) -> None:
    root = write_world(tmp_path / "w")
    (root / "manifest.json").write_text('{"format": "demarkus-world-v1",')
    with pytest.raises(ConfigError, match="manifest.json is not valid JSON"):
        open_world(root)


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"format": "demarkus-world-v0"}, "format is 'demarkus-world-v0'"),
        ({"format": None}, "format is None"),
        ({"id": ""}, "`id` must be a non-empty string"),
        ({"authority": "https://tiny.world"}, "must look like `mark://host`"),
        ({"documents": -1}, "`documents` must be a non-negative integer"),
        ({"versions": True}, "`versions` must be a non-negative integer"),
        ({"versions": "3"}, "`versions` must be a non-negative integer"),
        ({"corpus_sha256": "md5-abc"}, "`corpus_sha256` is 'md5-abc'"),
        ({"questions_sha256": None}, "`questions_sha256` must be a non-empty string"),
        ({"source": 7}, "`source` must be a string"),
    ],
)
def test_bad_manifest_is_refused(tmp_path: Path, overrides: dict[str, Any], fragment: str) -> None:
    root = write_world(tmp_path / "w", **overrides)
    with pytest.raises(ConfigError) as info:
        open_world(root)
    assert fragment in str(info.value)


def test_manifest_must_be_an_object(tmp_path: Path) -> None:
    root = write_world(tmp_path / "w")
    (root / "manifest.json").write_text("[]")
    with pytest.raises(ConfigError, match="must hold a JSON object"):
        open_world(root)


@pytest.mark.parametrize("name", ["questions.json", "rubric.json"])
def test_fingerprinted_file_with_bad_json_is_refused_when_read(tmp_path: Path, name: str) -> None:
    kwargs = {name.split(".")[0]: b'{"q1": '}
    root = write_world(tmp_path / "w", **kwargs)
    world = open_world(root)  # the fingerprint matches the (bad) bytes
    with pytest.raises(ConfigError, match=f"{name} is not valid JSON"):
        world.questions() if name == "questions.json" else world.rubric()


@pytest.mark.parametrize(
    ("questions", "fragment"),
    [
        ({"q1": {}}, "must hold a JSON array"),
        ([{"id": "q1", "category": "trivia", "question": "?", "fields": {}}], "category"),
        ([{"id": "q1", "category": "direct", "question": "?", "fields": {"a": "int"}}], "fields"),
        ([{"category": "direct", "question": "?", "fields": {}}], "`id`"),
        (
            [{"id": "q1", "category": "direct", "question": "?", "fields": {}, "scope": "x"}],
            "scope",
        ),
        (
            [
                {"id": "q1", "category": "direct", "question": "?", "fields": {}},
                {"id": "q1", "category": "absent", "question": "?", "fields": {}},
            ],
            "repeats",
        ),
    ],
)
def test_questions_with_a_bad_shape_are_refused(tmp_path: Path, questions: Any, fragment: str) -> None:
    root = write_world(tmp_path / "w", questions=json.dumps(questions).encode())
    with pytest.raises(ConfigError, match="questions.json") as info:
        open_world(root).questions()
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    "rubric",
    [
        [],
        {"q1": {"answer": {}, "evidence": {}}},
        {"q1": {"answer": {}, "evidence": {"a": [{"path": "/a.md"}]}, "abstain": False}},
        {"q1": {"answer": {}, "evidence": {"a": {}}, "abstain": False}},
    ],
)
def test_rubric_with_a_bad_shape_is_refused(tmp_path: Path, rubric: Any) -> None:
    root = write_world(tmp_path / "w", rubric=json.dumps(rubric).encode())
    with pytest.raises(ConfigError, match="rubric.json"):
        open_world(root).rubric()


def test_questions_changed_after_opening_are_refused(tmp_path: Path) -> None:
    root = write_world(tmp_path / "w")
    world = open_world(root)
    _flip_one_byte(root / "questions.json", offset=3)
    with pytest.raises(ConfigError, match="does not match its fingerprint"):
        world.questions()


# --- corpus lines ------------------------------------------------------------------------


BAD_LINES: list[tuple[Any, str]] = [
    (b'{"path": "/x.md", ', "is not valid JSON"),
    (b"\xff\xfe", "is not valid UTF-8"),
    (b"", "is not valid JSON"),
    (["/x.md"], "must be a JSON object"),
    ({"path": "/x.md", "metadata": {}}, "lacks versions"),
    (_line("/x.md", extra="1"), "unknown keys extra"),
    (_line("x.md"), "must start with `/`"),
    (_line("/x.txt"), "end in `.md`"),
    (_line(7), "must start with `/`"),
    (_line("/a/../x.md"), "leaves the document root"),
    (_line("/x.md", metadata={"title": {"nested": "map"}}), "flat map of strings"),
    (_line("/x.md", metadata={"importance": 0.5}), "flat map of strings"),
    (_line("/x.md", metadata=["title"]), "flat map of strings"),
    (_line("/x.md", metadata={"Title": "x"}), "malformed"),
    (_line("/x.md", metadata={"title": "two\nlines"}), "line break"),
    (_line("/x.md", metadata={"k": "v" * 1100}), "at most 1024 bytes"),
    (_line("/x.md", versions=[]), "non-empty list"),
    (_line("/x.md", versions="# x\n"), "non-empty list"),
    (_line("/x.md", versions=["# x\n", 3]), "non-empty list"),
    (_line("/x.md", versions=["x" * (1024 * 1024 + 1)]), "at most 1048576"),
    (_line("/a.md"), "already appeared on an earlier line"),
]


@pytest.mark.parametrize(("line", "fragment"), BAD_LINES)
def test_bad_line_is_refused_lazily_with_its_number(tmp_path: Path, line: Any, fragment: str) -> None:
    root = write_world(tmp_path / "w", [_line("/a.md"), line, _line("/z.md")])
    world = open_world(root)  # lines are validated while streaming, not on open
    stream = world.documents()
    assert next(stream).path == "/a.md"
    with pytest.raises(ConfigError) as info:
        next(stream)
    message = str(info.value)
    assert "corpus.jsonl line 2" in message
    assert fragment in message


def test_counts_that_disagree_with_the_manifest_are_refused(tmp_path: Path) -> None:
    root = write_world(tmp_path / "w", versions=5)
    world = open_world(root)
    with pytest.raises(ConfigError, match="declares 2 documents and 5 versions"):
        list(world.documents())


def test_corpus_replaced_after_opening_is_refused(tmp_path: Path) -> None:
    root = write_world(tmp_path / "w")
    world = open_world(root)
    (root / "corpus.jsonl").write_bytes(
        json.dumps(_line("/a.md")).encode() + b"\n" + json.dumps(_line("/q.md")).encode() + b"\n"
    )
    with pytest.raises(ConfigError, match="does not match its fingerprint"):
        list(world.documents())


def test_corpus_deleted_after_opening_is_refused(tmp_path: Path) -> None:
    root = write_world(tmp_path / "w")
    world = open_world(root)
    (root / "corpus.jsonl").unlink()
    with pytest.raises(ConfigError, match="cannot read"):
        list(world.documents())


# --- the bundled demo world ---------------------------------------------------------------


def test_demo_world_path_points_at_the_packaged_folder() -> None:
    path = demo_world_path()
    assert isinstance(path, Path)
    assert path.name == "demo"
    assert sorted(p.name for p in path.iterdir() if p.suffix in (".json", ".jsonl")) == sorted(FILES)

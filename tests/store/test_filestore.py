"""The on-disk store: layout, versioning, conflicts, archive, containment, crash recovery."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from demarkus.errors import (
    ArchivedError,
    BadRequestError,
    ConflictError,
    IntegrityError,
    NotFoundError,
)
from demarkus.protocol import MAX_BODY
from demarkus.store import Entry, FileStore, VersionFile, serialize_version, sha256_tag


@pytest.fixture
def store(tmp_path: Path) -> FileStore:
    return FileStore(tmp_path / "root")


def test_opening_creates_a_missing_root(tmp_path: Path) -> None:
    FileStore(tmp_path / "a" / "b")
    assert (tmp_path / "a" / "b").is_dir()


def test_write_then_read_round_trips_body_and_metadata(store: FileStore) -> None:
    meta = {"title": "Alpha", "rel-supersedes": "/old.md", "importance": "0.8"}
    result = store.write("/docs/a.md", b"# Alpha\n\ntext\n", meta)
    doc = store.read("/docs/a.md")
    assert result.changed is True
    assert result.document == doc
    assert (doc.path, doc.version, doc.archived) == ("/docs/a.md", 1, False)
    assert doc.body == b"# Alpha\n\ntext\n"
    assert doc.metadata == meta


def test_a_write_returns_the_version_a_cold_read_parses(tmp_path: Path) -> None:
    # the writer keeps what it wrote instead of reading it back: it must equal the file's
    # parse, metadata order included (answers list it in that order)
    root = tmp_path / "root"
    meta = {"title": 'Quote " and é\tand ☃', "zeta": "last", "agent": "x", "tags": "a,b"}
    written = FileStore(root).write("/a.md", b"# A\n", meta).document
    cold = FileStore(root).read("/a.md")
    assert written == cold
    assert list(written.metadata.items()) == list(cold.metadata.items())
    assert (written.etag, written.content_hash) == (cold.etag, cold.content_hash)


def test_layout_is_a_relative_symlink_into_the_directorys_versions_folder(store: FileStore) -> None:
    store.write("/docs/a.md", b"one", {"title": "T", "agent": "x"})
    store.write("/docs/a.md", b"two", {})
    docs = store.root / "docs"
    assert os.readlink(docs / "a.md") == "versions/a.md.v2"
    assert sorted(os.listdir(docs / "versions")) == ["a.md.v1", "a.md.v2"]
    assert (docs / "versions" / "a.md.v1").read_bytes() == (
        b"---\nversion: 1\narchived: false\nmeta.agent: x\ntitle: T\n---\none"
    )


def test_etag_hashes_the_raw_file_and_content_hash_the_body(store: FileStore) -> None:
    doc = store.write("/a.md", b"body", {"title": "T"}).document
    assert doc.etag == sha256_tag(doc.raw).removeprefix("sha256-")
    assert doc.content_hash == sha256_tag(b"body")
    assert doc.raw.endswith(b"\n---\nbody")


def test_modified_is_the_file_mtime_in_utc_truncated_to_seconds(store: FileStore) -> None:
    store.write("/a.md", b"body", {})
    os.utime(store.root / "versions" / "a.md.v1", (1_700_000_000.75, 1_700_000_000.75))
    expected = datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert store.read("/a.md").modified == expected
    assert [v.modified for v in store.versions("/a.md")] == [expected]


def test_each_changed_write_adds_the_next_version(store: FileStore) -> None:
    for n in range(1, 4):
        assert store.write("/a.md", f"v{n}".encode(), {}).document.version == n
    assert store.current_version("/a.md") == 3
    assert [v.version for v in store.versions("/a.md")] == [3, 2, 1]
    assert store.read("/a.md", 2).body == b"v2"
    assert store.verify("/a.md") is None


def test_identical_body_and_metadata_creates_no_new_version(store: FileStore) -> None:
    first = store.write("/a.md", b"same", {"title": "T"}).document
    again = store.write("/a.md", b"same", {"title": "T"})
    assert again == type(again)(document=first, changed=False)
    assert os.listdir(store.root / "versions") == ["a.md.v1"]


def test_changed_metadata_alone_creates_a_new_version(store: FileStore) -> None:
    store.write("/a.md", b"same", {"title": "T"})
    result = store.write("/a.md", b"same", {"title": "U"})
    assert (result.changed, result.document.version) == (True, 2)


def test_current_version_is_zero_for_a_missing_document(store: FileStore) -> None:
    assert store.current_version("/nothing.md") == 0


def test_read_of_a_missing_document_raises_not_found(store: FileStore) -> None:
    with pytest.raises(NotFoundError):
        store.read("/nothing.md")
    with pytest.raises(NotFoundError):
        store.versions("/nothing.md")


@pytest.mark.parametrize("version", [0, -1, 4], ids=["zero", "negative", "too-high"])
def test_read_of_a_missing_version_names_the_versions_that_exist(store: FileStore, version: int) -> None:
    for body in (b"1", b"2", b"3"):
        store.write("/a.md", body, {})
    with pytest.raises(NotFoundError) as info:
        store.read("/a.md", version)
    assert "versions 1 to 3" in str(info.value)


def test_expected_version_zero_creates_a_new_document(store: FileStore) -> None:
    assert store.write("/a.md", b"x", {}, expected_version=0).document.version == 1


def test_expected_version_zero_on_an_existing_document_conflicts(store: FileStore) -> None:
    store.write("/a.md", b"x", {})
    with pytest.raises(ConflictError) as info:
        store.write("/a.md", b"y", {}, expected_version=0)
    assert (info.value.your_version, info.value.server_version) == (0, 1)


def test_expected_version_matching_current_writes(store: FileStore) -> None:
    store.write("/a.md", b"x", {})
    assert store.write("/a.md", b"y", {}, expected_version=1).document.version == 2


def test_stale_expected_version_conflicts_naming_both_versions(store: FileStore) -> None:
    for body in (b"1", b"2", b"3"):
        store.write("/a.md", body, {})
    with pytest.raises(ConflictError) as info:
        store.write("/a.md", b"new", {}, expected_version=1)
    assert (info.value.your_version, info.value.server_version) == (1, 3)
    assert "fetch" in str(info.value)
    assert store.current_version("/a.md") == 3


def test_negative_expected_version_is_a_bad_request(store: FileStore) -> None:
    with pytest.raises(BadRequestError):
        store.write("/a.md", b"x", {}, expected_version=-1)


def test_writing_to_an_archived_document_is_refused(store: FileStore) -> None:
    store.write("/a.md", b"x", {})
    store.archive("/a.md")
    with pytest.raises(ArchivedError) as info:
        store.write("/a.md", b"y", {})
    assert "unarchive it by publishing an empty body" in str(info.value)
    assert store.current_version("/a.md") == 1


def test_archive_flips_the_flag_in_place_and_unarchive_flips_it_back(store: FileStore) -> None:
    store.write("/a.md", b"one", {})
    store.write("/a.md", b"two", {"title": "T"})
    archived = store.archive("/a.md")
    assert (archived.version, archived.archived, archived.body) == (2, True, b"two")
    assert store.read("/a.md").archived is True
    assert store.current_version("/a.md") == 2
    assert store.verify("/a.md") is None
    assert store.archive("/a.md") == store.read("/a.md")
    restored = store.unarchive("/a.md")
    assert (restored.version, restored.archived, restored.metadata) == (2, False, {"title": "T"})
    assert store.write("/a.md", b"three", {}).document.version == 3
    assert store.verify("/a.md") is None


def test_archive_of_a_missing_document_raises_not_found(store: FileStore) -> None:
    with pytest.raises(NotFoundError):
        store.archive("/nothing.md")


def test_version_pinned_read_of_an_archived_document_still_works(store: FileStore) -> None:
    store.write("/a.md", b"one", {})
    store.write("/a.md", b"two", {})
    store.archive("/a.md")
    assert store.read("/a.md", 1).body == b"one"
    assert store.read("/a.md", 2).archived is True


def test_flat_file_is_migrated_to_v1_before_the_write(store: FileStore) -> None:
    (store.root / "flat.md").write_bytes(b"old content\n")
    assert store.is_document("/flat.md") is False
    result = store.write("/flat.md", b"new content\n", {"title": "T"})
    assert result.document.version == 2
    assert (store.root / "versions" / "flat.md.v1").read_bytes() == (
        b"---\nversion: 1\narchived: false\n---\nold content\n"
    )
    assert store.read("/flat.md", 1).body == b"old content\n"
    assert os.readlink(store.root / "flat.md") == "versions/flat.md.v2"
    assert store.verify("/flat.md") is None


def test_flat_file_counts_as_version_one_for_expected_version(store: FileStore) -> None:
    (store.root / "flat.md").write_bytes(b"old\n")
    with pytest.raises(ConflictError) as info:
        store.write("/flat.md", b"new\n", {}, expected_version=0)
    assert info.value.server_version == 1
    assert store.write("/flat.md", b"new\n", {}, expected_version=1).document.version == 2


def test_hash_index_follows_writes_archive_and_unarchive(store: FileStore) -> None:
    one, two = sha256_tag(b"one"), sha256_tag(b"two")
    store.write("/a.md", b"one", {})
    assert store.resolve_hash(one) == "/a.md"
    store.write("/a.md", b"two", {})
    assert (store.resolve_hash(one), store.resolve_hash(two)) == (None, "/a.md")
    store.archive("/a.md")
    assert store.resolve_hash(two) is None
    store.unarchive("/a.md")
    assert store.resolve_hash(two) == "/a.md"


def test_hash_index_is_rebuilt_at_open_from_current_non_archived_documents(tmp_path: Path) -> None:
    first = FileStore(tmp_path)
    first.write("/a.md", b"alpha", {})
    first.write("/b.md", b"beta", {})
    first.archive("/b.md")
    reopened = FileStore(tmp_path)
    assert reopened.resolve_hash(sha256_tag(b"alpha")) == "/a.md"
    assert reopened.resolve_hash(sha256_tag(b"beta")) is None


def test_hash_index_keeps_other_documents_with_the_same_body(store: FileStore) -> None:
    store.write("/a.md", b"same", {})
    store.write("/b.md", b"same", {})
    store.write("/a.md", b"changed", {})
    assert store.resolve_hash(sha256_tag(b"same")) == "/b.md"


def test_list_dir_shows_documents_and_directories_but_hides_store_files(store: FileStore) -> None:
    store.write("/b.md", b"b", {})
    store.write("/a.md", b"a", {})
    store.write("/sub/c.md", b"c", {})
    store.archive("/b.md")
    (store.root / ".hidden.md").write_bytes(b"x")
    (store.root / "versions" / ".tmp.a.md.123").write_bytes(b"x")
    (store.root / "flat.txt").write_bytes(b"not versioned")
    (store.root / "empty").mkdir()
    assert store.list_dir("/") == [
        Entry("a.md", is_dir=False, archived=False),
        Entry("b.md", is_dir=False, archived=True),
        Entry("empty", is_dir=True),
        Entry("sub", is_dir=True),
    ]
    assert store.list_dir("/sub/") == [Entry("c.md", is_dir=False)]


def test_list_dir_of_a_document_or_missing_path_raises_not_found(store: FileStore) -> None:
    store.write("/a.md", b"a", {})
    for path in ("/a.md", "/missing"):
        with pytest.raises(NotFoundError):
            store.list_dir(path)


def test_documents_lists_every_document_sorted(store: FileStore) -> None:
    for path in ("/z.md", "/docs/b.md", "/docs/deep/a.md", "/a.md"):
        store.write(path, b"x", {})
    (store.root / "flat.md").write_bytes(b"x")
    assert store.documents() == ["/a.md", "/docs/b.md", "/docs/deep/a.md", "/z.md"]
    assert store.is_document("/docs/b.md") and not store.is_document("/docs")
    assert store.is_directory("/docs") and store.is_directory("/")
    assert not store.is_directory("/a.md")


@pytest.mark.parametrize("path", ["/docs/../etc/passwd", "/../outside.md"], ids=["inner-dotdot", "leading-dotdot"])
def test_dotdot_paths_are_refused_as_not_found(store: FileStore, path: str) -> None:
    with pytest.raises(NotFoundError):
        store.read(path)
    with pytest.raises(NotFoundError):
        store.write(path, b"x", {})


@pytest.mark.parametrize("path", ["/.hidden.md", "/docs/.git/config", "/versions/a.md.v1", "/docs/versions"])
def test_hidden_names_and_versions_segments_are_bad_requests(store: FileStore, path: str) -> None:
    with pytest.raises(BadRequestError):
        store.write(path, b"x", {})


def test_writing_to_a_directory_path_is_a_bad_request(store: FileStore) -> None:
    store.write("/docs/a.md", b"x", {})
    for path in ("/docs", "/"):
        with pytest.raises(BadRequestError):
            store.write(path, b"x", {})


def test_a_file_symlink_planted_inside_the_root_is_refused(store: FileStore, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"---\nversion: 1\narchived: false\n---\nsecret")
    (store.root / "evil.md").symlink_to(secret)
    with pytest.raises(NotFoundError):
        store.read("/evil.md")
    with pytest.raises(NotFoundError):
        store.write("/evil.md", b"x", {})
    assert store.is_document("/evil.md") is False
    assert store.list_dir("/") == []
    assert secret.read_bytes().endswith(b"secret")


def test_a_directory_symlink_planted_inside_the_root_is_refused(store: FileStore, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    FileStore(outside).write("/doc.md", b"outside", {})
    (store.root / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(NotFoundError):
        store.read("/link/doc.md")
    with pytest.raises(NotFoundError):
        store.write("/link/new.md", b"x", {})
    with pytest.raises(NotFoundError):
        store.list_dir("/link")
    assert store.is_directory("/link") is False
    assert store.documents() == []
    assert not (outside / "new.md").exists()


def test_a_folder_swapped_for_a_symlink_after_a_read_is_refused(store: FileStore, tmp_path: Path) -> None:
    """The store remembers how a path maps to disk, but asks the disk on every read."""
    store.write("/docs/doc.md", b"inside", {})
    assert store.read("/docs/doc.md").body == b"inside"
    outside = tmp_path / "outside"
    FileStore(outside).write("/doc.md", b"outside", {})
    (store.root / "docs").rename(tmp_path / "moved")
    (store.root / "docs").symlink_to(outside, target_is_directory=True)
    with pytest.raises(NotFoundError, match="symbolic link"):
        store.read("/docs/doc.md")
    (store.root / "docs").unlink()
    (store.root / "docs").write_bytes(b"a file where the folder was")
    with pytest.raises(NotFoundError, match="`docs` is not a directory"):
        store.read("/docs/doc.md")


def test_a_planted_versions_symlink_is_refused(store: FileStore, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    FileStore(outside).write("/doc.md", b"outside", {})
    (store.root / "versions").symlink_to(outside / "versions", target_is_directory=True)
    (store.root / "doc.md").symlink_to("versions/doc.md.v1")
    with pytest.raises(NotFoundError):
        store.read("/doc.md")


def test_a_planted_version_file_symlink_is_not_read(store: FileStore, tmp_path: Path) -> None:
    store.write("/doc.md", b"mine", {})
    secret = tmp_path / "secret"
    secret.write_bytes(b"---\nversion: 1\narchived: false\n---\nsecret")
    version_file = store.root / "versions" / "doc.md.v1"
    version_file.unlink()
    version_file.symlink_to(secret)
    with pytest.raises(NotFoundError):
        store.read("/doc.md")


def test_non_utf8_body_is_refused(store: FileStore) -> None:
    with pytest.raises(BadRequestError) as info:
        store.write("/a.md", b"\xff\xfe bad", {})
    assert "UTF-8" in str(info.value)
    assert store.current_version("/a.md") == 0


def test_body_over_one_mib_is_refused(store: FileStore) -> None:
    store.write("/max.md", b"x" * MAX_BODY, {})
    with pytest.raises(BadRequestError):
        store.write("/a.md", b"x" * (MAX_BODY + 1), {})
    assert store.current_version("/a.md") == 0


@pytest.mark.parametrize(
    "metadata",
    [
        {"Title": "x"},
        {"a_b": "x"},
        {"title": "a\nb"},
        {"title": "a\x00b"},
        {"title": "a\x1fb"},
        {"title": "a\ud800b"},
        {"title": "a\udfffb"},
    ],
)
def test_malformed_metadata_is_refused(store: FileStore, metadata: dict[str, str]) -> None:
    with pytest.raises(BadRequestError):
        store.write("/a.md", b"x", metadata)


def test_a_tab_and_characters_outside_the_bmp_are_kept(store: FileStore) -> None:
    meta = {"title": "a\tb \U0001f600 \x7f"}
    assert store.write("/a.md", b"x", meta).document.metadata == meta


def test_hundred_threads_racing_on_expected_version_have_one_winner_per_version(
    store: FileStore,
) -> None:
    store.write("/race.md", b"start", {})
    threads = 100
    for round_number in range(1, 4):
        expected = store.current_version("/race.md")
        barrier = threading.Barrier(threads)
        outcomes: list[str] = []
        guard = threading.Lock()

        def attempt(
            index: int,
            expected: int = expected,
            barrier: threading.Barrier = barrier,
            rnd: int = round_number,
            outcomes: list[str] = outcomes,
            guard: threading.Lock = guard,
        ) -> None:
            barrier.wait(timeout=10)
            try:
                store.write("/race.md", f"r{rnd} t{index}".encode(), {}, expected)
                outcome = "won"
            except ConflictError as exc:
                outcome = f"conflict {exc.your_version}->{exc.server_version}"
            with guard:
                outcomes.append(outcome)

        workers = [threading.Thread(target=attempt, args=(i,)) for i in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=30)
        loser = f"conflict {expected}->{expected + 1}"
        assert sorted(outcomes) == sorted(["won"] + [loser] * (threads - 1))
        assert store.current_version("/race.md") == expected + 1
    assert store.current_version("/race.md") == 4
    assert store.verify("/race.md") is None


def test_open_rolls_forward_a_version_written_before_the_symlink_swap(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    v1 = store.write("/a.md", b"one", {}).document
    versions = tmp_path / "versions"
    v2 = serialize_version(VersionFile(2, False, sha256_tag(v1.raw), {}, b"two"))
    (versions / "a.md.v2").write_bytes(v2)
    (versions / ".tmp.a.md.deadbeef").write_bytes(b"---\nversion: 3\npartial")
    (tmp_path / ".tmp.a.md.cafe.link").symlink_to("versions/a.md.v2")
    reopened = FileStore(tmp_path)
    assert reopened.current_version("/a.md") == 2
    assert reopened.read("/a.md").body == b"two"
    assert os.readlink(tmp_path / "a.md") == "versions/a.md.v2"
    assert sorted(os.listdir(versions)) == ["a.md.v1", "a.md.v2"]
    assert not os.path.lexists(tmp_path / ".tmp.a.md.cafe.link")
    assert reopened.verify("/a.md") is None
    assert reopened.resolve_hash(sha256_tag(b"two")) == "/a.md"


def test_open_recreates_a_missing_symlink_after_a_crashed_first_write(tmp_path: Path) -> None:
    (tmp_path / "docs" / "versions").mkdir(parents=True)
    raw = serialize_version(VersionFile(1, False, None, {"title": "T"}, b"body"))
    (tmp_path / "docs" / "versions" / "new.md.v1").write_bytes(raw)
    store = FileStore(tmp_path)
    assert store.read("/docs/new.md").metadata == {"title": "T"}


def test_write_rolls_forward_first_so_the_next_version_follows_the_newest(store: FileStore) -> None:
    v1 = store.write("/a.md", b"one", {}).document
    v2 = serialize_version(VersionFile(2, False, sha256_tag(v1.raw), {}, b"two"))
    (store.root / "versions" / "a.md.v2").write_bytes(v2)
    with pytest.raises(ConflictError) as info:
        store.write("/a.md", b"three", {}, expected_version=1)
    assert info.value.server_version == 2
    assert store.write("/a.md", b"three", {}, expected_version=2).document.version == 3
    assert store.verify("/a.md") is None


def test_a_crash_during_flat_migration_is_rolled_forward(tmp_path: Path) -> None:
    (tmp_path / "versions").mkdir()
    (tmp_path / "flat.md").write_bytes(b"flat\n")
    migrated = serialize_version(VersionFile(1, False, None, {}, b"flat\n"))
    (tmp_path / "versions" / "flat.md.v1").write_bytes(migrated)
    store = FileStore(tmp_path)
    assert os.readlink(tmp_path / "flat.md") == "versions/flat.md.v1"
    assert store.read("/flat.md").body == b"flat\n"


def test_tampering_with_an_old_version_is_reported_by_verify(store: FileStore) -> None:
    for body in (b"one", b"two", b"three"):
        store.write("/a.md", body, {})
    v1 = store.root / "versions" / "a.md.v1"
    v1.write_bytes(v1.read_bytes().replace(b"one", b"0ne"))
    assert store.verify("/a.md") == "v2: previous-hash does not match v1"


def test_a_deleted_middle_version_is_reported_by_verify(store: FileStore) -> None:
    for body in (b"one", b"two", b"three"):
        store.write("/a.md", body, {})
    (store.root / "versions" / "a.md.v2").unlink()
    assert store.verify("/a.md") == "v2 is missing"
    with pytest.raises(NotFoundError) as info:
        store.read("/a.md", 2)
    assert "versions 1, 3" in str(info.value)


def test_a_damaged_current_version_raises_integrity_error(store: FileStore) -> None:
    store.write("/a.md", b"one", {})
    (store.root / "versions" / "a.md.v1").write_bytes(b"garbage")
    with pytest.raises(IntegrityError):
        store.read("/a.md")


_CHURN = """
import sys
from pathlib import Path
from demarkus.store import FileStore
store = FileStore(Path(sys.argv[1]))
if store.is_document("/churn.md"):
    store.unarchive("/churn.md")
while True:
    n = store.current_version("/churn.md") + 1
    store.write("/churn.md", f"write {n}\\n".encode() * 50, {"title": f"t{n}"})
    store.archive("/churn.md")
    store.unarchive("/churn.md")
    print(store.current_version("/churn.md"), flush=True)
"""


def test_sigkill_at_any_moment_leaves_a_valid_chain_and_no_partial_version(
    tmp_path: Path,
) -> None:
    seen = 0
    for _round in range(5):
        process = subprocess.Popen([sys.executable, "-c", _CHURN, str(tmp_path)], stdout=subprocess.PIPE, text=True)
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            for _ in range(20):
                assert selector.select(timeout=20), "the writer stopped reporting"
                seen = int(process.stdout.readline())
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=20)
        process.stdout.close()
        store = FileStore(tmp_path)
        current = store.current_version("/churn.md")
        assert current >= seen
        assert store.verify("/churn.md") is None
        assert current == store.versions("/churn.md")[0].version
        assert store.read("/churn.md").body.startswith(f"write {current}\n".encode())
        assert not [n for n in os.listdir(tmp_path / "versions") if n.startswith(".")]


def test_the_folders_a_first_write_creates_survive_a_power_cut(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # a new folder is durable once its parent is fsynced; the version inside it is acknowledged
    from demarkus.store import layout

    synced: list[Path] = []
    real = layout.fsync_dir

    def record(directory: Path) -> None:
        synced.append(Path(directory))
        real(directory)

    store = FileStore(tmp_path / "root")
    root = tmp_path / "root"
    monkeypatch.setattr(layout, "fsync_dir", record)
    store.write("/a/b/c.md", b"# C\n", {})
    assert {root, root / "a", root / "a" / "b", root / "a" / "b" / "versions"} <= set(synced)
    synced.clear()
    store.write("/a/b/d.md", b"# D\n", {})
    assert root not in synced and root / "a" not in synced  # nothing new above the document


# --- histories: several versions in one write ------------------------------------------


def test_a_history_stores_the_versions_successive_writes_would(tmp_path: Path) -> None:
    bodies = [b"# One\n", b"# Two\n", b"# Three\n"]
    meta = {"title": "T", "tags": "a,b"}
    one_by_one = FileStore(tmp_path / "writes")
    for expected, body in enumerate(bodies):
        one_by_one.write("/d/a.md", body, meta, expected)
    together = FileStore(tmp_path / "history")
    result = together.write_history("/d/a.md", bodies, meta, 0)
    assert (result.changed, result.document.version, result.document.body) == (True, 3, b"# Three\n")
    assert result.document == together.read("/d/a.md")
    for number in (1, 2, 3):
        assert together.read("/d/a.md", number).raw == one_by_one.read("/d/a.md", number).raw
    assert together.verify("/d/a.md") is None
    assert FileStore(tmp_path / "history").read("/d/a.md") == result.document
    assert together.resolve_hash(sha256_tag(b"# Three\n")) == "/d/a.md"


def test_a_history_syncs_each_version_then_its_folder_once_then_swaps_once(
    tmp_path: Path,
    monkeypatch,  # type: ignore[no-untyped-def]
) -> None:
    from demarkus.store import layout

    store = FileStore(tmp_path)
    store.write("/other.md", b"# Other\n", {})  # the folders exist: only this write's syncs remain
    events: list[str] = []
    real_fsync, real_dir, real_swap = os.fsync, layout.fsync_dir, layout.swap_current
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append("file"), real_fsync(fd))[1])
    monkeypatch.setattr(layout, "fsync_dir", lambda d: (events.append(f"dir {Path(d).name}"), real_dir(d))[1])
    monkeypatch.setattr(
        layout, "swap_current", lambda loc, n, **kw: (events.append(f"swap {n}"), real_swap(loc, n, **kw))[1]
    )
    store.write_history("/a.md", [b"1", b"2", b"3"], {}, 0)
    # fsync_dir's own os.fsync is recorded too: each "dir" is followed by its "file"
    assert events == ["file"] * 3 + ["dir versions", "file", "swap 3", f"dir {tmp_path.name}", "file"]


# --- filling an empty store: one sync at the end -----------------------------------------


def _count_syncs(monkeypatch) -> list[str]:  # type: ignore[no-untyped-def]
    events: list[str] = []
    real_fsync, real_sync = os.fsync, os.sync
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "sync", lambda: (events.append("sync"), real_sync())[1])
    return events


def test_filling_an_empty_store_syncs_once_at_the_end(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store = FileStore(tmp_path)
    events = _count_syncs(monkeypatch)
    with store.filling():
        assert (tmp_path / ".demarkus.filling").exists()
        marked = len(events)
        for n in range(5):
            store.write_history(f"/deep/d{n}.md", [b"# One\n", b"# Two\n"], {"title": "D"}, 0)
        assert len(events) == marked  # no write synced anything
    assert events[marked:] == ["sync", "fsync"]  # everything, then the marker's removal
    assert not (tmp_path / ".demarkus.filling").exists()
    again = FileStore(tmp_path)
    assert again.documents() == [f"/deep/d{n}.md" for n in range(5)]
    assert all(again.verify(p) is None for p in again.documents())
    assert again.read("/deep/d3.md").body == b"# Two\n"


def test_filling_a_store_that_holds_documents_keeps_a_sync_per_write(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store = FileStore(tmp_path)
    store.write("/kept.md", b"# Kept\n", {})
    events = _count_syncs(monkeypatch)
    with store.filling():
        assert not (tmp_path / ".demarkus.filling").exists()
        store.write_history("/a.md", [b"1", b"2"], {}, 0)
    assert "sync" not in events and events.count("fsync") >= 2 + 2


def test_a_fill_that_fails_part_way_is_still_made_durable(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store = FileStore(tmp_path)
    events = _count_syncs(monkeypatch)
    with pytest.raises(RuntimeError), store.filling():
        store.write("/a.md", b"# A\n", {})
        raise RuntimeError("the load failed")
    assert "sync" in events and not (tmp_path / ".demarkus.filling").exists()
    store.write("/b.md", b"# B\n", {})  # writes sync again
    assert events[-1] == "fsync"


def test_a_store_left_part_way_through_a_fill_is_checked_when_opened(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    store = FileStore(tmp_path)
    store.write_history("/a.md", [b"# A1\n", b"# A2\n"], {}, 0)
    store.write("/b.md", b"# B\n", {})
    (tmp_path / ".demarkus.filling").write_bytes(b"")  # the process stopped before the end
    again = FileStore(tmp_path)
    assert "was being filled when it stopped; its 2 documents verify" in caplog.text
    assert not (tmp_path / ".demarkus.filling").exists()
    assert again.read("/a.md").body == b"# A2\n"


def test_a_store_opened_while_another_fills_it_leaves_the_fill_alone(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    with store.filling():
        store.write("/a.md", b"# A\n", {})
        other = FileStore(tmp_path)  # a reader started meanwhile: the fill is under way
        assert (tmp_path / ".demarkus.filling").exists()
        assert other.read("/a.md").body == b"# A\n"
    assert not (tmp_path / ".demarkus.filling").exists()


def test_a_second_fill_of_a_store_being_filled_writes_as_usual(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    first = FileStore(tmp_path)
    with first.filling():
        second = FileStore(tmp_path)
        events = _count_syncs(monkeypatch)
        with second.filling():  # the first fill holds the marker: no wait, no second marker
            second.write("/b.md", b"# B\n", {})
        assert "sync" not in events and events.count("fsync") >= 2
        assert (tmp_path / ".demarkus.filling").exists()
    assert not (tmp_path / ".demarkus.filling").exists()


def test_a_version_cut_short_by_a_stopped_fill_refuses_the_store(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.write_history("/a.md", [b"# A1\n", b"# A2\n"], {}, 0)
    (tmp_path / "versions" / "a.md.v1").write_bytes(b"")  # what a power cut may leave
    (tmp_path / ".demarkus.filling").write_bytes(b"")
    with pytest.raises(IntegrityError, match=r"/a\.md is damaged .*delete the folder and load it again"):
        FileStore(tmp_path)
    assert (tmp_path / ".demarkus.filling").exists()  # still refused the next time


def test_a_history_skips_a_body_equal_to_the_version_before_it(store: FileStore) -> None:
    result = store.write_history("/a.md", [b"one", b"one", b"two"], {}, 0)
    assert result.document.version == 2
    assert store.write_history("/a.md", [b"two"], {}).changed is False


def test_a_history_checks_every_body_before_writing_any(store: FileStore) -> None:
    with pytest.raises(BadRequestError, match="not valid UTF-8"):
        store.write_history("/a.md", [b"fine", b"\xff\xfe"], {}, 0)
    with pytest.raises(BadRequestError, match="at least one version"):
        store.write_history("/a.md", [], {}, 0)
    assert store.current_version("/a.md") == 0
    assert not store.documents()


def test_a_history_follows_expected_version_and_the_current_chain(store: FileStore) -> None:
    first = store.write("/a.md", b"one", {}).document
    with pytest.raises(ConflictError, match="create only"):
        store.write_history("/a.md", [b"two"], {}, 0)
    third = store.write_history("/a.md", [b"two", b"three"], {}, 1).document
    assert third.version == 3
    assert store.read("/a.md", 2).raw.count(sha256_tag(first.raw).encode()) == 1
    assert store.verify("/a.md") is None


def test_a_history_that_fails_part_way_leaves_what_was_linked_for_the_next_open(
    tmp_path: Path,
    monkeypatch,  # type: ignore[no-untyped-def]
) -> None:
    store = FileStore(tmp_path)
    real_link = os.link
    links: list[str] = []

    def link_twice(source: str, target: str) -> None:
        links.append(str(target))
        if len(links) == 3:
            raise OSError(28, "No space left on device")
        real_link(source, target)

    monkeypatch.setattr(os, "link", link_twice)
    with pytest.raises(OSError):
        store.write_history("/a.md", [b"1", b"2", b"3"], {}, 0)
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path / "versions")) == ["a.md.v1", "a.md.v2"]  # no temp file left
    reopened = FileStore(tmp_path)
    assert reopened.current_version("/a.md") == 2
    assert reopened.verify("/a.md") is None

"""`--git`: a real repository (commits with fixed dates, a rename, a deletion, a commit
dated before its parent) imported into a real store; history, times, metadata, the hash
chain, and an incremental re-import after one more commit."""

from __future__ import annotations

import asyncio
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from demarkus.importer import Outcome, Summary
from demarkus.importer.command import run_import
from demarkus.importer.folder import scan_folder
from demarkus.importer.site import parse_site
from demarkus.protocol import MAX_PUBLISHER_BYTES
from demarkus.render import format_time
from demarkus.service import Service

from .test_folder import tool_texts, tree_state

T0 = 1_700_000_000  # 2023-11-14T22:13:20Z


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty repository; git reads no configuration of the user's (here or in the import)."""
    home = tmp_path / "git-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    top = tmp_path / "repo"
    top.mkdir()
    git(top, "init", "-q", "-b", "main")
    return top


def git(top: Path, *args: str, when: int = T0, author: str = "Ann Author") -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": author,
        "GIT_AUTHOR_EMAIL": "ann@example.org",
        "GIT_COMMITTER_NAME": "Carl Committer",
        "GIT_COMMITTER_EMAIL": "carl@example.org",
        "GIT_AUTHOR_DATE": f"@{when} +0000",
        "GIT_COMMITTER_DATE": f"@{when} +0000",
    }
    done = subprocess.run(["git", *args], cwd=top, env=env, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


def commit(top: Path, message: str, when: int, **files: str | None) -> str:
    for name, text in files.items():
        path = top / "notes" / name.replace("__", "/")
        if text is None:
            git(top, "rm", "-q", str(path.relative_to(top)))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        git(top, "add", str(path.relative_to(top)))
    git(top, "commit", "-q", "--allow-empty", "-m", message, when=when)
    return git(top, "rev-parse", "HEAD")


def run(folder: Path, root: Path, **options: object) -> Summary:
    settings: dict[str, object] = {"prefix": "/", "use_git": True, "archive_missing": False, "authority": "mark://t"}
    settings.update(options)
    return run_import(folder, root=root, url=None, **settings)  # type: ignore[arg-type]


def history(root: Path, path: str) -> list[tuple[dict[str, str], bytes, datetime]]:
    """(metadata, body, modified) of every version, oldest first; checks the chain."""
    service = Service.open(root, writable=False)
    try:
        assert service.store.verify(path) is None
        count = service.store.current_version(path)
        docs = [service.store.read(path, n) for n in range(1, count + 1)]
        return [(dict(d.metadata), d.body, d.modified) for d in docs]
    finally:
        service.close()


def test_each_commit_becomes_a_version_following_renames_with_times_and_authors(repo: Path, tmp_path: Path):
    c1 = commit(repo, "start", T0, **{"a.md": "---\ntitle: A\n---\none\n", "gone.md": "# Gone\n"})
    c2 = commit(repo, "edit", T0 + 100, **{"a.md": "---\ntitle: A\n---\none two\n"})
    root = tmp_path / "store"
    first = run(repo / "notes", root)
    assert first.count(Outcome.CREATED) == 2 and first.versions == 3 and first.ok
    assert [m["git-commit"] for m, _b, _t in history(root, "/a.md")] == [c1, c2]

    git(repo, "mv", "notes/a.md", "notes/renamed.md")
    c3 = commit(repo, "rename", T0 + 200)
    c4 = commit(repo, "delete and edit", T0 + 300, **{"gone.md": None, "renamed.md": "---\ntitle: A\n---\nthree\n"})
    c5 = commit(repo, "dated before its parent", T0 + 50, **{"renamed.md": "---\ntitle: A\n---\nfour\n"})
    (repo / "notes" / "renamed.md").write_text("---\ntitle: A\n---\nfive, not committed\n")
    before = datetime.now(UTC).replace(microsecond=0)
    tree = tree_state(repo)
    second = run(repo / "notes", root, archive_missing=True)
    assert tree_state(repo) == tree, "the repository was changed"
    assert second.ok, second.lines()
    assert {r.path: r.outcome for r in second.results} == {
        "/renamed.md": Outcome.CREATED,
        "/a.md": Outcome.ARCHIVED,
        "/gone.md": Outcome.ARCHIVED,
    }
    versions = history(root, "/renamed.md")
    assert [b for _m, b, _t in versions] == [
        b"one\n",
        b"one two\n",
        b"one two\n",
        b"three\n",
        b"four\n",
        b"five, not committed\n",
    ]
    commits = [c1, c2, c3, c4, c5]
    assert [m.get("git-commit") for m, _b, _t in versions] == [*commits, None]
    assert versions[-1][0]["git-base"] == c5
    assert all(m["git-author"] == "Ann Author <ann@example.org>" for m, _b, _t in versions[:5])
    assert all(m["title"] == "A" for m, _b, _t in versions)
    stamps = [T0, T0 + 100, T0 + 200, T0 + 300, T0 + 50]
    assert [m["git-time"] for m, _b, _t in versions[:5]] == [
        format_time(datetime.fromtimestamp(s, UTC)) for s in stamps
    ]
    times = [t for _m, _b, t in versions]
    # the commit dated before its parent takes its parent's time: times never go backwards
    assert [int(t.timestamp()) for t in times[:5]] == [T0, T0 + 100, T0 + 200, T0 + 300, T0 + 300]
    assert times[5] >= before  # the working tree: the store's own clock

    listed, old = asyncio.run(
        tool_texts(root, [("mark_versions", {"url": "/renamed.md"}), ("mark_fetch", {"url": "/renamed.md/v2"})])
    )
    assert "total: 6\ncurrent: 6\nchain-valid: true\n" in listed
    assert "- [v1](/renamed.md/v1) - 2023-11-14T22:13:20Z\n" in listed
    assert "- [v4](/renamed.md/v4) - 2023-11-14T22:18:20Z\n" in listed
    assert old.endswith("one two\n")

    c6 = commit(repo, "commit the edit", T0 + 400, **{"renamed.md": "---\ntitle: A\n---\nfive, not committed\n"})
    c7 = commit(repo, "and one more", T0 + 500, **{"renamed.md": "---\ntitle: A\ntags: [x]\n---\nsix\n"})
    third = run(repo / "notes", root)
    assert [(r.path, r.outcome, r.versions) for r in third.results] == [("/renamed.md", Outcome.UPDATED, 2)]
    versions = history(root, "/renamed.md")
    assert [m.get("git-commit") for m, _b, _t in versions[6:]] == [c6, c7]
    assert versions[-1][0]["tags"] == "x"
    assert versions[-1][0]["git-time"] == format_time(datetime.fromtimestamp(T0 + 500, UTC))
    # the working-tree version was dated now, so the commits after it are dated no earlier
    assert versions[6][2] == versions[7][2] == versions[5][2]
    assert run(repo / "notes", root).versions == 0


def test_a_bad_old_revision_is_left_out_with_a_warning_and_the_rest_imported(repo: Path, tmp_path: Path):
    commit(repo, "too large", T0 - 10, **{"n.md": "# N\n" + "x" * (2 * 1024 * 1024)})
    commit(repo, "bad yaml", T0, **{"n.md": "---\ntitle: [open\n---\nx\n"})
    good = commit(repo, "fixed", T0 + 10, **{"n.md": "---\ntitle: N\n---\nx\n"})
    summary = run(repo / "notes", tmp_path / "store")
    (result,) = summary.results
    assert result.outcome == Outcome.CREATED and result.versions == 1
    assert len(result.problems) == 2
    assert "left out: the file is 2097156 bytes at commit" in result.problems[0]
    assert "left out: the frontmatter is not valid YAML" in result.problems[1]
    assert not summary.ok and summary.lines()[1].startswith("warning n.md: commit ")
    assert [m["git-commit"] for m, _b, _t in history(tmp_path / "store", "/n.md")] == [good]


def test_files_git_does_not_track_are_imported_as_they_are_and_then_follow_git(repo: Path, tmp_path: Path):
    commit(repo, "other", T0, **{"tracked.md": "# T\n"})
    (repo / "notes" / "new.md").write_text("# New\n")
    root = tmp_path / "store"
    assert run(repo / "notes", root).count(Outcome.CREATED) == 2
    assert "git-commit" not in history(root, "/new.md")[0][0]
    added = commit(repo, "track it", T0 + 10, **{"new.md": "# New\n"})
    summary = run(repo / "notes", root)
    assert [(r.relative, r.outcome, r.versions) for r in summary.results if r.versions] == [
        ("new.md", Outcome.UPDATED, 1)
    ]
    assert history(root, "/new.md")[-1][0]["git-commit"] == added


def test_every_commit_of_a_note_has_its_links_by_the_site_made_local(repo: Path, tmp_path: Path):
    site = "https://github.com/org/repo/blob/main/notes/"
    commit(repo, "one", T0, **{"a.md": f"# A\n\nSee [b]({site}b.md).\n", "b.md": "# B\n"})
    commit(repo, "two", T0 + 10, **{"a.md": f"# A\n\nSee [b]({site}b.md#x), twice.\n"})
    (repo / "notes" / "a.md").write_text(f"# A\n\nSee [b]({site}b.md#y), not committed.\n")
    root = tmp_path / "store"
    run(repo / "notes", root, sites=(parse_site(site),))
    assert [body for _m, body, _t in history(root, "/a.md")] == [
        b"# A\n\nSee [b](b.md).\n",
        b"# A\n\nSee [b](b.md#x), twice.\n",
        b"# A\n\nSee [b](b.md#y), not committed.\n",
    ]


def test_tags_in_text_fill_each_versions_metadata_leaving_room_for_its_git_keys(repo: Path, tmp_path: Path):
    crowded = "# C\n\n" + " ".join(f"#t{n:03d}" for n in range(300)) + "\n"
    commit(repo, "one", T0, **{"c.md": crowded})
    (repo / "notes" / "c.md").write_text(crowded + "\nAn edit not committed.\n")
    root = tmp_path / "store"
    summary = run(repo / "notes", root, wikilinks=True)
    (result,) = summary.results
    assert result.outcome == Outcome.CREATED and result.versions == 2  # the commit, then the edit on it
    [committed, edited] = [metadata for metadata, _b, _t in history(root, "/c.md")]
    assert committed["tags"].startswith("t000,t001,") and "git-commit" in committed
    assert edited["tags"].startswith("t000,t001,") and "git-base" in edited
    for metadata in (committed, edited):
        assert MAX_PUBLISHER_BYTES - 5 < sum(len(k) + len(v) for k, v in metadata.items()) <= MAX_PUBLISHER_BYTES
    [warning] = result.problems  # for the version that is current
    assert warning.startswith(f"{300 - len(edited['tags'].split(','))} tags its text writes left out (#t")


def test_git_outside_a_repository_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    plain = tmp_path / "plain"
    plain.mkdir()
    from demarkus.errors import ConfigError

    with pytest.raises(ConfigError, match="not inside a git repository.*without --git"):
        run(plain, tmp_path / "store")


def test_histories_run_ahead_and_files_skipped_in_between_cost_nothing_wrong(repo: Path):
    first = commit(repo, "three files", T0, **{"a.md": "a\n", "b.md": "b\n", "c.md": "c\n"})
    second = commit(repo, "edit c", T0 + 1, **{"c.md": "c2\n"})
    from demarkus.importer import GitHistory

    files = [repo / "notes" / name for name in ("a.md", "b.md", "c.md")]
    with GitHistory(repo, ahead=2) as history:
        history.expect(files)
        assert [r.commit for r in history.revisions(files[2])] == [first, second]  # a and b were refused
        assert [r.commit for r in history.revisions(files[0])] == [first]
        assert [r.path for r in history.revisions(files[1])] == ["notes/b.md"]
        assert history.read(history.revisions(files[2])[0]) == b"c\n"


def test_what_git_ignores_is_not_read_unless_the_repository_tracks_it(repo: Path, tmp_path: Path):
    (repo / ".gitignore").write_text("node_modules/\n*.draft.md\nbuild/\n")
    files = {
        "README.md": "# Project\n",
        "docs/guide.md": "# Guide\n",
        "docs/wip.draft.md": "# Draft\n",  # ignored
        "docs/kept.draft.md": "# Kept draft\n",  # ignored by name, but tracked
        "node_modules/pkg/README.md": "# A package\n",  # an ignored folder
        "build/docs/out.md": "# Built\n",
    }
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", ".gitignore", "README.md")
    git(repo, "add", "-f", "docs/kept.draft.md")
    expected = {"README.md", "docs/guide.md", "docs/kept.draft.md"}
    assert set(scan_folder(repo).files) == expected
    summary = run(repo, tmp_path / "store", use_git=False)
    assert {r.relative for r in summary.results} == expected
    assert set(scan_folder(repo / "build").files) == {"docs/out.md"}  # a folder named is read, ignored or not
    plain = tmp_path / "plain"  # no work tree: a .gitignore file says nothing
    (plain / "node_modules").mkdir(parents=True)
    (plain / ".gitignore").write_text("node_modules/\n")
    (plain / "node_modules" / "a.md").write_text("# A\n")
    assert scan_folder(plain).files == ("node_modules/a.md",)

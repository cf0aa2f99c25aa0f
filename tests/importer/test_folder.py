"""A generated folder imported into a real store; relations read back through the MCP
tools (in-memory client), idempotence, edits, archive-missing and the folder untouched."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

import pytest
from mcp import Client as MCPClient

from demarkus.graph import GraphStore
from demarkus.graph.store import default_graph_path
from demarkus.importer import Outcome, Summary
from demarkus.importer.command import run_import
from demarkus.importer.folder import scan_folder
from demarkus.importer.note import note_file
from demarkus.importer.site import parse_site
from demarkus.mcp.server import LocalResolver, build_server
from demarkus.mcp.tools import Tools
from demarkus.service import Service

from ..conftest import call

AUTHORITY = "mark://notes.test"
GOOD = {
    "adr/0001-log.md": (
        "---\n"
        "title: Segment log\n"
        "tags: [storage, adr]\n"
        "superseded-by: 0002-replicated.md\n"
        "owner: storage-team\n"
        "---\n\n"
        "# Segment log\n\nAppend-only segments. See [the overview](../overview.md).\n"
    ),
    "adr/0002-replicated.md": (
        "---\n"
        "tags: 'storage, replication'\n"
        "supersedes: [0001-log.md]\n"
        "depends-on: ../overview.md, ../specs/wire.md#framing\n"
        "implements: [../specs/wire.md]\n"
        "derived-from: 0001-log.md\n"
        "related: [../overview.md]\n"
        "rel-reviewed-by: ../people/ann.md\n"
        "---\n"
        "# Replicated segment log\n\nSegments are copied to followers.\n"
    ),
    "overview.md": "# Overview\n\nStart at [the log](adr/0001-log.md) and [its successor](adr/0002-replicated.md).\n",
    "specs/wire.md": "---\nrel-related: ../overview.md\n---\n# Wire\n\n## Framing\n\nLength-prefixed frames.\n",
    "people/ann.md": "No heading here, just text.\n",
}
BAD = {
    "bad-yaml.md": ("---\ntitle: [unclosed\n---\nbody\n", "not valid YAML"),
    "over-limits.md": (
        "---\nrel-related: " + ", ".join(f"n{n}.md" for n in range(300)) + "\n---\nbody\n",
        "1024 bytes",
    ),
    "unclosed.md": ("---\ntitle: A\nbody\n", "never closes it"),
    "versions/in-reserved-folder.md": ("# x\n", "reserved for version history"),
    ".hidden.md": ("# x\n", "hidden names"),
}


def tree_state(folder: Path) -> dict[str, tuple[int, int, str]]:
    """(mode, mtime_ns, sha256 of bytes or link target) of every entry, never followed."""
    state = {}
    for here, dirs, names in os.walk(folder):
        for name in [*dirs, *names]:
            path = Path(here) / name
            st = os.lstat(path)
            if path.is_symlink():
                content = os.readlink(path)
            elif path.is_file():
                content = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                content = ""
            state[path.relative_to(folder).as_posix()] = (st.st_mode, st.st_mtime_ns, content)
    return state


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    top = tmp_path / "notes"
    for relative, text in GOOD.items():
        (top / relative).parent.mkdir(parents=True, exist_ok=True)
        (top / relative).write_text(text, encoding="utf-8")
    for relative, (text, _reason) in BAD.items():
        (top / relative).parent.mkdir(parents=True, exist_ok=True)
        (top / relative).write_text(text, encoding="utf-8")
    (top / "empty-body.md").write_text("---\ntitle: A\n---\n")  # a site's list page: skipped
    (top / "latin1.md").write_bytes(b"caf\xe9\n")
    (top / "huge.md").write_bytes(b"# Huge\n" + b"x" * (1024 * 1024))
    outside = tmp_path / "outside.md"
    outside.write_text("# Outside\n")
    (top / "escape.md").symlink_to(outside)
    (top / "alias.md").symlink_to(top / "overview.md")
    (top / "notes.txt").write_text("not markdown\n")
    (top / ".obsidian").mkdir()
    (top / ".obsidian" / "cache.md").write_text("# internal\n")
    return top


def run(folder: Path, root: Path, **options: object) -> Summary:
    settings: dict[str, object] = {"prefix": "/kb", "use_git": False, "archive_missing": False, "authority": AUTHORITY}
    settings.update(options)
    return run_import(folder, root=root, url=None, **settings)  # type: ignore[arg-type]


def refused(summary: Summary) -> dict[str, str]:
    return {r.relative: r.problems[0] for r in summary.refused}


def test_a_folder_becomes_documents_with_metadata_and_bad_files_are_refused(folder: Path, tmp_path: Path):
    before = tree_state(folder)
    summary = run(folder, tmp_path / "store")
    assert tree_state(folder) == before, "the folder was changed"
    assert summary.count(Outcome.CREATED) == len(GOOD)
    assert summary.count(Outcome.SKIPPED) == 2  # alias.md, a symlink inside the folder; empty-body.md
    reasons = refused(summary)
    assert set(reasons) == {*BAD, "latin1.md", "huge.md", "escape.md"}
    for relative, (_text, fragment) in BAD.items():
        assert fragment in reasons[relative], reasons[relative]
    assert "not valid UTF-8" in reasons["latin1.md"]
    assert "at most 1048576" in reasons["huge.md"]
    assert "leads out of the folder" in reasons["escape.md"]
    assert not summary.ok
    lines = summary.lines()
    assert lines[0] == "5 created, 0 updated, 0 unchanged, 0 archived, 2 skipped, 8 refused; 5 versions added"
    assert lines[1] == (
        "not read: 1 file (empty-body.md) with no text besides the frontmatter, as a site's list page often is "
        "(a Hugo section's _index.md); add text to import one"
    )
    assert "refused latin1.md: the file is not valid UTF-8 (byte 3); save it as UTF-8 and import again" in lines
    assert not (tmp_path / "store" / ".demarkus.filling").exists()  # a first import: synced once, at the end

    service = Service.open(tmp_path / "store", writable=False)
    try:
        assert service.store.documents() == sorted("/kb/" + r for r in GOOD)
        log = service.store.read("/kb/adr/0001-log.md")
        assert dict(log.metadata) == {
            "title": "Segment log",
            "tags": "storage,adr",
            "rel-superseded-by": "/kb/adr/0002-replicated.md",
            "owner": "storage-team",
        }
        assert log.body == b"# Segment log\n\nAppend-only segments. See [the overview](../overview.md).\n"
        replicated = service.store.read("/kb/adr/0002-replicated.md")
        assert dict(replicated.metadata) == {
            "title": "Replicated segment log",
            "tags": "storage,replication",
            "rel-supersedes": "/kb/adr/0001-log.md",
            "rel-depends-on": "/kb/overview.md, /kb/specs/wire.md#framing",
            "rel-implements": "/kb/specs/wire.md",
            "rel-derived-from": "/kb/adr/0001-log.md",
            "rel-related": "/kb/overview.md",
            "rel-reviewed-by": "/kb/people/ann.md",
        }
        assert not replicated.body.startswith(b"---")
        assert dict(service.store.read("/kb/people/ann.md").metadata) == {}
        assert service.store.read("/kb/specs/wire.md").metadata["title"] == "Wire"
        for relative in GOOD:
            assert [v.version for v in service.store.versions("/kb/" + relative)] == [1]
    finally:
        service.close()


async def tool_texts(root: Path, calls: list[tuple[str, dict[str, object]]]) -> list[str]:
    service = Service.open(root, writable=False)
    graph = GraphStore(default_graph_path(root, AUTHORITY))
    try:
        tools = Tools(LocalResolver(service, AUTHORITY, graph))
        async with MCPClient(build_server(lambda: tools)) as client:
            texts = []
            for tool, arguments in calls:
                text, is_error = await call(client, tool, **arguments)
                assert not is_error, text
                texts.append(text)
            return texts
    finally:
        graph.close()
        service.close()


def test_relations_and_links_are_seen_by_backlinks_and_explore_without_reading_first(folder: Path, tmp_path: Path):
    root = tmp_path / "store"
    run(folder, root)
    log_backlinks, wire_backlinks, explored = asyncio.run(
        tool_texts(
            root,
            [
                ("mark_backlinks", {"url": "/kb/adr/0001-log.md"}),
                ("mark_backlinks", {"url": "/kb/specs/wire.md"}),
                ("mark_explore", {"url": "/kb/adr/0001-log.md", "direction": "incoming"}),
            ],
        )
    )
    source = "(/kb/adr/0002-replicated.md)"
    assert source in log_backlinks and "[supersedes]" in log_backlinks and "[derived-from]" in log_backlinks
    assert "(/kb/overview.md)" in log_backlinks  # a body link
    assert source in wire_backlinks and "[implements]" in wire_backlinks and "[depends-on]" in wire_backlinks
    assert "incoming [supersedes]" in explored


def stored_body(root: Path, path: str) -> str:
    service = Service.open(root, writable=False)
    try:
        return service.store.read(path).body.decode()
    finally:
        service.close()


def test_links_by_the_folders_published_address_are_edges_to_its_notes(folder: Path, tmp_path: Path):
    site = "https://github.com/org/notes/blob/main/"
    rendered = "https://notes.example.org/architecture/"
    (folder / "history.md").write_text(
        f"# History\n\nIt began with [the log]({site}adr/0001-log.md), then [replicas]({rendered}0002-replicated/) "
        f"and [a page]({rendered}0003-nothing.html).\n"
    )
    sites = (parse_site(site), parse_site(rendered + "=adr"))
    root = tmp_path / "store"
    run(folder, root, sites=sites)
    text = stored_body(root, "/kb/history.md")
    assert "[the log](adr/0001-log.md), then [replicas](adr/0002-replicated.md)" in text
    assert f"[a page]({rendered}0003-nothing.html)" in text  # no such note: a web page
    backlinks, explored = asyncio.run(
        tool_texts(
            root,
            [
                ("mark_backlinks", {"url": "/kb/adr/0001-log.md"}),
                ("mark_explore", {"url": "/kb/history.md"}),
            ],
        )
    )
    assert "(/kb/history.md)" in backlinks
    assert "- [Segment log](/kb/adr/0001-log.md)" in explored and site not in explored
    again = run(folder, root, sites=sites)
    assert again.count(Outcome.UNCHANGED) == len(GOOD) + 1  # the same bytes: no new version


def test_links_to_the_pages_a_site_renders_from_its_notes_are_edges_to_the_notes(folder: Path, tmp_path: Path):
    # VitePress and Docusaurus pages link without `.md`, from the site's root or the page
    (folder / "guide.md").write_text(
        "# Guide\n\nSee [the log](/adr/0001-log#decision), [replicas](./adr/0002-replicated) "
        "and [a picture](./adr/diagram.png).\n"
    )
    root = tmp_path / "store"
    run(folder, root, prefix="/")  # its top is the site's root: an absolute path names a note
    text = stored_body(root, "/guide.md")
    assert "[the log](adr/0001-log.md#decision), [replicas](adr/0002-replicated.md)" in text
    assert "[a picture](./adr/diagram.png)" in text  # no note renders it: as written
    (backlinks,) = asyncio.run(tool_texts(root, [("mark_backlinks", {"url": "/adr/0001-log.md"})]))
    assert "(/guide.md)" in backlinks


def test_under_a_prefix_the_sites_paths_from_its_root_name_notes_when_the_site_is_given(folder: Path, tmp_path: Path):
    (folder / "guide.md").write_text(
        "---\nsuperseded-by: /adr/0002-replicated\n---\n# Guide\n\nSee [the log](/adr/0001-log#decision) "
        "and [elsewhere](/elsewhere/page).\n"
    )
    root = tmp_path / "store"
    run(folder, root)  # under /kb: a path from the root is a document path, outside the prefix
    assert "[the log](/adr/0001-log#decision)" in stored_body(root, "/kb/guide.md")
    run(folder, root, sites=(parse_site("https://notes.example.org/"),))  # the site's root is the folder's
    text = stored_body(root, "/kb/guide.md")
    assert "[the log](adr/0001-log.md#decision) and [elsewhere](/elsewhere/page)" in text
    (backlinks,) = asyncio.run(tool_texts(root, [("mark_backlinks", {"url": "/kb/adr/0002-replicated.md"})]))
    assert "superseded-by" in backlinks and "(/kb/guide.md)" in backlinks


def test_a_vault_joined_by_wiki_links_gets_its_edges_and_the_hop_follows_its_typed_links(tmp_path: Path):
    vault = tmp_path / "vault"
    (vault / "design").mkdir(parents=True)
    (vault / "design" / "Search ranking.md").write_text(
        "# Search ranking\n\nThe ranking scores sections with BM25 over their words.\n\n"
        "## Scores\n\nBM25 scores rank the sections, best first.\n\n"
        "## Relations\n- depends_on [[Index layout]] (the rows it ranks)\n- relates_to [[terms]]\n"
    )
    (vault / "Index layout.md").write_text(
        "# Index layout\n\nEach heading starts one row; sections are keyed by anchor.\n"
    )
    (vault / "Glossary.md").write_text(
        "---\naliases: [Terms]\n---\n# Glossary\n\nSee [[Search ranking#Relations|the relations]].\n"
    )
    root = tmp_path / "store"
    run(vault, root, wikilinks=True)
    page, backlinks, by_alias = asyncio.run(
        tool_texts(
            root,
            [
                ("mark_lookup", {"query": "ranking scores sections BM25", "match": "body", "limit": 2, "budget": 1500}),
                ("mark_backlinks", {"url": "/kb/design/Search ranking.md"}),
                ("mark_lookup", {"query": "terms"}),
            ],
        )
    )
    assert "| /kb/Index layout.md" not in page  # not a row: the typed link leads to it
    assert ">>> </kb/Index layout.md/v1#index-layout> (via </kb/design/Search ranking.md/v1> depends-on)\n" in page
    assert "- depends_on [Index layout](<../Index layout.md>) (the rows it ranks)\n" in page
    assert ">>> rel: </kb/design/Search ranking.md/v1> relates-to /kb/Glossary.md\n" in page  # by its alias
    assert "(/kb/Glossary.md)" in backlinks
    assert "| /kb/Glossary.md | 0.50 | Glossary |" in by_alias  # found by its alias, shown by its title


def test_a_notes_frontmatter_keys_an_editor_spells_its_own_way_are_kept_and_the_rest_warned_of(tmp_path: Path):
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Plan.md").write_text(
        "---\ncreated_at: 2024-01-02\nmodified: 2024-02-03\nstatus: superseded\nauthors: [{name: Ann}]\n"
        "作者: Ann\n---\n# Plan\n\nShip it.\n"
    )
    root = tmp_path / "store"
    summary = run(vault, root)
    assert summary.count(Outcome.CREATED) == 1 and not summary.refused
    [warning] = [line for line in summary.lines() if not line[0].isdigit()]
    assert warning == (  # each key with its cause, and what keeps it
        "warning Plan.md: 3 frontmatter keys left out: authors (a mapping or a list of lists, where metadata is "
        "text or a list of text: flatten it to keep it); 作者 (no metadata key spells it: a key keeps its ASCII "
        "letters and digits; rename it to keep it); modified (a key the note or the server already has: rename "
        "it to keep it)"
    )
    [page] = asyncio.run(tool_texts(root, [("mark_lookup", {"query": "plan", "filter": "created-at=2024-01-02"})]))
    assert "| /kb/Plan.md" in page and "status:superseded" in page


def test_a_vaults_tags_in_text_filter_lookups_and_those_left_out_are_warned_of(tmp_path: Path):
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Meeting.md").write_text("# Meeting\n\nDecided in the #weekly review: ship the ranking.\n")
    (vault / "Ranking.md").write_text("# Ranking\n\nThe ranking ships next week.\n\n```\n#weekly\n```\n")
    (vault / "Crowded.md").write_text("# Crowded\n\n" + " ".join(f"#t{n:03d}" for n in range(300)) + "\n")
    root = tmp_path / "store"
    summary = run(vault, root, wikilinks=True)
    assert summary.count(Outcome.CREATED) == 3 and not summary.ok
    [warning] = [line for line in summary.lines() if not line[0].isdigit()]
    assert warning.startswith("warning Crowded.md: ") and "tags its text writes left out (#t" in warning
    tagged, untagged = asyncio.run(
        tool_texts(
            root,
            [
                ("mark_lookup", {"query": "ranking ship", "match": "body", "filter": "tag=weekly"}),
                ("mark_lookup", {"query": "ranking ship", "match": "body"}),
            ],
        )
    )
    assert "| /kb/Meeting.md" in tagged and "| /kb/Ranking.md" in untagged
    assert "| /kb/Ranking.md" not in tagged  # its `#weekly` is in a code block
    plain = run(vault, tmp_path / "plain")  # without --wikilinks: no tags from the text
    assert plain.ok
    [none] = asyncio.run(
        tool_texts(tmp_path / "plain", [("mark_lookup", {"query": "ranking", "filter": "tag=weekly"})])
    )
    assert "/kb/" not in none


def test_a_path_is_a_note_exactly_when_the_folder_import_reads_it(folder: Path):
    (folder / "linked").symlink_to(folder / "adr")
    (folder / "adr" / "sub").mkdir()
    entries = [
        Path(here, name).relative_to(folder).as_posix()
        for here, dirs, names in os.walk(folder, followlinks=True)
        for name in [*dirs, *names]
    ]
    assert "linked/0001-log.md" in entries and ".obsidian/cache.md" in entries and "adr/sub" in entries
    read = set(scan_folder(folder).files)
    assert {entry for entry in entries if note_file(folder, entry) == entry} == read
    assert note_file(folder, "missing.md") is None and note_file(folder, "adr//0001-log.md") is None


def test_markdown_files_under_another_name_are_notes_and_links_to_them_name_their_documents(tmp_path: Path):
    top = tmp_path / "site"
    (top / "docs").mkdir(parents=True)
    pages = {
        "intro.md": "# Intro\n\nSee [setup](./setup) and [the post](../blog/post.markdown#why).\n",
        "intro.mdx": "# Intro, the other file\n",  # the same document: intro.md is read
        "setup.mdx": "import Tabs from '@theme/Tabs';\n\n# Setup\n\n<Tabs>Run it.</Tabs> Back to [intro](intro.md).\n",
        "faq.MDX": "# FAQ\n\nAsk.\n",
        "report.qmd": "---\ntitle: Report\n---\n\n```{python}\nprint(1)\n```\n",  # Quarto
        "model.Rmd": "# Model\n\n```{r}\nfit <- lm(y ~ x)\n```\n",  # R Markdown
        "logo.png": "",
    }
    for name, text in pages.items():
        (top / "docs" / name).write_text(text)
    (top / "blog").mkdir()
    (top / "blog" / "post.markdown").write_text("---\ntitle: A post\n---\n# Post\n\n## Why\n\nBecause.\n")
    summary = run(top, tmp_path / "store")
    created = {r.relative: r.path for r in summary.results if r.outcome == Outcome.CREATED}
    assert summary.ok and created == {
        "blog/post.markdown": "/kb/blog/post.md",
        "docs/faq.MDX": "/kb/docs/faq.md",
        "docs/intro.md": "/kb/docs/intro.md",
        "docs/model.Rmd": "/kb/docs/model.md",
        "docs/report.qmd": "/kb/docs/report.md",
        "docs/setup.mdx": "/kb/docs/setup.md",
    }
    assert summary.lines()[1] == (
        "not read: 1 file (docs/intro.mdx) beside a file of the same name read as the same document "
        "(b.md before b.mdx); rename one to import both"
    )
    intro = stored_body(tmp_path / "store", "/kb/docs/intro.md")
    assert "[setup](setup.md) and [the post](../blog/post.md#why)" in intro
    assert stored_body(tmp_path / "store", "/kb/docs/setup.md").startswith("import Tabs from")
    assert set(scan_folder(top).files) == {
        "blog/post.markdown",
        "docs/faq.MDX",
        "docs/intro.md",
        "docs/model.Rmd",
        "docs/report.qmd",
        "docs/setup.mdx",
    }
    assert note_file(top, "docs/setup.md") == "docs/setup.mdx" and note_file(top, "docs/intro.md") == "docs/intro.md"
    assert note_file(top, "docs/faq.md") == "docs/faq.MDX" and note_file(top, "docs/none.md") is None
    assert note_file(top, "docs/model.md") == "docs/model.Rmd"


def test_a_logseq_graphs_own_folder_of_settings_and_page_backups_is_not_read(tmp_path: Path):
    graph = tmp_path / "graph"
    for relative in ("pages/Tasks.md", "journals/2024_01_15.md", "logseq/bak/pages/Tasks/2024-01-15T10_00.Desktop.md"):
        (graph / relative).parent.mkdir(parents=True, exist_ok=True)
        (graph / relative).write_text("- ## Usage\n\t- Mark a block LATER.\n")
    (graph / "pages" / "logseq").mkdir()
    (graph / "pages" / "logseq" / "note.md").write_text("A page folder of the same name is read.\n")
    assert scan_folder(graph).files == (
        "journals/2024_01_15.md",
        "logseq/bak/pages/Tasks/2024-01-15T10_00.Desktop.md",  # no config.edn: not a Logseq graph
        "pages/Tasks.md",
        "pages/logseq/note.md",
    )
    (graph / "logseq" / "config.edn").write_text("{:meta/version 1}\n")
    assert scan_folder(graph).files == ("journals/2024_01_15.md", "pages/Tasks.md", "pages/logseq/note.md")
    assert note_file(graph, "logseq/bak/pages/Tasks/2024-01-15T10_00.Desktop.md") is None
    assert note_file(graph, "pages/logseq/note.md") == "pages/logseq/note.md"
    # a graph inside the folder imported: its own folder is skipped as well
    assert scan_folder(tmp_path).files == tuple(f"graph/{f}" for f in scan_folder(graph).files)
    assert note_file(tmp_path, "graph/logseq/bak/pages/Tasks/2024-01-15T10_00.Desktop.md") is None


def test_a_second_run_changes_nothing_and_an_edit_makes_exactly_one_version(folder: Path, tmp_path: Path):
    root = tmp_path / "store"
    run(folder, root)
    again = run(folder, root)
    assert again.count(Outcome.UNCHANGED) == len(GOOD)
    assert again.count(Outcome.CREATED) == again.count(Outcome.UPDATED) == again.versions == 0

    (folder / "overview.md").write_text("# Overview\n\nRewritten.\n")
    (folder / "specs" / "wire.md").write_text("---\nrel-related: ../overview.md\ntags: wire\n---\n# Wire\n")
    edited = run(folder, root)
    assert {r.relative for r in edited.results if r.outcome == Outcome.UPDATED} == {"overview.md", "specs/wire.md"}
    assert edited.versions == 2
    service = Service.open(root, writable=False)
    try:
        assert [v.version for v in service.store.versions("/kb/overview.md")] == [2, 1]
        assert service.store.read("/kb/specs/wire.md").metadata["tags"] == "wire"
        assert service.store.verify("/kb/overview.md") is None
    finally:
        service.close()
    assert run(folder, root).versions == 0


def test_archive_missing_archives_documents_whose_file_is_gone_and_a_return_restores(folder: Path, tmp_path: Path):
    root = tmp_path / "store"
    run(folder, root)
    (folder / "people" / "ann.md").unlink()
    kept = run(folder, root)  # without the flag nothing is archived
    assert kept.count(Outcome.ARCHIVED) == 0
    archived = run(folder, root, archive_missing=True)
    assert [r.path for r in archived.results if r.outcome == Outcome.ARCHIVED] == ["/kb/people/ann.md"]
    assert ", 1 archived," in archived.lines()[0]
    assert run(folder, root, archive_missing=True).count(Outcome.ARCHIVED) == 0  # already archived

    service = Service.open(root, writable=False)
    try:
        assert service.store.read("/kb/people/ann.md").archived
        assert not service.store.read("/kb/overview.md").archived  # refused files keep theirs too
    finally:
        service.close()
    (folder / "people" / "ann.md").write_text("Back again.\n")
    restored = run(folder, root, archive_missing=True)
    assert [r.relative for r in restored.results if r.outcome == Outcome.UPDATED] == ["people/ann.md"]
    service = Service.open(root, writable=False)
    try:
        doc = service.store.read("/kb/people/ann.md")
        assert not doc.archived and doc.body == b"Back again.\n" and doc.version == 2
    finally:
        service.close()


def test_archive_missing_leaves_documents_outside_the_prefix_alone(folder: Path, tmp_path: Path):
    root = tmp_path / "store"
    run(folder, root)
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.md").write_text("# X\n")
    summary = run(other, root, prefix="/elsewhere", archive_missing=True)
    assert summary.count(Outcome.CREATED) == 1 and summary.count(Outcome.ARCHIVED) == 0

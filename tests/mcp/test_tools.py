"""Every MCP tool through the SDK's in-memory client; texts pinned by golden files.

Regenerate the golden files after an intended change with DEMARKUS_UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mcp import Client

from ..conftest import call, make_server

GOLDEN = Path(__file__).parent / "golden"

CASES = [
    ("lookup-catalog", "mark_lookup", {"query": "runbook snapshot", "limit": 5}),
    ("lookup-body", "mark_lookup", {"query": "learner catch up rate promoted voter", "match": "body", "limit": 5}),
    ("lookup-budget", "mark_lookup", {"query": "lease heartbeat interval", "match": "body", "limit": 3, "budget": 600}),
    (
        "lookup-budget-weak",
        "mark_lookup",
        {"query": "kafka zookeeper broker topic partitions", "match": "body", "limit": 3, "budget": 1500},
    ),
    (
        "lookup-budget-readme",
        "mark_lookup",
        {"query": "restore snapshot quorum check", "url": "/runbooks", "match": "body", "limit": 2, "budget": 700},
    ),
    ("lookup-scoped", "mark_lookup", {"query": "*", "url": "/decisions", "limit": 20}),
    ("lookup-body-star", "mark_lookup", {"query": "*", "url": "/runbooks", "match": "body", "limit": 3}),
    ("fetch-whole", "mark_fetch", {"url": "/decisions/adr-0010-leases-and-heartbeats.md"}),
    ("fetch-section", "mark_fetch", {"url": "/runbooks/replace-failed-node.md#notes-1"}),
    ("fetch-old-version", "mark_fetch", {"url": "/operations/retention.md/v1"}),
    ("fetch-verbose-keys", "mark_fetch", {"url": "/overview.md", "verbose": False}),
    ("fetch-missing", "mark_fetch", {"url": "/nowhere.md"}),
    ("explore", "mark_explore", {"url": "/decisions/adr-0007-segment-log.md"}),
    ("list-root", "mark_list", {"url": "/"}),
    ("versions", "mark_versions", {"url": "/operations/configuration.md"}),
]


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("DEMARKUS_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden file {path}; run with DEMARKUS_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("name, tool, arguments", CASES, ids=[c[0] for c in CASES])
async def test_tool_texts_match_their_golden_files(demo_server, name: str, tool: str, arguments: dict[str, object]):
    async with Client(demo_server) as demo_client:
        text, is_error = await call(demo_client, tool, **arguments)
        assert not is_error, text
        check_golden(name, text)


async def test_outputs_are_identical_across_fresh_servers(demo_root: Path):
    texts = []
    for _ in range(2):
        async with Client(make_server(demo_root)) as client:
            texts.append([await call(client, tool, **args) for _, tool, args in CASES])
    assert texts[0] == texts[1]


async def test_every_tool_is_listed_with_a_description_for_a_model(demo_server):
    async with Client(demo_server) as demo_client:
        listed = await demo_client.list_tools()
        names = sorted(t.name for t in listed.tools)
        assert names == sorted(
            [
                "mark_lookup",
                "mark_fetch",
                "mark_explore",
                "mark_backlinks",
                "mark_list",
                "mark_versions",
                "mark_publish",
                "mark_append",
                "mark_archive",
            ]
        )
        for tool in listed.tools:
            assert tool.description and len(tool.description) > 80, tool.name
            assert tool.input_schema["type"] == "object"


async def test_a_repeated_full_fetch_answers_unchanged_until_forced(demo_server):
    async with Client(demo_server) as demo_client:
        first, _ = await call(demo_client, "mark_fetch", url="/overview.md")
        assert first.startswith("status: ok\nversion: 1\n")
        again, _ = await call(demo_client, "mark_fetch", url="/overview.md")
        assert again.startswith("status: unchanged\nversion: 1\netag: ")
        assert "pass force=true to re-read it" in again
        forced, _ = await call(demo_client, "mark_fetch", url="/overview.md", force=True)
        assert forced == first
        section, _ = await call(demo_client, "mark_fetch", url="/overview.md#harborwick-at-a-glance")
        assert "section: #harborwick-at-a-glance" in section


async def test_unknown_anchor_is_a_tool_error_listing_the_anchors(demo_server):
    async with Client(demo_server) as demo_client:
        text, is_error = await call(demo_client, "mark_fetch", url="/runbooks/replace-failed-node.md#nope")
        assert is_error
        assert "section #nope not found in /runbooks/replace-failed-node.md; available anchors: " in text
        assert "notes-1" in text


async def test_backlinks_come_from_the_authoritys_graph_before_any_document_is_read(demo_server):
    async with Client(demo_server) as demo_client:
        found, _ = await call(demo_client, "mark_backlinks", url="/decisions/adr-0003-sqlite-job-store.md")
        # named as every other local text names them: bare paths, not the authority's address
        assert found.startswith("Backlinks for /decisions/adr-0003-sqlite-job-store.md (")
        assert "(/decisions/adr-0007-segment-log.md) [supersedes]" in found
        assert "mark://" not in found


async def test_explore_records_relations_in_both_directions(demo_server):
    async with Client(demo_server) as demo_client:
        await call(demo_client, "mark_explore", url="/decisions/adr-0012-replicated-segment-log.md")
        text, _ = await call(
            demo_client, "mark_explore", url="/decisions/adr-0007-segment-log.md", direction="incoming"
        )
        assert "## Relations" in text
        assert "incoming [supersedes]" in text


async def test_a_location_in_angle_brackets_reads_as_its_path(demo_server):
    """A lookup's frames and an explore card write a location holding a space in angle
    brackets; a caller copying it whole reads the document."""
    async with Client(demo_server) as demo_client:
        text, is_error = await call(demo_client, "mark_fetch", url="</overview.md>", force=True)
        assert not is_error and text.startswith("status: ok\n"), text


@pytest.mark.parametrize(
    "tool, arguments, fragment",
    [
        ("mark_lookup", {"query": ""}, "empty"),
        ("mark_lookup", {"query": "x"}, "at least 2 characters"),
        ("mark_lookup", {"query": "lease", "match": "fuzzy"}, "match `fuzzy`"),
        ("mark_lookup", {"query": "lease", "filter": "tag"}, "malformed"),
        ("mark_lookup", {"query": "lease", "budget": -5}, "negative"),
        ("mark_lookup", {"query": "lease", "budget": 10**9}, "larger than"),
        ("mark_lookup", {"query": "lease", "limit": 0}, "below 1"),
        ("mark_lookup", {"query": "lease", "url": "mark://elsewhere.org/"}, "this server reads mark://demo.world only"),
        ("mark_fetch", {"url": "mark://elsewhere.org/a.md"}, "this server reads mark://demo.world only"),
        ("mark_fetch", {"url": "relative.md"}, "is not a path"),
        ("mark_fetch", {"url": "/a/../b.md"}, "`..`"),
        ("mark_fetch", {"url": "/a/%2e%2E/b.md"}, "`..`"),  # escapes are decoded before any check
        ("mark_explore", {"url": "/overview.md", "direction": "sideways"}, "direction `sideways`"),
        ("mark_explore", {"url": "/overview.md", "cursor": "garbage"}, "cursor"),
        ("mark_explore", {"url": "/overview.md", "page_size": 0}, "page_size"),
    ],
    ids=[
        "empty-query",
        "one-letter",
        "match",
        "filter",
        "negative-budget",
        "huge-budget",
        "limit",
        "lookup-cross-authority",
        "fetch-cross-authority",
        "relative",
        "dotdot",
        "escaped-dotdot",
        "direction",
        "cursor",
        "page-size",
    ],
)
async def test_bad_input_is_a_tool_error_that_says_what_to_do(
    demo_server, tool: str, arguments: dict[str, object], fragment: str
):
    async with Client(demo_server) as demo_client:
        text, is_error = await call(demo_client, tool, **arguments)
        assert is_error, text
        assert fragment in text
        still, failed = await call(demo_client, "mark_fetch", url="/index.md", force=True)
        assert not failed and still.startswith("status: ok")


async def test_a_url_is_read_as_a_link_with_its_escapes_decoded(demo_server):
    async with Client(demo_server) as client:
        plain, _ = await call(client, "mark_fetch", url="/index.md", force=True)
        escaped, failed = await call(client, "mark_fetch", url="/ind%65x.md", force=True)
        assert not failed and escaped == plain


async def test_a_path_copied_from_a_lookups_table_reads_its_document(tmp_path: Path):
    root = tmp_path / "store"
    root.mkdir()
    async with Client(make_server(root, trusted=True)) as client:
        for url in ("/pages/Changelog_07_09.md", "/notes/C# basics.md"):
            body = f"# {url}\n\n## Release notes\n\nThe unusual zebrafish release.\n"
            created, failed = await call(client, "mark_publish", url=url.replace("#", "%23"), body=body)
            assert not failed and created.startswith("status: created"), created
        table, _ = await call(client, "mark_lookup", query="zebrafish release", match="body")
        assert "| /pages/Changelog\\_07\\_09.md#release-notes |" in table  # a cell escapes `_`
        assert "| /notes/C%23 basics.md#release-notes |" in table  # a `#` in a path: percent-escaped
        rows = ("/pages/Changelog\\_07\\_09.md#release-notes", "/notes/C%23 basics.md#release-notes")
        for row in (*rows, "/notes/C\\# basics.md#release-notes"):  # a cell's escape reads too
            text, failed = await call(client, "mark_fetch", url=row)
            assert not failed and "The unusual zebrafish release." in text, text
        page, failed = await call(client, "mark_lookup", query="zebrafish release", match="body", budget=800)
        # the evidence is read, under a location that names the document when passed back
        assert not failed and ">>> </notes/C%23 basics.md/v1#release-notes>\n\n## Release notes\n" in page, page
        card, failed = await call(client, "mark_explore", url="</notes/C%23 basics.md>")
        assert not failed and "\nfetch /notes/C%23 basics.md#<anchor> for a section;" in card


async def test_explore_lists_the_siblings_nearest_the_document(tmp_path: Path):
    # a journal of 30 days: the card's ten siblings are the days around the one explored,
    # not the first days of the folder
    root = tmp_path / "store"
    root.mkdir()
    async with Client(make_server(root, trusted=True)) as client:
        for day in range(1, 31):
            url = f"/journal/2026-11-{day:02}.md"
            _, failed = await call(client, "mark_publish", url=url, body=f"# November {day}\n\nNotes.\n")
            assert not failed
        card, failed = await call(client, "mark_explore", url="/journal/2026-11-20.md")
    assert not failed, card
    siblings = card[card.index("## Siblings in /journal/ (29)") :]
    shown = [line[2:] for line in siblings.splitlines() if line.startswith("- ")]
    assert shown == [f"2026-11-{day:02}.md" for day in (15, 16, 17, 18, 19, 21, 22, 23, 24, 25)]
    assert "+14 earlier entries\n" in siblings and "+5 later entries\n" in siblings


async def test_scope_confines_every_tool(demo_root: Path):
    async with Client(make_server(demo_root, scope="/runbooks")) as client:
        text, is_error = await call(client, "mark_fetch", url="/overview.md")
        assert is_error and "outside the allowed scope /runbooks" in text
        text, is_error = await call(client, "mark_fetch", url="/runbooks%2F..%2Foverview.md")
        assert is_error and "`..`" in text
        inside, failed = await call(client, "mark_lookup", query="*")
        assert not failed and "/runbooks/" in inside and "/decisions/" not in inside.split("\n\n", 1)[1].split(">>>")[0]


async def test_writes_and_the_outline_of_large_documents(tmp_path: Path):
    root = tmp_path / "store"
    root.mkdir()
    async with Client(make_server(root, trusted=True)) as client:
        big = "# Big\n\nOpening paragraph of the big one.\n\n" + "".join(
            f"## Part {i}\n\n" + "words " * 300 + "\n\n" for i in range(8)
        )
        created, failed = await call(client, "mark_publish", url="/big.md", body=big, metadata={"title": "Big"})
        assert not failed and created.startswith("status: created\nversion: 1\n")
        outline, _ = await call(client, "mark_fetch", url="/big.md")
        assert "mode: outline\n" in outline and f"size: {len(big.encode())} bytes" in outline
        assert "- Big (#big, " in outline and "Opening paragraph of the big one." in outline
        assert outline.rstrip().endswith("fetch /big.md#<anchor> for a section; force=true for the full body")
        full, _ = await call(client, "mark_fetch", url="/big.md", force=True)
        assert full.endswith(big)
        # a section as large, with sub-sections: its own text and the outline below it
        section, _ = await call(client, "mark_fetch", url="/big.md#big")
        head, body = section.split("\n\n", 1)
        assert head.endswith(f"mode: outline\nsize: {len(big.encode())} bytes, 36 lines\nsection: #big")
        assert body.startswith(
            "# Big\n\nOpening paragraph of the big one.\n\nSub-sections:\n- Part 0 (#part-0, 4 lines)\n"
        )
        assert "words" not in body and "- Part 7 (#part-7, 4 lines)\n" in body
        assert body.endswith("\n\nfetch /big.md#<anchor> for a sub-section; force=true for the whole section\n")
        whole, _ = await call(client, "mark_fetch", url="/big.md#big", force=True)
        assert whole.endswith("section: #big\n\n" + big)
        part, _ = await call(client, "mark_fetch", url="/big.md#part-3")  # small: whole, as before
        assert "mode:" not in part and part.endswith("## Part 3\n\n" + "words " * 300 + "\n\n")
        appended, _ = await call(client, "mark_append", url="/big.md", body="tail\n")
        assert appended.startswith("status: created\nversion: 2")
        conflict, failed = await call(client, "mark_publish", url="/big.md", body="x", expected_version=1)
        assert not failed and conflict.startswith("status: conflict\nyour-version: 1\nserver-version: 2\n")
        archived, _ = await call(client, "mark_archive", url="/big.md")
        assert archived.startswith("status: ok\nversion: 2\narchived: true")
        gone, _ = await call(client, "mark_fetch", url="/big.md")
        assert gone.startswith("status: archived")


async def test_a_budgeted_lookup_lists_its_decisions_beside_the_text(demo_server):
    arguments = {"query": "lease heartbeat interval", "match": "body", "limit": 3, "budget": 600}
    async with Client(demo_server) as demo_client:
        budgeted = await demo_client.call_tool("mark_lookup", arguments)
        plain = await demo_client.call_tool("mark_lookup", {**arguments, "budget": 0})
    decisions = budgeted.meta["demarkus/decisions"]
    text = budgeted.content[0].text
    assert text == (GOLDEN / "lookup-budget.txt").read_text(encoding="utf-8")
    assert budgeted.structured_content == {"result": text}
    assert decisions[0] == {
        "location": "",
        "tokens": 114,
        "action": "table",
        "why": "the envelope and the table of 3 rows",
    }
    spent = sum(d["tokens"] for d in decisions if d["action"] not in ("omit", "drop"))
    assert f"; used {spent} of 600 tokens\n" in text
    assert "demarkus/decisions" not in (plain.meta or {})

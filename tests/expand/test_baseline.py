"""Today's budgeted expansion: rank order, whole blocks only, at most ten fetches."""

from __future__ import annotations

import pytest

from demarkus.errors import NotFoundError
from demarkus.expand import Fetched, expand, table_rows
from demarkus.render import LookupRow, render_lookup
from demarkus.tokens import count_tokens

DOCS = {
    "/ops/restore.md": "# Restore\n\nIntro.\n\n## Checks\n\nVerify the hashes before restoring.\n\n### Hashes\n\nUse sha256.\n",
    "/ops/audit.md": "# Audit\n\n## Completion\n\nAn audit completes when every step is signed.\n",
}


def table(*locations: str, query: str = "q") -> str:
    rows = []
    for loc in locations:
        path, _, anchor = loc.partition("#")
        rows.append(LookupRow(path, 0.8, "Fixture", ("graph",), anchor=anchor, heading="H" if anchor else "", snippet="s"))
    return render_lookup(query, "/", rows, body_match=True)


def fetcher(docs: dict[str, str], log: list[str] | None = None):
    async def fetch(path: str) -> Fetched:
        if log is not None:
            log.append(path)
        if path not in docs:
            raise NotFoundError(f"no document at {path}")
        return Fetched(path, docs[path].encode(), 2, {})

    return fetch


def test_table_rows_read_back_escaped_paths_and_anchors():
    rows = [LookupRow("/a_b/c|d.md", 0.5, "T", ()), LookupRow("/x.md", 0.5, "T", (), anchor="sec-1", heading="Sec")]
    text = render_lookup("q", "/", rows, body_match=True)
    assert [(r.path, r.anchor) for r in table_rows(text)] == [("/a_b/c|d.md", ""), ("/x.md", "sec-1")]


async def test_zero_budget_adds_nothing():
    assert await expand(table("/ops/restore.md#checks"), "q", 0, fetcher(DOCS)) == ""


async def test_anchored_rows_print_their_section_with_subsections_in_rank_order():
    out = await expand(table("/ops/restore.md#checks", "/ops/audit.md#completion"), "q", 500, fetcher(DOCS))
    assert out.startswith("\n>>> /ops/restore.md/v2#checks\n\n## Checks\n\nVerify the hashes before restoring.\n\n### Hashes\n\nUse sha256.\n\n")
    assert ">>> /ops/audit.md/v2#completion" in out
    assert out.endswith(">>> note: expanded 2 of 2 rows within the budget\n")


async def test_small_documents_without_anchor_print_whole_labelled_with_their_h1():
    out = await expand(table("/ops/audit.md"), "q", 500, fetcher(DOCS))
    assert ">>> /ops/audit.md/v2#audit\n\n# Audit\n" in out


async def test_a_block_is_printed_only_when_it_fits_whole_and_the_budget_covers_blocks():
    budget = count_tokens(">>> /ops/audit.md/v2#completion\n\n## Completion\n\nAn audit completes when every step is signed.\n\n")
    out = await expand(table("/ops/restore.md#checks", "/ops/audit.md#completion"), "q", budget, fetcher(DOCS))
    assert "#checks" not in out and ">>> /ops/audit.md/v2#completion" in out
    assert "expanded 1 of 2 rows" in out


async def test_the_baseline_prints_nested_rows_twice():
    out = await expand(table("/ops/restore.md#checks", "/ops/restore.md#hashes"), "q", 500, fetcher(DOCS))
    assert out.count("Use sha256.") == 2


async def test_failed_fetches_become_notes_and_unknown_anchors_too():
    out = await expand(table("/missing.md#x", "/ops/audit.md#nope", "/ops/audit.md#completion"), "q", 500, fetcher(DOCS))
    assert ">>> note: /missing.md: no document at /missing.md\n" in out
    assert ">>> note: /ops/audit.md: section #nope not found\n" in out
    assert "expanded 1 of 3 rows" in out


async def test_at_most_ten_documents_are_fetched():
    docs = {f"/d{i}.md": f"# D{i}\n\ntext {i}\n" for i in range(15)}
    log: list[str] = []
    out = await expand(table(*docs), "q", 10_000, fetcher(docs, log))
    assert len(log) == 10
    assert "fetch limit of 10 documents reached" in out


async def test_large_documents_print_sections_holding_every_query_word_else_the_outline():
    big = "# Big\n\n" + "".join(f"## Part {i}\n\n" + ("filler words here. " * 40) + "\n\n" for i in range(12))
    big += "## Retention\n\nThe retention period is seven days.\n"
    docs = {"/big.md": big}
    out = await expand(table("/big.md", query="retention period"), "retention period", 5000, fetcher(docs))
    assert ">>> /big.md/v2#retention\n\n## Retention\n\nThe retention period is seven days.\n" in out
    outline = await expand(table("/big.md", query="absent words"), "absent words", 5000, fetcher(docs))
    assert ">>> /big.md/v2\n\n- Big (#big," in outline


async def test_frame_lines_inside_evidence_are_indented():
    docs = {"/f.md": "# F\n\n>>> not a frame\n"}
    out = await expand(table("/f.md"), "q", 500, fetcher(docs))
    assert "\n >>> not a frame\n" in out


@pytest.mark.parametrize("budget", [1, 10, 50, 120, 400])
async def test_blocks_never_exceed_the_budget(budget: int):
    out = await expand(table("/ops/restore.md#checks", "/ops/audit.md#completion", "/ops/restore.md"), "q", budget, fetcher(DOCS))
    blocks = [b for b in out.split(">>> ") if b.strip() and not b.startswith("note:")]
    assert sum(count_tokens(">>> " + b) for b in blocks) <= budget

"""The context bench scores frames with the package's one parser (`demarkus.expand.frames`)."""

from __future__ import annotations

from bench.context_bench import score

EXPANSION = (
    "\n>>> /a.md/v2#decision\n\nWe keep the log.\n >>> a quoted prompt\nWe keep the log.\n\n"
    ">>> /a.md/v2#detail: within /a.md/v2#decision above\n"
    ">>> /b.md/v1 (via /a.md/v2 supersedes)\n\nThe old log.\n\n"
    ">>> rel: /a.md/v2 supersedes /b.md\n"
    ">>> note: expanded 1 of 1 rows and 1 related document; used 40 of 500 tokens\n"
)
CASE = {
    "budget": 500,
    "expected": [
        {"path": "/a.md", "text": "We keep the log."},
        {"path": "/b.md", "text": "The old log."},
        {"path": "/a.md", "text": "The old log."},
    ],
}


def test_blocks_count_by_their_own_document_and_stubs_are_not_blocks() -> None:
    scored = score(CASE, "status: ok\n", EXPANSION, ["/a.md", "mark://other/c.md"])
    assert scored["recall"] == "2/3"  # "The old log." is in /b.md's block, not in one of /a.md
    assert scored["dup"] == 1  # /a.md's passage twice in its block
    assert scored["related"] == 1
    assert (scored["fetches"], scored["cross_authority_fetches"]) == (2, 1)
    assert scored["over"] == 0 and scored["tokens"] > scored["table_tokens"]


def test_a_guarded_evidence_line_stays_in_its_block_unindented() -> None:
    case = {"budget": 500, "expected": [{"path": "/a.md", "text": "We keep the log.\n>>> a quoted prompt"}]}
    assert score(case, "", EXPANSION, [])["recall"] == "1/1"

"""World-qualified locations (pure): what is qualified, what is left alone, and that
removing the world prefix gives the local text back."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from demarkus.gateway.qualify import (
    qualify_expansion,
    qualify_lookup,
    qualify_lookup_result,
    qualify_versions,
    strip_world,
)

HEAD = """status: ok
matches: 2
match: body

# Lookup matches for "lease \\"renewal\\" in /docs" in /docs

| Path | Importance | Title | Tags | Snippet |
|------|------------|-------|------|---------|
| /docs/a\\_b.md#intro | 0.80 | A › Intro | x | see /docs/c.md |
| /docs/c.md | 0.50 | C | y | \\| /not/a/row |
"""

EXPANSION = """
>>> /docs/a_b.md/v3#intro

## Intro

| /inside | a document table |
 >>> evidence text that looked like a frame is indented by the expansion: /docs/h.md stays
Text that mentions /docs/c.md and (/docs/d.md) stays as written.
[#setup: same text as /docs/c.md/v1#setup above]

>>> /docs/e.md/v1 (via /docs/a_b.md/v3 supersedes)

body

>>> rel: /docs/a_b.md/v3 depends-on /docs/c.md, mark://other/x.md#y
>>> /docs/a_b.md/v3#details: within /docs/a_b.md/v3#intro above
>>> note: /docs/f.md: world w did not answer FETCH /docs/f.md
>>> note: did not fit: /docs/c.md#x (~12 tokens), /docs/g.md (~3 tokens) +2 more
>>> note: expanded 2 of 2 rows and 1 related document; used 700 of 800 tokens
"""


def test_a_lookup_result_qualifies_scope_rows_and_frames_only():
    text = qualify_lookup_result(HEAD + EXPANSION, "w")
    assert '# Lookup matches for "lease \\"renewal\\" in /docs" in mark://w/docs' in text
    assert "| mark://w/docs/a\\_b.md#intro | 0.80 | A › Intro | x | see /docs/c.md |" in text
    assert "| mark://w/docs/c.md | 0.50 | C | y | \\| /not/a/row |" in text
    assert ">>> mark://w/docs/a_b.md/v3#intro\n" in text
    assert "\n| /inside | a document table |\n" in text
    assert "\n >>> evidence text that looked like a frame is indented by the expansion: /docs/h.md stays\n" in text
    assert "Text that mentions /docs/c.md and (/docs/d.md) stays as written." in text
    assert "[#setup: same text as mark://w/docs/c.md/v1#setup above]" in text
    assert ">>> mark://w/docs/e.md/v1 (via mark://w/docs/a_b.md/v3 supersedes)" in text
    assert ">>> rel: mark://w/docs/a_b.md/v3 depends-on mark://w/docs/c.md, mark://other/x.md#y" in text
    assert ">>> mark://w/docs/a_b.md/v3#details: within mark://w/docs/a_b.md/v3#intro above" in text
    assert ">>> note: mark://w/docs/f.md: world w did not answer FETCH mark://w/docs/f.md" in text
    assert ">>> note: did not fit: mark://w/docs/c.md#x (~12 tokens), mark://w/docs/g.md (~3 tokens) +2 more" in text
    assert ">>> note: expanded 2 of 2 rows and 1 related document; used 700 of 800 tokens" in text
    assert strip_world(text, "w") == HEAD + EXPANSION


def test_a_table_without_expansion_and_a_version_history():
    assert strip_world(qualify_lookup_result(HEAD, "w"), "w") == HEAD
    assert qualify_lookup(HEAD, "w").count("| mark://w/") == 2
    history = "\n# Version History: /docs/a.md\n\n- [v2](/docs/a.md/v2) - 2026-01-02T00:00:00Z\n- [v1](/docs/a.md/v1) - 2026-01-01T00:00:00Z\n"
    qualified = qualify_versions(history, "w")
    assert qualified == history.replace("/docs/a.md", "mark://w/docs/a.md")
    assert strip_world(qualified, "w") == history


def test_strip_world_leaves_other_worlds_and_longer_names():
    text = "mark://w/a.md mark://w#x mark://wx/b.md mark://w.example/c.md mark://other/d.md"
    assert strip_world(text, "w") == "/a.md #x mark://wx/b.md mark://w.example/c.md mark://other/d.md"


_paths = st.from_regex(r"/[a-z0-9_./-]{0,12}", fullmatch=True)
_words = st.text(alphabet="abc /#()[]|>\\:.-", max_size=20).filter(lambda s: "mark://" not in s)


@given(
    st.lists(
        st.one_of(
            _paths.map(lambda p: f">>> {p}/v1#x"),
            st.tuples(_paths, _paths).map(lambda t: f">>> rel: {t[0]} supersedes {t[1]}"),
            _paths.map(lambda p: f">>> note: {p}: gone"),
            _words,
        ),
        max_size=12,
    )
)
def test_qualifying_then_stripping_gives_the_local_text_back(lines: list[str]):
    text = "\n".join(lines)
    assert strip_world(qualify_expansion(text, "w"), "w") == text

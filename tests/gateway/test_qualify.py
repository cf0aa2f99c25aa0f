"""World-qualified names (pure): a version history is qualified, and removing the world
prefix gives the local text back. Lookups are named while printed (tests/gateway/test_fidelity.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from demarkus.gateway.qualify import qualify_versions, strip_world


def test_a_version_history_is_qualified_and_stripped_back():
    history = "\n# Version History: /docs/a.md\n\n- [v2](/docs/a.md/v2) - 2026-01-02T00:00:00Z\n- [v1](/docs/a.md/v1) - 2026-01-01T00:00:00Z\n"
    qualified = qualify_versions(history, "w")
    assert qualified == history.replace("/docs/a.md", "mark://w/docs/a.md")
    assert strip_world(qualified, "w") == history


def test_strip_world_leaves_other_worlds_and_longer_names():
    text = "mark://w/a.md mark://w#x mark://wx/b.md mark://w.example/c.md mark://other/d.md"
    assert strip_world(text, "w") == "/a.md #x mark://wx/b.md mark://w.example/c.md mark://other/d.md"


_paths = st.from_regex(r"/[a-z0-9_./-]{0,12}", fullmatch=True)


@given(st.lists(_paths, max_size=6))
def test_qualifying_then_stripping_gives_the_local_history_back(paths: list[str]):
    history = "".join(f"\n# Version History: {p}\n\n- [v1]({p}/v1) - 2026-01-01T00:00:00Z\n" for p in paths)
    assert strip_world(qualify_versions(history, "w"), "w") == history

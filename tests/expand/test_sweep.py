"""Budgeted lookups stay byte for byte what they were: a sweep over the demo and PEPs worlds.

Every question's content words, looked up with match=body in the question's scope, at
five budgets and two limits, through `mark_lookup`'s code (`Tools.lookup`) on an embedded
store: 260 results whose digests are pinned in `sweep.json`. A change to how the selection
is built must leave them as they are; a change to what it selects updates them on purpose
(DEMARKUS_UPDATE_GOLDEN=1) and says in its commit which figures moved.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from demarkus.graph import GraphStore
from demarkus.index.query import content_words
from demarkus.mcp.server import LocalResolver
from demarkus.mcp.tools import Tools
from demarkus.service import Service
from demarkus.worlds import demo_world_path

from ..conftest import PEPS_WORLD

PINNED = Path(__file__).parent / "sweep.json"
BUDGETS = (600, 1000, 1500, 2000, 3000)
LIMITS = (3, 10)


async def sweep(root: Path, world: Path, name: str) -> dict[str, str]:
    """Digest of every budgeted lookup of the world's questions, by `world budget limit question`."""
    questions = json.loads((world / "questions.json").read_text(encoding="utf-8"))
    authority = json.loads((world / "manifest.json").read_text(encoding="utf-8"))["authority"]
    service = Service.open(root)
    digests: dict[str, str] = {}
    try:
        for budget in BUDGETS:
            for limit in LIMITS:
                for question in questions:
                    tools = Tools(LocalResolver(service, authority, GraphStore(None), scope="/"))
                    query = " ".join(content_words(question["question"]))
                    text = await tools.lookup(query, question.get("scope", "/"), None, limit, "body", budget)
                    key = f"{name} b{budget} l{limit} {question['id']}"
                    digests[key] = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    finally:
        service.close()
    return digests


async def test_budgeted_lookups_are_byte_identical_to_the_pinned_sweep(demo_root: Path, peps_root: Path):
    digests = await sweep(demo_root, demo_world_path(), "demo")
    digests |= await sweep(peps_root, PEPS_WORLD, "peps")
    assert len(digests) >= 150
    if os.environ.get("DEMARKUS_UPDATE_GOLDEN"):
        PINNED.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    pinned = json.loads(PINNED.read_text(encoding="utf-8"))
    changed = sorted(key for key in pinned if digests.get(key) != pinned[key])
    if changed:
        pytest.fail(f"{len(changed)} of {len(pinned)} budgeted lookups changed, e.g. {', '.join(changed[:8])}")
    assert digests.keys() == pinned.keys()

"""One arm of the evidence benches (`evidence_peps`, `evidence_sweep`): every question of a
world as one body-match `mark_lookup` through the MCP tools on an embedded store, with the
question's content words, the given limit and budget. Prints `{question id: tool text}` as
JSON; the parent scores the texts.

It runs on every arm's `src`, so it uses only what v0.1.0 and the current code both have.

    python -m bench.evidence_arm ROOT WORLD BUDGET LIMIT    (started by bench.arms.run)
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from demarkus.graph import GraphStore
from demarkus.index.query import content_words
from demarkus.mcp.server import LocalResolver
from demarkus.mcp.tools import Tools
from demarkus.service import Service

from . import arms


def lookup_texts(root: Path, world: Path, budget: int, limit: int) -> dict[str, str]:
    """The text of each question's lookup, in the world's question order."""
    questions = json.loads((world / "questions.json").read_text(encoding="utf-8"))
    authority = json.loads((world / "manifest.json").read_text(encoding="utf-8"))["authority"]
    service = Service.open(root)
    texts: dict[str, str] = {}

    async def go() -> None:
        for q in questions:
            tools = Tools(LocalResolver(service, authority, GraphStore(None), scope="/"))
            query = " ".join(content_words(q["question"]))
            texts[q["id"]] = await tools.lookup(query, q.get("scope", "/"), None, limit, "body", budget, False)

    asyncio.run(go())
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="a store the world was loaded into")
    parser.add_argument("world", type=Path)
    parser.add_argument("budget", type=int)
    parser.add_argument("limit", type=int)
    args = parser.parse_args()
    arms.own_demarkus()
    arms.answer(lookup_texts(args.root, args.world, args.budget, args.limit))


if __name__ == "__main__":
    main()

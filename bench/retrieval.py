"""Section retrieval on every visible world: do the body search's top rows hold the
sections the questions' evidence lies in?

    .venv/bin/python -m bench.retrieval [--world DIR ...] [--limit 20]

Each world's current versions are loaded into a fresh store (`demarkus world load`, which
builds the section index), and each question, reduced to its content words (the index's
own stop-word list), is searched under its scope. Per world:

- first evidence in the top 3 / top 10: the section holding the question's first
  evidence quote (of its first field that has one);
- all evidence in the top 10 / top 20: every evidence quote of every field.

A row finds a quote when its path is the quote's document and its anchor is the evidence
anchor, or names a section of the current version whose byte range (with sub-sections)
contains the quote; a bare-path row counts only when the quote is in the preamble.
Questions without evidence (category `absent`) are not applicable.

This bench MEASURES: no ranking weight, stop word or rule was chosen by looking at it.
Results go to bench/out/retrieval.json, and to bench/results/retrieval.json (the committed
copy) when every visible world ran at the default limit.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Any

from demarkus.index import SectionHit, SectionIndex
from demarkus.index.query import content_words
from demarkus.markdown import parse_outline
from demarkus.store import FileStore
from demarkus.worlds import open_world

from .common import VISIBLE_WORLDS, load_world, print_table, shown, write_results

LIMIT = 20


def accepted_anchors(store: FileStore, path: str, anchor: str, quote: str) -> set[str]:
    """Anchors of rows that count as finding the quote: the evidence anchor, every section of
    the current version whose subtree holds the quote, and "" when the preamble holds it."""
    out = {anchor}
    try:
        body = store.read(path).body
    except Exception:  # a missing document: only the named anchor can count
        return out
    needle = quote.encode("utf-8")
    outline = parse_outline(body)
    for section in outline.sections:
        if needle in outline.text(section):
            out.add(section.anchor)
    if needle in outline.preamble:
        out.add("")
    return out


def first_rank(hits: list[SectionHit], path: str, anchors: set[str]) -> int | None:
    for i, hit in enumerate(hits, start=1):
        if hit.path == path and hit.anchor in anchors:
            return i
    return None


def measure(world_dir: Path, root: Path, limit: int) -> dict[str, Any]:
    """Ranks of every question's evidence in one world's body search."""
    world = open_world(world_dir)
    rubric = world.rubric()
    store = FileStore(root)
    index = SectionIndex(root / ".demarkus" / "index.sqlite")
    questions: list[dict[str, Any]] = []
    try:
        for q in world.questions():
            evidence = rubric[q["id"]].get("evidence") or {}
            items = [item for field in q["fields"] for item in evidence.get(field) or []]
            query = " ".join(content_words(q["question"]))
            hits = index.search(query, q.get("scope") or "/", limit=limit)
            ranks: list[int | None] = []
            seen: set[tuple[str, str]] = set()
            for item in items:
                key = (item["path"], item["quote"])
                if key in seen:
                    continue
                seen.add(key)
                anchors = accepted_anchors(store, item["path"], item.get("anchor", ""), item["quote"])
                ranks.append(first_rank(hits, item["path"], anchors))
            questions.append(
                {
                    "id": q["id"],
                    "category": q["category"],
                    "applicable": bool(ranks),
                    "query": query,
                    "first_rank": ranks[0] if ranks else None,
                    "ranks": ranks,
                    "top": [f"{h.path}#{h.anchor}" for h in hits[:3]],
                }
            )
    finally:
        index.close()
    answerable = [q for q in questions if q["applicable"]]

    def share(test: Any) -> int:
        return sum(1 for q in answerable if test(q))

    def within(rank: int | None, top: int) -> bool:
        return rank is not None and rank <= top

    return {
        "world": world.id,
        "answerable": len(answerable),
        "first_top3": share(lambda q: within(q["first_rank"], 3)),
        "first_top10": share(lambda q: within(q["first_rank"], 10)),
        "all_top10": share(lambda q: all(within(r, 10) for r in q["ranks"])),
        "all_top20": share(lambda q: all(within(r, 20) for r in q["ranks"])),
        "quotes": sum(len(q["ranks"]) for q in answerable),
        "quotes_top10": sum(1 for q in answerable for r in q["ranks"] if within(r, 10)),
        "quotes_top20": sum(1 for q in answerable for r in q["ranks"] if within(r, 20)),
        "questions": questions,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--world", type=Path, action="append", help="a world folder (repeatable; default: every visible world)"
    )
    parser.add_argument("--limit", type=int, default=LIMIT)
    args = parser.parse_args(argv)
    worlds = args.world or [w for w in VISIBLE_WORLDS if w.is_dir()]
    results: list[dict[str, Any]] = []
    work = Path(tempfile.mkdtemp(prefix="demarkus-retrieval-"))
    try:
        for world in worlds:
            root = work / world.name
            load_world(world, root)
            results.append(measure(world, root, args.limit))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = [
        [
            r["world"],
            r["answerable"],
            f"{r['first_top3']}/{r['answerable']}",
            f"{r['first_top10']}/{r['answerable']}",
            f"{r['all_top10']}/{r['answerable']}",
            f"{r['all_top20']}/{r['answerable']}",
            f"{r['quotes_top10']}/{r['quotes']}",
            f"{r['quotes_top20']}/{r['quotes']}",
        ]
        for r in results
    ]
    print_table(
        f"Body search, every visible world (limit {args.limit}): questions whose evidence sections are in the top rows",
        ["world", "answerable", "first top3", "first top10", "all top10", "all top20", "quotes top10", "quotes top20"],
        rows,
    )
    write_results(
        "retrieval",
        {"worlds": [shown(w) for w in worlds], "limit": args.limit},
        {"worlds": results},
        keep=args.world is None and args.limit == LIMIT,  # part of it keeps the committed copy
    )


if __name__ == "__main__":
    main()

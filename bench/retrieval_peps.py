"""Section retrieval on the PEPs world: is the section holding each question's first evidence
quote among the top 3 / top 10 rows of a body search?

    .venv/bin/python -m bench.retrieval_peps [--world ../shared/worlds/peps] [--root DIR]

The world's current versions are loaded into a fresh store (`demarkus world load`), the
section index is rebuilt from it, and each question, reduced to its content words (the
index's own stop-word list), is searched under its scope with limit 10.

A row is a hit when its path is the evidence path and either its anchor is the evidence
anchor, or it names a section of the current version whose byte range (with sub-sections)
contains the quote; a bare-path row counts only when the quote is in the preamble. The
stricter "exact" column counts only the evidence anchor itself. Questions of category
`absent` have no evidence and are not applicable.

This bench MEASURES: no ranking weight, stop word or rule was chosen by looking at it.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from demarkus.index import SectionHit, SectionIndex, rebuild
from demarkus.index.query import content_words
from demarkus.markdown import parse_outline
from demarkus.store import FileStore
from demarkus.worlds import open_world

from .common import DEMARKUS, PEPS, REPO, print_table, shown, write_results

WORLD = PEPS
LIMIT = 10


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


def doc_rank(hits: list[SectionHit], path: str) -> int | None:
    for i, hit in enumerate(hits, start=1):
        if hit.path == path:
            return i
    return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=Path, default=WORLD)
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        help="an already loaded store to reuse (default: load into a temp dir)",
    )
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="demarkus-retrieval-"))
    try:
        root = args.root
        load_s = 0.0
        if root is None:
            root = work / "store"
            start = time.perf_counter()
            subprocess.run(
                [*DEMARKUS, "world", "load", str(args.world), "--root", str(root)],
                check=True,
                capture_output=True,
                text=True,
                cwd=REPO,
            )
            load_s = time.perf_counter() - start
        store = FileStore(root)
        index = SectionIndex(work / "index.sqlite")
        start = time.perf_counter()
        rows = rebuild(index, store)
        build_s = time.perf_counter() - start

        world = open_world(args.world)
        rubric = world.rubric()
        results: list[dict[str, Any]] = []
        table: list[list[object]] = []
        for q in world.questions():
            qid, category = q["id"], q["category"]
            scope = q.get("scope") or "/"
            query = " ".join(content_words(q["question"]))
            start = time.perf_counter()
            hits = index.search(query, scope, limit=LIMIT)
            ms = (time.perf_counter() - start) * 1000
            evidence = rubric[qid].get("evidence") or {}
            fields = list(q["fields"])
            first = next((f for f in fields if evidence.get(f)), None)
            if first is None:
                results.append(
                    {
                        "id": qid,
                        "category": category,
                        "applicable": False,
                        "query": query,
                        "top": [f"{h.path}#{h.anchor}" for h in hits[:3]],
                        "ms": round(ms, 2),
                    }
                )
                table.append(
                    [
                        qid,
                        category,
                        "n/a",
                        "n/a",
                        "n/a",
                        "-",
                        hits[0].path + "#" + hits[0].anchor if hits else "-",
                    ]
                )
                continue
            ev = evidence[first][0]
            path, anchor, quote = ev["path"], ev.get("anchor", ""), ev["quote"]
            anchors = accepted_anchors(store, path, anchor, quote)
            hit = first_rank(hits, path, anchors)
            exact = first_rank(hits, path, {anchor})
            doc = doc_rank(hits, path)
            results.append(
                {
                    "id": qid,
                    "category": category,
                    "applicable": True,
                    "query": query,
                    "scope": scope,
                    "target": f"{path}#{anchor}",
                    "accepted": sorted(anchors),
                    "rank": hit,
                    "exact_rank": exact,
                    "doc_rank": doc,
                    "top3": hit is not None and hit <= 3,
                    "top10": hit is not None,
                    "top": [f"{h.path}#{h.anchor}" for h in hits[:3]],
                    "ms": round(ms, 2),
                }
            )
            table.append(
                [
                    qid,
                    category,
                    hit or "-",
                    exact or "-",
                    doc or "-",
                    f"{path}#{anchor}",
                    hits[0].path + "#" + hits[0].anchor if hits else "-",
                ]
            )
        index.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print_table(
        f"Body search on {world.id}: rank of the first-evidence section (limit {LIMIT};"
        " hit = evidence anchor or a section enclosing the quote; exact = the evidence anchor)",
        ["id", "category", "hit rank", "exact rank", "doc rank", "evidence", "top row"],
        table,
    )
    by_category: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in results:
        c = by_category[r["category"]]
        if not r["applicable"]:
            c["n/a"] += 1
            continue
        c["questions"] += 1
        c["top3"] += int(r["top3"])
        c["top10"] += int(r["top10"])
        c["exact_top3"] += int(r["exact_rank"] is not None and r["exact_rank"] <= 3)
        c["exact_top10"] += int(r["exact_rank"] is not None)
        c["doc_top10"] += int(r["doc_rank"] is not None)
    total: dict[str, int] = defaultdict(int)
    summary_rows = []
    for category in sorted(by_category):
        c = by_category[category]
        for key, value in c.items():
            total[key] += value
        summary_rows.append(
            [
                category,
                c["questions"],
                c["top3"],
                c["top10"],
                c["exact_top3"],
                c["exact_top10"],
                c["doc_top10"],
                c["n/a"],
            ]
        )
    summary_rows.append(
        [
            "TOTAL",
            total["questions"],
            total["top3"],
            total["top10"],
            total["exact_top3"],
            total["exact_top10"],
            total["doc_top10"],
            total["n/a"],
        ]
    )
    print_table(
        "By category (counts of questions)",
        [
            "category",
            "applicable",
            "top3",
            "top10",
            "exact top3",
            "exact top10",
            "doc top10",
            "n/a",
        ],
        summary_rows,
    )
    print(
        f"\nindex: {rows} rows, rebuilt in {build_s:.2f} s (world load {load_s:.1f} s); "
        f"target: top-10 hit for >= 12 of {total['questions']} applicable questions: "
        f"{'MET' if total['top10'] >= 12 else 'MISSED'} ({total['top10']})"
    )
    write_results(
        "retrieval_peps",
        {"world": shown(args.world), "limit": LIMIT},
        {
            "questions": results,
            "by_category": {k: dict(v) for k, v in by_category.items()},
            "total": dict(total),
            "index_rows": rows,
            "rebuild_s": round(build_s, 3),
        },
    )


if __name__ == "__main__":
    main()

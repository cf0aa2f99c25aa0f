"""Evidence inside one budgeted lookup, on the PEPs world (or another with `--world`):
v0.1.0 against the current code.

For each question: one `mark_lookup` (match=body, the question's content words, the given
limit and budget) through the MCP tools on an embedded store. A rubric evidence quote
counts when it lies inside a frame (`>>> /path/vN#anchor`) of its own document. Reported
per question and by category, for both arms. The questions measure; nothing is tuned to
them.

    .venv/bin/python bench/evidence_peps.py [--budget 1500] [--limit 3] [--world DIR]

Results go to bench/results/evidence_<world directory>_b<budget>_l<limit>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
WORLD = REPO.parent / "shared" / "worlds" / "peps"  # as common.PEPS, imported lazily here
MULTI = ("multi-document", "supersession", "lineage", "dependency")


def run_arm(src: Path, root: Path, world: Path, budget: int, limit: int) -> dict:
    sys.path.insert(0, str(src))
    sys.path.insert(0, str(BENCH))
    from context_bench import blocks

    from demarkus.graph import GraphStore
    from demarkus.index.query import content_words
    from demarkus.mcp.server import LocalResolver
    from demarkus.mcp.tools import Tools
    from demarkus.service import Service
    from demarkus.tokens import count_tokens

    questions = json.loads((world / "questions.json").read_text(encoding="utf-8"))
    authority = json.loads((world / "manifest.json").read_text(encoding="utf-8"))["authority"]
    rubric = json.loads((world / "rubric.json").read_text(encoding="utf-8"))
    service = Service.open(root)
    out: dict[str, dict] = {}

    async def go() -> None:
        for q in questions:
            tools = Tools(LocalResolver(service, authority, GraphStore(None), scope="/"))
            query = " ".join(content_words(q["question"]))
            text = await tools.lookup(query, q.get("scope", "/"), None, limit, "body", budget, False)
            expansion = text.split("\n>>> ", 1)
            framed = blocks(">>> " + expansion[1]) if len(expansion) > 1 else []
            items = [e for field in rubric[q["id"]]["evidence"].values() for e in field]
            unique = {(e["path"], e["quote"]) for e in items}
            found = sum(1 for path, quote in unique if any(p == path and quote in t for p, _, t in framed))
            out[q["id"]] = {
                "category": q["category"],
                "quotes": len(unique),
                "found": found,
                "all": bool(unique) and found == len(unique),
                "tokens": count_tokens(text),
                "related_blocks": sum(1 for _, frame, _ in framed if " (via " in frame),
            }

    asyncio.run(go())
    return out


def baseline_commit() -> str:
    return (BENCH / "BASELINE").read_text(encoding="utf-8").split()[0]


def baseline_src(tmp: Path) -> Path:
    """v0.1.0's `src` (the `bench/BASELINE` commit), extracted under `tmp`."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", baseline_commit(), "src"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
    return tmp / "src"


def load_store(world: Path, root: Path) -> None:
    sys.path.insert(0, str(BENCH))
    import common

    subprocess.run(
        [*common.DEMARKUS, "world", "load", str(world), "--root", str(root)], check=True, capture_output=True
    )


def arm(src: Path, root: Path, world: Path, budget: int, limit: int) -> dict:
    """`run_arm` in its own interpreter, so each arm imports its own `src`."""
    done = subprocess.run(
        [
            sys.executable,
            __file__,
            "--world",
            str(world),
            "--budget",
            str(budget),
            "--limit",
            str(limit),
            "--arm",
            str(src),
            str(root),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=Path, default=WORLD)
    parser.add_argument("--budget", type=int, default=1500)
    parser.add_argument("--limit", type=int, default=3)
    parser.add_argument("--arm", nargs=2, metavar=("SRC", "ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        print(json.dumps(run_arm(Path(args.arm[0]), Path(args.arm[1]), args.world, args.budget, args.limit)))
        return
    sys.path.insert(0, str(BENCH))
    import common

    commit = baseline_commit()
    with tempfile.TemporaryDirectory(prefix="demarkus-evidence-") as tmp:
        root = Path(tmp) / "store"
        load_store(args.world, root)
        arms = {
            name: arm(src, root, args.world, args.budget, args.limit)
            for name, src in (("v0.1.0", baseline_src(Path(tmp))), ("current", REPO / "src"))
        }
    before, after = arms["v0.1.0"], arms["current"]
    rows = [
        [
            qid,
            b["category"],
            f"{b['found']}/{b['quotes']}",
            f"{after[qid]['found']}/{b['quotes']}",
            b["tokens"],
            after[qid]["tokens"],
            after[qid]["related_blocks"],
        ]
        for qid, b in before.items()
    ]
    common.print_table(
        f"evidence quotes inside one lookup (budget {args.budget}, limit {args.limit})",
        ["question", "category", "v0.1.0", "current", "tokens 0.1", "tokens now", "related"],
        rows,
    )
    by_category = {}
    for cat in sorted({b["category"] for b in before.values()}):
        ids = [q for q, b in before.items() if b["category"] == cat]
        by_category[cat] = {
            arm: {
                "questions_all_quotes": sum(r[q]["all"] for q in ids),
                "quotes_found": sum(r[q]["found"] for q in ids),
                "quotes": sum(r[q]["quotes"] for q in ids),
            }
            for arm, r in (("v0.1.0", before), ("current", after))
        }
    common.print_table(
        "by category",
        ["category", "v0.1.0 quotes", "current quotes", "v0.1.0 all", "current all"],
        [
            [
                c,
                f"{v['v0.1.0']['quotes_found']}/{v['v0.1.0']['quotes']}",
                f"{v['current']['quotes_found']}/{v['current']['quotes']}",
                v["v0.1.0"]["questions_all_quotes"],
                v["current"]["questions_all_quotes"],
            ]
            for c, v in by_category.items()
        ],
    )
    answerable = [q for q, b in before.items() if b["quotes"]]
    total_after = sum(after[q]["all"] for q in answerable)
    total_before = sum(before[q]["all"] for q in answerable)
    print(
        f"\nquestions with every evidence quote inside the one result: v0.1.0 {total_before}/{len(answerable)}, "
        f"current {total_after}/{len(answerable)}"
        + (" (target: at least 10 of 15)" if args.world.name == "peps" else "")
    )
    for cat in MULTI:
        if cat in by_category:
            v = by_category[cat]
            print(
                f"  {cat}: quotes {v['v0.1.0']['quotes_found']} -> {v['current']['quotes_found']} of {v['current']['quotes']}"
            )
    common.write_results(
        f"evidence_{args.world.name}_b{args.budget}_l{args.limit}",
        {"world": str(args.world), "budget": args.budget, "limit": args.limit, "baseline": commit},
        {
            "v0.1.0": before,
            "current": after,
            "by_category": by_category,
            "all_quotes": {"v0.1.0": total_before, "current": total_after, "answerable": len(answerable)},
        },
    )


if __name__ == "__main__":
    main()

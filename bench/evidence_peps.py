"""Evidence inside one budgeted lookup, on the PEPs world (or another with `--world`):
v0.1.0 against the current code.

For each question: one `mark_lookup` (match=body, the question's content words, the given
limit and budget) through the MCP tools on an embedded store, run by each arm in its own
interpreter (`bench.evidence_arm`). A rubric evidence quote counts when it lies inside a
frame (`>>> /path/vN#anchor`) of its own document, read with the current package's frame
parser for both arms. Reported per question and by category, for both arms. The questions
measure; nothing is tuned to them.

    .venv/bin/python -m bench.evidence_peps [--budget 1500] [--limit 3] [--world DIR]

Results go to bench/results/evidence_<world directory>_b<budget>_l<limit>.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from demarkus.expand import frames
from demarkus.tokens import count_tokens

from . import arms, common

MULTI = ("multi-document", "supersession", "lineage", "dependency")


def score(world: Path, texts: dict[str, str]) -> dict[str, dict]:
    """Per question (in the world's order): the rubric quotes found inside a block of their
    own document, the tokens of the whole text and the related blocks."""
    questions = json.loads((world / "questions.json").read_text(encoding="utf-8"))
    rubric = json.loads((world / "rubric.json").read_text(encoding="utf-8"))
    out: dict[str, dict] = {}
    for q in questions:
        text = texts[q["id"]]
        blocks = frames.blocks(text)
        items = [e for field in rubric[q["id"]]["evidence"].values() for e in field]
        unique = {(e["path"], e["quote"]) for e in items}
        found = sum(1 for path, quote in unique if any(b.location.path == path and quote in b.text for b in blocks))
        out[q["id"]] = {
            "category": q["category"],
            "quotes": len(unique),
            "found": found,
            "all": bool(unique) and found == len(unique),
            "tokens": count_tokens(text),
            "related_blocks": sum(1 for b in blocks if b.via is not None),
            "related_with_quote": sum(
                1 for b in blocks if b.via is not None and any(b.location.path == p and q in b.text for p, q in unique)
            ),
        }
    return out


def measure(src: Path, root: Path, world: Path, budget: int, limit: int) -> dict[str, dict]:
    """One arm's lookups (the `demarkus` under `src`, in its own interpreter), scored here."""
    texts = arms.run("evidence_arm", src, str(root), str(world), str(budget), str(limit))
    return score(world, texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=Path, default=common.PEPS)
    parser.add_argument("--budget", type=int, default=1500)
    parser.add_argument("--limit", type=int, default=3)
    args = parser.parse_args()
    commit = arms.baseline_commit()
    with tempfile.TemporaryDirectory(prefix="demarkus-evidence-") as tmp:
        root = Path(tmp) / "store"
        common.load_world(args.world, root)
        before = measure(arms.baseline_src(Path(tmp)), root, args.world, args.budget, args.limit)
        after = measure(arms.CURRENT_SRC, root, args.world, args.budget, args.limit)
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
        {"world": common.shown(args.world), "budget": args.budget, "limit": args.limit, "baseline": commit},
        {
            "v0.1.0": before,
            "current": after,
            "by_category": by_category,
            "all_quotes": {"v0.1.0": total_before, "current": total_after, "answerable": len(answerable)},
        },
    )


if __name__ == "__main__":
    main()

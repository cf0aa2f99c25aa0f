"""Evidence inside one budgeted lookup across budgets and limits, v0.1.0 against the
current code: the `bench.evidence_peps` measure repeated over a grid, so a change is judged
on more than one budget.

For each world, limit and budget: how many answerable questions have every rubric
evidence quote inside a frame of its own document, and how many quotes are found. Per
world, the hop's yield: how many related blocks (`(via ...)`) hold an evidence quote.

    .venv/bin/python -m bench.evidence_sweep [--world DIR ...] [--budgets 1000 1500 2000 3000] [--limits 3 10]
        [--against bench/results/evidence_sweep.json]

Per world, the sums over its settings and its worst setting against v0.1.0. With
`--against` an earlier run's v0.1.0 figures are reused (that arm and the worlds are
frozen, so they cannot change; half the time), each world's sums in that run are shown
beside today's (a change is kept only if no world's fall and one rises), and the
questions whose quotes found moved are listed: what a change did, question by question.

Results go to bench/out/evidence_sweep.json, and to bench/results/evidence_sweep.json (the
committed grid) when the whole grid ran: every visible world, the default budgets and limits.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from . import arms, common
from .common import load_world
from .evidence_peps import measure

BUDGETS = [1000, 1500, 2000, 3000]
LIMITS = [3, 10]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--world",
        type=Path,
        action="append",
        help="a world directory (repeat; default every visible world: peps, eth, rust, demo, go, logseq)",
    )
    parser.add_argument("--budgets", type=int, nargs="+", default=BUDGETS)
    parser.add_argument("--limits", type=int, nargs="+", default=LIMITS)
    parser.add_argument(
        "--against",
        type=Path,
        help="an earlier results file: take v0.1.0's figures from it instead of running that arm "
        "(same baseline commit only), and list the questions whose quotes found changed since it",
    )
    args = parser.parse_args()
    # only a run of the whole grid replaces the committed copy
    whole = args.world is None and args.budgets == BUDGETS and args.limits == LIMITS
    worlds = args.world or list(common.VISIBLE_WORLDS)
    commit = arms.baseline_commit()
    earlier = _earlier(args.against, commit)
    rows: list[list[object]] = []
    results: list[dict[str, object]] = []
    totals = {"v0.1.0": 0, "current": 0}
    hops = {w.name: {"v0.1.0": [0, 0], "current": [0, 0]} for w in worlds}
    """Per world and arm: related blocks holding an evidence quote, and all related blocks."""
    with tempfile.TemporaryDirectory(prefix="demarkus-sweep-") as tmp:
        sources = {arms.CURRENT: arms.CURRENT_SRC}
        if not earlier:  # else v0.1.0's figures come from the earlier run
            sources = {arms.BASELINE: arms.baseline_src(Path(tmp)), **sources}
        for world in worlds:
            root = Path(tmp) / f"store-{world.name}"
            load_world(world, root)
            for limit in args.limits:
                for budget in args.budgets:
                    found: dict[str, dict] = {}
                    if earlier:
                        found["v0.1.0"] = earlier[(world.name, limit, budget)]["v0.1.0"]
                    for name, src in sources.items():
                        per = measure(src, root, world, budget, limit)
                        answerable = [q for q in per.values() if q["quotes"]]
                        found[name] = {
                            "all_quotes": sum(q["all"] for q in answerable),
                            "answerable": len(answerable),
                            "quotes_found": sum(q["found"] for q in answerable),
                            "quotes": sum(q["quotes"] for q in answerable),
                            "related_blocks": sum(q["related_blocks"] for q in per.values()),
                            "related_with_quote": sum(q["related_with_quote"] for q in per.values()),
                            "found": {qid: q["found"] for qid, q in per.items() if q["quotes"]},
                        }
                    for name in found:
                        hops[world.name][name][0] += found[name].get("related_with_quote", 0)
                        hops[world.name][name][1] += found[name].get("related_blocks", 0)
                        totals[name] += found[name]["all_quotes"]
                    before, after = found["v0.1.0"], found["current"]
                    rows.append(
                        [
                            world.name,
                            limit,
                            budget,
                            f"{before['all_quotes']}/{before['answerable']}",
                            f"{after['all_quotes']}/{after['answerable']}",
                            f"{before['quotes_found']}/{before['quotes']}",
                            f"{after['quotes_found']}/{after['quotes']}",
                        ]
                    )
                    results.append({"world": world.name, "limit": limit, "budget": budget, **found})
    common.print_table(
        "questions with every evidence quote inside one lookup",
        ["world", "limit", "budget", "v0.1.0 all", "current all", "v0.1.0 quotes", "current quotes"],
        rows,
    )
    print(f"\nsummed over the {len(rows)} settings: v0.1.0 {totals['v0.1.0']}, current {totals['current']}")
    common.print_table(
        "per world, summed over its settings (the worst: current minus v0.1.0 at its lowest setting)",
        [
            "world",
            "v0.1.0 all/quotes",
            "current all/quotes",
            "worst setting",
            *(["earlier current"] if earlier else []),
        ],
        [_world_row(world.name, results, earlier) for world in worlds],
    )
    common.print_table(
        "the hop: related blocks holding an evidence quote, of all related blocks, summed over the settings",
        ["world", "v0.1.0", "current"],
        [[w, f"{h['v0.1.0'][0]}/{h['v0.1.0'][1]}", f"{h['current'][0]}/{h['current'][1]}"] for w, h in hops.items()],
    )
    if earlier:
        _print_changes(earlier, results)
    common.write_results(
        "evidence_sweep",
        {
            "worlds": [common.shown(w) for w in worlds],
            "budgets": args.budgets,
            "limits": args.limits,
            "baseline": commit,
        },
        {"settings": results, "totals": totals, "hops": hops},
        keep=whole,
    )


def _earlier(path: Path | None, commit: str) -> dict[tuple[str, int, int], dict]:
    """The settings of an earlier results file, by (world, limit, budget); {} without one.

    Raises:
        SystemExit: the file was made against another baseline commit.
    """
    if path is None:
        return {}
    document = json.loads(path.read_text(encoding="utf-8"))
    if document["parameters"].get("baseline") != commit:
        raise SystemExit(f"{path} was measured against another baseline than {commit}: run without --against")
    return {(s["world"], s["limit"], s["budget"]): s for s in document["results"]["settings"]}


def _world_row(world: str, results: list[dict], earlier: dict[tuple[str, int, int], dict]) -> list[object]:
    """One world's sums over its settings, v0.1.0 then current (questions with every quote /
    quotes found), the setting where current is furthest below v0.1.0 (or nearest above),
    and, with an earlier run, its current sums then: what a change did to this world."""
    mine = [s for s in results if s["world"] == world]

    def sums(settings: list[dict], arm: str) -> str:
        return f"{sum(s[arm]['all_quotes'] for s in settings)}/{sum(s[arm]['quotes_found'] for s in settings)}"

    worst = min(mine, key=lambda s: s["current"]["all_quotes"] - s["v0.1.0"]["all_quotes"])
    gap = worst["current"]["all_quotes"] - worst["v0.1.0"]["all_quotes"]
    row: list[object] = [
        world,
        sums(mine, "v0.1.0"),
        sums(mine, "current"),
        f"{gap:+d} (l{worst['limit']} b{worst['budget']})",
    ]
    if earlier:
        keys = [(s["world"], s["limit"], s["budget"]) for s in mine]
        row.append(sums([earlier[k] for k in keys], "current") if all(k in earlier for k in keys) else "-")
    return row


def _print_changes(earlier: dict[tuple[str, int, int], dict], results: list[dict]) -> None:
    """The questions whose quotes found changed since the earlier run, setting by setting."""
    changes = []
    for setting in results:
        key = (setting["world"], setting["limit"], setting["budget"])
        before = earlier.get(key, {}).get("current", {}).get("found", {})
        for qid, now in setting["current"]["found"].items():
            if qid in before and before[qid] != now:
                changes.append([*key, qid, before[qid], now])
    if changes:
        common.print_table(
            "quotes found that changed since the earlier run",
            ["world", "limit", "budget", "question", "then", "now"],
            changes,
        )
    else:
        print("\nno question's quotes found changed since the earlier run (or it has no per-question figures)")


if __name__ == "__main__":
    main()

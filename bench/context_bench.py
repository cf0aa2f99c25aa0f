"""Context assembly given candidates: the frozen fixture bench/context/fixture.json run
through the v0.1.0 expansion and the current one, side by side.

Each case fixes the table rows, the document bodies and metadata, the budget (tokens)
and the expected passages. Metrics per case (E.10 of the reference, adapted):

* recall      expected passages found inside a frame of their own document
* dup         duplicated evidence: sum over passages of (occurrences in own frames - 1)
* tokens      o200k_base tokens of the whole result (envelope + table + expansion)
* over        max(0, tokens - budget)
* fetches     documents fetched
* related     typed related blocks (relation expansions)

Each arm (v0.1.0 from `git archive` of the commit in bench/BASELINE, and the current
code) runs real code in its own interpreter (`bench.context_arm`) and returns its texts;
both are scored here with the current package's frame parser and token counter.

    .venv/bin/python -m bench.context_bench
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from demarkus.expand import frames
from demarkus.tokens import count_tokens

from . import arms, common

FIXTURE = common.BENCH / "context" / "fixture.json"


def score(case: dict, head: str, expansion: str, fetched: list[str]) -> dict:
    """The metrics of one case from what an arm printed and fetched."""
    found = dup = 0
    blocks = frames.blocks(expansion)
    for expected in case["expected"]:
        occurrences = sum(b.text.count(expected["text"]) for b in blocks if b.location.path == expected["path"])
        found += occurrences > 0
        dup += max(0, occurrences - 1)
    tokens = count_tokens(head + expansion)
    return {
        "recall": f"{found}/{len(case['expected'])}",
        "recall_full": found == len(case["expected"]),
        "dup": dup,
        "tokens": tokens,
        "over": max(0, tokens - case["budget"]),
        "fetches": len(fetched),
        "cross_authority_fetches": sum(1 for f in fetched if f.startswith("mark://")),
        "related": sum(1 for b in blocks if b.via is not None),
        "table_tokens": count_tokens(head),
        "budget": case["budget"],
    }


def measure(src: Path) -> dict[str, dict]:
    """Every case through the `demarkus` under `src`, scored here; cases by name."""
    texts = arms.run("context_arm", src, str(FIXTURE))
    cases = {case["name"]: case for case in json.loads(FIXTURE.read_text(encoding="utf-8"))["cases"]}
    return {
        name: score(cases[name], texts[name]["head"], texts[name]["expansion"], texts[name]["fetched"])
        for name in sorted(texts)
    }


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    commit = arms.baseline_commit()
    with tempfile.TemporaryDirectory(prefix="demarkus-v0.1.0-") as tmp:
        before = measure(arms.baseline_src(Path(tmp)))
    after = measure(arms.CURRENT_SRC)
    rows = []
    worse = []
    for name, a in after.items():
        b = before[name]
        rows.append(
            [
                name,
                a["budget"],
                a["table_tokens"],
                b["recall"],
                a["recall"],
                b["dup"],
                a["dup"],
                b["tokens"],
                a["tokens"],
                b["over"],
                a["over"],
                b["fetches"],
                a["fetches"],
                a["related"],
            ]
        )
        if (
            int(a["recall"].split("/")[0]) < int(b["recall"].split("/")[0])
            or a["dup"] > b["dup"]
            or a["over"] > b["over"]
        ):
            worse.append(name)
    common.print_table(
        f"context assembly: v0.1.0 ({commit[:10]}) vs current, per case",
        [
            "case",
            "budget",
            "table",
            "recall 0.1",
            "recall now",
            "dup 0.1",
            "dup now",
            "tokens 0.1",
            "tokens now",
            "over 0.1",
            "over now",
            "fetch 0.1",
            "fetch now",
            "related now",
        ],
        rows,
    )
    fits = [n for n, a in after.items() if a["table_tokens"] <= a["budget"]]
    print(
        f"\ncurrent: full recall on {sum(after[n]['recall_full'] for n in fits)}/{len(fits)} cases whose table fits the budget; "
        f"duplicated evidence {sum(a['dup'] for a in after.values())}; "
        f"tokens over budget where the table fits {sum(after[n]['over'] for n in fits)}; "
        f"cases worse than v0.1.0: {worse or 'none'}"
    )
    common.write_results(
        "context_bench",
        {"fixture": str(FIXTURE.relative_to(common.REPO)), "baseline": commit},
        {"v0.1.0": before, "current": after, "worse_than_baseline": worse},
    )


if __name__ == "__main__":
    main()

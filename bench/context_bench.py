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

The v0.1.0 code is taken from the commit in bench/BASELINE (`git archive`), so both
arms run real code.

    .venv/bin/python bench/context_bench.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
FIXTURE = BENCH / "context" / "fixture.json"


def head_for(case: dict) -> str:
    rows = "".join(f"| {row} | 0.80 | Fixture | graph |\n" for row in case["rows"])
    return (
        f"status: ok\nmatches: {len(case['rows'])}\n\n"
        f'# Lookup matches for "{case["query"]}" in /\n\n'
        "| Path | Importance | Title | Tags |\n|------|------------|-------|------|\n" + rows
    )


_FRAME = re.compile(r"^>>> (\S+)(.*)$")


def blocks(expansion: str) -> list[tuple[str, str, str]]:
    """(path, frame line, text) of every evidence block; notes, relation lines and
    one-line stubs (`loc: within ...`, `loc: same text as ...`) are not blocks."""
    out: list[tuple[str, str, list[str]]] = []
    current: list[str] | None = None
    for line in expansion.split("\n"):
        found = _FRAME.match(line)
        if found is None:
            if current is not None:
                current.append(line)
            continue
        location = found.group(1)
        if location in ("note:", "rel:") or location.endswith(":"):
            current = None
            continue
        current = []
        out.append((re.sub(r"/v\d+$", "", location.split("#", 1)[0]), line, current))
    return [(path, frame, "\n".join(text)) for path, frame, text in out]


def score(case: dict, expansion: str, head: str, fetched: list[str], count_tokens) -> dict:
    found = dup = 0
    parsed = blocks(expansion)
    for expected in case["expected"]:
        occurrences = sum(text.count(expected["text"]) for path, _, text in parsed if path == expected["path"])
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
        "related": sum(1 for _, header, _ in parsed if " (via " in header),
    }


def run_cases(src: Path | None) -> dict[str, dict]:
    """Run every case through the `demarkus` found on sys.path (or under `src`)."""
    if src is not None:
        sys.path.insert(0, str(src))
    import demarkus.expand as expand_package
    from demarkus.errors import NotFoundError
    from demarkus.expand import Fetched, expand
    from demarkus.tokens import count_tokens

    fixture = json.loads(FIXTURE.read_text(encoding="utf-8"))
    results: dict[str, dict] = {}
    for case in fixture["cases"]:
        fetched: list[str] = []

        async def fetch(path: str, case: dict = case, fetched: list[str] = fetched) -> Fetched:
            fetched.append(path)
            doc = case["docs"].get(path)
            if doc is None:
                raise NotFoundError(f"no document at {path}")
            return Fetched(path, doc["body"].encode("utf-8"), 1, doc["metadata"])

        head = head_for(case)
        if hasattr(expand_package, "drop_snippets"):  # the current code's budgeted table
            head = expand_package.drop_snippets(head)
        expansion = asyncio.run(expand(head, case["query"], case["budget"], fetch))
        results[case["name"]] = score(case, expansion, head, fetched, count_tokens)
        results[case["name"]]["table_tokens"] = count_tokens(head)
        results[case["name"]]["budget"] = case["budget"]
    return results


def baseline_results(commit: str) -> dict[str, dict]:
    with tempfile.TemporaryDirectory(prefix="demarkus-v0.1.0-") as tmp:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "src"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        done = subprocess.run(
            [sys.executable, __file__, "--src", str(Path(tmp) / "src"), "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, help="run one arm with demarkus from this src folder")
    parser.add_argument("--json", action="store_true", help="print the arm's results as JSON")
    args = parser.parse_args()
    if args.json:
        print(json.dumps(run_cases(args.src), sort_keys=True))
        return
    sys.path.insert(0, str(BENCH))
    import common

    commit = (BENCH / "BASELINE").read_text(encoding="utf-8").split()[0]
    before = baseline_results(commit)
    after = json.loads(
        subprocess.run(
            [sys.executable, __file__, "--json", "--src", str(REPO / "src")], capture_output=True, text=True, check=True
        ).stdout
    )
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
        {"fixture": str(FIXTURE.relative_to(REPO)), "baseline": commit},
        {"v0.1.0": before, "current": after, "worse_than_baseline": worse},
    )


if __name__ == "__main__":
    main()

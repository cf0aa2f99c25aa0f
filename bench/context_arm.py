"""One arm of the context bench: every case of the frozen fixture through that arm's
`expand`, with the case's table rows, documents and budget. Prints, per case, the table
head, the expansion and the paths fetched, as JSON; `bench.context_bench` scores them.

It runs on every arm's `src`, so it uses only what v0.1.0 and the current code both have.

    python -m bench.context_arm FIXTURE    (started by bench.arms.run)
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from demarkus.errors import NotFoundError

try:  # the current package: one module per layer
    from demarkus.expand.document import Fetched
    from demarkus.expand.select import expand
except ImportError:  # v0.1.0: one module, its names on the package
    from demarkus.expand import Fetched, expand

from . import arms


def head_for(case: dict) -> str:
    """The lookup envelope and table the case's rows make."""
    rows = "".join(f"| {row} | 0.80 | Fixture | graph |\n" for row in case["rows"])
    return (
        f"status: ok\nmatches: {len(case['rows'])}\n\n"
        f'# Lookup matches for "{case["query"]}" in /\n\n'
        "| Path | Importance | Title | Tags |\n|------|------------|-------|------|\n" + rows
    )


def expansions(fixture: Path) -> dict[str, dict]:
    """Per case: `head` (the table as this arm sends it), `expansion` and `fetched`."""
    out: dict[str, dict] = {}
    for case in json.loads(fixture.read_text(encoding="utf-8"))["cases"]:
        fetched: list[str] = []

        async def fetch(path: str, case: dict = case, fetched: list[str] = fetched) -> Fetched:
            fetched.append(path)
            doc = case["docs"].get(path)
            if doc is None:
                raise NotFoundError(f"no document at {path}")
            return Fetched(path, doc["body"].encode("utf-8"), 1, doc["metadata"])

        head = head_for(case)  # a catalog table: no Snippet column for a budgeted lookup to drop
        expansion = asyncio.run(expand(head, case["query"], case["budget"], fetch))
        out[case["name"]] = {"head": head, "expansion": expansion, "fetched": fetched}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fixture", type=Path)
    args = parser.parse_args()
    arms.own_demarkus()
    arms.answer(expansions(args.fixture))


if __name__ == "__main__":
    main()

"""Rebuild this world's corpus from a clone of github.com/logseq/docs.

    python bench/worlds/logseq/build.py CLONE

CLONE must hold commit COMMIT. Its `pages/*.md` are imported as `demarkus import
--wikilinks --prefix /pages` imports a Logseq graph (page properties as metadata, wiki
links to pages of the graph as links, `#tags`), into a scratch store, and each document
is written as the store holds it. Writes corpus.jsonl beside this file; questions.json,
rubric.json and the manifest's fingerprints are kept by hand (see README.md). Run it with
the project's virtualenv.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from demarkus.store import FileStore

COMMIT = "08f855f24d66e4509b7ea808554c13b4649e6ee1"
HERE = Path(__file__).resolve().parent


def pages(clone: Path) -> list[str]:
    listed = subprocess.run(
        ["git", "-C", str(clone), "ls-tree", "--name-only", COMMIT, "pages/"],
        capture_output=True,
        check=True,
        text=True,
    ).stdout.splitlines()
    return sorted(name for name in listed if name.endswith(".md"))


def main(clone: Path) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        folder, store = Path(scratch) / "pages", Path(scratch) / "store"
        folder.mkdir()
        for name in pages(clone):
            raw = subprocess.run(["git", "-C", str(clone), "show", f"{COMMIT}:{name}"], capture_output=True, check=True)
            (folder / Path(name).name).write_bytes(raw.stdout)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "demarkus",
                "import",
                str(folder),
                "--root",
                str(store),
                "--prefix",
                "/pages",
                "--wikilinks",
            ],
            check=True,
        )
        held = FileStore(store)
        lines = []
        for path in held.documents():
            version = held.read(path)
            lines.append(
                json.dumps(
                    {"path": path, "metadata": dict(version.metadata), "versions": [version.body.decode("utf-8")]},
                    ensure_ascii=False,
                )
            )
    (HERE / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} documents")


if __name__ == "__main__":
    main(Path(sys.argv[1]))

"""Rebuild this world's corpus from a clone of github.com/golang/proposal.

    python bench/worlds/go/build.py CLONE

CLONE must hold commit COMMIT (and 03441cb, the structured logging proposal's first
revision). Writes corpus.jsonl beside this file; questions.json, rubric.json and the
manifest's fingerprints are kept by hand (see README.md). Run it with the project's
virtualenv (it reads titles and links as `demarkus import` does).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from demarkus.importer.site import Sites, parse_site
from demarkus.markdown.frontmatter import first_heading

COMMIT = "f6e2e6b7f89c932d16aaa20b2aabddd599e5b468"
EARLIER = {"design/56345-structured-logging.md": ["03441cb"]}
"""Earlier revisions loaded before the current one, oldest first."""
HERE = Path(__file__).resolve().parent
SITES = tuple(
    parse_site(address)
    for address in (
        "https://go.googlesource.com/proposal/+/master/",
        "https://go.googlesource.com/proposal/+/refs/heads/master/",
        "https://github.com/golang/proposal/blob/master/",
        "https://golang.org/design/=design",
    )
)
"""The addresses the repository is published at, as `demarkus import --site` takes them:
the documents name each other by these more often than by a path of the folder
(`golang.org/design/X` is the rendered page of `design/X.md`)."""


def show(clone: Path, rev: str, path: str) -> str:
    return subprocess.run(
        ["git", "-C", str(clone), "show", f"{rev}:{path}"], capture_output=True, check=True
    ).stdout.decode("utf-8")


def names(clone: Path) -> list[str]:
    """Every design document but the template and the `.src.md` sources that generated
    documents are built from (their text is that of the document they generate)."""
    listed = subprocess.run(
        ["git", "-C", str(clone), "ls-tree", "-r", "--name-only", COMMIT, "design"],
        capture_output=True,
        check=True,
        text=True,
    ).stdout.split()
    return sorted(n for n in listed if n.endswith(".md") and n != "design/TEMPLATE.md" and not n.endswith(".src.md"))


def main(clone: Path) -> None:
    lines = []
    documents = names(clone)
    sites = Sites(SITES, "/", frozenset(documents).__contains__)
    for name in documents:
        revisions = [*EARLIER.get(name, []), COMMIT]
        bodies = [sites.localize(show(clone, rev, name), "/" + name) for rev in revisions]
        # the title `demarkus import` gives a note (its first H1, outside code), else the file's name
        title = first_heading(bodies[-1].encode("utf-8")) or Path(name).stem
        lines.append(
            json.dumps({"path": "/" + name, "metadata": {"title": title}, "versions": bodies}, ensure_ascii=False)
        )
    (HERE / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} documents")


if __name__ == "__main__":
    main(Path(sys.argv[1]))

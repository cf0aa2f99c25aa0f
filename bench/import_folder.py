"""`demarkus import` against `demarkus world load` of the same documents, in the same run.

Three generated inputs, each imported into a fresh store and, as a frozen world with the
same bodies, metadata and version counts, loaded into another fresh store; both as CLI
subprocesses, timed from outside:

* a folder of N notes (default 10,000) with frontmatter (title, tags, relations as
  aliases and `rel-*` keys, relative paths) and relative links in the bodies;
* the same folder written as a vault, its body links wiki links (`[[note-00042]]`, one
  by path with a `|text`) and one a typed link (`- depends_on [[note-00042]]`), imported
  with `--wikilinks`;
* a git repository of F files (default 1,000) and C commits (default 10), each commit
  changing every file, imported with `--git` (F x C versions).

    .venv/bin/python -m bench.import_folder [--notes 10000] [--files 1000] [--commits 10]
    .venv/bin/python -m bench.import_folder --quick      # 500 notes, 100 files x 5 commits

Each side runs `--runs` times (default 2) in turns, and its best time counts. The ratio
is import seconds / world-load seconds: above 1 the import costs more. Both
sides index and seed the graph at the end; the import also reads and parses every file
(and with --git, runs `git log --follow` once per file and reads every version's bytes
from one `git cat-file --batch`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from demarkus.importer.history import GIT_KEYS
from demarkus.importer.note import LinkForm, document_path, parse_note
from demarkus.importer.wikilink import Names, WikiLinks

from . import common

NAME = "import_folder"
TIMEOUT = 3600.0
SUMMARY = re.compile(r"(\d+) created, (\d+) updated, (\d+) unchanged, .*; (\d+) versions added")
LOADED = re.compile(r"loaded (\S+): (\d+) documents, (\d+) versions")
WORDS = (
    "segment log replica lease quorum snapshot follower leader commit index batch retention "
    "compaction checksum frame budget token section anchor relation graph store version"
).split()
ALIASES = ("supersedes", "depends-on", "implements", "derived-from", "related")


def note_text(rng: random.Random, number: int, total: int, revision: int = 0, wiki: bool = False) -> str:
    """One note: frontmatter of every shape, two sections, relative links (or wiki links
    and a typed link)."""
    folder = f"area-{number % 20:02d}"
    other = rng.randrange(total)
    third = rng.randrange(total)
    tags = [rng.choice(WORDS) for _ in range(3)]
    tag_line = f"tags: [{', '.join(tags)}]" if number % 2 else f"tags: {', '.join(tags)}"
    alias = ALIASES[number % len(ALIASES)]
    paragraphs = "\n\n".join(" ".join(rng.choice(WORDS) for _ in range(40)) for _ in range(3))
    return (
        "---\n"
        f"title: Note {number} on {rng.choice(WORDS)}\n"
        f"{tag_line}\n"
        f"{alias}: ../area-{other % 20:02d}/note-{other:05d}.md\n"
        f"rel-cites: [note-{third:05d}.md]\n"
        f"owner: team-{number % 7}\n"
        "---\n\n"
        f"# Note {number} ({folder}, revision {revision})\n\n{paragraphs}\n\n"
        + (
            f"## Links\n\nSee [[area-{other % 20:02d}/note-{other:05d}|a neighbour]] and [[note-{third:05d}]].\n\n"
            f"- depends_on [[note-{other:05d}]] (the neighbour)\n"
            if wiki
            else f"## Links\n\nSee [a neighbour](../area-{other % 20:02d}/note-{other:05d}.md) and "
            f"[another](note-{third:05d}.md).\n"
        )
    )


def relative_name(number: int) -> str:
    return f"area-{number % 20:02d}/note-{number:05d}.md"


def make_folder(top: Path, notes: int, seed: int = 7, wiki: bool = False) -> None:
    rng = random.Random(seed)
    for number in range(notes):
        path = top / relative_name(number)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(note_text(rng, number, notes, wiki=wiki))


def make_repository(top: Path, files: int, commits: int, env: dict[str, str], seed: int = 11) -> list[dict[int, str]]:
    """A repository whose every commit rewrites every file; the texts, commit by commit."""
    rng = random.Random(seed)
    subprocess.run(["git", "init", "-q", "-b", "main", str(top)], env=env, check=True, timeout=60)
    texts: list[dict[int, str]] = []
    for revision in range(commits):
        snapshot = {}
        for number in range(files):
            path = top / relative_name(number)
            path.parent.mkdir(parents=True, exist_ok=True)
            snapshot[number] = note_text(rng, number, files, revision)
            path.write_text(snapshot[number])
        texts.append(snapshot)
        when = f"@{1_700_000_000 + revision * 3600} +0000"
        step = {**env, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
        subprocess.run(["git", "-C", str(top), "add", "-A"], env=step, check=True, timeout=600)
        subprocess.run(["git", "-C", str(top), "commit", "-qm", f"r{revision}"], env=step, check=True, timeout=600)
    return texts


def write_world(folder: Path, documents: list[tuple[str, dict[str, str], list[str]]]) -> None:
    """A demarkus-world-v1 folder holding `documents` (path, metadata, bodies oldest first)."""
    folder.mkdir(parents=True)
    corpus = "".join(
        json.dumps({"path": p, "metadata": m, "versions": v}, sort_keys=True) + "\n" for p, m, v in documents
    ).encode()
    (folder / "corpus.jsonl").write_bytes(corpus)
    (folder / "questions.json").write_bytes(b"[]")
    (folder / "rubric.json").write_bytes(b"{}")

    def digest(data: bytes) -> str:
        return "sha256-" + hashlib.sha256(data).hexdigest()

    manifest = {
        "format": "demarkus-world-v1",
        "id": folder.name,
        "authority": "mark://localhost",
        "source": "generated by bench/import_folder.py",
        "documents": len(documents),
        "versions": sum(len(v) for _p, _m, v in documents),
        "corpus_sha256": digest(corpus),
        "questions_sha256": digest(b"[]"),
        "rubric_sha256": digest(b"{}"),
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))


def world_of_texts(
    revisions: list[dict[int, str]], links: Sequence[LinkForm] = ()
) -> list[tuple[str, dict[str, str], list[str]]]:
    """The documents the import makes of these texts: bodies per revision, final metadata."""
    out = []
    for number in sorted(revisions[-1]):
        path = document_path(relative_name(number), "/")
        notes = [parse_note(snapshot[number].encode(), path, links=links) for snapshot in revisions]
        metadata = {k: v for k, v in notes[-1].metadata.items() if k not in GIT_KEYS}
        out.append((path, metadata, [n.body.decode() for n in notes]))
    return out


def timed(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=TIMEOUT, check=False, cwd=common.REPO)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(args[2:4])} failed ({done.returncode}): {done.stdout[-1000:]} {done.stderr[-2000:]}"
        )
    return seconds, done.stdout + done.stderr


def compare(
    label: str, source: Path, world: Path, extra: list[str], tmp: Path, env: dict[str, str], runs: int
) -> dict[str, object]:
    """Import `source` and load `world`, each into a fresh store, `runs` times in turns
    (the first run imports first, the second loads first, ...); the best time of each."""
    imports: list[float] = []
    loads: list[float] = []
    versions = documents = 0
    for run in range(runs):
        steps = ["import", "load"] if run % 2 == 0 else ["load", "import"]
        for step in steps:
            store = tmp / f"{label}-{step}-{run}"
            if step == "import":
                seconds, out = timed([*common.DEMARKUS, "import", str(source), "--root", str(store), *extra], env)
                found = SUMMARY.search(out)
                if found is None:
                    raise RuntimeError(f"no summary line in the import's output: {out[-1000:]!r}")
                documents, versions = int(found.group(1)), int(found.group(4))
                imports.append(seconds)
            else:
                seconds, out = timed([*common.DEMARKUS, "world", "load", str(world), "--root", str(store)], env)
                counted = LOADED.search(out)
                if counted is None:
                    raise RuntimeError(f"no `loaded ...` line in the world load's output: {out[-1000:]!r}")
                loaded_versions = int(counted.group(3))
                loads.append(seconds)
            shutil.rmtree(store, ignore_errors=True)
    if versions != loaded_versions:
        raise RuntimeError(f"the import added {versions} versions, the world load {loaded_versions}")
    return {
        "input": label,
        "documents": documents,
        "versions": versions,
        "import_s": round(min(imports), 2),
        "world_load_s": round(min(loads), 2),
        "ratio": round(min(imports) / min(loads), 2),
        "import_versions_per_s": round(versions / min(imports), 1),
        "import_runs_s": [round(s, 2) for s in imports],
        "world_load_runs_s": [round(s, 2) for s in loads],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=1_000)
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="500 notes, 100 files x 5 commits; writes bench/out only")
    parser.add_argument("--runs", type=int, default=2, help="runs of each side, in turns; the best counts")
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS")
    args = parser.parse_args()
    if args.quick:
        args.notes, args.files, args.commits = 500, 100, 5

    tmp = Path(tempfile.mkdtemp(prefix="demarkus-bench-import-"))
    try:
        env = common.bench_env(tmp / "home")
        git_home = tmp / "git-home"
        git_home.mkdir()
        env.update(
            {
                "HOME": str(git_home),
                "GIT_CONFIG_GLOBAL": str(git_home / "gitconfig"),
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_AUTHOR_NAME": "Bench",
                "GIT_AUTHOR_EMAIL": "bench@example.org",
                "GIT_COMMITTER_NAME": "Bench",
                "GIT_COMMITTER_EMAIL": "bench@example.org",
            }
        )
        folder = tmp / "notes"
        make_folder(folder, args.notes)
        texts = [{n: (folder / relative_name(n)).read_text() for n in range(args.notes)}]
        write_world(tmp / "notes-world", world_of_texts(texts))
        vault = tmp / "vault"
        make_folder(vault, args.notes, wiki=True)
        wiki = WikiLinks(Names.of(relative_name(n) for n in range(args.notes)), "/")
        vault_texts = [{n: (vault / relative_name(n)).read_text() for n in range(args.notes)}]
        write_world(tmp / "vault-world", world_of_texts(vault_texts, (wiki,)))
        repo = tmp / "repo"
        revisions = make_repository(repo, args.files, args.commits, env)
        write_world(tmp / "repo-world", world_of_texts(revisions))

        common.wait_for_quiet(args.wait_quiet)
        rows = [
            compare("folder", folder, tmp / "notes-world", [], tmp, env, args.runs),
            compare("wikilinks", vault, tmp / "vault-world", ["--wikilinks"], tmp, env, args.runs),
            compare("git", repo, tmp / "repo-world", ["--git"], tmp, env, args.runs),
        ]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    common.print_table(
        "demarkus import DIR --root <fresh store> against world load of the same documents "
        f"(best of {args.runs} runs each, in turns)",
        ["input", "documents", "versions", "import s", "world load s", "ratio", "import versions/s"],
        [
            [
                r[k]
                for k in (
                    "input",
                    "documents",
                    "versions",
                    "import_s",
                    "world_load_s",
                    "ratio",
                    "import_versions_per_s",
                )
            ]
            for r in rows
        ],
    )
    common.write_results(
        NAME,
        {
            "notes": args.notes,
            "files": args.files,
            "commits": args.commits,
            "runs": args.runs,
            "wait_quiet_seconds": args.wait_quiet,
            "cpus": os.cpu_count(),
            "notes_on_method": "wall time of each CLI subprocess (interpreter start-up included); "
            "ratio = import seconds / world load seconds of the same bodies and version counts",
        },
        {"rows": rows},
        keep=not args.quick,
    )


if __name__ == "__main__":
    main()

"""Section index: build time and search latency, on the PEPs world and on a generated world.

    .venv/bin/python -m bench.index_build                 # peps + 100,000 generated sections
    .venv/bin/python -m bench.index_build --docs 1000     # a smaller generated world
    .venv/bin/python -m bench.index_build --tune          # ranking grid on generated questions

The generated world is synthetic markdown: pseudo-words with a Zipf distribution, documents
grouped in topic clusters (siblings share topic words, like a series of related PEPs),
each document an H1 title and H2/H3 sections of 40-250 words with 2-4 word headings, each
section with a few "subtopic" words of its own. `--tune` writes questions about randomly
chosen sections (title words, heading words, subtopic words, common words, words the
section does not hold, stop words) and scores every ranking on the grid by MRR and
top-1/3/10. It is the only data the ranking defaults were chosen on.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import shutil
import tempfile
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from demarkus.index import Ranking, SectionIndex, rebuild
from demarkus.index.query import STOP_WORDS
from demarkus.markdown import parse_outline
from demarkus.store import FileStore

from .common import OUT, PEPS, REPO, latency_summary_ms, load_world, print_table, write_results

MODIFIED = datetime(2026, 1, 1, tzinfo=UTC)

# --- the generated world -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GenSection:
    anchor: str
    heading: str
    subtopic: tuple[str, ...]
    words: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GenDocument:
    path: str
    metadata: dict[str, str]
    body: bytes
    title_words: tuple[str, ...]
    sections: tuple[GenSection, ...]


class Vocabulary:
    """Pseudo-words ranked by a Zipf-Mandelbrot law (rank r drawn with weight 1/(r+2.7)^1.07)."""

    def __init__(self, size: int, rng: random.Random) -> None:
        onsets = "b c d f g h j k l m n p r s t v z br cl dr gr pl st tr".split()
        vowels = "a e i o u ai ou".split()
        codas = ["", "", "n", "r", "s", "t", "l", "m"]
        seen: set[str] = set()
        words: list[str] = []
        while len(words) < size:
            syllables = rng.choice((2, 2, 3, 3, 4))
            word = "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(syllables))
            word += rng.choice(codas)
            if word not in seen and word not in STOP_WORDS:
                seen.add(word)
                words.append(word)
        self.words = words
        weights = [1.0 / (r + 2.7) ** 1.07 for r in range(size)]
        self.cumulative = list(itertools.accumulate(weights))

    def draw(self, rng: random.Random, k: int) -> list[str]:
        return rng.choices(self.words, cum_weights=self.cumulative, k=k)

    def band(self, rng: random.Random, low: int, high: int, k: int) -> list[str]:
        """k distinct words with frequency rank in [low, high)."""
        return [self.words[i] for i in rng.sample(range(low, high), k)]


def generate_world(
    documents: int, sections: int, seed: int = 7, vocabulary: int = 40_000
) -> tuple[Vocabulary, list[GenDocument]]:
    """`documents` documents of about `sections` sections each (one H1 + H2/H3 below)."""
    rng = random.Random(seed)
    vocab = Vocabulary(vocabulary, rng)
    clusters = max(1, documents // 5)
    topics = [vocab.band(rng, 300, 20_000, 8) for _ in range(clusters)]
    shared: list[list[GenSection]] = [[] for _ in range(clusters)]
    out: list[GenDocument] = []
    for d in range(documents):
        cluster = d % clusters
        topic = topics[cluster]
        title_words = tuple(rng.sample(topic, 2) + vocab.band(rng, 50, 3000, rng.choice((1, 2))))
        title = " ".join(w.capitalize() for w in title_words)
        tags = rng.sample(topic, 2)
        importance = rng.choice(("0.2", "0.4", "0.5", "0.5", "0.6", "0.8"))
        lines = [f"# {title}\n"]
        secs: list[GenSection] = []
        for s in range(sections):
            if shared[cluster] and rng.random() < 0.5:
                # a sibling document repeats a sub-topic (a related PEP restating a rule)
                subtopic = rng.choice(shared[cluster]).subtopic
            else:
                subtopic = tuple(vocab.band(rng, 100, 6_000, 5))
            heading_words = rng.sample(subtopic, rng.choice((1, 2))) + vocab.band(rng, 20, 2000, rng.choice((1, 2)))
            rng.shuffle(heading_words)
            heading = " ".join(heading_words[:4]).capitalize()
            length = rng.randint(40, 250)
            # one section in five dwells on a single word (an overview repeating a term)
            focus = rng.choice(vocab.band(rng, 100, 6_000, 1) + topic) if rng.random() < 0.2 else None
            words: list[str] = []
            for w in vocab.draw(rng, length):
                roll = rng.random()
                if roll < 0.04:
                    words.append(rng.choice(subtopic))
                elif roll < 0.10:
                    words.append(rng.choice(topic))
                elif focus is not None and roll < 0.16:
                    words.append(focus)
                else:
                    words.append(w)
            level = "##" if s == 0 or rng.random() < 0.6 else "###"
            lines.append(f"\n{level} {heading}\n\n")
            for start in range(0, len(words), 12):
                lines.append(" ".join(words[start : start + 12]) + "\n")
            section = GenSection("", heading, subtopic, tuple(words))
            secs.append(section)
            shared[cluster].append(section)
        body = "".join(lines).encode()
        outline = parse_outline(body).sections[1:]  # the anchors exactly as the index sees them
        secs = [replace(sec, anchor=o.anchor) for sec, o in zip(secs, outline, strict=True)]
        out.append(
            GenDocument(
                path=f"/gen/c{cluster:04d}/doc-{d:05d}.md",
                metadata={"title": title, "tags": ",".join(tags), "importance": importance},
                body=body,
                title_words=title_words,
                sections=tuple(secs),
            )
        )
    return vocab, out


# --- generated questions -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GenQuestion:
    text: str
    path: str
    anchor: str


def generate_questions(
    vocab: Vocabulary, world: list[GenDocument], count: int, seed: int = 11, *, long: bool = False
) -> list[GenQuestion]:
    """Questions about one section each, built like real ones: a word or two naming the
    document, maybe heading words, two or three of the section's specific words, common
    words, one or two words the section lacks (paraphrase), and stop words between.
    `long` questions carry more common words and more words the section lacks."""
    rng = random.Random(seed)
    stops = sorted(STOP_WORDS - {"s", "t", "d", "m", "o", "y", "ll", "re", "ve", "ma"})
    out: list[GenQuestion] = []
    while len(out) < count:
        doc = rng.choice(world)
        section = rng.choice(doc.sections)
        own = set(section.words)
        picked: list[str] = []
        if rng.random() < 0.6:
            picked += rng.sample(doc.title_words, rng.choice((1, 2)))
        if rng.random() < 0.4:
            picked += rng.sample(section.heading.lower().split(), 1)
        specific = [w for w in section.subtopic if w in own]
        if not specific:
            continue
        picked += rng.sample(specific, min(len(specific), rng.choice((1, 1, 2))))
        picked += rng.sample(section.words, rng.choice((3, 5, 8) if long else (1, 2, 3)))
        absent = [w for w in vocab.band(rng, 100, 10_000, 6) if w not in own]
        picked += absent[: rng.choice((2, 4, 6) if long else (1, 2, 3))]
        rng.shuffle(picked)
        text: list[str] = []
        for word in picked:
            text += rng.sample(stops, rng.choice((0, 1, 1, 2)))
            text.append(word)
        out.append(GenQuestion(" ".join(text) + "?", doc.path, section.anchor))
    return out


def judge(index: SectionIndex, questions: list[GenQuestion]) -> dict[str, float]:
    ranks: list[int | None] = []
    for q in questions:
        hits = index.search(q.text, "/", limit=10)
        found = None
        for i, hit in enumerate(hits, start=1):
            if hit.path == q.path and hit.anchor == q.anchor:
                found = i
                break
        ranks.append(found)
    n = len(ranks)
    return {
        "mrr": round(sum(1.0 / r for r in ranks if r) / n, 4),
        "top1": round(sum(1 for r in ranks if r == 1) / n, 4),
        "top3": round(sum(1 for r in ranks if r and r <= 3) / n, 4),
        "top10": round(sum(1 for r in ranks if r) / n, 4),
    }


# --- runs ----------------------------------------------------------------------------------


def build_generated(index: SectionIndex, world: list[GenDocument]) -> tuple[float, int]:
    start = time.perf_counter()
    rows = 0
    with index.bulk():
        for doc in world:
            rows += index.update(doc.path, 1, doc.metadata, doc.body, MODIFIED)
    return time.perf_counter() - start, rows


def latency_queries(vocab: Vocabulary, world: list[GenDocument], n: int, seed: int = 5) -> list[str]:
    """2-3 word queries: heading words, mid-frequency words and a common word now and then."""
    rng = random.Random(seed)
    queries = []
    for _ in range(n):
        doc = rng.choice(world)
        section = rng.choice(doc.sections)
        words = rng.sample(section.heading.lower().split(), 1)
        words += vocab.band(rng, 200, 20_000, 1)
        if rng.random() < 0.5:
            words += vocab.band(rng, 0, 200, 1)
        queries.append(" ".join(words))
    return queries


def time_searches(index: SectionIndex, queries: list[str], repeat: int = 3) -> dict[str, float]:
    for q in queries:  # warm the page cache
        index.search(q, "/", limit=10)
    seconds = []
    for _ in range(repeat):
        for q in queries:
            start = time.perf_counter()
            index.search(q, "/", limit=10)
            seconds.append(time.perf_counter() - start)
    return latency_summary_ms(seconds)


def run_build(args: argparse.Namespace) -> None:
    results: dict[str, object] = {}
    rows_out: list[list[object]] = []
    work = Path(tempfile.mkdtemp(prefix="demarkus-index-bench-"))
    try:
        if not args.skip_peps:
            store_root = work / "peps-store"
            load_s = load_world(PEPS, store_root)
            store = FileStore(store_root)
            index = SectionIndex(work / "peps.sqlite")
            start = time.perf_counter()
            rows = rebuild(index, store)
            seconds = time.perf_counter() - start
            docs = len(index.indexed_versions())
            size = (work / "peps.sqlite").stat().st_size
            peps_queries = [
                "release schedule",
                "type hints stub files",
                "garbage collection",
                "unicode identifiers",
                "exception groups",
                "pattern matching",
                "import hooks",
                "package metadata",
                "async generators",
                "string formatting",
            ]
            latency = time_searches(index, peps_queries)
            index.close()
            results["peps"] = {
                "world_load_s": round(load_s, 2),
                "documents": docs,
                "rows": rows,
                "rebuild_s": round(seconds, 3),
                "rows_per_s": round(rows / seconds),
                "db_mb": round(size / 1e6, 1),
                "search": latency,
            }
            rows_out.append(
                [
                    "peps (rebuild from store)",
                    docs,
                    rows,
                    seconds,
                    rows / seconds,
                    size / 1e6,
                    latency["p50_ms"],
                    latency["p99_ms"],
                ]
            )
        start = time.perf_counter()
        vocab, world = generate_world(args.docs, args.sections)
        gen_s = time.perf_counter() - start
        index = SectionIndex(work / "gen.sqlite")
        seconds, rows = build_generated(index, world)
        start = time.perf_counter()
        index.optimize()
        optimize_s = time.perf_counter() - start
        size = (work / "gen.sqlite").stat().st_size
        queries = latency_queries(vocab, world, 50)
        latency = time_searches(index, queries)
        index.close()
        text_mb = sum(len(d.body) for d in world) / 1e6
        results["generated"] = {
            "documents": len(world),
            "rows": rows,
            "text_mb": round(text_mb, 1),
            "generate_s": round(gen_s, 2),
            "build_s": round(seconds, 3),
            "rows_per_s": round(rows / seconds),
            "optimize_s": round(optimize_s, 3),
            "db_mb": round(size / 1e6, 1),
            "search": latency,
            "queries": queries,
        }
        rows_out.append(
            [
                f"generated {len(world)} docs (update in bulk)",
                len(world),
                rows,
                seconds,
                rows / seconds,
                size / 1e6,
                latency["p50_ms"],
                latency["p99_ms"],
            ]
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_table(
        "Section index build and search (search: 10 rows with snippets; generated: 50 queries of 2-3 words x3)",
        ["world", "docs", "rows", "build s", "rows/s", "db MB", "p50 ms", "p99 ms"],
        rows_out,
    )
    if "generated" in results:
        g = results["generated"]
        print(f"generated text {g['text_mb']} MB; optimize after build {g['optimize_s']} s")
    write_results("index_build", {"docs": args.docs, "sections": args.sections}, results)


def run_tune(args: argparse.Namespace) -> None:
    vocab, world = generate_world(args.docs, args.sections, seed=args.seed)
    questions = generate_questions(vocab, world, args.questions, seed=args.seed + 1)
    work = Path(tempfile.mkdtemp(prefix="demarkus-index-tune-"))
    try:
        index = SectionIndex(work / "tune.sqlite")
        build_generated(index, world)
        grid = []
        for title, trail, power, idf_coord in itertools.product(
            (1.0, 2.0, 4.0, 8.0), (1.0, 2.0, 3.0, 5.0), (0.0, 1.0, 2.0, 3.0), (True, False)
        ):
            if power == 0.0 and not idf_coord:
                continue
            index.ranking = replace(
                Ranking(),
                title_weight=title,
                trail_weight=trail,
                coord_power=power,
                idf_coord=idf_coord,
            )
            scores = judge(index, questions)
            grid.append(
                {
                    "title": title,
                    "trail": trail,
                    "coord_power": power,
                    "idf_coord": idf_coord,
                    **scores,
                }
            )
        index.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    grid.sort(key=lambda g: (-g["mrr"], -g["top3"]))
    default = Ranking()
    print_table(
        f"Ranking grid on {len(questions)} generated questions, {len(world)} generated documents (best 15 by MRR)",
        ["title", "trail", "coord^", "idf coord", "MRR", "top1", "top3", "top10"],
        [
            [
                g["title"],
                g["trail"],
                g["coord_power"],
                str(g["idf_coord"]),
                g["mrr"],
                g["top1"],
                g["top3"],
                g["top10"],
            ]
            for g in grid[:15]
        ],
    )
    for g in grid:
        if (g["title"], g["trail"], g["coord_power"], g["idf_coord"]) == (
            default.title_weight,
            default.trail_weight,
            default.coord_power,
            default.idf_coord,
        ):
            print(f"\ndefault {default}: MRR {g['mrr']} top1 {g['top1']} top3 {g['top3']} top10 {g['top10']}")
    # scratch only: bench/results/ keeps the build bench, the tuning grid stays local
    OUT.mkdir(parents=True, exist_ok=True)
    target = OUT / "index_tune.json"
    target.write_text(
        json.dumps(
            {
                "parameters": {
                    "docs": args.docs,
                    "sections": args.sections,
                    "questions": args.questions,
                    "seed": args.seed,
                },
                "results": grid,
            },
            indent=2,
            sort_keys=True,
        )
        + "\n"
    )
    print(f"\nwrote {target.relative_to(REPO)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--sections", type=int, default=10)
    parser.add_argument("--skip-peps", action="store_true")
    parser.add_argument("--tune", action="store_true")
    parser.add_argument("--questions", type=int, default=400)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if args.tune:
        if args.docs == 10_000:
            args.docs = 1_500
        run_tune(args)
    else:
        run_build(args)


if __name__ == "__main__":
    main()

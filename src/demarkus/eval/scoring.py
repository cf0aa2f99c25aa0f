"""Scoring (pure): strict answer parsing, observed-text provenance, citation validity and
evidence sufficiency.

Scoring version `section-provenance-py-v1`:
- the final answer is one JSON object with exactly `answer`, `citations`, `abstain`
  (a single ```json fence is allowed); anything else is incorrect;
- no tool call at all is incorrect;
- values are exact per field (numbers compared as numbers, never booleans; arrays in
  order); no missing or extra fields;
- a citation is valid only when its url is `/doc.md/vN#anchor`, its quote (whitespace
  normalised) lies inside the cited section of that version (`parse_outline` on the
  world's body), and the quote was observed in a tool result the reader received for
  that document and version, in a block or fetched section that encloses or lies inside
  the cited section (sibling sections never satisfy each other; lookup tables and
  snippets never count);
- sufficient when every required evidence item of every field is covered by a valid
  citation of that field: same path and version, the quote contains the required quote,
  and the anchor is the required one or a parent section enclosing it;
- `abstain: true` rubric entries (category `absent`) are correct only as an empty abstention.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypedDict
from urllib.parse import unquote

from ..expand import frames
from ..markdown import Outline, parse_outline
from ..worlds import World
from .questions import Evidence, Question, RubricEntry
from .records import CallRecord, Score

SCORING_VERSION = "section-provenance-py-v1"

_FENCE = re.compile(r"\A```(?:json)?\s*\n(.*?)\n?```\s*\Z", re.S)
_VERSIONED = re.compile(r"\A(/.+?\.md)(?:/v(\d+))?\Z")


def normalize(text: str) -> str:
    return " ".join(text.split())


class Corpus:
    """Every version body of a world, by path (versions oldest first)."""

    def __init__(self, documents: Mapping[str, Sequence[str]]) -> None:
        self._docs = {path: tuple(versions) for path, versions in documents.items()}
        self._outlines: dict[tuple[str, int], Outline] = {}

    @classmethod
    def from_world(cls, world: World) -> Corpus:
        return cls({doc.path: doc.versions for doc in world.documents()})

    def named(self, path: str) -> str:
        """The document a location's path names: the path as written when the world holds
        it, else with its percent-escapes decoded (the tools print a name holding `%`, `#`
        or `?` escaped, `/C%23.md`; v0.1.0 printed it as it is)."""
        if path in self._docs:
            return path
        decoded = unquote(path)
        return decoded if decoded in self._docs else path

    def current(self, path: str) -> int | None:
        versions = self._docs.get(path)
        return len(versions) if versions else None

    def outline(self, path: str, version: int) -> Outline | None:
        versions = self._docs.get(path)
        if not versions or not 1 <= version <= len(versions):
            return None
        key = (path, version)
        if key not in self._outlines:
            self._outlines[key] = parse_outline(versions[version - 1].encode("utf-8"))
        return self._outlines[key]

    def span(self, path: str, version: int, anchor: str | None) -> tuple[int, int, str] | None:
        """(start, end, normalised text) of a section (or of the whole body when anchor is None)."""
        outline = self.outline(path, version)
        if outline is None:
            return None
        if not anchor:
            return 0, len(outline.body), normalize(outline.body.decode("utf-8"))
        section = outline.find(anchor)
        if section is None or section.anchor != anchor.lower().removeprefix("#"):
            section = next((s for s in outline.sections if s.anchor == anchor), None)
        if section is None:
            return None
        return section.start, section.end, normalize(outline.text(section).decode("utf-8"))


# --- what the reader saw ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Observation:
    """Document text returned to the reader: a lookup block or a fetched body/section."""

    path: str
    version: int | None
    """None when the tool did not say (an unpinned frame): read as the current version."""
    anchor: str | None
    """None = the whole document."""
    text: str
    """Normalised."""
    related: bool = False


def split_location(url: str) -> tuple[str, int | None, str | None]:
    """`/a.md/v3#x` (or `mark://host/a.md...`) -> ("/a.md", 3, "x")."""
    text = url.strip()
    if text.lower().startswith("mark://"):
        rest = text[len("mark://") :]
        slash = rest.find("/")
        text = rest[slash:] if slash >= 0 else "/"
    location, _, anchor = text.partition("#")
    match = _VERSIONED.match(location)
    if match is None:
        return location, None, anchor or None
    return match.group(1), int(match.group(2)) if match.group(2) else None, anchor or None


def parse_envelope(text: str) -> tuple[dict[str, str], str]:
    head, _, body = text.partition("\n\n")
    header: dict[str, str] = {}
    for line in head.splitlines():
        key, sep, value = line.partition(": ")
        if sep:
            header[key.strip()] = value.strip()
    return header, body


class LookupBlock(NamedTuple):
    """An evidence block of a lookup expansion, located for scoring."""

    path: str
    version: int | None
    anchor: str | None
    text: str
    """As printed (not normalised)."""
    related: bool
    """A related document's block, framed `(via ...)`."""


def lookup_blocks(text: str) -> list[LookupBlock]:
    """The evidence blocks of a lookup expansion (`frames.blocks`); a `mark://host/...`
    location names its path on that host, as `split_location` reads it."""
    located: list[LookupBlock] = []
    for block in frames.blocks(text):
        where = block.location
        path, _, _ = split_location(where.path)
        located.append(LookupBlock(path, where.version, where.anchor or None, block.text, block.via is not None))
    return located


def relation_expansions(calls: Iterable[CallRecord]) -> int:
    """Related-document blocks (frames with ` (via `) in the lookup results received."""
    return sum(
        1
        for call in calls
        if tool_name(call) == "mark_lookup" and not call.get("error")
        for block in lookup_blocks(call.get("output") or "")
        if block.related
    )


def observations(calls: Iterable[CallRecord]) -> list[Observation]:
    """Document text in the results of `calls` ({name, input, output, error})."""
    seen: list[Observation] = []
    for call in calls:
        if call.get("error"):
            continue
        tool, output = tool_name(call), call.get("output") or ""
        if tool == "mark_lookup":
            for path, version, anchor, text, related in lookup_blocks(output):
                seen.append(Observation(path, version, anchor, normalize(text), related))
        elif tool == "mark_fetch":
            header, body = parse_envelope(output)
            if header.get("status") != "ok":
                continue
            if header.get("mode") == "binary" or (header.get("mode") == "outline" and "section" not in header):
                continue  # a large section's outline answer opens with its own text: that counts
            path, version, _ = split_location(str((call.get("input") or {}).get("url", "")))
            if header.get("version", "").isdigit():
                version = int(header["version"])
            anchor = header.get("section", "").removeprefix("#") or None
            seen.append(Observation(path, version, anchor, normalize(body)))
    return seen


def tool_name(call: CallRecord) -> str:
    """The MCP tool a call used, without the `fixture_` prefix OpenCode gives the tools of
    the server it knows by that name."""
    name = str(call.get("name", ""))
    return name.split("_", 1)[1] if name.startswith("fixture_") else name


def observed(corpus: Corpus, path: str, version: int, anchor: str, quote: str, seen: Sequence[Observation]) -> bool:
    """Whether `quote` was returned to the reader for this document version, in text whose
    section encloses or lies inside section `anchor`."""
    cited = corpus.span(path, version, anchor)
    if cited is None:
        return False
    want = normalize(quote)
    for obs in seen:
        if corpus.named(obs.path) != path or want not in obs.text:
            continue
        obs_version = obs.version if obs.version is not None else corpus.current(path)
        if obs_version != version:
            continue
        span = corpus.span(path, version, obs.anchor)
        if span is None:
            continue
        if (span[0] <= cited[0] and cited[1] <= span[1]) or (cited[0] <= span[0] and span[1] <= cited[1]):
            return True
    return False


def evidence_seen(corpus: Corpus, item: Evidence, seen: Sequence[Observation]) -> bool:
    return observed(corpus, item.path, item.version, item.anchor, item.quote, seen)


# --- the answer ------------------------------------------------------------------------------


class Citation(TypedDict):
    field: str
    url: str
    """`/doc.md/vN#section`."""
    quote: str


class Answer(TypedDict):
    """A reader's final answer, once `parse_answer` accepted it."""

    answer: dict[str, Any]
    citations: list[Citation]
    abstain: bool


def parse_answer(final: str | None) -> tuple[Answer | None, str]:
    """Strict: one JSON object {answer, citations, abstain}; a single ```json fence allowed."""
    if final is None or not final.strip():
        return None, "no final answer"
    text = final.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"final answer is not JSON ({exc.msg})"
    if not isinstance(data, dict) or set(data) != {"answer", "citations", "abstain"}:
        return None, "final answer must hold exactly answer, citations and abstain"
    if (
        not isinstance(data["answer"], dict)
        or not isinstance(data["citations"], list)
        or not isinstance(data["abstain"], bool)
    ):
        return None, "answer must be an object, citations a list, abstain a boolean"
    for citation in data["citations"]:
        if (
            not isinstance(citation, dict)
            or set(citation) != {"field", "url", "quote"}
            or not all(isinstance(citation[k], str) for k in citation)
        ):
            return None, "each citation must be {field, url, quote} strings"
    citations: list[Citation] = [{"field": c["field"], "url": c["url"], "quote": c["quote"]} for c in data["citations"]]
    return {"answer": data["answer"], "citations": citations, "abstain": data["abstain"]}, ""


def values_equal(got: Any, want: Any) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return type(got) is type(want) and got == want
    if isinstance(want, (int, float)):
        return isinstance(got, (int, float)) and float(got) == float(want)
    if isinstance(want, list):
        return (
            isinstance(got, list)
            and len(got) == len(want)
            and all(values_equal(g, w) for g, w in zip(got, want, strict=True))
        )
    return bool(got == want)


def citation_problem(corpus: Corpus, citation: Citation, seen: Sequence[Observation]) -> str:
    """ "" when valid, else why not."""
    url, quote = citation["url"], citation["quote"]
    path, version, anchor = split_location(url)
    path = corpus.named(path)
    if version is None or version < 1 or not anchor:
        return f"citation {url} must name a version /vN and a #section"
    if not normalize(quote):
        return f"citation {url} has an empty quote"
    span = corpus.span(path, version, anchor)
    if span is None:
        return f"citation {url} names no section of the world"
    if normalize(quote) not in span[2]:
        return f"citation {url}: quote is not inside the cited section"
    if not observed(corpus, path, version, anchor, quote, seen):
        return f"citation {url}: quote was never returned to the reader for that section"
    return ""


def supports(corpus: Corpus, citation: Citation, item: Evidence) -> bool:
    path, version, anchor = split_location(citation["url"])
    path = corpus.named(path)
    if path != item.path or version != item.version or not anchor:
        return False
    want = normalize(item.quote)
    if want not in normalize(citation["quote"]):
        return False
    if anchor == item.anchor:
        return True
    parent, required = corpus.span(path, version, anchor), corpus.span(path, version, item.anchor)
    return (
        parent is not None
        and required is not None
        and parent[0] <= required[0]
        and required[1] <= parent[1]
        and parent[2].count(want) == 1
    )


def score_attempt(
    question: Question,
    rubric: RubricEntry,
    calls: Sequence[CallRecord],
    final: str | None,
    corpus: Corpus,
) -> Score:
    """{correct, answer_correct, citations_valid, evidence_sufficient, reasons}."""
    reasons: list[str] = []
    if not calls:
        return _failed(["no retrieval attempted"])
    answer, problem = parse_answer(final)
    if answer is None:
        return _failed([problem])
    if rubric.abstain:
        ok = answer["abstain"] and not answer["answer"] and not answer["citations"]
        if not ok:
            reasons.append("expected an empty abstention")
        return {
            "correct": ok,
            "answer_correct": ok,
            "citations_valid": ok,
            "evidence_sufficient": ok,
            "reasons": reasons,
        }
    if answer["abstain"]:
        return _failed(["abstained on an answerable question"])
    want = rubric.answer
    got = answer["answer"]
    answer_ok = set(got) == set(want) and all(values_equal(got[k], want[k]) for k in want)
    if not answer_ok:
        wrong = sorted(
            k for k in set(want) | set(got) if k not in got or k not in want or not values_equal(got[k], want[k])
        )
        reasons.append("wrong or missing fields: " + ", ".join(wrong))
    seen = observations(calls)
    valid: list[Citation] = []
    for citation in answer["citations"]:
        issue = citation_problem(corpus, citation, seen)
        if issue:
            reasons.append(issue)
        else:
            valid.append(citation)
    citations_ok = len(valid) == len(answer["citations"]) and bool(valid)
    missing = [
        f"{field}: {item.url}"
        for field, items in rubric.evidence.items()
        for item in items
        if not any(c["field"] == field and supports(corpus, c, item) for c in valid)
    ]
    if missing:
        reasons.append("evidence not covered: " + "; ".join(missing))
    sufficient = not missing
    return {
        "correct": answer_ok and citations_ok and sufficient,
        "answer_correct": answer_ok,
        "citations_valid": citations_ok,
        "evidence_sufficient": sufficient,
        "reasons": reasons,
    }


def _failed(reasons: list[str]) -> Score:
    return {
        "correct": False,
        "answer_correct": False,
        "citations_valid": False,
        "evidence_sufficient": False,
        "reasons": reasons,
    }

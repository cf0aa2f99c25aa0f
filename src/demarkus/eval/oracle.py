"""The oracle reader: deterministic, free, and a lower bound on what a model would spend.

It follows its policy literally:
- the first call is `mark_lookup` with the question's content words
  (`demarkus.index.query.content_words`), match=body, the question's scope, the policy's
  limit and (budget-first) budget;
- afterwards it acts only on locations seen in earlier tool results (table rows, frames,
  the sub-sections a block names as not shown, relation lines, links, outlines, relations,
  version lists); the rubric is used only to pick which visible lead to take next and to
  know when every required quote has been seen (by the scorer's own provenance rule);
- when the rubric's evidence spans several documents (the policies' lineage, supersession
  and dependency questions; the oracle never reads the category) a link inside a fetched
  body is not a lead: the related document must come from the lookup (rows, frames,
  `rel:` lines) or from mark_explore;
- it answers from the rubric once every required quote was seen, or abstains when the
  step limit is reached first.

Token cost follows the turn model: each turn's input is the policy prompt + the tool
schemas (JSON, as listed by the MCP server) + the task + every earlier call and result;
its output is the call or the final answer; all counted with `count_tokens`. Real
readers add reasoning, formatting and retries, so this is a lower bound.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from ..expand import frames
from ..index.query import content_words
from ..render import unescape_cell
from ..tokens import count_tokens
from .policies import Policy, task_text
from .questions import Evidence, Question, RubricEntry
from .reader import AttemptResult, Session
from .records import CallRecord, empty_usage
from .scoring import Corpus, evidence_seen, observations, parse_envelope, split_location

_ROW = re.compile(r"^\| (/.+?) \| ")
_LINK = re.compile(r"\]\((<[^<>\n]+>|[^)\s]+)\)")
_MARK = re.compile(r"mark://[^/\s)]+(/[^\s)#]*\.md(?:#[^\s)]*)?)")
_OUTLINE = re.compile(r"\(#([^,\s]+), \d+ lines?\)")
_SIBLINGS = re.compile(r"^## Siblings in (/\S*/)")


@dataclass
class Leads:
    """Locations the reader has been shown."""

    anchors: dict[str, set[str]] = field(default_factory=dict)
    versions: dict[str, set[int]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    """Paths in the order they became visible."""
    named: Callable[[str], str] = unquote
    """The document a location's path names (`Corpus.named`)."""
    printed: dict[str, str] = field(default_factory=dict)
    """Each document's path as the results printed it: what a call passes back."""
    follow_body_links: bool = True
    """False for lineage, supersession and dependency questions: the policies send the
    reader to mark_explore (or the expansion's relation blocks) for the related document
    instead of a link inside a fetched body."""

    def add(self, location: str, base: str | None = None) -> None:
        """Note a location as a result names it: a table cell's escapes (`\\_`) and a
        link's or frame's percent-escapes (`My%20note.md`) decoded, as the tools decode
        them, so it compares with the rubric's paths; the path as printed is kept."""
        location = location.strip().strip("<>")
        if location.startswith("mark://"):
            match = _MARK.match(location)
            if match is None:
                return
            location = match.group(1)
        location = unescape_cell(location)
        if "://" in location or location.startswith("#"):
            if location.startswith("#") and base:
                self.anchors.setdefault(base, set()).add(unquote(location[1:]))
            return
        if not location.startswith("/"):
            if base is None:
                return
            location = posixpath.normpath(posixpath.join(posixpath.dirname(base), location))
        written, version, anchor = split_location(location)
        # decoded after the split (`/C%23.md#x` names `/C#.md`), and only when the world
        # holds no document so named (v0.1.0 printed `%` in a name as it is)
        path, anchor = self.named(written), anchor and unquote(anchor)
        self.printed.setdefault(path, written)
        if not path.endswith(".md"):
            return
        if path not in self.anchors:
            self.anchors[path] = set()
            self.order.append(path)
        if anchor:
            self.anchors[path].add(anchor)
        if version is not None:
            self.versions.setdefault(path, set()).add(version)

    def absorb(self, tool: str, arguments: Mapping[str, Any], output: str) -> None:
        if tool == "mark_lookup":
            self._absorb_lookup(output)
            return
        header, body = parse_envelope(output)
        path, _, _ = split_location(str(arguments.get("url", "")))
        if header.get("version", "").isdigit() and path.endswith(".md"):
            self.add(f"{path}/v{header['version']}")
        for anchor in _OUTLINE.findall(body):
            self.add(f"{path}#{anchor}")
        if tool == "mark_versions":
            for target in _LINK.findall(body):
                self.add(target)
            return
        directory = None
        for line in body.splitlines():
            sibling = _SIBLINGS.match(line)
            if sibling:
                directory = sibling.group(1)
                continue
            if directory and line.startswith("- ") and line.endswith(".md"):
                self.add(directory + line[2:])
                continue
            if line.startswith("## "):
                directory = None
            if tool == "mark_fetch" and not self.follow_body_links:
                continue
            for target in _MARK.findall(line):
                self.add(target)
            for target in _LINK.findall(line):
                self.add(target, base=path)

    def _absorb_lookup(self, output: str) -> None:
        """The rows of the table, then every frame (`frames.parse`) in order: a block's
        location (with any table row quoted in its text and the sub-sections it names as not
        shown), the location of a row shown `within` or as `same text as` an earlier block,
        each target of a `rel:` line, and the locations named as not fitting. Frames on
        another authority are not leads."""
        lines = output.splitlines()
        first = next((i for i, line in enumerate(lines) if line.startswith(frames.FRAME)), len(lines))
        self._add_rows(lines[:first])
        for frame in frames.parse(output):
            if isinstance(frame, frames.Block):
                self._add_framed(frame.location)
                self._add_rows(frame.text.splitlines())
                for hidden in frames.hidden_subsections(frame):
                    self._add_framed(hidden)
            elif isinstance(frame, (frames.Within, frames.SameText)):
                self._add_framed(frame.location)
            elif isinstance(frame, frames.Relation):
                for target in frames.targets(frame.target):
                    self.add(target)
            elif isinstance(frame, frames.Omitted):
                for location, _ in frame.named:
                    self._add_framed(location)

    def _add_rows(self, lines: Iterable[str]) -> None:
        for line in lines:
            row = _ROW.match(line)
            if row:
                self.add(row.group(1))

    def _add_framed(self, location: frames.Location) -> None:
        if location.path.startswith("/"):
            self.add(str(location))


def call_text(name: str, arguments: Mapping[str, Any]) -> str:
    return json.dumps({"name": name, "arguments": dict(arguments)}, sort_keys=True)


class OracleReader:
    kind = "oracle"
    model = "oracle"

    def __init__(self, corpus: Corpus, rubric: Mapping[str, RubricEntry]) -> None:
        self.corpus = corpus
        self.rubric = rubric

    async def attempt(self, question: Question, session: Session, policy: Policy, steps: int) -> AttemptResult:
        """Run one attempt through `session`; its usage is the turn model's (`lower_bound`)."""
        entry = self.rubric[question.id]
        required = entry.required()
        task = task_text(question)
        fixed = count_tokens(policy.prompt) + count_tokens(session.schemas_json) + count_tokens(task)
        history = 0
        usage = empty_usage()
        leads = Leads(named=self.corpus.named, follow_body_links=len({item.path for item in required}) <= 1)
        made: set[str] = set()
        explored: set[str] = set()
        calls: list[CallRecord] = []
        turns = 0

        def pending() -> list[Evidence]:
            seen = observations(calls)
            return [item for item in required if not evidence_seen(self.corpus, item, seen)]

        while True:
            missing = pending()
            choice: tuple[str, dict[str, Any]] | None = None
            if turns == 0:
                arguments: dict[str, Any] = {
                    "query": " ".join(content_words(question.question)),
                    "url": question.scope or "/",
                    "limit": policy.lookup_limit,
                    "match": "body",
                }
                if policy.first_budget:
                    arguments["budget"] = policy.first_budget
                choice = ("mark_lookup", arguments)
            elif missing and turns < steps - 1:
                choice = self._next(missing, leads, made, explored)
            if choice is None:
                final = (
                    self._final(entry) if not missing else json.dumps({"answer": {}, "citations": [], "abstain": True})
                )
                usage["input"] += fixed + history
                usage["output"] += count_tokens(final)
                turns += 1
                return {"final": final, "usage": usage, "usage_complete": True, "turns": turns, "lower_bound": True}
            name, arguments = choice
            text = call_text(name, arguments)
            made.add(text)
            if name == "mark_explore":
                explored.add(arguments["url"])
            usage["input"] += fixed + history
            usage["output"] += count_tokens(text)
            turns += 1
            record = await session.call(name, arguments)
            calls.append(record)
            history += count_tokens(text) + count_tokens(record.get("output") or "")
            if not record.get("error"):
                leads.absorb(name, arguments, record.get("output") or "")

    def _next(
        self, missing: list[Evidence], leads: Leads, made: set[str], explored: set[str]
    ) -> tuple[str, dict[str, Any]] | None:
        options: list[tuple[str, dict[str, Any]]] = []
        for item in missing:
            path, version, anchor = item.path, item.version, item.anchor
            if path not in leads.anchors:
                continue
            known = leads.versions.get(path, set())
            pinned = version in known
            shown = leads.printed.get(path, path)
            if not pinned and known and max(known) != version:
                options.append(("mark_versions", {"url": shown}))
            base = f"{shown}/v{version}" if pinned else shown
            if anchor in leads.anchors[path]:
                options.append(("mark_fetch", {"url": f"{base}#{anchor}"}))
            options.append(("mark_fetch", {"url": base}))
            options.append(("mark_explore", {"url": shown}))
        # a required document not visible yet: look at the neighbourhood of what was seen
        for path in leads.order:
            shown = leads.printed.get(path, path)
            if shown not in explored:
                options.append(("mark_explore", {"url": shown}))
        for name, arguments in options:
            if call_text(name, arguments) not in made:
                return name, arguments
        return None

    @staticmethod
    def _final(entry: RubricEntry) -> str:
        if entry.abstain:
            return json.dumps({"answer": {}, "citations": [], "abstain": True})
        citations = [
            {"field": name, "url": item.url, "quote": item.quote}
            for name, items in entry.evidence.items()
            for item in items
        ]
        return json.dumps({"answer": entry.answer, "citations": citations, "abstain": False}, ensure_ascii=False)

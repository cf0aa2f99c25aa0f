"""Reader policies: prompt texts, the shared answer contract, and their hashes.

A policy is named and identified by the sha256 of its full prompt text (policy prompt +
answer contract), so two reports that name the same policy with different text are
never mistaken for one another.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from .questions import Question

ANSWER_CONTRACT = """Answer contract. When you are done, reply with only one JSON object and nothing else:
{"answer": {<field>: <value>, ...}, "citations": [{"field": "<field>", "url": "/doc.md/vN#section", "quote": "<exact text>"}], "abstain": false}
- Give every requested field, with exactly the requested type (number, string, boolean, array of strings) and exact identifiers.
- Every field needs at least one citation; a field combined from several sources needs one citation per source.
- Cite only an immutable location you observed in a tool result: the document path, its version /vN and the #section anchor, e.g. /docs/a.md/v3#setup.
- The quote is exact text copied from that section as a tool returned it; quote complete sentences.
- If the documents do not answer the question, reply {"answer": {}, "citations": [], "abstain": true}."""

SECTION_FIRST_PROMPT = """You answer questions from a versioned markdown knowledge base through read-only tools (mark_lookup, mark_fetch, mark_explore, mark_list, mark_versions, mark_backlinks).
Retrieval policy graph-section-first-v1:
- Aim for at most two tool calls and about 1500 tokens of tool results.
- Start with mark_lookup: match=body with the question's content words (descriptive terms, not bare numbers), url set to the allowed scope when one is given, limit 3, and no budget.
- Then mark_fetch the specific `path#anchor` row that answers; short documents may be fetched whole; pick sections from an outline when a document is large.
- For lineage, supersession and dependency questions, use mark_explore on the document you found to see its typed relations (supersedes, superseded-by, depends-on, implements, derived-from), then fetch the related section you need.
- For questions about an earlier revision, use mark_versions and fetch the requested /vN.
- Never invent paths or anchors: act only on locations a tool showed you. Refine the lookup instead of guessing."""

BUDGET_FIRST_PROMPT = """You answer questions from a versioned markdown knowledge base through read-only tools (mark_lookup, mark_fetch, mark_explore, mark_list, mark_versions, mark_backlinks).
Retrieval policy graph-budget-first-v1:
- Aim for at most two tool calls and about 1500 tokens of tool results.
- Start with mark_lookup: match=body with the question's content words (descriptive terms, not bare numbers), url set to the allowed scope when one is given, limit 3, and budget 1500, so the result already prints the evidence framed `>>> /path/vN#anchor` and related documents framed `(via ...)`.
- Read the expansion first. Then mark_fetch only what the expansion did not include: a row listed under `did not fit`, or a section you still need.
- For lineage, supersession and dependency questions, use mark_explore only when the expansion did not already show the related document.
- For questions about an earlier revision, use mark_versions and fetch the requested /vN.
- Never invent paths or anchors: act only on locations a tool showed you. Refine the lookup instead of guessing."""


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    prompt: str
    """The full system prompt: policy text, a blank line, the answer contract."""
    lookup_limit: int
    first_budget: int
    """Budget of the first lookup (0 = none)."""

    @property
    def prompt_hash(self) -> str:
        return sha256_text(self.prompt)


def sha256_text(text: str) -> str:
    return "sha256-" + hashlib.sha256(text.encode("utf-8")).hexdigest()


POLICIES: dict[str, Policy] = {
    "graph-section-first-v1": Policy("graph-section-first-v1", SECTION_FIRST_PROMPT + "\n\n" + ANSWER_CONTRACT, 3, 0),
    "graph-budget-first-v1": Policy("graph-budget-first-v1", BUDGET_FIRST_PROMPT + "\n\n" + ANSWER_CONTRACT, 3, 1500),
}


def get_policy(name: str) -> Policy:
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown reader policy {name!r}; choose one of {', '.join(sorted(POLICIES))}") from None


def task_text(question: Question) -> str:
    """What the reader is told: the question, the answer fields and, if any, the scope.
    Never the category, rubric or paths."""
    lines = [question.question, "Answer fields and types: " + json.dumps(dict(question.fields), sort_keys=True)]
    if question.scope:
        lines.append(f"Allowed scope: {question.scope}")
    return "\n".join(lines)

"""Pure markdown: sections with exact byte ranges and anchors, links, `rel-*` relations."""

from .links import Link, Target, extract_links, resolve_target
from .relations import PREFERRED, RejectedRelation, Relation, parse_relations
from .sections import (
    Outline,
    Section,
    block_starts,
    opening_paragraph,
    outline_text,
    parse_blocks,
    parse_outline,
    slugify,
)

__all__ = [
    "PREFERRED",
    "Link",
    "Outline",
    "RejectedRelation",
    "Relation",
    "Section",
    "Target",
    "block_starts",
    "extract_links",
    "opening_paragraph",
    "outline_text",
    "parse_blocks",
    "parse_outline",
    "parse_relations",
    "resolve_target",
    "slugify",
]

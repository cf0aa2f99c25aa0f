"""Section search for LOOKUP `match: body`: one row per section of every current document.

`SectionIndex` (SQLite FTS5) is the embedded backend; `Index` is the protocol a second
backend (tantivy, for very large worlds) would implement. `rebuild` and `reconcile` keep
any backend in step with a `FileStore`.
"""

from __future__ import annotations

from .base import Index, SectionHit, rebuild, reconcile
from .query import Ranking, content_words
from .sqlite import SectionIndex

__all__ = [
    "Index",
    "Ranking",
    "SectionHit",
    "SectionIndex",
    "content_words",
    "rebuild",
    "reconcile",
]

"""Budgeted lookup expansion, shared by the local MCP server and the gateway."""

from .evidence import MAX_FETCHES, MAX_RELATED, Selection, expand, select_evidence
from .rows import Fetched, FetchFn, TableRow, compact_table, table_rows

__all__ = [
    "MAX_FETCHES",
    "MAX_RELATED",
    "Fetched",
    "FetchFn",
    "Selection",
    "TableRow",
    "compact_table",
    "expand",
    "select_evidence",
    "table_rows",
]

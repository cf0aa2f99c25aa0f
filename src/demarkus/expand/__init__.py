"""Budgeted lookup expansion, shared by the local MCP server and the gateway."""

from .rows import Fetched, FetchFn, TableRow, table_rows
from .baseline import MAX_FETCHES, expand

__all__ = ["MAX_FETCHES", "Fetched", "FetchFn", "TableRow", "expand", "table_rows"]

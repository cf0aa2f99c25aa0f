"""Budgeted lookup expansion, shared by the local MCP server and the gateway.

Layers, each importing only those above it:

- `frames`: the `>>>` grammar (the one writer and the one parser);
- `table`: the lookup table as values;
- `document`: a fetched document, parsed once, and the bounded fetcher;
- `relevance`, `candidates`: which ranges could stand for a row or a related target;
- `ledger`: the only place that counts tokens, and the decisions;
- `page`, `show`: what is on the page, and how a candidate gets there;
- `hop`, `rows`, `leftovers`: the turns;
- `select`: the order of turns.
"""

from .document import MAX_FETCHES, Fetched, FetchFn
from .ledger import MAX_RELATED, Action, Decision, explain
from .select import Selection, expand, select_evidence
from .table import DITTO, Table, TableRow

__all__ = [
    "DITTO",
    "MAX_FETCHES",
    "MAX_RELATED",
    "Action",
    "Decision",
    "FetchFn",
    "Fetched",
    "Selection",
    "Table",
    "TableRow",
    "expand",
    "explain",
    "select_evidence",
]

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

Import what you use from its module (`demarkus.expand.select.select_evidence`, ...): the
package itself imports nothing, so a reader of results that needs only the grammar
(`demarkus.expand.frames`: the scorer, the oracle) loads only that.
"""

"""The compact input schemas the server lists, and that callers are served as before."""

from __future__ import annotations

import json

from mcp import Client

from demarkus.mcp.schema import compact_schema

from ..conftest import call

DERIVED = {
    "title": "mark_lookupArguments",
    "type": "object",
    "required": ["query"],
    "properties": {
        "query": {"title": "Query", "type": "string", "description": "Words to find."},
        "title": {"title": "Title", "type": "string"},  # an argument that is named title
        "limit": {"title": "Limit", "anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        "mode": {"title": "Mode", "anyOf": [{"type": "string"}, {"type": "null"}], "default": "fast"},
        "tags": {
            "title": "Tags",
            "anyOf": [{"type": "array", "items": {"title": "Tag", "type": "string"}}, {"type": "null"}],
            "default": None,
        },
    },
}


def test_titles_go_and_an_optional_argument_is_its_type():
    assert compact_schema(DERIVED) == {
        "type": "object",
        "required": ["query"],
        "properties": {
            "query": {"type": "string", "description": "Words to find."},
            "title": {"type": "string"},
            "limit": {"type": "integer"},
            # a default other than null says something: kept as derived, less its title
            "mode": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": "fast"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    }
    assert DERIVED["properties"]["limit"]["title"] == "Limit"  # the input is not changed


async def test_the_server_lists_compact_schemas_and_still_takes_null(demo_server):
    async with Client(demo_server) as client:
        listed = (await client.list_tools()).tools
        schemas = json.dumps([tool.input_schema for tool in listed])
        assert '"title"' not in schemas and '{"type": "null"}' not in schemas
        lookup = next(tool for tool in listed if tool.name == "mark_lookup")
        assert lookup.input_schema["properties"]["limit"] == {
            "type": "integer",
            "description": "Rows to return (default 10).",
        }
        left_out, _ = await call(client, "mark_lookup", query="lease heartbeat", match="body", limit=2)
        sent_null, failed = await call(client, "mark_lookup", query="lease heartbeat", match="body", limit=2, url=None)
        assert not failed and sent_null == left_out

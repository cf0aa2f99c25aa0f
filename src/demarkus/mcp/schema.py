"""The tools' input schemas as the server lists them: compact. Pure.

A caller's model reads every tool schema on every turn, so each token in them is paid once
per turn of every session. The schemas pydantic derives carry two things that tell a model
nothing: a `title` on every property and on the whole object (the property's own name,
capitalised), and an optional argument spelled `anyOf: [T, null]` with `default: null`,
where leaving the argument out says the same. Listing drops both (the six read tools:
1,602 -> 1,306 tokens); arguments are still checked against the full schema, so a caller
that sends `null` for an optional argument is served as before.
"""

from __future__ import annotations

from typing import Any

NULL = {"type": "null"}


def compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` without `title` keywords, optional `anyOf [T, null]` arguments as plain `T`."""
    out = {key: value for key, value in schema.items() if key != "title"}
    variants = out.get("anyOf")
    if isinstance(variants, list) and len(variants) == 2 and NULL in variants and out.get("default", 0) is None:
        (kept,) = [variant for variant in variants if variant != NULL]
        del out["anyOf"], out["default"]
        out = {**compact_schema(kept), **out}
    if isinstance(out.get("properties"), dict):  # names of arguments, each with its schema
        out["properties"] = {name: compact_schema(value) for name, value in out["properties"].items()}
    if isinstance(out.get("$defs"), dict):
        out["$defs"] = {name: compact_schema(value) for name, value in out["$defs"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = compact_schema(out[key])
    if isinstance(out.get("anyOf"), list):
        out["anyOf"] = [compact_schema(variant) if isinstance(variant, dict) else variant for variant in out["anyOf"]]
    return out

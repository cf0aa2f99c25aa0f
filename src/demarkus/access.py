"""Access made visible: what a token file grants, what a change to it opens or closes,
and how many rows a reader was not shown. Pure: texts and values, no I/O.

Nothing here ever prints a token or its hash.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from .auth import READ, TokenGrant, TokenStore, uncovered

HIDDEN = "hidden"
"""The LOOKUP and LIST response key: rows left out because the caller may not read them.
Present only when not zero, so an answer with nothing hidden is unchanged."""


@dataclass(frozen=True, slots=True)
class GrantView:
    """One grant as `demarkus token list` shows it: everything but the hash."""

    label: str
    paths: tuple[str, ...]
    operations: tuple[str, ...]
    expires: str | None
    """RFC 3339 in UTC, or None for a grant that never expires."""
    expired: bool


def view_grants(store: TokenStore, now: datetime) -> tuple[GrantView, ...]:
    """Every grant of ``store`` by label, with whether it has lapsed at ``now``."""
    return tuple(
        GrantView(
            label=g.label,
            paths=g.paths,
            operations=tuple(sorted(g.operations)),
            expires=_utc(g.expires) if g.expires is not None else None,
            expired=g.expired(now),
        )
        for g in sorted(store.grants, key=lambda g: g.label)
    )


def render_grants(views: Sequence[GrantView]) -> str:
    """An aligned table, a header then one line per grant (empty when there is none)."""
    if not views:
        return ""
    rows = [("LABEL", "PATHS", "OPERATIONS", "EXPIRES", "STATE")]
    rows += [
        (v.label, ",".join(v.paths), ",".join(v.operations), v.expires or "never", "expired" if v.expired else "valid")
        for v in views
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1] + "\n"
        for row in rows
    )


def grants_json(views: Sequence[GrantView]) -> str:
    """The grants as a JSON array, keys sorted, one grant per element."""
    items = [
        {
            "label": v.label,
            "paths": list(v.paths),
            "operations": list(v.operations),
            "expires": v.expires,
            "expired": v.expired,
        }
        for v in views
    ]
    return json.dumps(items, indent=2, sort_keys=True) + "\n"


def newly_private(grant: TokenGrant, others: TokenStore) -> tuple[str, ...]:
    """The patterns of a new ``grant`` that no other read grant covered: reads there were
    public and now need a read token. Empty for a grant without read."""
    if READ not in grant.operations:
        return ()
    return uncovered(grant.paths, others.read_patterns(without=grant.label))


def newly_public(grant: TokenGrant, remaining: TokenStore) -> tuple[str, ...]:
    """The patterns of a revoked ``grant`` that no remaining read grant covers: anyone may
    read there now."""
    if READ not in grant.operations:
        return ()
    return uncovered(grant.paths, remaining.read_patterns())


def private_warning(patterns: Sequence[str]) -> str:
    """What `token generate` says when its read grant closes paths to anonymous readers."""
    return (
        f"warning: {', '.join(patterns)} {'is' if len(patterns) == 1 else 'are'} private now: reads there were public "
        "(no read grant covered all of it), and anonymous readers now see nothing there; "
        "they need a read token (demarkus token generate --ops read)"
    )


def public_warning(patterns: Sequence[str]) -> str:
    """What `token revoke` says when the revoked read grant was the last to cover paths."""
    return (
        f"warning: {', '.join(patterns)} {'is' if len(patterns) == 1 else 'are'} public again where no "
        "other read grant covers it: anyone can read there now, without a token"
    )


TOKEN_ADVICE = "pass --token (or DEMARKUS_AUTH)"
"""How a `demarkus` command or `demarkus mcp` is given a token."""


def hidden_note(count: int, noun: tuple[str, str], where: str, *, carried: bool, advice: str = TOKEN_ADVICE) -> str:
    """The one line that says ``count`` rows were left out for lack of a read token.

    ``noun`` is the rows' name, singular and plural (``("document", "documents")``);
    ``where`` says where they are (``under /docs``); ``carried`` whether the request
    carried a token; ``advice`` how the caller gets one. Only ever a count: never a path
    or a title."""
    one = count == 1
    rows = f"{count} {noun[0] if one else noun[1]} {where}"
    token = f"a read token that covers {'it' if one else 'them'}" if carried else "a read token"
    return f"{rows} {'needs' if one else 'need'} {token}; {advice}"


def hidden_count(metadata: Mapping[str, str]) -> int:
    """The `hidden` count of a LOOKUP or LIST answer (0 when absent or not a number)."""
    value = metadata.get(HIDDEN, "")
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 9 else 0


def _utc(when: datetime) -> str:
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")

"""World-qualified names: the gateway prints `mark://<world><path>` where the local server
prints `<path>`. Pure.

Lookups are named while they are printed (the resolver's `name`, see `GatewayResolver`),
so their budgets count what the caller receives. A version history is an authority's text
about one document: its heading and links are qualified here:

```
# Version History: /docs/a.md              -> # Version History: mark://w/docs/a.md
- [v2](/docs/a.md/v2) - ...                -> - [v2](mark://w/docs/a.md/v2) - ...
```
`strip_world` is the inverse used to compare with the local server.
"""

from __future__ import annotations

import re

SCHEME = "mark://"

_VERSIONS_HEADER = re.compile(r"^(# Version History: )(/.*)$", re.MULTILINE)
_VERSION_LINK = re.compile(r"^(- \[v[0-9]+\]\()(/)", re.MULTILINE)


def world_prefix(world: str) -> str:
    return f"{SCHEME}{world}"


def world_of(location: str) -> str:
    """`w` of `mark://w/path`."""
    return location[len(SCHEME) :].split("/", 1)[0]


def qualify_versions(text: str, world: str) -> str:
    """A version history whose heading and links are qualified."""
    prefix = world_prefix(world)
    text = _VERSIONS_HEADER.sub(lambda m: m.group(1) + prefix + m.group(2), text, count=1)
    return _VERSION_LINK.sub(lambda m: m.group(1) + prefix + m.group(2), text)


def strip_world(text: str, world: str) -> str:
    """Every `mark://<world>` before a `/` or `#` removed: a gateway text in local form."""
    return re.sub(rf"{re.escape(world_prefix(world))}(?=[/#])", "", text)

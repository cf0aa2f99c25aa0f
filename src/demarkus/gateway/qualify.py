"""World-qualified locations: the gateway prints `mark://<world><path>` where the local
server prints `<path>`. Pure.

The gateway runs the local tools unchanged over a world's bare paths (so a lookup's
expansion selects and counts exactly what the local server would), then qualifies the
locations an agent may copy into its next call:

```
# Lookup matches for "q" in /docs            -> ... in mark://w/docs
| /docs/a.md#x | 0.80 | ...                  -> | mark://w/docs/a.md#x | 0.80 | ...
>>> /docs/a.md/v3#x (via /b.md/v1 supersedes) -> >>> mark://w/docs/a.md/v3#x (via mark://w/b.md/v1 supersedes)
[#y: same text as /docs/a.md/v3#x above]    -> [#y: same text as mark://w/docs/a.md/v3#x above]
- [v2](/docs/a.md/v2) - ...                 -> - [v2](mark://w/docs/a.md/v2) - ...
```
Every line that starts with `>>> ` is an expansion frame (evidence text that starts with
`>>>` is indented by the expansion), and in a frame every word that starts with `/` is a
location. Document text is never touched. `strip_world` is the inverse used to compare
with the local server.
"""

from __future__ import annotations

import re

SCHEME = "mark://"
FRAME = ">>> "

_LOOKUP_HEADER = re.compile(r'^(# Lookup matches for ".*" in )(/.*)$', re.MULTILINE)
_VERSIONS_HEADER = re.compile(r"^(# Version History: )(/.*)$", re.MULTILINE)
_VERSION_LINK = re.compile(r"^(- \[v[0-9]+\]\()(/)", re.MULTILINE)
_FRAME_LOCATION = re.compile(r"(?:^|(?<=[\s(]))/(?=[^\s/])")
_SAME_TEXT = re.compile(r"(\[#[^\]\s]*: same text as )(/)(?=\S* above\])")
_REST = re.compile(r"^(\[… ~[0-9]+ tokens more: fetch )(/)(?=\S*\]$)")


def world_prefix(world: str) -> str:
    return f"{SCHEME}{world}"


def world_of(location: str) -> str:
    """`w` of `mark://w/path`."""
    return location[len(SCHEME) :].split("/", 1)[0]


def qualify_lookup(text: str, world: str) -> str:
    """A LOOKUP table (or an envelope holding one) with the scope and every row qualified."""
    prefix = world_prefix(world)
    text = _LOOKUP_HEADER.sub(lambda m: m.group(1) + prefix + m.group(2), text, count=1)
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if line.startswith("| /"):
            lines[index] = "| " + prefix + line[2:]
    return "\n".join(lines)


def qualify_expansion(text: str, world: str) -> str:
    """Frame lines and same-text markers of a lookup expansion, qualified."""
    prefix = world_prefix(world)
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if line.startswith(FRAME):
            lines[index] = FRAME + _FRAME_LOCATION.sub(prefix + "/", line[len(FRAME) :])
        elif "same text as /" in line:
            lines[index] = _SAME_TEXT.sub(lambda m: m.group(1) + prefix + m.group(2), line)
        elif line.startswith("[… ~"):
            lines[index] = _REST.sub(lambda m: m.group(1) + prefix + m.group(2), line)
    return "\n".join(lines)


def qualify_lookup_result(text: str, world: str) -> str:
    """A whole mark_lookup answer: envelope and table, then the expansion (if any)."""
    start = text.find("\n" + FRAME)
    if start < 0:
        return qualify_lookup(text, world)
    return qualify_lookup(text[: start + 1], world) + qualify_expansion(text[start + 1 :], world)


def qualify_versions(text: str, world: str) -> str:
    """A version history whose heading and links are qualified."""
    prefix = world_prefix(world)
    text = _VERSIONS_HEADER.sub(lambda m: m.group(1) + prefix + m.group(2), text, count=1)
    return _VERSION_LINK.sub(lambda m: m.group(1) + prefix + m.group(2), text)


def strip_world(text: str, world: str) -> str:
    """Every `mark://<world>` before a `/` or `#` removed: a gateway text in local form."""
    return re.sub(rf"{re.escape(world_prefix(world))}(?=[/#])", "", text)

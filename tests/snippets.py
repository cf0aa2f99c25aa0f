"""The README's agent configuration snippets, read out of the README itself, so the tests
run exactly what a reader copies (and a change to the command is made in the README alone)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "For agents: the MCP tools"
EXECUTABLE = "/path/to/demarkus"
"""The placeholder the snippets use for the installed `demarkus` command."""
DOCS = "/path/to/notes"
"""The placeholder the snippets use for the markdown folder the command serves."""
DEMO_NOTES = README.parent / "tools" / "demo_world" / "docs"
"""A folder of markdown to fill it with: the sources of the demo world."""
PLACEHOLDER_PREFIX = "/path/to/"


@dataclass(frozen=True)
class Snippets:
    """The three client configurations the README gives, parsed."""

    opencode: dict[str, Any]
    """OpenCode's `opencode.json`: `{"mcp": {"demarkus": {"type": "local", "command": [...]}}}`."""
    mcp_servers: dict[str, Any]
    """The generic `{"mcpServers": {"demarkus": {"command": ..., "args": [...]}}}` form."""
    claude_code: list[str]
    """`claude mcp add demarkus -- <command...>`, split as a shell would."""

    def commands(self) -> dict[str, list[str]]:
        """The command each snippet starts, by client: the tests check they agree."""
        generic = self.mcp_servers["mcpServers"]["demarkus"]
        separator = self.claude_code.index("--")
        return {
            "opencode": list(self.opencode["mcp"]["demarkus"]["command"]),
            "mcpServers": [generic["command"], *generic["args"]],
            "claude": self.claude_code[separator + 1 :],
        }


def section_blocks(text: str, title: str = SECTION) -> list[tuple[str, str]]:
    """The fenced code blocks (info string, content) under the `## title` heading, up to the
    next heading of level 2 or 1."""
    tokens = MarkdownIt("commonmark").parse(text)
    blocks: list[tuple[str, str]] = []
    inside = False
    for index, token in enumerate(tokens):
        if token.type == "heading_open" and token.tag in ("h1", "h2"):
            inside = token.tag == "h2" and tokens[index + 1].content.strip() == title
        elif inside and token.type == "fence":
            blocks.append((token.info.strip(), token.content))
    return blocks


def read_snippets(readme: Path = README) -> Snippets:
    """Find each snippet by its shape: the JSON block with a top-level `mcp` key (OpenCode),
    the one with `mcpServers`, and the shell line `claude mcp add demarkus -- ...`."""
    blocks = section_blocks(readme.read_text(encoding="utf-8"))
    if not blocks:
        raise AssertionError(f"no code blocks under '## {SECTION}' in {readme}")
    found: dict[str, Any] = {}
    for info, content in blocks:
        if info == "json":
            value = json.loads(content)
            for key in ("mcp", "mcpServers"):
                if isinstance(value, dict) and key in value:
                    found.setdefault(key, value)
        elif info in ("sh", "bash", "shell"):
            for line in content.splitlines():
                if line.startswith("claude mcp add demarkus "):
                    found.setdefault("claude", shlex.split(line, comments=True))
    missing = sorted({"mcp", "mcpServers", "claude"} - found.keys())
    if missing:
        raise AssertionError(f"'## {SECTION}' in {readme} lacks the snippet(s) {missing}")
    return Snippets(opencode=found["mcp"], mcp_servers=found["mcpServers"], claude_code=found["claude"])


def substitute(value: Any, paths: Mapping[str, str]) -> Any:
    """The snippet with each placeholder path replaced (in every string of a JSON value); a
    placeholder left over is an error naming it, so a new one in the README is not missed."""
    if isinstance(value, str):
        for placeholder, path in paths.items():
            value = value.replace(placeholder, path)
        if PLACEHOLDER_PREFIX in value:
            raise AssertionError(f"the snippet has a placeholder the test does not fill: {value!r}")
        return value
    if isinstance(value, list):
        return [substitute(item, paths) for item in value]
    if isinstance(value, dict):
        return {key: substitute(item, paths) for key, item in value.items()}
    return value

"""What the runner and a reader need from each other, and nothing else.

The runner gives a `Reader` one `Session` per attempt (the tools of a real `demarkus mcp`
subprocess) and takes back an `AttemptResult`; readers (`oracle`, `openai_reader`) import
this module, never the runner or each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NotRequired, Protocol, TypedDict

from .policies import Policy
from .questions import Question
from .records import CallRecord, Usage


class ToolSchema(TypedDict):
    """One tool as the MCP server lists it."""

    name: str
    description: str | None
    inputSchema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class McpServer:
    """The `demarkus mcp` command a session talks to, for a reader that is an MCP client
    of its own (OpenCode starts the same command itself)."""

    command: tuple[str, ...]
    environment: Mapping[str, str] = field(default_factory=dict)
    """Variables the command needs on top of the reader's environment (its DEMARKUS_HOME)."""
    workdir: Path = Path()
    """The attempt's own temporary directory: whatever the reader writes goes under it."""


class Session(Protocol):
    """The tools of one attempt. Every call is recorded in `calls`, failures included."""

    @property
    def tools(self) -> list[ToolSchema]: ...

    @property
    def schemas_json(self) -> str:
        """`tools` as canonical JSON (sorted keys): the schemas a model is shown, for token counts."""
        ...

    @property
    def calls(self) -> list[CallRecord]: ...

    @property
    def server(self) -> McpServer:
        """The MCP server command behind `tools`."""
        ...

    async def call(self, name: str, arguments: Mapping[str, Any]) -> CallRecord:
        """Call tool `name`; a failure comes back as a record with `error`, never raised."""
        ...


class AttemptResult(TypedDict):
    final: str | None
    """The reader's last message (its answer), None when it never gave one."""
    usage: Usage
    usage_complete: bool
    turns: int
    lower_bound: NotRequired[bool]
    """The usage is the oracle's turn model, not a model's count."""
    errors: NotRequired[list[str]]
    session: NotRequired[str]
    turn_usage: NotRequired[list[Usage]]


class Reader(Protocol):
    """Answers one question through a session's tools, following a policy."""

    @property
    def model(self) -> str:
        """Recorded in the run spec (`oracle` for the oracle)."""
        ...

    async def attempt(self, question: Question, session: Session, policy: Policy, steps: int) -> AttemptResult:
        """Run one attempt of at most `steps` model turns."""
        ...

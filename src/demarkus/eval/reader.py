"""What the runner and a reader need from each other, and nothing else.

The runner gives a `Reader` one `Session` per attempt (the tools of a real `demarkus mcp`
subprocess) and takes back the attempt's result; readers (`oracle`, `openai_reader`)
import this module, never the runner or each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from .policies import Policy


class Session(Protocol):
    """The tools of one attempt. Every call is recorded in `calls`, failures included."""

    @property
    def tools(self) -> list[dict[str, Any]]:
        """Each tool as the MCP server lists it: name, description, inputSchema."""
        ...

    @property
    def schemas_json(self) -> str:
        """`tools` as canonical JSON (sorted keys): the schemas a model is shown, for token counts."""
        ...

    @property
    def calls(self) -> list[dict[str, Any]]: ...

    async def call(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Call tool `name`; a failure comes back as a record with `error`, never raised."""
        ...


class Reader(Protocol):
    """Answers one question through a session's tools, following a policy."""

    @property
    def model(self) -> str:
        """Recorded in the run spec (`oracle` for the oracle)."""
        ...

    async def attempt(
        self, question: Mapping[str, Any], session: Session, policy: Policy, steps: int
    ) -> dict[str, Any]:
        """Run one attempt of at most `steps` model turns: {final, usage, usage_complete, turns[, lower_bound][, errors]}."""
        ...

"""The gateway: one streamable-HTTP MCP endpoint in front of many worlds (authorities),
each caller seeing only what its bearer token allows. `demarkus gateway --config FILE`.

The app (Starlette, the MCP SDK) loads on first use, so `demarkus` stays quick to start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .config import CallerConfig, GatewayConfig, WorldConfig

if TYPE_CHECKING:
    from .app import Gateway, create_app

__all__ = ["CallerConfig", "Gateway", "GatewayConfig", "WorldConfig", "create_app"]


def __getattr__(name: str) -> Any:
    if name in ("Gateway", "create_app"):
        from . import app

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

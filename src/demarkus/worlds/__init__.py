"""Frozen worlds: a fixed corpus of versioned markdown plus questions and a rubric.

`open_world` verifies a world folder against its manifest; `demo_world_path` is the
small world that ships with the package (`demo-harbor-v1`).
"""

from __future__ import annotations

from .world import World, WorldDocument, demo_world_path, open_world

__all__ = ["World", "WorldDocument", "demo_world_path", "open_world"]

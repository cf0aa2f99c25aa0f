"""Process logging for the long-running commands (authority, demo, gateway)."""

from __future__ import annotations

import logging
import sys


def configure_logging(access_log: str | None = None) -> None:
    """Warnings and errors to stderr as `LEVEL logger: message`; with `access_log`, that
    logger's records (one JSON object per request, already formatted) go to stderr as bare
    lines, and only there."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    if access_log is None:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    access = logging.getLogger(access_log)
    access.addHandler(handler)
    access.setLevel(logging.INFO)
    access.propagate = False

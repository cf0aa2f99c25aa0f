"""The paths of a folder that git ignores, which a folder import does not read.

A repository's markdown sits beside what its tools write and its `.gitignore` names:
`node_modules/` alone holds a README and a changelog for every package. As ripgrep and
editors' searches do, an import leaves out what git ignores there (the `.gitignore`
files, `.git/info/exclude`, the user's excludes file); a file the repository tracks is
read whatever the patterns say. Outside a git work tree, without git, or for a folder
git ignores as a whole (the user named it), nothing is left out.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Ignored"]

TIMEOUT = 60.0
"""Seconds git may take to list the ignored paths; past it, nothing is left out."""
MAX_IGNORED = 1_000_000
"""Ignored paths held at most (git names an ignored folder once, not its files)."""


@dataclass(frozen=True, slots=True)
class Ignored:
    """Ignored folders and files of one folder (`/`-separated, relative to it)."""

    folders: frozenset[str] = field(default_factory=frozenset)
    files: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, folder: Path) -> Ignored:
        """What git ignores under `folder` now."""
        try:
            done = subprocess.run(
                [
                    "git",
                    "-c",
                    "core.quotePath=false",
                    "-C",
                    str(folder),
                    "ls-files",
                    "-z",
                    "--others",
                    "--ignored",
                    "--exclude-standard",
                    "--directory",
                ],
                capture_output=True,
                timeout=TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return cls()
        if done.returncode != 0:
            return cls()  # not a work tree (or a folder inside an ignored one)
        entries = [os.fsdecode(entry) for entry in done.stdout.split(b"\0")[:MAX_IGNORED] if entry]
        if "./" in entries:
            return cls()  # the folder itself: named, so read
        folders = frozenset(entry.rstrip("/") for entry in entries if entry.endswith("/"))
        return cls(folders, frozenset(entry for entry in entries if not entry.endswith("/")))

    def __contains__(self, relative: object) -> bool:
        """Whether git ignores `relative` (a file or folder) or a folder it lies in."""
        if not isinstance(relative, str):
            return False
        if relative in self.files or relative in self.folders:
            return True
        if not self.folders:
            return False
        parts = relative.split("/")
        return any("/".join(parts[:end]) in self.folders for end in range(1, len(parts)))

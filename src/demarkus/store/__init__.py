"""Versioned document storage: the version-file codec (pure) and the on-disk store."""

from .filestore import Entry, FileStore, StoredVersion, VersionInfo, WriteResult
from .versionfile import (
    OKF_KEYS,
    VersionFile,
    parse_version,
    serialize_version,
    set_archived,
    sha256_tag,
    verify_chain,
)

__all__ = [
    "OKF_KEYS",
    "Entry",
    "FileStore",
    "StoredVersion",
    "VersionFile",
    "VersionInfo",
    "WriteResult",
    "parse_version",
    "serialize_version",
    "set_archived",
    "sha256_tag",
    "verify_chain",
]

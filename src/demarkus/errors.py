"""The one exception hierarchy, and the table from exceptions to wire statuses.

```
DemarkusError
├── BadRequestError            -> bad-request   (malformed input, limits)
├── NotFoundError              -> not-found
├── ArchivedError              -> archived
├── UnauthorizedError          -> unauthorized  (missing, unknown or expired token)
├── NotPermittedError          -> not-permitted (valid token, wrong path or operation)
├── ConflictError              -> conflict      (expected-version mismatch)
├── RateLimitedError           -> rate-limited
├── IntegrityError             -> server-error  (a stored file is damaged)
│   └── IndexDamagedError                       (the section index file; rebuild it)
├── ServerError                -> server-error
├── ConfigError                 (a configuration file or option is invalid)
└── TransportError                              (client side: the authority could not be reached)
    └── OutcomeUnknownError                     (a write may or may not have been applied)
```

Messages are written for agents: they state the facts and the next step, because
through MCP `str(exc)` is the whole user interface.
"""

from __future__ import annotations


class DemarkusError(Exception):
    """Base of every error raised by demarkus."""

    status = "server-error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class BadRequestError(DemarkusError):
    """The request is malformed or breaks a documented limit."""

    status = "bad-request"


class NoTextError(BadRequestError):
    """A note with no text besides its frontmatter: no document can hold it (a site's list
    page often is one), so an import leaves it out without counting it a failure."""


class NotFoundError(DemarkusError):
    """No document, version or section at the path."""

    status = "not-found"


class ArchivedError(DemarkusError):
    """The document exists but is archived."""

    status = "archived"


class UnauthorizedError(DemarkusError):
    """A token is required and none valid was given."""

    status = "unauthorized"


class NotPermittedError(DemarkusError):
    """The token is valid but does not cover this path or operation."""

    status = "not-permitted"


class ConflictError(DemarkusError):
    """The document is not at the version the writer expected."""

    status = "conflict"

    def __init__(self, message: str, *, your_version: int | None = None, server_version: int | None = None) -> None:
        super().__init__(message)
        self.your_version = your_version
        self.server_version = server_version


class RateLimitedError(DemarkusError):
    """Too many requests from this caller."""

    status = "rate-limited"


class IntegrityError(DemarkusError):
    """Stored bytes are damaged (unparsable version file, broken chain)."""

    status = "server-error"


class IndexDamagedError(IntegrityError):
    """The section index file is damaged. It holds only data derived from the store, so
    recreating and refilling it loses nothing."""


class ServerError(DemarkusError):
    """An unexpected failure on the server."""

    status = "server-error"


class TransportError(DemarkusError):
    """The authority could not be reached or the connection failed."""

    status = "server-error"


class OutcomeUnknownError(TransportError):
    """A write was sent but no answer arrived: it may or may not have been applied."""


STATUS_ERRORS: dict[str, type[DemarkusError]] = {
    "bad-request": BadRequestError,
    "not-found": NotFoundError,
    "archived": ArchivedError,
    "unauthorized": UnauthorizedError,
    "not-permitted": NotPermittedError,
    "conflict": ConflictError,
    "rate-limited": RateLimitedError,
    "server-error": ServerError,
}
"""Maps a wire status back to the error a client raises for it."""


class ConfigError(DemarkusError):
    """A configuration file or option is invalid; raised at start-up, never over the wire."""

    status = "server-error"

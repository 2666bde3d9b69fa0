"""The error tree and the error kinds of tool calls.

Exceptions are for what a caller must handle; a tool call that failed is *not* an
exception but a value (``ToolOutcome`` / ``ToolCallResult``) carrying an
:class:`ErrorKind`, because every call in a model turn must still get a result.

::

    YaoActorsError
    ├── ConfigError            a configuration was refused; ``.problems`` lists each one with its key path
    ├── ServerUnavailable      an MCP server actor cannot serve (down, restarting, stopped)
    ├── ModelError             a model call failed after its own retries
    │   ├── ModelHTTPError     the endpoint answered with an error status (carries its own message)
    │   ├── ModelTimeout       a connect or read deadline fired
    │   └── ModelStreamError   the stream was malformed or ended before its finish
    ├── RunError               a run could not start (unknown assistant, hook failure, ...)
    └── StoreUnavailable       the conversation store cannot be reached (Redis down, SQLite file unwritable)

Errors are classified by type and by :class:`ErrorKind`, never by searching the
text of an exception (DESIGN §2, invariant 7).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence


class ErrorKind(enum.StrEnum):
    """Why a tool call failed (DESIGN §4.3)."""

    UNKNOWN_TOOL = "unknown_tool"
    INVALID_ARGUMENTS = "invalid_arguments"
    TOOL_ERROR = "tool_error"
    TIMEOUT = "timeout"
    SERVER_UNAVAILABLE = "server_unavailable"
    CANCELLED = "cancelled"


#: Words that mark a tool's own error text as an infrastructure fault (the seed's
#: non-retryable list). Matched on the text the tool itself returned, and only for
#: ``tool_error`` results; never on Python exception messages.
INFRASTRUCTURE_WORDS: tuple[str, ...] = (
    "network",
    "timeout",
    "timed out",
    "connection",
    "unauthorized",
    "forbidden",
    "unavailable",
    "context canceled",
    "context deadline",
    "server error",
    "internal error",
)


def is_retryable(kind: ErrorKind | None, tool_text: str = "") -> bool:
    """Whether the model may usefully retry a call that failed with ``kind``.

    ``tool_text`` is the text a server returned with ``isError: true``; it is
    only consulted for :attr:`ErrorKind.TOOL_ERROR`.
    """
    if kind in (ErrorKind.UNKNOWN_TOOL, ErrorKind.INVALID_ARGUMENTS):
        return True
    if kind is ErrorKind.TOOL_ERROR:
        lowered = tool_text.lower()
        return not any(word in lowered for word in INFRASTRUCTURE_WORDS)
    return False


class YaoActorsError(Exception):
    """Base of every exception this package raises on purpose."""


class ConfigError(YaoActorsError):
    """A configuration was refused.

    ``problems`` holds one message per problem, each starting with the key path it
    concerns (``assistants.default.mcp.servers[1]: unknown server "wether"``).
    """

    def __init__(self, problems: Sequence[str], *, source: str | None = None) -> None:
        self.problems = tuple(problems)
        self.source = source
        head = f"invalid configuration{f' in {source}' if source else ''}"
        super().__init__(head + ":\n" + "\n".join(f"  - {p}" for p in self.problems))


class ServerUnavailable(YaoActorsError):
    """An MCP server actor cannot serve a request right now.

    ``exit_code`` and ``stderr_tail`` describe the last death of a stdio server
    when known.
    """

    def __init__(
        self,
        server_id: str,
        reason: str,
        *,
        exit_code: int | None = None,
        stderr_tail: str = "",
    ) -> None:
        self.server_id = server_id
        self.reason = reason
        self.exit_code = exit_code
        self.stderr_tail = stderr_tail
        message = f"server {server_id!r} unavailable: {reason}"
        if exit_code is not None:
            message += f" (exit code {exit_code})"
        if stderr_tail:
            message += f"; stderr tail:\n{stderr_tail}"
        super().__init__(message)


class ModelError(YaoActorsError):
    """A model call failed after its own retries."""


class ModelHTTPError(ModelError):
    """The model endpoint answered with an error status."""

    def __init__(self, status: int, message: str, *, url: str = "") -> None:
        self.status = status
        self.message = message
        self.url = url
        super().__init__(f"model endpoint {url or ''} returned HTTP {status}: {message}".replace("  ", " "))


class ModelTimeout(ModelError):
    """A connect or read deadline of a model call fired."""


class ModelStreamError(ModelError):
    """A model stream was malformed or ended before its finish reason / ``[DONE]``."""


class RunError(YaoActorsError):
    """A run could not start or continue; ``code`` is the ``RUN_ERROR`` code."""

    def __init__(self, message: str, *, code: str = "run_error") -> None:
        self.code = code
        super().__init__(message)


class StoreUnavailable(YaoActorsError):
    """The conversation store cannot be reached or written; the call that raised it wrote nothing."""

"""How a tool call failed, as a value: its :class:`ErrorKind`, whether the model may retry it, and the text of a
server that cannot serve.

A tool call that failed is not an exception (:mod:`yao_actors.errors`): every call of a model turn must still get
a result, so a failure is a ``ToolOutcome`` carrying its kind, classified by type and never by searching the text
of an exception.
"""

from __future__ import annotations

import enum


class ErrorKind(enum.StrEnum):
    """Why a tool call failed."""

    UNKNOWN_TOOL = "unknown_tool"
    INVALID_ARGUMENTS = "invalid_arguments"
    TOOL_ERROR = "tool_error"
    TIMEOUT = "timeout"
    SERVER_UNAVAILABLE = "server_unavailable"
    CANCELLED = "cancelled"
    INPUT_REQUIRED = "input_required"
    """Not a failure: the server asks the user for input; the run ends with an interrupt and the call waits."""


#: Words that mark a tool's own error text as an infrastructure fault (Yao's
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


def server_unavailable_message(
    server_id: str, reason: str, *, exit_code: int | None = None, stderr_tail: str = ""
) -> str:
    """Why a server cannot serve, with the exit code and last stderr lines of a stdio server when known."""
    message = f"server {server_id!r} unavailable: {reason}"
    if exit_code is not None:
        message += f" (exit code {exit_code})"
    if stderr_tail:
        message += f"; stderr tail:\n{stderr_tail}"
    return message

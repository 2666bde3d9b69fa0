"""What travels between a run and its server actor about a task: the task as last seen, and one request about it.

A task's polling runs in the caller's task (the run's), never in a worker of the server actor: the actor's
workers only send one short request at a time (:class:`TaskOp`: ``tasks/get``, ``tasks/result``, ``tasks/update``,
``tasks/cancel``), so a thousand open tasks hold no worker while they wait. What a request learned comes back
on the outcome (:attr:`~yao_actors.tools.results.ToolOutcome.task`, a :class:`TaskState`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs

from yao_actors.store.task_handle import TaskDesign

#: Statuses after which a task changes no more.
TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})

#: Bounds on the poll interval a server asks for (seconds): below, a poll storm; above, a task that seems stuck.
MIN_POLL_INTERVAL: Final = 0.05
MAX_POLL_INTERVAL: Final = 60.0
#: The poll interval when the server suggests none (seconds).
DEFAULT_POLL_INTERVAL: Final = 1.0


def poll_interval(milliseconds: float | None) -> float | None:
    """A server's suggested interval (milliseconds, untrusted) as seconds within the bounds; ``None`` if none."""
    if milliseconds is None or milliseconds != milliseconds:  # absent, or NaN
        return None
    return min(MAX_POLL_INTERVAL, max(MIN_POLL_INTERVAL, milliseconds / 1000))


#: The most of a task's status message passed on as progress (UTF-8 bytes; the rest is cut, marked ``…``).
MAX_STATUS_BYTES: Final = 1024
#: The least time between two status messages of one task passed on (seconds): the latest waits its turn.
STATUS_EVERY: Final = 1.0


def status_text(message: str) -> str:
    """A server's status message (untrusted, any length) cut to :data:`MAX_STATUS_BYTES`."""
    encoded = message.encode("utf-8", errors="replace")
    if len(encoded) <= MAX_STATUS_BYTES:
        return message
    return encoded[: MAX_STATUS_BYTES - 3].decode("utf-8", errors="ignore") + "…"


def stored_poll_interval(seconds: object) -> float:
    """The interval (seconds) a handle keeps, read as untrusted: within the same bounds as a server's (what is
    not a number, or NaN, is the default)."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return DEFAULT_POLL_INTERVAL
    return poll_interval(seconds * 1000) or DEFAULT_POLL_INTERVAL


@attrs.frozen
class TaskState:
    """A task as a server last described it: its ``status``, its status ``message``, the ``poll_interval`` it
    asks for (seconds), the ``input_requests`` it waits on (2026-07-28, by the server's key), and the MCP
    ``session_id`` it is bound to (streamable HTTP; ``None`` when not known)."""

    task_id: str
    design: TaskDesign
    status: str
    message: str | None = None
    poll_interval: float | None = None
    input_requests: Mapping[str, Any] | None = None
    session_id: str | None = None

    @property
    def ended(self) -> bool:
        return self.status in TERMINAL


@attrs.frozen
class TaskOp:
    """One request about task ``task_id`` of tool ``tool``, made by a worker of the server actor:
    ``get`` its status, the handshake-era ``result``, ``update`` it with the user's ``responses`` (2026-07-28),
    or ``cancel`` it."""

    kind: Literal["get", "result", "update", "cancel"]
    design: TaskDesign
    task_id: str
    tool: str
    responses: Mapping[str, Any] | None = None

"""What one connection tells its owner about its own health: the :class:`Link`."""

from __future__ import annotations

import collections

import attrs
import trio

#: Lines of a stdio server's stderr kept for error reports.
STDERR_TAIL_LINES = 20


@attrs.define(eq=False)
class Link:
    """What one connection tells its owner about its own health.

    ``lost`` is set once the connection is gone as a whole; ``reason``,
    ``exit_code`` and ``stderr_tail()`` say why. ``pid`` is the stdio child's pid.
    """

    lost: trio.Event = attrs.field(factory=trio.Event)
    reason: str | None = None
    exit_code: int | None = None
    pid: int | None = None
    #: The connection could not be authorized (OAuth: no usable tokens), rather than reached.
    unauthorized: bool = False
    stderr_lines: collections.deque[str] = attrs.field(factory=lambda: collections.deque(maxlen=STDERR_TAIL_LINES))

    def mark_lost(self, reason: str, *, exit_code: int | None = None) -> None:
        """Record the first reason the connection was lost, and wake whoever waits on ``lost``."""
        if self.lost.is_set():
            return
        self.reason = reason
        if exit_code is not None:
            self.exit_code = exit_code
        self.lost.set()

    def stderr_tail(self) -> str:
        """The last lines the server wrote to stderr."""
        return "\n".join(self.stderr_lines)

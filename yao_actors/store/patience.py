"""Calls to a store that may be out of reach for a moment: tried again until it answers, within a bound.

A store restarts (Redis after a crash or an upgrade, reloading its append-only file; a SQLite file locked past
its busy timeout) in a few seconds at most; the runs going on meanwhile should not end for it. :func:`patiently` repeats a call that
raised :class:`~yao_actors.errors.StoreUnavailable`, after :data:`RETRY_DELAYS`, for up to ``patience``
seconds, then lets the last error out. Only calls that are safe to repeat go through it (reads, ``open_thread``,
lease steps), or calls whose caller recognises its own earlier write (the journal's appends).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

import trio

from yao_actors.errors import StoreUnavailable

T = TypeVar("T")

RETRY_DELAYS: Final = (0.05, 0.1, 0.2, 0.5, 1.0)
"""Seconds between two tries while the store is out of reach (the last one repeats)."""

PATIENCE: Final = 5.0
"""Seconds a call of a run going on is tried again while the store is out of reach, before the run fails."""


async def patiently(call: Callable[[], Awaitable[T]], patience: float = PATIENCE) -> T:
    """``await call()``, tried again while it raises ``StoreUnavailable``, for up to ``patience`` seconds."""
    delays = iter(RETRY_DELAYS)
    deadline = trio.current_time() + patience
    while True:
        try:
            return await call()
        except StoreUnavailable:
            delay = next(delays, RETRY_DELAYS[-1])
            if trio.current_time() + delay > deadline:
                raise
        await trio.sleep(delay)

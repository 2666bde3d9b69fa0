"""Trio helpers the runtime's parts share.

- :func:`open_owned_nursery`: the one nursery shape the runtime's owners use. Trio wraps whatever leaves a
  nursery in an exception group; a caller of ``open_runtime`` or ``open_conversations`` wants the exception its
  own block raised, not a tree of groups around it. Everything else (a task of the nursery failing) still comes
  out as the group it is.
- :func:`send_now_or_wait` and :func:`receive_now_or_wait`: a channel's ``send``/``receive`` that takes no trip
  through the scheduler while the channel has room (or a value): what the hot paths use, so the values a task
  produces together are all queued before their consumer runs, and go on together.
- :class:`Turnstile`: one task at a time through a section, in order, free of charge when nobody waits.
- :func:`patiently`: a store call tried again while the store is out of reach for a moment (a Redis restart, an
  SQLite file locked past its busy timeout), within a bound; only calls safe to repeat go through it (reads,
  ``open_thread``, lease steps) or calls whose caller recognises its own earlier write (the journal's appends).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Final, Protocol, TypeVar

import attrs
import trio

from yao_actors.errors import StoreUnavailable, exception_leaves


@asynccontextmanager
async def open_owned_nursery() -> AsyncIterator[trio.Nursery]:
    """A nursery that is cancelled when the block ends, and lets the block's own exception out unwrapped."""
    body_error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            try:
                yield nursery
            except BaseException as exc:
                body_error = exc
                raise
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if body_error is not None and exception_leaves(group) == [body_error]:
            raise body_error from None
        raise


T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
T_contra = TypeVar("T_contra", contravariant=True)


class NowOrLaterSend(Protocol[T_contra]):
    """A channel's send end: a value sent now if there is room (``trio.WouldBlock`` if not), or when there is."""

    def send_nowait(self, value: T_contra, /) -> None: ...

    async def send(self, value: T_contra, /) -> None: ...


class NowOrLaterReceive(Protocol[T_co]):
    """A channel's receive end: a value now if there is one (``trio.WouldBlock`` if not), or when there is."""

    def receive_nowait(self) -> T_co: ...

    async def receive(self) -> T_co: ...


async def send_now_or_wait(channel: NowOrLaterSend[T], value: T) -> None:
    """Send ``value``: at once, with no trip through the scheduler, while the channel has room; else wait for it
    (and checkpoint, as a channel's ``send`` does)."""
    try:
        channel.send_nowait(value)
    except trio.WouldBlock:
        await channel.send(value)


async def receive_now_or_wait(channel: NowOrLaterReceive[T]) -> T:
    """The next value: at once, with no trip through the scheduler, when one is there; else wait for it.
    ``trio.EndOfChannel`` at the end, as a channel's ``receive`` raises."""
    try:
        return channel.receive_nowait()
    except trio.WouldBlock:
        return await channel.receive()


@attrs.define(eq=False)
class Turnstile:
    """One sender at a time, in the order they came; passing it while it is free costs no trip through the scheduler.

    A sender that leaves hands the turnstile straight to the first one waiting (``busy`` stays set), so a
    newcomer cannot slip in ahead of it. A waiter cancelled before its turn simply leaves the queue.
    """

    busy: bool = False
    _waiting: trio.lowlevel.ParkingLot = attrs.field(factory=trio.lowlevel.ParkingLot)

    def pass_free(self) -> bool:
        """Enter at once if the turnstile is free (``True``); else :meth:`enter` waits for its turn."""
        if self.busy:
            return False
        self.busy = True
        return True

    async def enter(self) -> None:
        if self.busy:
            await self._waiting.park()  # woken by leave(), which kept ``busy`` set for us
        else:
            self.busy = True

    def leave(self) -> None:
        if self._waiting:
            self._waiting.unpark()
        else:
            self.busy = False


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

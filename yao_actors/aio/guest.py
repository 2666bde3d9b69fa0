"""The bridge between an asyncio loop and a Trio run that is its guest, on the loop's own thread.

:func:`open_guest` starts a Trio run as a guest of the running asyncio loop (``trio.lowlevel.start_guest_run``),
enters an async context manager in it (the runtime, the service), and holds it open until the block ends; leaving
the block, however it is left, exits that context manager in Trio and waits for the guest run to end, and what the
guest run raised comes out of the block as itself.

:meth:`Guest.call` is the one place a host coroutine hands work to the guest: it starts ``fn(*args)`` in the
guest's nursery and awaits its outcome as an asyncio future, with cancellation both ways — the awaiting asyncio task
cancelled cancels the Trio call and waits for its close-out before it raises ``CancelledError``; the Trio call
cancelled (the guest run stopping) cancels the awaiting task. :meth:`Guest.hold` enters a Trio context manager for a
host block on top of it. :meth:`Guest.host` is the way back, for Trio code that must await a host coroutine (an ASGI
server's ``receive`` and ``send``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, TypeVar

import outcome
import trio

T = TypeVar("T")

#: Seconds a thread holding the GIL runs before one waiting for it gets it, while a guest run is open (Python's
#: default is 5 ms). A guest run waits for I/O in a thread of its own, which needs the GIL to hand what it found to
#: the host loop: with the host busy, every such hand-off waited up to the default's 5 ms, and under 50 concurrent
#: websocket runs the service answered 3.5 times fewer runs per second (``benchmarks/asgi_load.py``).
GUEST_SWITCH_INTERVAL = 0.001


class GuestClosed(RuntimeError):
    """Work handed to a guest run that has ended (the ``async with`` block was left)."""


class Guest:
    """A Trio run hosted by an asyncio loop (made by :func:`open_guest`): hand it work, or let it await the host."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._host_context = contextvars.copy_context()  # host tasks started from Trio code run in the host's
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._leave = trio.Event()
        self._leaving = False  # the host left before the guest run took its token

    # ------------------------------------------------------------------ host → guest

    async def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``await fn(*args)`` in the guest run; its result or exception here (see the module docstring)."""
        future: asyncio.Future[T] = self._loop.create_future()
        scope = trio.CancelScope()
        self.soon(self._start, fn, args, future, scope)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            if not future.done():  # this task was cancelled: cancel the Trio call, and wait for its close-out
                self.soon(scope.cancel)
                await asyncio.wait([future])
            raise

    def soon(self, fn: Callable[..., object], *args: Any) -> None:
        """Call the synchronous ``fn(*args)`` in the guest run soon (what a Trio object's methods need)."""
        if self._token is None:
            raise GuestClosed("the Trio guest run has ended")
        try:
            self._token.run_sync_soon(fn, *args)
        except trio.RunFinishedError:
            raise GuestClosed("the Trio guest run has ended") from None

    def _start(
        self, fn: Callable[..., Awaitable[T]], args: tuple[Any, ...], future: asyncio.Future[T], scope: trio.CancelScope
    ) -> None:
        if self._nursery is None:
            future.set_exception(GuestClosed("the Trio guest run is closing"))
        else:
            self._nursery.start_soon(_settle, fn, args, future, scope)

    @asynccontextmanager
    async def hold(self, manager: AbstractAsyncContextManager[T]) -> AsyncIterator[T]:
        """Enter ``manager`` in a guest task for the length of the host's block; it exits however the block ends."""
        entered: asyncio.Future[T] = self._loop.create_future()
        leave = trio.Event()
        held = self._loop.create_task(self.call(_hold, manager, entered, leave))
        try:
            await _first(entered, held)
            if not entered.done():
                await held  # entering failed: its exception
            yield entered.result()
        finally:
            if not held.done():
                with contextlib.suppress(GuestClosed):  # a guest run that ended has ended the hold too
                    self.soon(leave.set)
            await _finish(held)

    # ------------------------------------------------------------------ guest → host

    async def host(self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        """From Trio code: await the host coroutine ``fn(*args)`` as an asyncio task (cancelled with the caller)."""
        return await self.wait_host(self.start_host(fn, *args), cancel=True)

    def start_host(self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> asyncio.Task[T]:
        """From Trio code: start the host coroutine ``fn(*args)`` as an asyncio task (in the host's context)."""
        return self._loop.create_task(fn(*args), context=self._host_context.copy())

    async def wait_host(self, future: asyncio.Future[T], *, cancel: bool = False) -> T:
        """From Trio code: wait for a host future; a Trio cancellation leaves it running unless ``cancel``."""
        if not future.done():
            done = trio.Event()
            token = trio.lowlevel.current_trio_token()
            future.add_done_callback(lambda _: _soon_or_never(token, done.set))
            try:
                await done.wait()
            except trio.Cancelled:
                if cancel:
                    future.cancel()
                raise
        return future.result()

    # ------------------------------------------------------------------ the guest run

    async def _main(self, manager: AbstractAsyncContextManager[T], entered: asyncio.Future[T]) -> None:
        self._token = trio.lowlevel.current_trio_token()
        async with manager as value, trio.open_nursery() as calls:
            self._nursery = calls
            entered.set_result(value)
            if not self._leaving:
                await self._leave.wait()
            self._nursery = None
            calls.cancel_scope.cancel()


async def _settle(
    fn: Callable[..., Awaitable[T]], args: tuple[Any, ...], future: asyncio.Future[T], scope: trio.CancelScope
) -> None:
    """One :meth:`Guest.call` in the guest: its outcome goes to ``future``; a cancellation cancels the future."""
    with scope:
        try:
            result = await fn(*args)
        except trio.Cancelled:
            future.cancel()
            raise
        except BaseException as error:
            if not future.done():
                future.set_exception(error)
            return
        if not future.done():
            future.set_result(result)
    if not future.done():
        future.cancel()


async def _hold(manager: AbstractAsyncContextManager[T], entered: asyncio.Future[T], leave: trio.Event) -> None:
    async with manager as value:
        entered.set_result(value)
        await leave.wait()


async def _first(*futures: asyncio.Future[Any]) -> None:
    """Wait until one of ``futures`` is done."""
    await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)


async def _finish(task: asyncio.Future[Any]) -> None:
    """Await ``task`` to its end even when this task is cancelled meanwhile (then raise ``CancelledError``)."""
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    task.result()


def _soon_or_never(token: trio.lowlevel.TrioToken, fn: Callable[[], object]) -> None:
    """Wake Trio code from a host callback; nothing once the guest run has ended (nobody waits any more)."""
    with contextlib.suppress(trio.RunFinishedError):
        token.run_sync_soon(fn)


@asynccontextmanager
async def open_guest(
    manager: AbstractAsyncContextManager[T], *, switch_interval: float | None = GUEST_SWITCH_INTERVAL
) -> AsyncIterator[tuple[Guest, T]]:
    """Start a Trio guest run on the running asyncio loop, enter ``manager`` in it, and yield the guest and its value.

    Leaving the block cancels the calls in flight, exits ``manager`` and waits for the guest run to end — also when
    the host task is cancelled meanwhile. An exception out of the guest run comes out of the block (or out of
    entering it) as itself. ``switch_interval``: the process's ``sys.setswitchinterval`` while the block runs, when
    lower than it was (see :data:`GUEST_SWITCH_INTERVAL`; ``None`` leaves it alone); restored at the end.
    """
    with _switch_interval(switch_interval):
        async with _open_guest(manager) as opened:
            yield opened


@contextlib.contextmanager
def _switch_interval(seconds: float | None) -> Iterator[None]:
    """Lower the GIL's switch interval to ``seconds`` for the block; put back what was there, unless changed since."""
    before = sys.getswitchinterval()
    if seconds is None or seconds >= before:
        yield
        return
    sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        if sys.getswitchinterval() == seconds:
            sys.setswitchinterval(before)


@asynccontextmanager
async def _open_guest(manager: AbstractAsyncContextManager[T]) -> AsyncIterator[tuple[Guest, T]]:
    """:func:`open_guest` once the switch interval is set."""
    loop = asyncio.get_running_loop()
    guest = Guest(loop)
    entered: asyncio.Future[T] = loop.create_future()
    ended: asyncio.Future[outcome.Outcome[None]] = loop.create_future()
    trio.lowlevel.start_guest_run(
        guest._main,
        manager,
        entered,
        run_sync_soon_threadsafe=loop.call_soon_threadsafe,
        run_sync_soon_not_threadsafe=loop.call_soon,
        done_callback=ended.set_result,
        host_uses_signal_set_wakeup_fd=True,
    )
    try:
        await _first(entered, ended)
        if entered.done():
            yield guest, entered.result()
    finally:
        guest._leaving = True
        if not ended.done() and guest._token is not None:
            guest._token.run_sync_soon(guest._leave.set)
        await _finish(ended)
        guest._token = None
        ended.result().unwrap()  # what the guest run raised, as itself

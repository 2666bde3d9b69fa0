"""The runtime for asyncio programs: the Trio runtime running as a guest of the asyncio loop, on its thread.

``async with open_runtime(config) as runtime:`` (from any asyncio program: ``asyncio.run``, FastAPI, aiohttp)
starts :func:`yao_actors.open_runtime` in a Trio guest run (:mod:`yao_actors.aio.guest`) and gives a
:class:`Runtime` with the Trio runtime's methods as asyncio coroutines — ``run``, ``open_run`` (its events as an
async iterator), ``history``, ``threads``, ``forget``, ``open_resume``, ``wait_ready`` — and its servers
(``runtime.servers[id]``: the whole tool server protocol, :mod:`yao_actors.aio.servers`). Each call crosses the
bridge once (:meth:`yao_actors.aio.guest.Guest.call`): cancelling the asyncio task that awaits it cancels it in
Trio (a run ends ``cancelled``, its tool calls get ``cancelled`` results, the history stays valid) and returns once
that close-out is done. Exceptions are the Trio API's own (``ConfigError``, ``NotReady``, ``RunError``, ...). Leaving the block stops every actor and child process,
however it is left.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import trio

from yao_actors import runtime as trio_runtime
from yao_actors.aio.guest import GUEST_SWITCH_INTERVAL, Guest, open_guest
from yao_actors.aio.servers import AioServerHandle as AioServerHandle  # its public path
from yao_actors.conversation import MessagesInput, RunRequest, RunResult, ThreadHistory
from yao_actors.conversation.request import as_request
from yao_actors.models import Model
from yao_actors.specs import Config
from yao_actors.store import ThreadInfo
from yao_actors.transports import Connector, open_client

EventDict = dict[str, Any]


class AioEventStream:
    """A run's AG-UI event dicts for asyncio code: ``async for event in events``; ``cancel``, ``detach``,
    ``result`` once it ended. Each event crosses the bridge once."""

    def __init__(self, guest: Guest, stream: Any) -> None:
        self._guest = guest
        self._stream = stream

    @property
    def run_id(self) -> str:
        return str(self._stream.run_id)

    @property
    def thread_id(self) -> str:
        return str(self._stream.thread_id)

    @property
    def result(self) -> RunResult | None:
        """The run's result once it ended (a run's stream; ``None`` for a resumed one)."""
        return getattr(self._stream, "result", None)

    def cancel(self) -> None:
        """Cancel the run; it still ends with its terminal event."""
        self._guest.soon(self._stream.cancel)

    def detach(self) -> None:
        """Stop reading without cancelling the run (it waits ``detach_grace`` seconds to be resumed)."""
        self._guest.soon(self._stream.detach)

    async def receive(self) -> EventDict:
        """The next event; ``StopAsyncIteration`` after the terminal one."""
        try:
            return dict(await self._guest.call(self._stream.receive))
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise StopAsyncIteration from None

    def __aiter__(self) -> AsyncIterator[EventDict]:
        return self

    async def __anext__(self) -> EventDict:
        return await self.receive()


class Runtime:
    """The Trio :class:`yao_actors.Runtime` for asyncio code (made by :func:`open_runtime`)."""

    def __init__(self, guest: Guest, runtime: trio_runtime.Runtime) -> None:
        self._guest = guest
        self.trio_runtime = runtime
        self.config: Config = runtime.config
        self.models: Mapping[str, Model] = runtime.models
        self.servers: Mapping[str, AioServerHandle] = {
            server_id: AioServerHandle(guest, handle) for server_id, handle in runtime.servers.items()
        }

    @property
    def guest(self) -> Guest:
        """The guest run the runtime lives in (hand it your own Trio work with ``guest.call``)."""
        return self._guest

    async def wait_ready(self, timeout: float | None = None) -> None:  # noqa: ASYNC109 - the Trio API's
        await self._guest.call(self.trio_runtime.wait_ready, timeout)

    async def run(
        self, request: RunRequest | str, messages: MessagesInput | None = None, /, **options: Any
    ) -> RunResult:
        """Run to the end (``request`` as :meth:`yao_actors.Runtime.run`); cancelling the awaiting task cancels it."""
        return await self._guest.call(self.trio_runtime.run, as_request(request, messages, options))

    @asynccontextmanager
    async def open_run(
        self, request: RunRequest | str, messages: MessagesInput | None = None, /, **options: Any
    ) -> AsyncIterator[AioEventStream]:
        """Start a run (``request`` as :meth:`yao_actors.Runtime.open_run`); yields its events (an async iterator).
        Leaving the block early cancels the run."""
        opened = self.trio_runtime.open_run(as_request(request, messages, options))
        async with self._guest.hold(opened) as stream:
            yield AioEventStream(self._guest, stream)

    @asynccontextmanager
    async def open_resume(
        self, run_id: str, *, after_seq: int = 0, principal: str | None = None
    ) -> AsyncIterator[AioEventStream]:
        """A run's events after ``after_seq``, stored then live, up to its terminal one (``RunError`` ``unknown_run``)."""
        opened = self.trio_runtime.open_resume(run_id, after_seq=after_seq, principal=principal)
        async with self._guest.hold(opened) as stream:
            yield AioEventStream(self._guest, stream)

    async def run_exists(self, run_id: str) -> bool:
        return await self._guest.call(self.trio_runtime.run_exists, run_id)

    async def history(self, thread_id: str, *, principal: str | None = None) -> ThreadHistory:
        return await self._guest.call(partial(self.trio_runtime.history, thread_id, principal=principal))

    async def threads(self, *, principal: str | None = None, limit: int = 100) -> list[ThreadInfo]:
        return await self._guest.call(partial(self.trio_runtime.threads, principal=principal, limit=limit))

    async def forget(self, thread_id: str, *, principal: str | None = None) -> bool:
        return await self._guest.call(partial(self.trio_runtime.forget, thread_id, principal=principal))


@asynccontextmanager
async def open_runtime(
    config: Config,
    *,
    models: Mapping[str, Model] | None = None,
    connect: Connector = open_client,
    ready_timeout: float | None = None,
    switch_interval: float | None = GUEST_SWITCH_INTERVAL,
) -> AsyncIterator[Runtime]:
    """:func:`yao_actors.open_runtime` for asyncio: the same arguments, the runtime in a Trio guest run.

    ``switch_interval``: the GIL's switch interval while the block runs (:func:`yao_actors.aio.guest.open_guest`)."""
    opened = trio_runtime.open_runtime(config, models=models, connect=connect, ready_timeout=ready_timeout)
    async with open_guest(opened, switch_interval=switch_interval) as (guest, runtime):
        yield Runtime(guest, runtime)

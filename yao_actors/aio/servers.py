"""A tool server for asyncio code: the whole :class:`~yao_actors.tools.tool_server.ToolServer` protocol, forwarded.

:class:`AioServerHandle` subclasses the protocol itself (through
:class:`~yao_actors.tools.forwarding.ForwardedReads`), so a member the protocol gains and the handle does not
forward is an abstract member mypy refuses to instantiate; each member is forwarded by a generic helper typed by
the protocol's own definition: a property is read and a plain method called at once, as every wrapper of a server
does it (:mod:`yao_actors.tools.forwarding`), and a coroutine method runs in the guest run and is awaited here
(:func:`_across`), where cancelling the awaiting asyncio task cancels it in Trio. Only ``call_tool`` and
``poll_task`` do more than forward (a progress function may be an asyncio one).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

import attrs

from yao_actors.aio.guest import Guest
from yao_actors.store.task_handle import TaskHandle
from yao_actors.tools.forwarding import ForwardedReads
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.tool_server import NO_OPTIONS, CallOptions, ProgressFn, ToolServer

P = ParamSpec("P")
T = TypeVar("T")


def _across(
    method: Callable[Concatenate[ToolServer, P], Awaitable[T]],
) -> Callable[Concatenate[AioServerHandle, P], Coroutine[Any, Any, T]]:
    """A coroutine method of the protocol, run in the guest run and awaited from asyncio (crossing the bridge once)."""
    name = method.__name__

    @functools.wraps(method)
    async def across(handle: AioServerHandle, /, *args: P.args, **kwargs: P.kwargs) -> T:
        bound = functools.partial(getattr(handle.trio_server, name), *args, **kwargs)
        return await handle.guest.call(bound)

    return across


class AioServerHandle(ForwardedReads):
    """A tool server (``runtime.servers[id]``) for asyncio code: every method of
    :class:`~yao_actors.tools.tool_server.ToolServer`, its coroutines as asyncio ones run in the guest."""

    def __init__(self, guest: Guest, server: ToolServer) -> None:
        super().__init__(server)
        self.guest = guest
        self.trio_server = server
        """The Trio server behind it (hand it to your own Trio code with ``guest.call``)."""

    list_tools = _across(ToolServer.list_tools)
    wait_state_change = _across(ToolServer.wait_state_change)
    wait_for_state = _across(ToolServer.wait_for_state)
    reaches_parked = _across(ToolServer.reaches_parked)
    cancel_task = _across(ToolServer.cancel_task)

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        options: CallOptions = NO_OPTIONS,
        *,
        progress: ProgressFn | None = None,
    ) -> ToolOutcome:
        """Call tool ``name`` (see :meth:`yao_actors.tools.server_handle.ServerHandle.call_tool`); ``progress``
        (or ``options.progress``) may be a plain or an ``async`` (asyncio) function. A failure is an outcome;
        cancelling the awaiting task cancels the call at the server (``notifications/cancelled``)."""
        options = self._hosted(options, progress or options.progress)
        return await self.guest.call(self.trio_server.call_tool, name, arguments, options)

    async def poll_task(self, handle: TaskHandle, options: CallOptions = NO_OPTIONS) -> ToolOutcome:
        """Go on polling a stored task (see :meth:`yao_actors.tools.tool_server.ToolServer.poll_task`);
        ``options.progress`` may be a plain or an ``async`` (asyncio) function."""
        options = self._hosted(options, options.progress)
        return await self.guest.call(self.trio_server.poll_task, handle, options)

    def _hosted(self, options: CallOptions, given: ProgressFn | None) -> CallOptions:
        """``options`` with ``given`` as its progress, an asyncio coroutine function run in the host loop."""
        if given is not None and inspect.iscoroutinefunction(given):
            host_progress = given

            async def relay(done: float, total: float | None, message: str | None) -> None:
                await self.guest.host(host_progress, done, total, message)

            given = relay
        return options if given is options.progress else attrs.evolve(options, progress=given)

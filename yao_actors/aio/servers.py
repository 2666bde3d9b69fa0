"""A tool server for asyncio code: the whole :class:`~yao_actors.tools.tool_server.ToolServer` protocol, forwarded.

:class:`AioServerHandle` subclasses the protocol itself, so a member the protocol gains and the handle does not
forward is an abstract member mypy refuses to instantiate; each member is forwarded by one of three generic
helpers, typed by the protocol's own definition: a property is read at once (:class:`_Read`), a plain method is
called at once (:func:`_at_once`), a coroutine method runs in the guest run and is awaited here (:func:`_across`),
where cancelling the awaiting asyncio task cancels it in Trio. Only ``call_tool`` does more than forward (a
progress function may be an asyncio one).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

import attrs

from yao_actors.aio.guest import Guest
from yao_actors.store.task_handle import TaskHandle
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.tool_server import NO_OPTIONS, CallOptions, ProgressFn, ToolServer

P = ParamSpec("P")
T = TypeVar("T")


class _Read(Generic[T]):
    """A property of the protocol, read from the Trio server at once (a value it keeps, no waiting)."""

    def __init__(self, member: Callable[[ToolServer], T]) -> None:
        self._name = ""
        self.__doc__ = member.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, handle: None, owner: type) -> _Read[T]: ...

    @overload
    def __get__(self, handle: AioServerHandle, owner: type) -> T: ...

    def __get__(self, handle: AioServerHandle | None, owner: type) -> T | _Read[T]:
        if handle is None:
            return self
        value: T = getattr(handle.trio_server, self._name)
        return value


def _at_once(method: Callable[Concatenate[ToolServer, P], T]) -> Callable[Concatenate[AioServerHandle, P], T]:
    """A plain method of the protocol, called on the Trio server at once."""
    name = method.__name__

    @functools.wraps(method)
    def at_once(handle: AioServerHandle, /, *args: P.args, **kwargs: P.kwargs) -> T:
        result: T = getattr(handle.trio_server, name)(*args, **kwargs)
        return result

    return at_once


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


class AioServerHandle(ToolServer):
    """A tool server (``runtime.servers[id]``) for asyncio code: every method of
    :class:`~yao_actors.tools.tool_server.ToolServer`, its coroutines as asyncio ones run in the guest."""

    def __init__(self, guest: Guest, server: ToolServer) -> None:
        self.guest = guest
        self.trio_server = server
        """The Trio server behind it (hand it to your own Trio code with ``guest.call``)."""

    id = _Read(ToolServer.id)
    spec = _Read(ToolServer.spec)
    state = _Read(ToolServer.state)
    tools_version = _Read(ToolServer.tools_version)
    statistics = _at_once(ToolServer.statistics)
    list_tools = _across(ToolServer.list_tools)
    wait_state_change = _across(ToolServer.wait_state_change)
    wait_for_state = _across(ToolServer.wait_for_state)
    reaches_parked = _across(ToolServer.reaches_parked)

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

"""A tool server that passes the whole protocol on to another: :class:`ForwardingServer`, the base of every wrapper.

A wrapper that changes one thing about a server (what it keeps of its calls) subclasses :class:`ForwardingServer`
and overrides that member only; every other member of :class:`~yao_actors.tools.tool_server.ToolServer` is passed
on to its ``server``, each by one of two generic helpers typed by the protocol's own definition: a property is read
at once (:class:`Forwarded`), a method is called at once (:func:`forwarded`; a coroutine method's coroutine is the
wrapped server's own). The base subclasses the protocol itself: a member the protocol gains and the base does not
forward is an abstract member, and mypy refuses to build a wrapper then. The asyncio handle
(:class:`~yao_actors.aio.servers.AioServerHandle`) passes its properties and plain methods on the same way
(:class:`ForwardedReads`), its coroutines across the bridge.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Concatenate, Generic, ParamSpec, Protocol, TypeVar, overload

from yao_actors.tools.tool_server import ToolServer

P = ParamSpec("P")
T = TypeVar("T")


class Wrapper(Protocol):
    """What the helpers pass members on from: an object holding the ``server`` they go to."""

    @property
    def server(self) -> ToolServer: ...


class Forwarded(Generic[T]):
    """A property of the protocol, read from the wrapped server at once (a value it keeps, no waiting)."""

    def __init__(self, member: Callable[[ToolServer], T]) -> None:
        self._name = ""
        self.__doc__ = member.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, wrapper: None, owner: type) -> Forwarded[T]: ...

    @overload
    def __get__(self, wrapper: Wrapper, owner: type) -> T: ...

    def __get__(self, wrapper: Wrapper | None, owner: type) -> T | Forwarded[T]:
        if wrapper is None:
            return self
        value: T = getattr(wrapper.server, self._name)
        return value


def forwarded(method: Callable[Concatenate[ToolServer, P], T]) -> Callable[Concatenate[Wrapper, P], T]:
    """A method of the protocol, called on the wrapped server at once."""
    name = method.__name__

    @functools.wraps(method)
    def forward(wrapper: Wrapper, /, *args: P.args, **kwargs: P.kwargs) -> T:
        result: T = getattr(wrapper.server, name)(*args, **kwargs)
        return result

    return forward


class ForwardedReads(ToolServer):
    """What a wrapper passes on to its ``server`` at once, however it passes its coroutines on: the properties of
    the protocol and its plain methods. The coroutine methods are left to the subclass (abstract until then)."""

    def __init__(self, server: ToolServer) -> None:
        self._server = server

    @property
    def server(self) -> ToolServer:
        """The server everything is passed on to."""
        return self._server

    id = Forwarded(ToolServer.id)
    spec = Forwarded(ToolServer.spec)
    state = Forwarded(ToolServer.state)
    tools_version = Forwarded(ToolServer.tools_version)
    statistics = forwarded(ToolServer.statistics)


class ForwardingServer(ForwardedReads):
    """Every member of the protocol, passed on to ``server`` as it is; a subclass overrides what it does otherwise."""

    list_tools = forwarded(ToolServer.list_tools)
    call_tool = forwarded(ToolServer.call_tool)
    poll_task = forwarded(ToolServer.poll_task)
    cancel_task = forwarded(ToolServer.cancel_task)
    wait_state_change = forwarded(ToolServer.wait_state_change)
    wait_for_state = forwarded(ToolServer.wait_for_state)
    reaches_parked = forwarded(ToolServer.reaches_parked)

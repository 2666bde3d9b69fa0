"""A tool server that passes the whole protocol on to another: :class:`ForwardingServer`, the base of every wrapper.

A wrapper that changes one thing about a server (how its calls are made, what it keeps of them) subclasses
:class:`ForwardingServer` and overrides that member only; every other member of
:class:`~yao_actors.tools.tool_server.ToolServer` is passed on here, in one place. The base subclasses the
protocol itself: a member the protocol gains and this base does not forward is an abstract member, and mypy
refuses to build a wrapper then.
"""

from __future__ import annotations

from typing import Any

import mcp.types

from yao_actors.specs import ServerSpec
from yao_actors.store.task_handle import TaskHandle
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.tool_server import NO_OPTIONS, CallOptions, ServerState, ServerStatistics, ToolServer


class ForwardingServer(ToolServer):
    """Every member of the protocol, passed on to ``server`` as it is; a subclass overrides what it does otherwise."""

    def __init__(self, server: ToolServer) -> None:
        self.server = server
        """The server everything is passed on to."""

    @property
    def id(self) -> str:
        return self.server.id

    @property
    def spec(self) -> ServerSpec:
        return self.server.spec

    @property
    def state(self) -> ServerState:
        return self.server.state

    @property
    def tools_version(self) -> int:
        return self.server.tools_version

    async def list_tools(self) -> tuple[mcp.types.Tool, ...]:
        return await self.server.list_tools()

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None, options: CallOptions = NO_OPTIONS
    ) -> ToolOutcome:
        return await self.server.call_tool(name, arguments, options)

    async def poll_task(self, handle: TaskHandle, options: CallOptions = NO_OPTIONS) -> ToolOutcome:
        return await self.server.poll_task(handle, options)

    def statistics(self) -> ServerStatistics:
        return self.server.statistics()

    async def wait_state_change(self) -> ServerState:
        return await self.server.wait_state_change()

    async def wait_for_state(self, *states: ServerState) -> ServerState:
        return await self.server.wait_for_state(*states)

    async def reaches_parked(self, ticket: str) -> bool:
        return await self.server.reaches_parked(ticket)

"""One principal's side of an ``identity: "principal"`` server: its connection, and the view a run binds.

A :class:`PrincipalView` is what a run of that principal holds in the server's place
(:meth:`~yao_actors.auth.principals.PrincipalServers.bind_principal`): the principal's
:class:`PrincipalConnection` (a server actor of its own), or why there is none (``down``, or ``needs_auth`` with
the authorization the principal must make first). Its calls go to that connection only, opened again if it was
closed meanwhile.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import attrs
import mcp.types
import trio

from yao_actors.errors import AuthorizationError, AuthorizationRequired, ErrorKind, StoreUnavailable
from yao_actors.specs import ServerSpec
from yao_actors.store.task_handle import TaskHandle
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.server_handle import ServerHandle, unavailable_outcome
from yao_actors.tools.task_flow import bounded_cancel
from yao_actors.tools.tool_server import (
    LOST,
    NO_OPTIONS,
    Binding,
    CallOptions,
    ServerState,
    ServerStatistics,
    state_reached,
)


@attrs.define(eq=False)
class PrincipalConnection:
    """One principal's server actor: its handle, the scope that closes it, and its use."""

    handle: ServerHandle
    scope: trio.CancelScope
    last_used: float
    busy: int = 0

    @property
    def idle(self) -> bool:
        """No call uses it: none made through a view, and none its actor still runs (a call held open for the
        user's answer, or one a resume answered, is not made through :attr:`busy`)."""
        return self.busy == 0 and self.handle.statistics().in_flight == 0


class Router(Protocol):
    """What a view needs of its router (:class:`~yao_actors.auth.principals.PrincipalServers`)."""

    connections: dict[str, PrincipalConnection]

    @property
    def id(self) -> str: ...

    @property
    def spec(self) -> ServerSpec: ...

    def statistics(self) -> ServerStatistics: ...

    async def reaches_parked(self, ticket: str) -> bool: ...

    async def connection(self, name: str) -> PrincipalConnection: ...

    def store_out_of_reach(self, error: StoreUnavailable) -> str: ...


@attrs.define(eq=False)
class PrincipalView:
    """One principal's side of a :class:`~yao_actors.auth.principals.PrincipalServers`: that principal's
    connection, or why there is none."""

    router: Router
    principal: str
    bound: PrincipalConnection | None
    problem: str | None = None
    needed: AuthorizationRequired | None = None
    """Set when the principal must authorize the server first (the view is ``needs_auth``)."""

    @property
    def id(self) -> str:
        return self.router.id

    @property
    def spec(self) -> ServerSpec:
        return self.router.spec

    @property
    def state(self) -> ServerState:
        if self.bound is not None:
            return self.bound.handle.state
        return ServerState.DOWN if self.needed is None else ServerState.NEEDS_AUTH

    @property
    def tools_version(self) -> int:
        return 0 if self.bound is None else self.bound.handle.tools_version

    async def list_tools(self) -> tuple[mcp.types.Tool, ...]:
        if self.bound is None:
            await trio.lowlevel.checkpoint()
            return ()
        return await self.bound.handle.list_tools()

    def statistics(self) -> ServerStatistics:
        if self.bound is None:
            return attrs.evolve(self.router.statistics(), state=ServerState.DOWN, last_error=self.problem)
        return self.bound.handle.statistics()

    async def wait_state_change(self) -> ServerState:
        if self.bound is None:  # no connection: its state stays as it is
            await trio.sleep_forever()
        assert self.bound is not None
        return await self.bound.handle.wait_state_change()

    async def wait_for_state(self, *states: ServerState) -> ServerState:
        return await state_reached(self, states)

    async def reaches_parked(self, ticket: str) -> bool:
        return await self.router.reaches_parked(ticket)

    def binding(self) -> Binding:
        """This view as its principal's runs use it, and why they cannot yet (module docstring)."""
        return Binding(self, self.needed, self.problem if self.needed is None else None)

    async def poll_task(self, handle: TaskHandle, options: CallOptions = NO_OPTIONS) -> ToolOutcome:
        """Go on polling a stored task on this principal's connection (opened again if it was closed meanwhile)."""
        return await self._on_connection(lambda server: server.poll_task(handle, options))

    async def cancel_task(self, handle: TaskHandle) -> ToolOutcome:
        """Ask the server to stop a task, on this principal's connection (opened again if it was closed meanwhile).
        The whole of it, opening the connection again included, is shielded from the caller's cancelling and
        bounded in time (:func:`~yao_actors.tools.task_flow.bounded_cancel`)."""
        return await bounded_cancel(handle, lambda: self._on_connection(lambda server: server.cancel_task(handle)))

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None, options: CallOptions = NO_OPTIONS
    ) -> ToolOutcome:
        """The call, on this principal's connection (opened again if it was closed meanwhile); a call held open
        for the user's answers is answered on the connection that holds it."""
        if options.answers is not None and options.answers.ticket is not None:
            if self.bound is None:
                await trio.lowlevel.checkpoint()
                return ToolOutcome(error=LOST, kind=ErrorKind.TOOL_ERROR)
            return await self.bound.handle.call_tool(name, arguments, options)
        return await self._on_connection(lambda server: server.call_tool(name, arguments, options))

    async def _on_connection(self, work: Callable[[ServerHandle], Awaitable[ToolOutcome]]) -> ToolOutcome:
        """``work`` on this principal's connection (opened again if it was closed meanwhile)."""
        started = trio.current_time()
        if self.bound is None:
            await trio.lowlevel.checkpoint()
            return unavailable_outcome(self.spec, self.problem or "no connection", started=started)
        if self.router.connections.get(self.principal) is not self.bound:
            try:
                self.bound = await self.router.connection(self.principal)
            except AuthorizationError as error:
                return unavailable_outcome(self.spec, str(error), started=started)
            except StoreUnavailable as error:  # its tokens cannot be read now: an outcome, never an exception
                return unavailable_outcome(self.spec, self.router.store_out_of_reach(error), started=started)
        bound = self.bound
        bound.busy += 1
        try:
            return await work(bound.handle)
        finally:
            bound.busy -= 1
            bound.last_used = trio.current_time()

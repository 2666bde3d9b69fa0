"""What the conversation actor calls: one protocol for every tool server, and the options of one call.

Every server a run holds implements :class:`ToolServer` whole: a server actor's handle
(:class:`~yao_actors.tools.server_handle.ServerHandle`), or a principal's view of a server connected per principal
(:class:`~yao_actors.auth.principal_view.PrincipalView`). A caller never asks which one it holds: what differs
between them is in the methods, not in which methods there are. The router of a server connected per principal is
not one (it takes no calls): :mod:`yao_actors.tools.directory` binds it to a run's principal.

What one call needs besides its tool and arguments travels as one value, :class:`CallOptions`: where its
progress goes, the caller's deadline, and the user's answers to the questions an earlier call of it asked
(:class:`CallAnswers`). Whose tokens serve a call is not an option: a run's servers are bound to its principal
(:class:`~yao_actors.tools.directory.RunServers`) before it calls them.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import attrs
import mcp.types
import trio

from yao_actors.errors import AuthorizationRequired
from yao_actors.specs import ServerSpec
from yao_actors.store.task_handle import TaskHandle
from yao_actors.tools.input_requests import InputAnswer
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.task_handle import TaskWatch

ProgressFn = Callable[[float, float | None, str | None], Awaitable[None] | None]
"""Receives a running call's progress: ``(progress, total, message)``; a plain or an ``async`` function."""


class ServerState(enum.StrEnum):
    """Where a server actor is in its life."""

    STARTING = "starting"  #: connecting (first start or a restart)
    READY = "ready"  #: connected, serving calls
    RESTARTING = "restarting"  #: lost, waiting out its backoff before reconnecting
    DOWN = "down"  #: gave up after ``restart.max_restarts`` consecutive failures (only when that is set)
    NEEDS_AUTH = "needs_auth"  #: behind OAuth with no usable tokens: waits for a login, checking now and then
    STOPPED = "stopped"  #: the actor has ended


@attrs.frozen
class ServerStatistics:
    """A snapshot of a server actor.

    ``calls`` counts ``call_tool`` requests and ``errors`` those whose outcome
    was not a success; ``last_error`` says why the server last failed, with the
    last lines of a stdio server's stderr (which may hold secrets: for whoever
    runs the service), and ``last_error_kind`` only what kind of failure it was
    (:func:`~yao_actors.tools.server_status.loss_kind`), for readers that must not see the details.
    ``next_attempt_in`` is the seconds until a ``restarting`` server's next connection attempt (``None`` when
    none is waited for).
    """

    state: ServerState
    restarts: int
    in_flight: int
    queued: int
    calls: int
    errors: int
    last_error: str | None
    tools_version: int
    pid: int | None
    last_error_kind: str | None = None
    protocol: str | None = None
    """The MCP protocol version of the current (or last) connection: ``"2026-07-28"``, ``"2025-11-25"``, ..."""
    next_attempt_in: float | None = None
    tasks: str | None = None
    """The MCP tasks design the server offers on its current connection (``"2026-07-28"``: the tasks extension,
    ``"2025-11-25"``), ``None`` when it offers none."""


@attrs.frozen
class CallAnswers:
    """The user's answers to the questions an earlier call of a tool asked, and how they reach the server.

    A 2026-07-28 call is made again with the ``arguments`` it was first made with, ``responses`` (by the
    server's key) and its ``request_state``; a handshake-era call held open in a server actor (``ticket``) is
    given ``answer`` there.
    """

    arguments: Mapping[str, Any]
    responses: Mapping[str, Any] = attrs.field(factory=dict)
    request_state: str | None = None
    ticket: str | None = None
    answer: InputAnswer | None = None


#: What a call held open for the user's answer ends with when no live server actor holds it any more.
LOST = "Error: the tool could not complete: the call waiting for the user's answer is gone"


@attrs.frozen
class CallOptions:
    """The options of one ``call_tool``.

    ``progress`` receives the call's progress notifications (some may be dropped if it is slower than the
    server); ``deadline`` is the caller's own (an absolute ``trio.current_time()``, e.g. a turn's), kept in one
    cancel scope with the server's ``timeout``: when the caller's is the one that expires the call raises
    ``trio.TooSlowError``; ``answers`` make the call again (or resume it) with the user's answers.

    ``tasks``: the call may be answered with a task (the server goes on with it, the client polls): the handle
    is given to ``tasks.stored`` before the call waits on the task, and the call returns once, when the task
    has ended (or ``tasks.timeout`` passed). ``deadline`` bounds only the request that creates the task, not the
    wait for it (``tasks.waiting`` is entered around that wait). ``None``: a task answer is still followed to its
    end, unstored, within the default ``task_timeout``.

    An app's requests (MCP Apps) take the same way: ``method`` ``"resources/read"`` reads the resource whose URI is
    the call's name, ``"ping"`` pings the server; ``keep_result`` keeps the MCP result as the server sent it
    (``ToolOutcome.app_result``).
    """

    progress: ProgressFn | None = None
    deadline: float = math.inf
    answers: CallAnswers | None = None
    tasks: TaskWatch | None = None
    method: str = "tools/call"
    keep_result: bool = False


#: A call with no options.
NO_OPTIONS = CallOptions()


@attrs.frozen
class Binding:
    """A server connected per principal as one principal's run sees it (its view), and why that principal cannot use it yet (``needed``: they must
    authorize it first; ``problem``: it could not connect)."""

    server: ToolServer
    needed: AuthorizationRequired | None = None
    problem: str | None = None


class ToolSource(Protocol):
    """What a catalog reads of a server: its tools, and whether they may be offered now."""

    @property
    def id(self) -> str: ...

    @property
    def spec(self) -> ServerSpec: ...

    @property
    def state(self) -> ServerState: ...

    @property
    def tools_version(self) -> int: ...

    async def list_tools(self) -> tuple[mcp.types.Tool, ...]:
        """The server's catalog as last fetched (empty before the first)."""
        ...


class ToolServer(ToolSource, Protocol):
    """What a run (and the runtime) may ask of a tool server; every method is there on every server."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None, options: CallOptions = NO_OPTIONS
    ) -> ToolOutcome:
        """Call tool ``name``; a failure is an outcome, never an exception (but ``trio.TooSlowError`` when the
        caller's ``options.deadline`` expires first)."""
        ...

    async def poll_task(self, handle: TaskHandle, options: CallOptions = NO_OPTIONS) -> ToolOutcome:
        """Go on polling the stored task ``handle`` (after a restart, or on another worker) until it ends: its
        outcome, once; ``options.progress`` gets its status messages; ``options.deadline`` bounds only the wait for
        the server to be ready, the task's handle its own (``task_timeout``)."""
        ...

    async def cancel_task(self, handle: TaskHandle) -> ToolOutcome:
        """Ask the server to stop the task ``handle`` names (``tasks/cancel``), when nobody waits for it any more:
        shielded from the caller's cancelling and bounded in time; the server's answer, or why it could not be
        asked, as an outcome."""
        ...

    def statistics(self) -> ServerStatistics: ...

    async def wait_state_change(self) -> ServerState:
        """Wait for the next change of ``state``; return the state then."""
        ...

    async def wait_for_state(self, *states: ServerState) -> ServerState:
        """Return as soon as ``state`` is one of ``states`` (at once if it already is)."""
        ...

    async def reaches_parked(self, ticket: str) -> bool:
        """Whether a handshake-era call held open under ``ticket`` is held by a live server actor (here, or in a
        process sharing the store); ``StoreUnavailable`` when the store cannot say."""
        ...


async def state_reached(server: ToolServer, states: tuple[ServerState, ...]) -> ServerState:
    """``server``'s state as soon as it is one of ``states`` (at once if it already is), waiting on its changes:
    :meth:`ToolServer.wait_for_state` for a server whose state changes are :meth:`ToolServer.wait_state_change`."""
    while server.state not in states:
        await server.wait_state_change()
    await trio.lowlevel.checkpoint()
    return server.state

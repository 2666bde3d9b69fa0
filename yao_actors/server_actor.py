"""The MCP server actor: one long-lived, supervised task per configured server (DESIGN §2).

``await nursery.start(serve_mcp_server, spec)`` returns a :class:`ServerHandle`.
The actor task alone enters and exits its ``mcp.Client`` (the SDK requires enter
and exit in one task). Callers put requests in a bounded mailbox, each with a
one-shot reply channel (progress items, then the outcome). ``max_concurrency``
workers in the actor's own nursery take requests from it, so that many calls run
at once; the mailbox's buffer (``queue_size``) is the queue behind them, and a
request finding it full is answered ``server_unavailable`` ("queue full") at
once instead of waiting.

Supervision: when the connection is lost as a whole (the process exited, the
transport broke, the HTTP session failed), every in-flight call fails at once
with ``server_unavailable`` carrying the exit code (the server's last stderr
lines go to the log and ``ToolOutcome.stderr_tail``, and into the error the
model and clients see only with ``expose_stderr``: stderr may hold secrets); the actor reconnects with exponential backoff (``spec.restart``), and
calls made while it is down fail fast. After ``max_restarts`` consecutive lives
that failed (a life that answered a call, or lived ``backoff_max`` seconds,
resets the count) it stays down.

``call_tool`` never raises for a failed call: it returns a ``ToolOutcome``. A
JSON-RPC error the server answers is a ``tool_error`` (the server is up and
keeps its state); ``server_unavailable`` is for a lost connection, a request the
network failed, and anything else that went wrong on our side. A call's
deadline (``spec.timeout``) is a cancel scope in the caller's task; when it
fires, or when the caller is cancelled, the actor cancels the MCP request (the
server receives ``notifications/cancelled``) and the session stays usable.
"""

from __future__ import annotations

import collections
import enum
import logging
import math
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import attrs
import mcp
import mcp.types
import trio
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from yao_actors.config import ServerSpec
from yao_actors.errors import ErrorKind, ServerUnavailable
from yao_actors.results import ToolOutcome, parse_content
from yao_actors.transports import TRANSPORT_FAILURE, Link, open_client

logger = logging.getLogger(__name__)

ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]

#: Progress items buffered for one slow caller before newer ones are dropped (plus one slot for the outcome).
PROGRESS_BUFFER = 16
#: How long a call that saw its connection close waits for the reason (exit code, stderr).
LOSS_REPORT_WAIT = 1.0
#: Most ``tools/list`` pages read for one catalog (a server that pages forever cannot hang the actor).
MAX_CATALOG_PAGES = 1000


class ServerState(enum.StrEnum):
    """Where a server actor is in its life."""

    STARTING = "starting"  #: connecting (first start or a restart)
    READY = "ready"  #: connected, serving calls
    RESTARTING = "restarting"  #: lost, waiting out its backoff before reconnecting
    DOWN = "down"  #: gave up after ``max_restarts`` consecutive failures
    STOPPED = "stopped"  #: the actor has ended


@attrs.frozen
class ServerStatistics:
    """A snapshot of a server actor.

    ``calls`` counts ``call_tool`` requests and ``errors`` those whose outcome
    was not a success; ``last_error`` says why the server last failed.
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


@attrs.frozen
class _Progress:
    progress: float
    total: float | None
    message: str | None


@attrs.define(eq=False)
class _CallRequest:
    """One ``tools/call`` on its way to the actor, and its way back: progress items, then the outcome.

    ``scope`` lets the caller abandon the call. The way back is an event the
    caller waits on, not a memory channel: a channel per call costs more than the
    rest of the actor's bookkeeping together. It is bounded all the same: at most
    ``PROGRESS_BUFFER`` progress items wait, newer ones are dropped.
    """

    name: str
    arguments: dict[str, Any]
    started: float
    wants_progress: bool
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    outcome: ToolOutcome | None = attrs.field(default=None, init=False)
    progress: collections.deque[_Progress] = attrs.field(factory=collections.deque, init=False)
    _news: trio.Event = attrs.field(factory=trio.Event, init=False)

    def answer(self, outcome: ToolOutcome) -> None:
        """Deliver the outcome (the first one counts); a caller that gave up is not waiting for it."""
        if self.outcome is None:
            self.outcome = outcome
            self._news.set()

    def report(self, item: _Progress) -> None:
        """Pass a progress item on, unless ``PROGRESS_BUFFER`` items already wait for a slow caller."""
        if len(self.progress) < PROGRESS_BUFFER:
            self.progress.append(item)
            self._news.set()

    async def wait_news(self) -> None:
        """Wait until a progress item or the outcome has arrived since the last wait."""
        await self._news.wait()
        self._news = trio.Event()


@attrs.define(eq=False)
class _Life:
    """One connection of the actor: its client, its health report, what it left unanswered."""

    client: mcp.Client
    link: Link
    catalog_changed: trio.Event
    answered: bool = False
    unanswered: list[_CallRequest] = attrs.field(factory=list)


@attrs.define(eq=False)
class ServerHandle:
    """What others hold to use a server actor; made by :func:`serve_mcp_server`, never directly.

    ``state`` and ``tools_version`` may be read at any time; the methods may be
    called from any task of the same Trio run.
    """

    spec: ServerSpec
    _mailbox: trio.MemorySendChannel[_CallRequest] = attrs.field(alias="mailbox")
    _inbox: trio.MemoryReceiveChannel[_CallRequest] = attrs.field(alias="inbox")
    _nursery: trio.Nursery = attrs.field(alias="nursery")
    state: ServerState = attrs.field(default=ServerState.STARTING, init=False)
    tools_version: int = attrs.field(default=0, init=False)
    _catalog: tuple[mcp.types.Tool, ...] = attrs.field(default=(), init=False)
    _state_changed: trio.Event = attrs.field(factory=trio.Event, init=False)
    _catalog_changed: trio.Event = attrs.field(factory=trio.Event, init=False)
    _restarts: int = attrs.field(default=0, init=False)
    _in_flight: int = attrs.field(default=0, init=False)
    _calls: int = attrs.field(default=0, init=False)
    _errors: int = attrs.field(default=0, init=False)
    _last_error: str | None = attrs.field(default=None, init=False)
    _pid: int | None = attrs.field(default=None, init=False)
    _fail_fast_scope: trio.CancelScope = attrs.field(factory=trio.CancelScope, init=False)
    _last_loss: Link | None = attrs.field(default=None, init=False)

    @property
    def id(self) -> str:
        return self.spec.id

    async def list_tools(self) -> tuple[mcp.types.Tool, ...]:
        """The server's full catalog (every ``tools/list`` page) as last fetched; empty before the first."""
        await trio.lowlevel.checkpoint()
        return self._catalog

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None, *, progress: ProgressFn | None = None
    ) -> ToolOutcome:
        """Call tool ``name`` under the spec's deadline; a failure is an outcome, never an exception.

        ``progress`` receives the call's progress notifications (some may be
        dropped if it is slower than the server). Raises only ``trio.Cancelled``;
        the server then receives ``notifications/cancelled`` for the request.
        """
        outcome = await self._call(name, arguments, progress)
        self._calls += 1
        if not outcome.ok:
            self._errors += 1
        return outcome

    def statistics(self) -> ServerStatistics:
        return ServerStatistics(
            state=self.state,
            restarts=self._restarts,
            in_flight=self._in_flight,
            queued=self._mailbox.statistics().current_buffer_used,
            calls=self._calls,
            errors=self._errors,
            last_error=self._last_error,
            tools_version=self.tools_version,
            pid=self._pid,
        )

    async def wait_state_change(self) -> ServerState:
        """Wait for the next change of ``state``; return the state then."""
        await self._state_changed.wait()
        return self.state

    async def wait_catalog_change(self) -> int:
        """Wait until the catalog is next fetched (a restart, or ``tools/list_changed``); return ``tools_version``."""
        await self._catalog_changed.wait()
        return self.tools_version

    async def wait_for_state(self, *states: ServerState) -> ServerState:
        """Return as soon as ``state`` is one of ``states`` (at once if it already is)."""
        while self.state not in states:
            await self.wait_state_change()
        await trio.lowlevel.checkpoint()
        return self.state

    # ----------------------------------------------------------------- caller side

    async def _call(self, name: str, arguments: dict[str, Any] | None, progress: ProgressFn | None) -> ToolOutcome:
        started = trio.current_time()
        request = _CallRequest(name, dict(arguments or {}), started, progress is not None)
        with trio.move_on_after(self.spec.timeout):
            try:
                self._mailbox.send_nowait(request)
            except trio.WouldBlock:
                return self._unavailable("queue full", started=started)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return self._unavailable("the server actor has stopped", started=started)
            try:
                return await _await_outcome(request, progress)
            finally:
                if request.outcome is None:  # timed out or cancelled: the server is told to stop
                    request.scope.cancel()
        return ToolOutcome(
            error=f"tool {name!r} on server {self.id!r} timed out after {self.spec.timeout:g}s",
            kind=ErrorKind.TIMEOUT,
            duration=trio.current_time() - started,
        )

    # ----------------------------------------------------------------- actor side

    def _set_state(self, state: ServerState) -> None:
        if state is self.state:
            return
        self.state = state
        self._state_changed.set()
        self._state_changed = trio.Event()

    def _unavailable(self, reason: str, *, started: float, link: Link | None = None) -> ToolOutcome:
        """``server_unavailable``: the exit code and state for everyone, the stderr tail only if exposed."""
        stderr_tail = link.stderr_tail() if link else ""
        error = ServerUnavailable(
            self.id,
            reason,
            exit_code=link.exit_code if link else None,
            stderr_tail=stderr_tail if self.spec.expose_stderr else "",
        )
        return ToolOutcome(
            error=str(error),
            kind=ErrorKind.SERVER_UNAVAILABLE,
            duration=trio.current_time() - started,
            stderr_tail=stderr_tail,
        )

    def _down_outcome(self, request: _CallRequest) -> ToolOutcome:
        link = self._last_loss
        reason = f"{self.state.value} after: {link.reason}" if link else self.state.value
        return self._unavailable(reason, started=request.started, link=link)

    def _start_failing_fast(self) -> None:
        """Answer every request at once with ``server_unavailable`` until a life serves calls again."""
        if self._fail_fast_scope.cancel_called:
            self._fail_fast_scope = trio.CancelScope()
            self._nursery.start_soon(self._fail_fast, self._fail_fast_scope)

    async def _fail_fast(self, scope: trio.CancelScope) -> None:
        with scope:
            async for request in self._inbox:
                request.answer(self._down_outcome(request))

    async def _work(self, life: _Life) -> None:
        """One of ``max_concurrency`` workers of a life: take requests from the mailbox, one at a time."""
        async for request in self._inbox:
            await self._run_call(life, request)

    async def _run_call(self, life: _Life, request: _CallRequest) -> None:
        outcome: ToolOutcome | None = None
        self._in_flight += 1
        try:
            with request.scope:
                outcome = await self._execute(life, request)
        finally:
            self._in_flight -= 1
            if outcome is not None:
                request.answer(outcome)
            elif not request.scope.cancelled_caught:  # the life ended under the call: answered once the reason is known
                life.unanswered.append(request)

    async def _execute(self, life: _Life, request: _CallRequest) -> ToolOutcome:
        try:
            result = await life.client.call_tool(
                request.name,
                request.arguments,
                progress_callback=_progress_forwarder(request) if request.wants_progress else None,
            )
        except MCPError as exc:
            return await self._protocol_error(life, request, exc)
        except Exception as exc:
            logger.warning("server %r: tools/call %r failed", self.id, request.name, exc_info=True)
            return self._unavailable(f"{type(exc).__name__}: {exc}", started=request.started)
        life.answered = True
        duration = trio.current_time() - request.started
        parsed = parse_content(result.content)
        if result.is_error:
            text = "\n".join(block.text for block in result.content if isinstance(block, mcp.types.TextContent))
            return ToolOutcome(result=parsed, error=text or "tool error", kind=ErrorKind.TOOL_ERROR, duration=duration)
        return ToolOutcome(result=parsed, duration=duration)

    async def _protocol_error(self, life: _Life, request: _CallRequest, exc: MCPError) -> ToolOutcome:
        """Classify a JSON-RPC error: the connection closed, the network failed the request, or the server answered.

        An error the server answered (whatever its code) is the tool's failure, not the server's: the server
        is up and serving, so its state stays as it is.
        """
        if exc.code == mcp.types.CONNECTION_CLOSED:
            # The connection ended under the call: wait for the transport's report of why.
            with trio.move_on_after(LOSS_REPORT_WAIT):
                await life.link.lost.wait()
            life.link.lose("the connection to the server closed")
            await trio.sleep_forever()  # the life is being cancelled; _run_call reports the loss
        if exc.code == TRANSPORT_FAILURE:
            return self._unavailable(f"the request failed: {exc.error.message}", started=request.started)
        life.answered = True
        return ToolOutcome(
            error=f"{exc.error.message} (JSON-RPC error {exc.code})",
            kind=ErrorKind.TOOL_ERROR,
            duration=trio.current_time() - request.started,
        )

    async def _fetch_catalog(self, client: mcp.Client) -> None:
        tools: list[mcp.types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_CATALOG_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        self._catalog = tuple(tools)
        self.tools_version += 1
        self._catalog_changed.set()
        self._catalog_changed = trio.Event()

    async def _refresh_catalog(self, life: _Life) -> None:
        """Fetch the catalog again whenever the server announces ``tools/list_changed``."""
        while True:
            await life.catalog_changed.wait()
            life.catalog_changed = trio.Event()
            try:
                await self._fetch_catalog(life.client)
            except MCPError as exc:
                logger.warning("server %r: refreshing the catalog failed: %s", self.id, exc.error.message)

    async def _live(self, announce: Callable[[], None]) -> bool:
        """One life: connect, serve until the connection is lost, fail what it left unanswered. Whether healthy."""
        link = Link()
        lives: list[_Life] = []
        self._set_state(ServerState.STARTING)
        born = trio.current_time()
        try:
            with trio.CancelScope(deadline=born + self.spec.connect_timeout) as scope:
                try:
                    await self._connect_and_serve(link, scope, lives, announce)
                except* Exception as group:
                    link.lose("; ".join(f"{type(exc).__name__}: {exc}" for exc in _leaves(group)))
            if scope.cancelled_caught:
                link.lose(f"no connection within {self.spec.connect_timeout:g}s")
            self._lost(link)
            logger.warning("%s", self._last_error)
        finally:
            reason = link.reason or "the server actor has stopped"
            for life in lives:
                for request in life.unanswered:
                    request.answer(self._unavailable(reason, started=request.started, link=link))
        answered = any(life.answered for life in lives)
        return answered or trio.current_time() - born >= self.spec.restart.backoff_max

    async def _connect_and_serve(
        self, link: Link, scope: trio.CancelScope, lives: list[_Life], announce: Callable[[], None]
    ) -> None:
        """Connect and fetch the catalog within ``scope``'s deadline, then serve calls until ``link`` is lost."""
        catalog_changed = trio.Event()

        async def on_message(message: Any) -> None:
            if isinstance(message, mcp.types.ToolListChangedNotification):
                catalog_changed.set()

        async with open_client(self.spec, link=link, message_handler=on_message) as client:
            self._pid = link.pid
            await self._fetch_catalog(client)
            scope.deadline = math.inf
            async with trio.open_nursery() as nursery:
                life = _Life(client, link, catalog_changed)
                lives.append(life)
                nursery.start_soon(self._refresh_catalog, life)
                for _ in range(self.spec.max_concurrency):
                    nursery.start_soon(self._work, life)
                self._fail_fast_scope.cancel()
                try:
                    self._set_state(ServerState.READY)
                    announce()
                    await link.lost.wait()
                finally:
                    self._start_failing_fast()  # even while the session fails under us
                self._lost(link)
                scope.cancel()

    def _lost(self, link: Link) -> None:
        """The connection of ``link`` is gone: fail calls fast, and remember why."""
        self._start_failing_fast()
        self._last_loss = link
        self._last_error = str(
            ServerUnavailable(self.id, link.reason or "", exit_code=link.exit_code, stderr_tail=link.stderr_tail())
        )
        self._set_state(ServerState.RESTARTING)

    async def _supervise(self, announce: Callable[[], None]) -> None:
        """Live, and after each lost life back off and reconnect, until ``max_restarts`` failures in a row."""
        policy = self.spec.restart
        failures = 0
        while True:
            healthy = await self._live(announce)
            failures = 1 if healthy else failures + 1
            if failures > policy.max_restarts:
                self._set_state(ServerState.DOWN)
                announce()
                await trio.sleep_forever()
            self._set_state(ServerState.RESTARTING)
            announce()
            await trio.sleep(min(policy.backoff_initial * 2 ** (failures - 1), policy.backoff_max))
            self._restarts += 1


async def _await_outcome(request: _CallRequest, progress: ProgressFn | None) -> ToolOutcome:
    """The caller's side of a call: pass progress items to ``progress`` until the outcome arrives."""
    while request.outcome is None:
        await request.wait_news()
        while request.progress:
            item = request.progress.popleft()
            if progress is not None:
                await progress(item.progress, item.total, item.message)
    return request.outcome


def _progress_forwarder(request: _CallRequest) -> ProgressFnT:
    """A progress callback that never blocks the session: it drops items a slow caller has no room for."""

    async def forward(progress: float, total: float | None, message: str | None) -> None:
        request.report(_Progress(progress, total, message))

    return forward


def _leaves(group: BaseExceptionGroup[Exception]) -> Iterator[Exception]:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc


async def serve_mcp_server(
    spec: ServerSpec, *, task_status: trio.TaskStatus[ServerHandle] = trio.TASK_STATUS_IGNORED
) -> None:
    """Run the actor for ``spec`` until cancelled; ``task_status.started(handle)`` after the first connect attempt.

    The first attempt is bounded by ``spec.connect_timeout``; a server that
    fails to start is reported through its handle (``state``, ``last_error``)
    and retried in the background.
    """
    send, receive = trio.open_memory_channel[_CallRequest](spec.queue_size)
    with receive:
        async with trio.open_nursery() as nursery:
            handle = ServerHandle(spec, mailbox=send, inbox=receive, nursery=nursery)
            announced = False

            def announce() -> None:
                nonlocal announced
                if not announced:
                    announced = True
                    task_status.started(handle)

            try:
                nursery.start_soon(handle._fail_fast, handle._fail_fast_scope)
                await handle._supervise(announce)
            finally:
                handle._set_state(ServerState.STOPPED)

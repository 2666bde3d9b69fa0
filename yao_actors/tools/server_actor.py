"""The MCP server actor: one long-lived, supervised task per configured server (DESIGN §2).

``handle = await nursery.start(serve_mcp_server, spec)`` starts the actor and
reports its :class:`~yao_actors.tools.server_handle.ServerHandle`. The actor — a
private :class:`_ServerActor` — owns the inbox's receive side, its own nursery,
the connection and its supervision; the handle only sends requests and reads
the status. The actor task alone enters and exits its ``mcp.Client`` (the SDK
requires enter and exit in one task). ``max_concurrency`` workers in the actor's
nursery take requests from the inbox, so that many calls run at once (this is
the one place that limit is enforced); the inbox's buffer (``queue_size``) is
the queue behind them, and a request finding it full is answered
``server_unavailable`` ("queue full") at once instead of waiting.

``connect`` (default :func:`~yao_actors.transports.open_client`) is how the
actor reaches its server; tests pass their own, as one passes ``transport=`` to
an httpx client.

Supervision: when the connection is lost as a whole (the process exited, the
transport broke, the HTTP session failed), every in-flight call fails at once
with ``server_unavailable`` carrying the exit code (the server's last stderr
lines go to the log and ``ToolOutcome.stderr_tail``, and into the error the
model and clients see only with ``expose_stderr``: stderr may hold secrets); the
actor reconnects with exponential backoff (``spec.restart``), and
calls made while it is down fail fast. After ``max_restarts`` consecutive
connections that failed (one that answered a call, or lived ``backoff_max``
seconds, resets the count) it stays down.

A server behind OAuth with no usable tokens (its connector raised an
:class:`~yao_actors.errors.AuthorizationError`) is not failing: the actor is
``needs_auth``, fails calls fast with why, and looks again every
``restart.backoff_initial`` seconds, without counting failures, until someone logs in.

``call_tool`` never raises for a failed call: it returns a ``ToolOutcome``. A
JSON-RPC error the server answers is a ``tool_error`` (the server is up and
keeps its state); ``server_unavailable`` is for a lost connection, a request the
network failed, and anything else that went wrong on our side.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import mcp
import mcp.types
import trio
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from yao_actors.errors import AuthorizationError, ErrorKind, exception_leaves, server_unavailable_message
from yao_actors.observability import tracing
from yao_actors.observability.metrics import SERVER_RESTARTS, SERVER_UP, labelled
from yao_actors.specs import ServerSpec
from yao_actors.tools.results import ToolOutcome, parse_content
from yao_actors.tools.server_handle import (
    PROGRESS_BUFFER,
    CallRequest,
    ProgressItem,
    ServerHandle,
    ServerState,
    ServerStatistics,
    ServerStatus,
    unavailable_outcome,
)
from yao_actors.transports import TRANSPORT_FAILURE, Connector, Link, open_client

logger = logging.getLogger(__name__)

#: How long a call that saw its connection close waits for the reason (exit code, stderr).
LOSS_REPORT_WAIT = 1.0
#: Most ``tools/list`` pages read for one catalog (a server that pages forever cannot hang the actor).
MAX_CATALOG_PAGES = 1000


@attrs.define(eq=False)
class _Connection:
    """One connection of the actor: its client once connected, its health report, what it left unanswered.

    The supervisor makes it before connecting, so that whatever way the
    connection ends — refused, timed out, lost while serving — it can still
    answer the requests the connection took and never finished.
    """

    link: Link = attrs.field(factory=Link)
    client: mcp.Client | None = None
    catalog_changed: trio.Event = attrs.field(factory=trio.Event)
    answered: bool = False
    unanswered: list[CallRequest] = attrs.field(factory=list)


@attrs.define(eq=False)
class _ServerActor:
    """The actor's side: the inbox's receive end, the actor's nursery, the connection and its supervision."""

    spec: ServerSpec
    connect: Connector
    inbox: trio.MemoryReceiveChannel[CallRequest]
    nursery: trio.Nursery
    status: ServerStatus
    fail_fast_scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    #: Why the last connection could not be authorized (OAuth), or ``None``.
    unauthorized: str | None = None

    @property
    def id(self) -> str:
        return self.spec.id

    # ----------------------------------------------------------------- failing fast while there is no connection

    def start_failing_fast(self) -> None:
        """Answer every request at once with ``server_unavailable`` until a connection serves calls again.

        While no connection serves, one task drains the inbox and answers each request with why the
        server is down, so a caller never waits out a backoff or a reconnect. A connection that comes
        up cancels that task's scope (its workers take the inbox over); losing it starts a fresh one.
        Idempotent: a scope not yet cancelled means the fail-fast task is already running.
        """
        if self.fail_fast_scope.cancel_called:
            self.fail_fast_scope = trio.CancelScope()
            self.nursery.start_soon(self.fail_fast, self.fail_fast_scope)

    async def fail_fast(self, scope: trio.CancelScope) -> None:
        with scope:
            async for request in self.inbox:
                request.answer(self._down_outcome(request))

    def set_state(self, state: ServerState) -> None:
        """Change the published state; log it and keep ``yao_mcp_server_up`` in step."""
        if state is self.status.state:
            return
        previous = self.status.state
        self.status.set_state(state)
        labelled(SERVER_UP, self.id).set(1 if state is ServerState.READY else 0)
        level = logging.WARNING if state is ServerState.DOWN else logging.INFO
        logger.log(
            level,
            "server %r: %s → %s",
            self.id,
            previous.value,
            state.value,
            extra={"server": self.id, "state": state.value, "restarts": self.status.restarts},
        )

    def _down_outcome(self, request: CallRequest) -> ToolOutcome:
        link = self.status.last_loss
        reason = f"{self.status.state.value} after: {link.reason}" if link else self.status.state.value
        return unavailable_outcome(self.spec, reason, started=request.started, link=link)

    # ----------------------------------------------------------------- serving calls

    async def work(self, connection: _Connection) -> None:
        """One of ``max_concurrency`` workers of a connection: take requests from the inbox, one at a time."""
        async for request in self.inbox:
            await self._run_call(connection, request)
            del request  # waiting for the next one must not keep this one's outcome (a result of megabytes) alive

    async def _run_call(self, connection: _Connection, request: CallRequest) -> None:
        outcome: ToolOutcome | None = None
        self.status.call_started()
        try:
            with request.scope, tracing.attached(request.trace_context):
                outcome = await self._execute(connection, request)
        finally:
            self.status.call_ended()
            if outcome is not None:
                request.answer(outcome)
            elif not request.scope.cancelled_caught:
                # The connection ended under the call: it is answered once the reason is known.
                connection.unanswered.append(request)

    async def _execute(self, connection: _Connection, request: CallRequest) -> ToolOutcome:
        assert connection.client is not None
        try:
            result = await connection.client.call_tool(
                request.name,
                request.arguments,
                progress_callback=_progress_forwarder(request) if request.wants_progress else None,
            )
        except MCPError as exc:
            return await self._protocol_error(connection, request, exc)
        except Exception as exc:
            logger.warning(
                "server %r: tools/call %r failed", self.id, request.name, exc_info=True, extra={"server": self.id}
            )
            return unavailable_outcome(self.spec, f"{type(exc).__name__}: {exc}", started=request.started)
        connection.answered = True
        duration = trio.current_time() - request.started
        parsed = parse_content(result.content)
        if result.is_error:
            text = "\n".join(block.text for block in result.content if isinstance(block, mcp.types.TextContent))
            return ToolOutcome(result=parsed, error=text or "tool error", kind=ErrorKind.TOOL_ERROR, duration=duration)
        return ToolOutcome(result=parsed, duration=duration)

    async def _protocol_error(self, connection: _Connection, request: CallRequest, exc: MCPError) -> ToolOutcome:
        """Classify a JSON-RPC error: the connection closed, the network failed the request, or the server answered.

        An error the server answered (whatever its code) is the tool's failure, not the server's: the server
        is up and serving, so its state stays as it is.
        """
        if exc.code == mcp.types.CONNECTION_CLOSED:
            # The connection ended under the call: wait for the transport's report of why.
            with trio.move_on_after(LOSS_REPORT_WAIT):
                await connection.link.lost.wait()
            connection.link.mark_lost("the connection to the server closed")
            await trio.sleep_forever()  # the connection is being cancelled; _run_call reports the loss
        if exc.code == TRANSPORT_FAILURE:
            return unavailable_outcome(self.spec, f"the request failed: {exc.error.message}", started=request.started)
        connection.answered = True
        return ToolOutcome(
            error=f"{exc.error.message} (JSON-RPC error {exc.code})",
            kind=ErrorKind.TOOL_ERROR,
            duration=trio.current_time() - request.started,
        )

    # ----------------------------------------------------------------- the catalog

    async def fetch_catalog(self, client: mcp.Client) -> None:
        tools: list[mcp.types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_CATALOG_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        self.status.set_catalog(tuple(tools))

    async def refresh_catalog(self, connection: _Connection) -> None:
        """Fetch the catalog again whenever the server announces ``tools/list_changed``."""
        assert connection.client is not None
        while True:
            await connection.catalog_changed.wait()
            connection.catalog_changed = trio.Event()
            try:
                await self.fetch_catalog(connection.client)
            except MCPError as exc:
                logger.warning(
                    "server %r: refreshing the catalog failed: %s",
                    self.id,
                    exc.error.message,
                    extra={"server": self.id},
                )

    # ----------------------------------------------------------------- one connection, and supervision

    async def serve_one_connection(self, report_started: Callable[[], None]) -> bool:
        """Connect, serve until the connection is lost, fail what it left unanswered; whether it was healthy."""
        connection = _Connection()
        link = connection.link
        waiting_for_login = self.status.state is ServerState.NEEDS_AUTH
        if not waiting_for_login:
            self.set_state(ServerState.STARTING)
        born = trio.current_time()
        try:
            with trio.CancelScope(deadline=born + self.spec.connect_timeout) as scope:
                try:
                    await self._connect_and_serve(connection, scope, report_started)
                except* Exception as group:
                    leaves = exception_leaves(group)
                    unauthorized = [str(exc) for exc in leaves if isinstance(exc, AuthorizationError)]
                    self.unauthorized = unauthorized[0] if unauthorized else None
                    link.unauthorized = bool(unauthorized)
                    link.mark_lost(unauthorized[0] if unauthorized else _describe(leaves))
            if scope.cancelled_caught:
                link.mark_lost(f"no connection within {self.spec.connect_timeout:g}s")
            self._lost(link)
            if not (waiting_for_login and self.unauthorized):  # said once, not at every look at the store
                logger.warning(
                    "%s",
                    self.status.last_error,
                    extra={"server": self.id, "exit_code": link.exit_code, "stderr_tail": link.stderr_tail()},
                )
        finally:
            # Also when the actor itself is cancelled: no caller waits forever for an answer.
            reason = link.reason or "the server actor has stopped"
            for request in connection.unanswered:
                request.answer(unavailable_outcome(self.spec, reason, started=request.started, link=link))
        return connection.answered or trio.current_time() - born >= self.spec.restart.backoff_max

    async def _connect_and_serve(
        self, connection: _Connection, scope: trio.CancelScope, report_started: Callable[[], None]
    ) -> None:
        """Connect and fetch the catalog within ``scope``'s deadline, then serve calls until the link is lost."""

        async def on_message(message: Any) -> None:
            if isinstance(message, mcp.types.ToolListChangedNotification):
                connection.catalog_changed.set()

        link = connection.link
        async with self.connect(self.spec, link=link, message_handler=on_message) as client:
            connection.client = client
            self.status.connected(link.pid)
            await self.fetch_catalog(client)
            scope.deadline = math.inf
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.refresh_catalog, connection)
                for _ in range(self.spec.max_concurrency):
                    nursery.start_soon(self.work, connection)
                # The workers now take the requests; the fail-fast task stops answering them.
                self.fail_fast_scope.cancel()
                try:
                    self.set_state(ServerState.READY)
                    report_started()
                    await link.lost.wait()
                finally:
                    # Fail fast at once, even while the session is still failing under us: requests
                    # arriving now must not wait in the inbox for a connection that is gone.
                    self.start_failing_fast()
                self._lost(link)
                scope.cancel()

    def _lost(self, link: Link) -> None:
        """The connection of ``link`` is gone: fail calls fast, and remember why."""
        self.start_failing_fast()
        self.status.lost(
            link,
            server_unavailable_message(
                self.id, link.reason or "", exit_code=link.exit_code, stderr_tail=link.stderr_tail()
            ),
        )
        self.set_state(ServerState.NEEDS_AUTH if self.unauthorized else ServerState.RESTARTING)

    async def supervise(self, report_started: Callable[[], None]) -> None:
        """Serve a connection, and after each one is lost back off and reconnect, until ``max_restarts`` failures.

        Between connections the fail-fast task answers every request at once, so
        callers never wait out a backoff; a healthy connection resets the count
        of failures, so a server that crashes once a day is restarted every time.
        """
        policy = self.spec.restart
        failures = 0
        while True:
            self.unauthorized = None
            healthy = await self.serve_one_connection(report_started)
            if self.unauthorized is not None:
                # Not a failure of the server: it waits for a login (someone may log in from elsewhere), looking
                # at the store every restart.backoff_initial seconds; not counted, not backed off.
                self.set_state(ServerState.NEEDS_AUTH)
                report_started()
                await trio.sleep(policy.backoff_initial)
                continue
            failures = 1 if healthy else failures + 1
            if failures > policy.max_restarts:
                self.set_state(ServerState.DOWN)
                report_started()
                await trio.sleep_forever()
            self.set_state(ServerState.RESTARTING)
            report_started()
            delay = min(policy.backoff_initial * 2 ** (failures - 1), policy.backoff_max)
            logger.info(
                "server %r: reconnecting in %gs (failure %d of at most %d in a row)",
                self.id,
                delay,
                failures,
                policy.max_restarts,
                extra={"server": self.id},
            )
            await trio.sleep(delay)
            self.status.restarted()
            labelled(SERVER_RESTARTS, self.id).inc()


def _describe(leaves: Sequence[BaseException]) -> str:
    return "; ".join(f"{type(exc).__name__}: {exc}" for exc in leaves)


def _progress_forwarder(request: CallRequest) -> ProgressFnT:
    """A progress callback that never blocks the session: it drops items a slow caller has no room for."""

    async def forward(progress: float, total: float | None, message: str | None) -> None:
        request.report(ProgressItem(progress, total, message))

    return forward


async def serve_mcp_server(
    spec: ServerSpec,
    *,
    connect: Connector = open_client,
    task_status: trio.TaskStatus[ServerHandle] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the actor for ``spec`` until cancelled; ``task_status.started(handle)`` after the first connect attempt.

    The first attempt is bounded by ``spec.connect_timeout``; a server that
    fails to start is reported through its handle (``state``, ``last_error``)
    and retried in the background.
    """
    send, receive = trio.open_memory_channel[CallRequest](spec.queue_size)
    status = ServerStatus()
    handle = ServerHandle._create(spec, send, status)
    with receive:
        async with trio.open_nursery() as nursery:
            actor = _ServerActor(spec, connect, receive, nursery, status)
            labelled(SERVER_UP, spec.id).set(0)
            labelled(SERVER_RESTARTS, spec.id).inc(0)  # shown at 0 from the start
            started = False

            def report_started() -> None:
                # The first outcome of the first connection (ready, or failed and now restarting)
                # starts the caller; later ones are the supervisor's business.
                nonlocal started
                if not started:
                    started = True
                    task_status.started(handle)

            try:
                nursery.start_soon(actor.fail_fast, actor.fail_fast_scope)
                await actor.supervise(report_started)
            finally:
                actor.set_state(ServerState.STOPPED)


__all__ = ["PROGRESS_BUFFER", "ServerHandle", "ServerState", "ServerStatistics", "serve_mcp_server"]

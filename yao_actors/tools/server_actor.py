"""The MCP server actor: one long-lived, supervised task per configured server.

``handle = await nursery.start(serve_mcp_server, spec)`` starts the actor and
reports its :class:`~yao_actors.tools.server_handle.ServerHandle`. The actor — a
private :class:`_ServerActor` — owns the inbox's receive side, its own nursery,
the connection and its supervision; the handle only sends requests and reads
the status. The actor task alone enters and exits its ``mcp.Client`` (the SDK
requires enter and exit in one task). ``max_concurrency`` workers in the actor's
nursery take requests from the inbox, so that many calls run at once (this is
the one place that limit is enforced); the inbox's buffer (``queue_size``) is
the queue behind them, and a call finding it full is answered
``server_unavailable`` ("queue full") at once instead of waiting (a task's poll, which is in no hurry, waits for
room).

``connect`` (default :func:`~yao_actors.transports.open_client`) is how the
actor reaches its server; tests pass their own, as one passes ``transport=`` to
an httpx client.

Supervision: when the connection is lost as a whole (the process exited, the
transport broke, the HTTP session failed), every in-flight call fails at once
with ``server_unavailable`` carrying the exit code (the server's last stderr
lines go to the log and ``ToolOutcome.stderr_tail``, and into the error the
model and clients see only with ``expose_stderr``: stderr may hold secrets); the
actor reconnects with exponential backoff capped at ``restart.backoff_max`` (``spec.restart``), for as long as
it runs, and calls made while it is down fail fast; the status says when the next attempt is. Only with
``restart.max_restarts`` set does it give up: after that many consecutive connections that failed (one that
answered a call, or lived ``backoff_max`` seconds, resets the count) it stays down.

The connection speaks the spec's ``protocol`` (:func:`~yao_actors.transports.open_client`); the actor keeps the
server's discover answer across reconnects, and on a 2026-07-28 connection follows the catalog through a
``subscriptions/listen`` stream. A server that asks the user during a call is answered by the actor's input
handler, or else the call ends ``input_required`` (:class:`~yao_actors.tools.input_requests.InputRound`): made
again later with the answers (2026-07-28), or held open here until they come (handshake-era) — from this process,
or from another sharing the store (:mod:`~yao_actors.tools.parked_relay`).

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

from yao_actors.errors import AuthorizationError, exception_leaves, server_unavailable_message
from yao_actors.observability import tracing
from yao_actors.observability.metrics import SERVER_PROTOCOL, SERVER_RESTARTS, SERVER_UP, labelled
from yao_actors.specs import ServerSpec
from yao_actors.tools.call_request import PROGRESS_BUFFER, CallRequest
from yao_actors.tools.input_requests import InputHandler
from yao_actors.tools.parked_relay import ParkedRelay
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.server_calls import Connection, execute_call
from yao_actors.tools.server_catalog import ServerCatalog
from yao_actors.tools.server_handle import ServerHandle, unavailable_outcome
from yao_actors.tools.server_questions import CALLING, ServerQuestions
from yao_actors.tools.server_status import ServerStatus
from yao_actors.tools.task_calls import execute_task_op
from yao_actors.tools.task_start import client_extensions, offered_design
from yao_actors.tools.tool_server import ServerState, ServerStatistics
from yao_actors.transports import Connector, Link, is_modern, open_client

logger = logging.getLogger(__name__)


@attrs.define(eq=False)
class _ServerActor:
    """The actor's side: the inbox's receive end, the actor's nursery, the connection and its supervision."""

    spec: ServerSpec
    connect: Connector
    inbox: trio.MemoryReceiveChannel[CallRequest]
    nursery: trio.Nursery
    status: ServerStatus
    questions: ServerQuestions
    """How it answers what its server asks the user (:mod:`~yao_actors.tools.server_questions`)."""
    fail_fast_scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    discover: mcp.types.DiscoverResult | None = None
    """The server's ``server/discover`` answer, kept across reconnects (a reconnect does not probe again)."""
    #: Why the last connection could not be authorized (OAuth), or ``None``.
    unauthorized: str | None = None
    #: Whether this actor's state is the server's ``yao_mcp_server_up`` (not a principal's connection's: the
    #: router of an ``identity: "principal"`` server owns that label).
    publish_up: bool = True
    catalog: ServerCatalog = attrs.field(init=False)
    """Its catalog, read and refreshed (:mod:`~yao_actors.tools.server_catalog`)."""

    @catalog.default
    def _catalog(self) -> ServerCatalog:
        return ServerCatalog(self.spec.id, self.status)

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
        if self.publish_up:
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

    async def work(self, connection: Connection) -> None:
        """One of ``max_concurrency`` workers of a connection: take requests from the inbox, one at a time."""
        async for request in self.inbox:
            await self._run_call(connection, request)
            del request  # waiting for the next one must not keep this one's outcome (a result of megabytes) alive

    async def _run_call(self, connection: Connection, request: CallRequest) -> None:
        outcome: ToolOutcome | None = None
        self.status.call_started()
        calling = CALLING.set(request)
        try:
            with request.scope, tracing.attached(request.trace_context):
                await connection.askers.enter(request)
                if request.task_op is None:
                    outcome = await execute_call(
                        self.spec, self.status, connection, request, keep_rounds=self.questions.handler is None
                    )
                else:
                    outcome = await execute_task_op(self.spec, self.status, connection, request, request.task_op)
        finally:
            CALLING.reset(calling)
            connection.askers.leave(request, answered=outcome is not None)
            self.status.call_ended()
            if outcome is not None:
                request.answer(outcome)
            elif not request.scope.cancelled_caught:
                # The connection ended under the call: it is answered once the reason is known.
                connection.unanswered.append(request)

    # ----------------------------------------------------------------- one connection, and supervision

    async def serve_one_connection(self, report_started: Callable[[], None]) -> bool:
        """Connect, serve until the connection is lost, fail what it left unanswered; whether it was healthy."""
        connection = Connection()
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
                request.answer(unavailable_outcome(self.spec, reason, started=request.started, link=link, lost=True))
        return connection.answered or trio.current_time() - born >= self.spec.restart.backoff_max

    async def _connect_and_serve(
        self, connection: Connection, scope: trio.CancelScope, report_started: Callable[[], None]
    ) -> None:
        """Connect and fetch the catalog within ``scope``'s deadline, then serve calls until the link is lost."""

        async def on_message(message: Any) -> None:
            if isinstance(message, mcp.types.ToolListChangedNotification):
                connection.catalog_changed.set()

        link = connection.link
        prior, self.discover = self.discover, None  # kept again only once a connection has adopted it
        async with self.connect(
            self.spec,
            link=link,
            message_handler=on_message,
            elicitation_callback=self.questions.elicitation_callback(connection.askers),
            prior_discover=prior,
            extensions=client_extensions(self.spec),
        ) as client:
            connection.client = client
            self.status.connected(link.pid)
            self._negotiated(client)
            await self.catalog.fetch(client)
            scope.deadline = math.inf
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.catalog.refresh, connection)
                if is_modern(client.protocol_version):
                    nursery.start_soon(self.catalog.listen, connection)
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

    def _negotiated(self, client: mcp.Client) -> None:
        """Publish the connection's protocol version; keep its discover result for the next connection."""
        version = client.protocol_version
        if self.status.protocol is not None and self.status.protocol != version:
            labelled(SERVER_PROTOCOL, self.id, self.status.protocol).set(0)
        self.status.negotiated(version)
        self.status.offer_tasks(offered_design(client))
        labelled(SERVER_PROTOCOL, self.id, version).set(1)
        self.discover = client.session.discover_result
        logger.info("server %r: speaking MCP %s", self.id, version, extra={"server": self.id, "protocol": version})

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
        """Serve a connection, and after each one is lost back off and reconnect (until ``max_restarts`` failures,
        when set).

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
            if policy.max_restarts is not None and failures > policy.max_restarts:
                self.set_state(ServerState.DOWN)
                report_started()
                await trio.sleep_forever()
            self.set_state(ServerState.RESTARTING)
            report_started()
            delay = min(policy.backoff_initial * 2 ** min(failures - 1, 64), policy.backoff_max)
            limit = "" if policy.max_restarts is None else f" of at most {policy.max_restarts}"
            logger.info(
                "server %r: reconnecting in %gs (failure %d%s in a row)",
                self.id,
                delay,
                failures,
                limit,
                extra={"server": self.id},
            )
            self.status.backing_off(trio.current_time() + delay)
            await trio.sleep(delay)
            self.status.restarted()
            labelled(SERVER_RESTARTS, self.id).inc()


def _describe(leaves: Sequence[BaseException]) -> str:
    return "; ".join(f"{type(exc).__name__}: {exc}" for exc in leaves)


async def serve_mcp_server(
    spec: ServerSpec,
    *,
    connect: Connector = open_client,
    input_handler: InputHandler | None = None,
    relay: ParkedRelay | None = None,
    publish_up: bool = True,
    task_status: trio.TaskStatus[ServerHandle] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the actor for ``spec`` until cancelled; ``task_status.started(handle)`` after the first connect attempt.

    ``input_handler`` answers the server's questions to the user (``elicitation/create``, input rounds) in
    process. Without it a call that asks ends ``input_required`` with an
    :class:`~yao_actors.tools.input_requests.InputRound` (the run makes it an interrupt): a 2026-07-28 call
    carries the ``request_state`` to call again with, a handshake-era call stays open here (``resume_parked``)
    up to ``spec.input_timeout``. With ``relay`` (the store's held calls) such a call can also be answered by a
    resume that reached another process sharing the store. ``publish_up=False``: the actor leaves
    ``yao_mcp_server_up`` alone (one principal's connection, whose router owns that label).

    The first attempt is bounded by ``spec.connect_timeout``; a server that
    fails to start is reported through its handle (``state``, ``last_error``)
    and retried in the background.
    """
    send, receive = trio.open_memory_channel[CallRequest](spec.queue_size)
    status = ServerStatus(ask_optional=spec.tasks == "auto")
    handle = ServerHandle._create(spec, send, status, relay, input_handler)
    with receive:
        async with trio.open_nursery() as nursery:
            questions = ServerQuestions(spec, status, nursery, input_handler, relay)
            actor = _ServerActor(spec, connect, receive, nursery, status, questions, publish_up=publish_up)
            if publish_up:
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

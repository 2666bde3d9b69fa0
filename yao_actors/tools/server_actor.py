"""The MCP server actor: one long-lived, supervised task per configured server.

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

import contextvars
import logging
import math
import secrets
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import mcp
import mcp.types
import pydantic
import trio
from mcp.client.session import ClientRequestContext, ElicitationFnT
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from yao_actors.errors import AuthorizationError, ErrorKind, exception_leaves, server_unavailable_message
from yao_actors.observability import tracing
from yao_actors.observability.metrics import SERVER_PROTOCOL, SERVER_RESTARTS, SERVER_UP, labelled
from yao_actors.specs import ServerSpec
from yao_actors.tools.askers import Askers
from yao_actors.tools.input_requests import (
    InputAnswer,
    InputHandler,
    InputRound,
    ParkedQuestion,
    elicit_result,
    input_request,
    input_round,
    refusal,
)
from yao_actors.tools.links import read_links
from yao_actors.tools.parked_relay import ParkedRelay
from yao_actors.tools.results import ToolOutcome, call_outcome
from yao_actors.tools.schema_gate import tool_schema_notes
from yao_actors.tools.server_handle import (
    PROGRESS_BUFFER,
    CallRequest,
    ProgressItem,
    ServerHandle,
    ServerStatus,
    unavailable_outcome,
)
from yao_actors.tools.tool_server import ServerState, ServerStatistics
from yao_actors.transports import TRANSPORT_FAILURE, Connector, Link, is_modern, open_client
from yao_actors.transports.malformed import MALFORMED

logger = logging.getLogger(__name__)

#: How long a call that saw its connection close waits for the reason (exit code, stderr).
LOSS_REPORT_WAIT = 1.0
#: The call a worker task is making: an ``elicitation/create`` that arrives in that task's context belongs to it.
_CALLING: contextvars.ContextVar[CallRequest | None] = contextvars.ContextVar("yao_actors_calling", default=None)
#: The error text of an ``input_required`` outcome (the run ends with an interrupt; the model never sees it).
ASKS_THE_USER = "the server asks the user for input"
#: Seconds (at most a tenth of what is left) before a call's deadline at which reading its links stops.
LINK_READ_MARGIN = 0.5
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
    askers: Askers = attrs.field(factory=Askers)
    """Its calls in flight, and which of them can have asked a question (:mod:`~yao_actors.tools.askers`)."""


@attrs.define(eq=False)
class _ServerActor:
    """The actor's side: the inbox's receive end, the actor's nursery, the connection and its supervision."""

    spec: ServerSpec
    connect: Connector
    inbox: trio.MemoryReceiveChannel[CallRequest]
    nursery: trio.Nursery
    status: ServerStatus
    fail_fast_scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    input_handler: InputHandler | None = None
    relay: ParkedRelay | None = None
    """How a call held here is answered from another process sharing the store."""
    discover: mcp.types.DiscoverResult | None = None
    """The server's ``server/discover`` answer, kept across reconnects (a reconnect does not probe again)."""
    #: Why the last connection could not be authorized (OAuth), or ``None``.
    unauthorized: str | None = None
    #: Whether this actor's state is the server's ``yao_mcp_server_up`` (not a principal's connection's: the
    #: router of an ``identity: "principal"`` server owns that label).
    publish_up: bool = True
    #: Whether the server has asked a question its transport did not tie to a call: then its connections run
    #: calls one at a time (:mod:`~yao_actors.tools.askers`), this one and the next.
    untied_questions: bool = False
    #: What is not enforced of each tool's schemas, by tool name, as last logged.
    schema_notes: dict[str, tuple[str, ...]] = attrs.field(factory=dict)

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

    async def work(self, connection: _Connection) -> None:
        """One of ``max_concurrency`` workers of a connection: take requests from the inbox, one at a time."""
        async for request in self.inbox:
            await self._run_call(connection, request)
            del request  # waiting for the next one must not keep this one's outcome (a result of megabytes) alive

    async def _run_call(self, connection: _Connection, request: CallRequest) -> None:
        outcome: ToolOutcome | None = None
        self.status.call_started()
        calling = _CALLING.set(request)
        try:
            with request.scope, tracing.attached(request.trace_context):
                await connection.askers.enter(request)
                outcome = await self._execute(connection, request)
        finally:
            _CALLING.reset(calling)
            connection.askers.leave(request, answered=outcome is not None)
            self.status.call_ended()
            if outcome is not None:
                request.answer(outcome)
            elif not request.scope.cancelled_caught:
                # The connection ended under the call: it is answered once the reason is known.
                connection.unanswered.append(request)

    async def _execute(self, connection: _Connection, request: CallRequest) -> ToolOutcome:
        client = connection.client
        assert client is not None
        progress = _progress_forwarder(request) if request.wants_progress else None
        try:
            if self.input_handler is None and is_modern(client.protocol_version):
                # Input rounds are ours to keep (as interrupts), not the SDK's to answer in process.
                answer = await client.session.call_tool(
                    request.name,
                    request.arguments,
                    progress_callback=progress,
                    input_responses=request.input_responses,  # type: ignore[arg-type]
                    request_state=request.request_state,
                    allow_input_required=True,
                    allow_claimed=False,
                )
                if isinstance(answer, mcp.types.InputRequiredResult):
                    connection.answered = True
                    return self._input_required(request, answer)
                result = answer
            else:
                result = await client.call_tool(
                    request.name,
                    request.arguments,
                    progress_callback=progress,
                    input_responses=request.input_responses,  # type: ignore[arg-type]
                    request_state=request.request_state,
                )
        except MCPError as exc:
            return await self._protocol_error(connection, request, exc)
        except pydantic.ValidationError as exc:  # JSON-RPC, but not the result the SDK expects
            reason = _first_error(exc)
            logger.warning(
                "server %r: tools/call %r: %s: %s", self.id, request.name, MALFORMED, reason, extra={"server": self.id}
            )
            return _malformed(request, reason)
        except Exception as exc:
            logger.warning(
                "server %r: tools/call %r failed", self.id, request.name, exc_info=True, extra={"server": self.id}
            )
            return unavailable_outcome(self.spec, f"{type(exc).__name__}: {exc}", started=request.started)
        connection.answered = True
        assert isinstance(result, mcp.types.CallToolResult)
        outcome = call_outcome(result, self.status.output_schemas.get(request.name), 0.0)
        if self.spec.read_links and outcome.ok and outcome.rich:
            # The reads end a little before the call's deadline, so the call still answers with what it has.
            margin = min(LINK_READ_MARGIN, (request.scope.deadline - trio.current_time()) / 10)
            linked = await read_links(client, outcome.result, request.scope.deadline - margin)
            outcome = attrs.evolve(outcome, result=linked)
        return attrs.evolve(outcome, duration=trio.current_time() - request.started)

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
            reason = f"the request failed: {exc.error.message}"
            return unavailable_outcome(self.spec, reason, started=request.started, lost=True)
        connection.answered = True
        if exc.code == mcp.types.PARSE_ERROR:
            # The answer could not be read (the transport said so, and said why in its log line); or the server
            # says it could not read the request: either way nothing of the call came back.
            return _malformed(request, exc.error.data if isinstance(exc.error.data, str) else None)
        return ToolOutcome(
            error=f"{exc.error.message} (JSON-RPC error {exc.code})",
            kind=ErrorKind.TOOL_ERROR,
            duration=trio.current_time() - request.started,
        )

    # ----------------------------------------------------------------- the server asks the user

    def _input_required(self, request: CallRequest, result: mcp.types.InputRequiredResult) -> ToolOutcome:
        """A 2026-07-28 call that asks the user: its round, to keep with the thread until the answers come."""
        duration = trio.current_time() - request.started
        round_ = input_round(self.id, request.name, request.arguments, result)
        if isinstance(round_, str):
            return ToolOutcome(error=round_, kind=ErrorKind.TOOL_ERROR, duration=duration)
        return ToolOutcome(result=round_, error=ASKS_THE_USER, kind=ErrorKind.INPUT_REQUIRED, duration=duration)

    def elicitation_callback(self, connection: _Connection) -> ElicitationFnT:
        """How the connection answers ``elicitation/create``: through the input handler, or by parking the call.

        The SDK's own input-round driver (protocol 2026-07-28) calls it too, in the call's task. A handshake-era
        request is tied to its call by the task that sent the call where the transport keeps it (streamable
        HTTP); else :class:`~yao_actors.tools.askers.Askers` tells which call asked, or refuses the question
        (and from then on the actor's connections run their calls one at a time). A URL the user must not be
        sent to is refused before anyone is asked.
        """
        handler = self.input_handler
        askers = connection.askers
        askers.one_at_a_time = self.untied_questions

        async def on_elicit(
            context: ClientRequestContext, params: mcp.types.ElicitRequestParams
        ) -> mcp.types.ElicitResult | mcp.types.ErrorData:
            if (refused := refusal(params)) is not None:
                logger.warning("server %r: %s", self.id, refused, extra={"server": self.id})
                return mcp.types.ErrorData(code=mcp.types.INVALID_PARAMS, message=refused)
            request: CallRequest | str | None = _CALLING.get()
            if request is None:
                self.untied_questions = askers.one_at_a_time = True
                request = await askers.asker()
            if isinstance(request, str):
                logger.warning("server %r: %s", self.id, request, extra={"server": self.id})
                return mcp.types.ErrorData(code=mcp.types.INVALID_REQUEST, message=request)
            askers.ask_user(request)
            try:
                if handler is None:
                    return await self._park(request, str(context.request_id), params)
                return await self._ask(handler, request, params)
            finally:
                await askers.resume(request)

        return on_elicit

    async def _park(
        self, request: CallRequest, key: str, params: mcp.types.ElicitRequestParams
    ) -> mcp.types.ElicitResult | mcp.types.ErrorData:
        """Hold a handshake-era call open while its question goes out as an interrupt, ``input_timeout`` at most.

        The caller gets an ``input_required`` outcome now (a second question of the same call goes to whoever
        answered the first); the answer comes through :meth:`ServerHandle.resume_parked`, in this process or (with
        a relay: the call is recorded in the store as held here first) in another sharing the store. Unanswered in
        time, the server is told ``cancel``. From the answer on, the call has ``spec.timeout`` again.
        """
        if request.scope.cancel_called:  # its caller has gone (timed out, cancelled): nobody would see it
            return elicit_result(InputAnswer("cancel"), None)
        question = ParkedQuestion(secrets.token_urlsafe(12))
        form = input_request(self.id, request.name, params)
        asked = InputRound(((key, form),), request.arguments, ticket=question.ticket)
        held_in_store = self.relay is not None and await self.relay.hold(question.ticket)
        duration = trio.current_time() - request.started
        self.status.park(question)  # no checkpoint from here to the wait's ``finally``
        if held_in_store:
            self._serve_from_store(question)
        request.answer(ToolOutcome(result=asked, error=ASKS_THE_USER, kind=ErrorKind.INPUT_REQUIRED, duration=duration))
        request.parked = question
        answer = InputAnswer("cancel")
        try:
            with trio.move_on_after(self.spec.input_timeout):
                answer = await question.wait_answer()
        finally:
            self.status.unpark(question.ticket)
        request.scope.deadline = trio.current_time() + self.spec.timeout
        return elicit_result(answer, form.schema)

    def _serve_from_store(self, question: ParkedQuestion) -> None:
        """Serve answers to the call held for ``question`` that come through the store (from another process the
        resume reached), for as long as it is held here (:meth:`ParkedRelay.serve`)."""
        relay, status, ticket = self.relay, self.status, question.ticket
        assert relay is not None

        async def resume(answer: InputAnswer) -> ToolOutcome | None:
            return await status.answer_parked(ticket, answer)

        self.nursery.start_soon(relay.serve, ticket, question.wait_closed, resume)

    async def _ask(
        self, handler: InputHandler, request: CallRequest, params: mcp.types.ElicitRequestParams
    ) -> mcp.types.ElicitResult | mcp.types.ErrorData:
        """Ask ``handler``, at most ``spec.input_timeout`` seconds (then the answer is ``cancel``)."""
        asked = input_request(self.id, request.name, params)
        answer = InputAnswer("cancel")
        with request.deadline_paused(), trio.move_on_after(self.spec.input_timeout) as waiting:
            try:
                answer = await handler(asked)
            except Exception as exc:
                logger.exception("server %r: the input handler failed", self.id, extra={"server": self.id})
                return mcp.types.ErrorData(
                    code=mcp.types.INTERNAL_ERROR, message=f"the input handler failed: {type(exc).__name__}"
                )
        if waiting.cancelled_caught:
            logger.info(
                "server %r: no answer to %r within %gs: cancelled",
                self.id,
                asked.message,
                self.spec.input_timeout,
                extra={"server": self.id},
            )
        return elicit_result(answer, asked.schema)

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
        self.say_schema_notes(tools)

    def say_schema_notes(self, tools: Sequence[mcp.types.Tool]) -> None:
        """Compile the tools' schemas now (through the gate, so a call finds them ready) and log, once per tool,
        what of them is not enforced (:func:`~yao_actors.tools.schema_gate.tool_schema_notes`)."""
        notes = {tool.name: found for tool in tools if (found := tool_schema_notes(tool))}
        for name, found in notes.items():
            if self.schema_notes.get(name) != found:
                logger.warning(
                    "server %r: tool %r: %s", self.id, name, "; ".join(found), extra={"server": self.id, "tool": name}
                )
        self.schema_notes = notes

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
                request.answer(unavailable_outcome(self.spec, reason, started=request.started, link=link, lost=True))
        return connection.answered or trio.current_time() - born >= self.spec.restart.backoff_max

    async def _connect_and_serve(
        self, connection: _Connection, scope: trio.CancelScope, report_started: Callable[[], None]
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
            elicitation_callback=self.elicitation_callback(connection),
            prior_discover=prior,
        ) as client:
            connection.client = client
            self.status.connected(link.pid)
            self._negotiated(client)
            await self.fetch_catalog(client)
            scope.deadline = math.inf
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.refresh_catalog, connection)
                if is_modern(client.protocol_version):
                    nursery.start_soon(self.listen_for_changes, connection)
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
        labelled(SERVER_PROTOCOL, self.id, version).set(1)
        self.discover = client.session.discover_result
        logger.info("server %r: speaking MCP %s", self.id, version, extra={"server": self.id, "protocol": version})

    async def listen_for_changes(self, connection: _Connection) -> None:
        """On a stateless connection, ``tools/list_changed`` comes through a ``subscriptions/listen`` stream."""
        assert connection.client is not None
        try:
            async with connection.client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    connection.catalog_changed.set()
        except Exception as exc:  # a server without subscriptions still serves calls; its catalog stays as fetched
            logger.info(
                "server %r: no subscription to catalog changes: %s: %s",
                self.id,
                type(exc).__name__,
                exc,
                extra={"server": self.id},
            )

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


def _malformed(request: CallRequest, reason: str | None) -> ToolOutcome:
    """The outcome of a call whose answer could not be read (``reason``: what was wrong, when known)."""
    error = MALFORMED if reason is None else f"{MALFORMED}: {reason}"
    return ToolOutcome(error=error, kind=ErrorKind.TOOL_ERROR, duration=trio.current_time() - request.started)


def _first_error(exc: pydantic.ValidationError) -> str:
    """The first thing pydantic found wrong, in one line: where, and what."""
    first = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else str(first["msg"])


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
    status = ServerStatus()
    handle = ServerHandle._create(spec, send, status, relay)
    with receive:
        async with trio.open_nursery() as nursery:
            actor = _ServerActor(
                spec, connect, receive, nursery, status, input_handler=input_handler, relay=relay, publish_up=publish_up
            )
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

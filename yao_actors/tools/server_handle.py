"""The public side of a server actor: :class:`ServerHandle`, and what it shares with its actor.

A handle holds the send side of the actor's inbox and a read-only view of the
actor's :class:`~yao_actors.tools.server_status.ServerStatus`; the actor (:mod:`yao_actors.tools.server_actor`) owns
the receive side, its nursery, the connection and its supervision. A caller puts
a :class:`~yao_actors.tools.call_request.CallRequest` in the inbox and waits on the request itself for progress
items, then the outcome. The call's deadline (``spec.timeout``) is a cancel scope
in the caller's task: when it fires, or the caller is cancelled, the request's
own scope is cancelled and the actor cancels the MCP request (the server gets
``notifications/cancelled``). A caller with a deadline of its own (a turn's) hands
it to ``call_tool``, which keeps both in that one scope instead of two.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import mcp.types
import trio

from yao_actors.errors import ErrorKind, server_unavailable_message
from yao_actors.handles import NoPublicConstructor
from yao_actors.observability import tracing
from yao_actors.specs import ServerSpec
from yao_actors.store.task_handle import TaskHandle
from yao_actors.tools.call_request import CallRequest, await_outcome
from yao_actors.tools.input_requests import InputAnswer, InputHandler
from yao_actors.tools.parked_relay import ParkedRelay
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.server_status import ServerStatus, loss_kind
from yao_actors.tools.task_flow import (
    TaskLine,
    cancel_task,
    follow_task,
    own_deadline,
    poll_handle,
    task_timeout,
    update_task,
)
from yao_actors.tools.task_input import task_of_round
from yao_actors.tools.task_state import TaskOp, TaskState
from yao_actors.tools.tool_server import (
    LOST,
    NO_OPTIONS,
    CallAnswers,
    CallOptions,
    ProgressFn,
    ServerState,
    ServerStatistics,
    state_reached,
)
from yao_actors.transports import Link

#: The error of a stored task whose server was not ready again within the run's wait for the task.
NOT_BACK = (
    "the task {task!r} of tool {tool!r} did not finish within {timeout:g}s (task_timeout): "
    "its server {server!r} was not ready again in that time"
)


def unavailable_outcome(
    spec: ServerSpec, reason: str, *, started: float, link: Link | None = None, lost: bool = False
) -> ToolOutcome:
    """A ``server_unavailable`` outcome saying why: the exit code ``link`` knows for everyone, its stderr tail
    in ``stderr_tail`` and, only with ``spec.expose_stderr``, in the error the model and clients see."""
    stderr_tail = link.stderr_tail() if link else ""
    error = server_unavailable_message(
        spec.id,
        reason,
        exit_code=link.exit_code if link else None,
        stderr_tail=stderr_tail if spec.expose_stderr else "",
    )
    return ToolOutcome(
        error=error,
        kind=ErrorKind.SERVER_UNAVAILABLE,
        duration=trio.current_time() - started,
        stderr_tail=stderr_tail,
        connection_lost=lost,
    )


@attrs.define(eq=False)
class ServerHandle(metaclass=NoPublicConstructor):
    """What others hold to use a server actor; made by :func:`~yao_actors.tools.server_actor.serve_mcp_server` only.

    It can send calls and read the actor's status, nothing more. ``state`` and
    ``tools_version`` may be read at any time; the methods may be called from any
    task of the same Trio run.
    """

    spec: ServerSpec
    _mailbox: trio.MemorySendChannel[CallRequest]
    _status: ServerStatus
    _relay: ParkedRelay | None = None
    """The way to calls held open by other processes sharing the store (``None``: this process's only)."""
    _input_handler: InputHandler | None = None
    """Answers the questions of a 2026-07-28 task in process (the actor's ``input_handler``), as a call's own."""
    _task_room: trio.Semaphore = attrs.field(init=False)
    """Requests about tasks queued or in flight at once: at most ``max_concurrency``, so that polls waiting for
    room never fill the queue and turn calls away."""

    @_task_room.default
    def _task_room_default(self) -> trio.Semaphore:
        return trio.Semaphore(max(1, min(self.spec.max_concurrency, self.spec.queue_size)))

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def state(self) -> ServerState:
        return self._status.state

    @property
    def tools_version(self) -> int:
        return self._status.tools_version

    async def list_tools(self) -> tuple[mcp.types.Tool, ...]:
        """The server's full catalog (every ``tools/list`` page) as last fetched; empty before the first."""
        await trio.lowlevel.checkpoint()
        return self._status.catalog

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        options: CallOptions = NO_OPTIONS,
        *,
        progress: ProgressFn | None = None,
    ) -> ToolOutcome:
        """Call tool ``name`` under the spec's deadline; a failure is an outcome, never an exception.

        ``progress`` is ``options.progress`` in short, for a caller that wants no other option.

        ``options.progress`` (a plain or an ``async`` function of ``(progress, total, message)``) receives the
        call's progress notifications (some may be dropped if it is slower than the server).
        ``options.deadline`` is the caller's own (an absolute ``trio.current_time()``, e.g. a turn's): the call
        runs in one cancel scope under the earlier of it and ``spec.timeout``, and when the caller's is the one
        that expires it raises ``trio.TooSlowError``, as ``trio.fail_at(deadline)`` around the call would.
        Otherwise it raises only ``trio.Cancelled``. Either way the server then receives
        ``notifications/cancelled`` for the request. A call the server answers with a task: both deadlines bound
        the request that creates it; the wait for the task is bounded by its ``task_timeout`` (and cancelling).

        ``options.answers`` give the call the user's answers to the questions an earlier call of it asked: it is
        made again with them (protocol 2026-07-28), or the handshake-era call held open for them gets them
        (:meth:`resume_parked`). A call that asks ends ``input_required``.
        """
        if progress is not None:
            options = attrs.evolve(options, progress=progress)
        answers = options.answers
        if answers is not None and answers.ticket is not None:
            return await self._resume(answers)
        if answers is not None and (task := task_of_round(answers.request_state)) is not None:
            return await self._answer_task(task, name, answers, options)
        if answers is not None:
            arguments = dict(answers.arguments)
        request = CallRequest(
            name,
            dict(arguments or {}),
            trio.current_time(),
            options.progress is not None,
            tracing.capture(),
            input_responses=None if answers is None else answers.responses,
            request_state=None if answers is None else answers.request_state,
            method=options.method,
            keep_result=options.keep_result,
        )
        outcome = await self._call(request, options.progress, options.deadline)
        if outcome.task is not None:  # the server goes on with the call as a task: follow it to its end
            outcome = await follow_task(self._tasks, outcome.task, name, request.arguments, options)
        self._status.count_call(outcome.ok)
        return outcome

    async def poll_task(self, handle: TaskHandle, options: CallOptions = NO_OPTIONS) -> ToolOutcome:
        """Go on polling the stored task ``handle`` to its end (:meth:`ToolServer.poll_task`): once the server
        is ready, through this actor's connection (:mod:`~yao_actors.tools.task_flow`). The wait for the server to
        be ready is bounded by the task's own deadline too: a server that never comes back ends the wait then."""
        own = own_deadline(handle, options)
        with trio.CancelScope(deadline=min(own, options.deadline)) as waiting:
            if self.state is not ServerState.READY:
                await self._ready()
        if waiting.cancelled_caught:
            if options.deadline < own:
                raise trio.TooSlowError
            timeout = handle.wait_until(task_timeout(options)) - handle.created_at
            error = NOT_BACK.format(task=handle.task_id, tool=handle.tool, timeout=timeout, server=self.id)
            return ToolOutcome(error=error, kind=ErrorKind.TIMEOUT)
        outcome = await poll_handle(self._task_op, self._ready, handle, options)
        self._status.count_call(outcome.ok)
        return outcome

    async def cancel_task(self, handle: TaskHandle) -> ToolOutcome:
        """Ask the server to stop the task ``handle`` names (:meth:`ToolServer.cancel_task`), through this actor's
        connection (:func:`~yao_actors.tools.task_flow.cancel_task`)."""
        return await cancel_task(self._task_op, handle)

    async def _answer_task(self, task: TaskState, name: str, answers: CallAnswers, options: CallOptions) -> ToolOutcome:
        """Give a 2026-07-28 task the user's answers (``tasks/update``), then go on following it
        (:mod:`~yao_actors.tools.task_input`)."""
        acknowledged = await update_task(self._task_op, task, name, answers.responses)
        if acknowledged.task is None:  # refused: the server does not know the task (any more)
            self._status.count_call(False)
            return acknowledged
        answered = frozenset(answers.responses)
        outcome = await follow_task(self._tasks, task, name, dict(answers.arguments), options, answered)
        self._status.count_call(outcome.ok)
        return outcome

    @property
    def _tasks(self) -> TaskLine:
        """How a call of this handle follows a task; with an input handler, its questions are answered on the way."""
        return TaskLine(self.id, self._task_op, self._ready, self._input_handler, self.spec.input_timeout)

    async def _ready(self) -> None:
        await self.wait_for_state(ServerState.READY)

    async def _task_op(self, op: TaskOp) -> ToolOutcome:
        """Send one request about a task through the actor, under the server's ``timeout``.

        Unlike a call, it waits for room when the actor's queue is full (a thousand tasks polled at once are
        not in a hurry: turned away, each would wait a whole interval more), and no more than
        ``max_concurrency`` of them take room at once (calls find the rest); the server's ``timeout`` counts
        from when it is queued."""
        request = CallRequest(op.tool, {}, trio.current_time(), False, tracing.capture(), task_op=op)
        async with self._task_room:
            try:
                await self._mailbox.send(request)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return unavailable_outcome(self.spec, "the server actor has stopped", started=request.started)
            request.started = trio.current_time()
            return await self._call(request, None, math.inf, queued=True)

    async def _resume(self, answers: CallAnswers) -> ToolOutcome:
        """The outcome of the held call ``answers`` names, once it has the user's answer; :data:`LOST` when no
        live actor holds it any more."""
        assert answers.ticket is not None  # a held call's answers name it
        assert answers.answer is not None  # and carry the user's answer
        outcome = await self.resume_parked(answers.ticket, answers.answer)
        return outcome if outcome is not None else ToolOutcome(error=LOST, kind=ErrorKind.TOOL_ERROR)

    def statistics(self) -> ServerStatistics:
        status = self._status
        return ServerStatistics(
            state=status.state,
            restarts=status.restarts,
            in_flight=status.in_flight,
            queued=self._mailbox.statistics().current_buffer_used,
            calls=status.calls,
            errors=status.errors,
            last_error=status.last_error,
            tools_version=status.tools_version,
            pid=status.pid,
            last_error_kind=loss_kind(status.last_loss),
            protocol=status.protocol,
            tasks=None if status.task_design is None else status.task_design.value,
            next_attempt_in=None
            if status.next_attempt is None
            else max(0.0, status.next_attempt - trio.current_time()),
        )

    async def wait_state_change(self) -> ServerState:
        """Wait for the next change of ``state``; return the state then."""
        await self._status.state_changed.wait()
        return self.state

    async def wait_catalog_change(self) -> int:
        """Wait until the catalog is next fetched (a restart, or ``tools/list_changed``); return ``tools_version``."""
        await self._status.catalog_changed.wait()
        return self.tools_version

    async def wait_for_state(self, *states: ServerState) -> ServerState:
        """Return as soon as ``state`` is one of ``states`` (at once if it already is)."""
        return await state_reached(self, states)

    def holds_parked(self, ticket: str) -> bool:
        """Whether this actor holds a handshake-era call open under ``ticket``, waiting for the user's answer."""
        return ticket in self._status.parked

    async def reaches_parked(self, ticket: str) -> bool:
        """Whether the call held under ``ticket`` is held open here, or by a live process sharing the store;
        ``StoreUnavailable`` when the store cannot say."""
        if self.holds_parked(ticket):
            await trio.lowlevel.checkpoint()
            return True
        return self._relay is not None and await self._relay.reachable(ticket)

    async def resume_parked(self, ticket: str, answer: InputAnswer) -> ToolOutcome | None:
        """Give the user's answer to the handshake-era call held open under ``ticket``; its outcome then.

        A call held by another process sharing the store gets the answer there, through the store, and its
        outcome comes back the same way (:class:`~yao_actors.tools.parked_relay.ParkedRelay`). ``None`` when no
        live actor holds such a call (it was never held, its ``input_timeout`` passed, the connection holding it
        was lost, or the process holding it died).
        """
        if self.holds_parked(ticket) or self._relay is None:
            return await self._status.answer_parked(ticket, answer)
        return await self._relay.answer(ticket, answer)

    async def _call(
        self, request: CallRequest, progress: ProgressFn | None, deadline: float, *, queued: bool = False
    ) -> ToolOutcome:
        """Send ``request`` to the actor (unless already ``queued``) and wait for its outcome."""
        name, started = request.name, request.started
        own = started + self.spec.timeout
        # One scope for both deadlines: the call's own, and the caller's when it comes first.
        with trio.CancelScope(deadline=min(own, deadline)) as request.deadline_scope:
            try:
                # A full queue is answered at once: waiting for room would only move the queue into callers.
                if not queued:
                    self._mailbox.send_nowait(request)
            except trio.WouldBlock:
                return unavailable_outcome(self.spec, "queue full", started=started)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return unavailable_outcome(self.spec, "the server actor has stopped", started=started)
            try:
                return await await_outcome(request, progress)
            finally:
                if request.outcome is None:  # timed out or cancelled: the server is told to stop
                    request.scope.cancel()
        if deadline < own:  # the caller's deadline came first, and it expired (ties are the call's own)
            raise trio.TooSlowError
        return ToolOutcome(
            error=f"tool {name!r} on server {self.id!r} timed out after {self.spec.timeout:g}s",
            kind=ErrorKind.TIMEOUT,
            duration=trio.current_time() - started,
        )

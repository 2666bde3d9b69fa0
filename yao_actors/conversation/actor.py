"""The conversation actor: one per thread, it owns the thread's history and executes its runs in order.

A run is submitted as a :class:`RunOrder`; the actor executes orders one at a
time and closes each one out — exactly one terminal event, the result, the
history — even when the run was cancelled (DESIGN invariant 6).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import trio
from opentelemetry.context import Context

from yao_actors.conversation.approvals import PendingApproval, Resolution, resolve
from yao_actors.conversation.client_tools import answer_dangling_calls, check_tool_answers
from yao_actors.conversation.run import Answer, PendingBatch, Run, RunResources
from yao_actors.conversation.window import window_history
from yao_actors.dispatch import execute_tool_calls
from yao_actors.errors import ModelError, RunError, RunErrorCode, exception_leaves
from yao_actors.events import EventDict, Outcome, RunEvents
from yao_actors.handles import NoPublicConstructor
from yao_actors.history_budget import MAX_THREAD_BYTES, BoundedHistory
from yao_actors.models.base import Message, Usage
from yao_actors.observability import tracing
from yao_actors.observability.runs import RunObservation
from yao_actors.results import ToolCallResult
from yao_actors.specs import AssistantSpec

logger = logging.getLogger(__name__)

CLEANUP_GRACE = 5.0
"""Seconds a cancelled run has to record its results and emit its terminal event."""


@attrs.frozen
class RunResult:
    """What a run produced.

    ``text`` is the final answer (the fallback's when it answered);
    ``tool_results`` every tool call of the run in order; ``usage`` summed over
    every model call, fallback included; ``outcome`` how it ended; ``data`` what
    a ``next`` hook returned; ``error`` and ``code`` those of a ``RUN_ERROR``;
    ``note`` why the fallback was used; ``events`` the run's events when they
    were collected (:meth:`ConversationManager.run`); ``pending_tool_calls`` the
    calls of client tools left for the client (outcome ``client_tools``); ``interrupts``
    the calls held for approval (outcome ``interrupt``).
    """

    run_id: str
    thread_id: str
    text: str
    tool_results: tuple[ToolCallResult, ...]
    usage: Usage
    outcome: Outcome
    data: Any = None
    note: str | None = None
    error: str | None = None
    code: RunErrorCode | None = None
    events: tuple[EventDict, ...] = ()
    pending_tool_calls: tuple[str, ...] = ()
    interrupts: tuple[PendingApproval, ...] = ()


class Cancelled:
    """The run was cancelled before it ended by itself."""


CANCELLED = Cancelled()
Ending = Answer | RunError | Cancelled


@attrs.define(eq=False)
class RunOrder:
    """A run submitted to a thread's actor; the caller keeps it to cancel the run and read its result.

    ``events`` is the consumer's channel (:meth:`ConversationManager.open_run`);
    without one the events are kept in ``collected`` (:meth:`ConversationManager.run`,
    which returns them all at the end: a channel and a task reading it would
    only cost a trip through the scheduler per event). ``trace_context`` is the
    submitter's trace context: the run's ``invoke_agent`` span starts under it.
    """

    assistant: AssistantSpec
    messages: tuple[Message, ...]
    run_id: str
    thread_id: str
    events: trio.MemorySendChannel[EventDict] | None
    history: tuple[Message, ...] | None = None
    """When given, the thread's history becomes these messages before the run (an AG-UI HTTP client's conversation)."""
    client_tools: tuple[Mapping[str, Any], ...] = ()
    """The tools of the run's client (AG-UI frontend tools), as function tools."""
    resume: tuple[Mapping[str, Any], ...] = ()
    """AG-UI ``resume`` entries answering the interrupts of the thread's held calls."""
    collected: list[EventDict] = attrs.field(factory=list)
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    started: trio.Event = attrs.field(factory=trio.Event)
    done: trio.Event = attrs.field(factory=trio.Event)
    result: RunResult | None = None
    late_events: list[EventDict] = attrs.field(factory=list)
    trace_context: Context | None = attrs.field(factory=tracing.capture)

    async def deliver(self, event: EventDict) -> None:
        """Send an event to the consumer; a consumer that is gone cancels the run."""
        if self.events is None:
            self.collected.append(event)
            return
        try:
            await self.events.send(event)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.scope.cancel()

    def end(self) -> None:
        """The run is over: no more events; whoever waits for it may go on."""
        if self.events is not None:
            self.events.close()
        self.done.set()


RUN_QUEUE = 8
"""Runs that may wait for their turn on one thread before submitting waits too."""


@attrs.define(eq=False)
class ThreadStatus:
    """What a conversation actor publishes: the thread's history (only the actor appends) and its pending runs.

    The history is bounded (:class:`~yao_actors.history_budget.BoundedHistory`): it keeps the newest whole
    turns that fit its limit.
    """

    history: BoundedHistory = attrs.field(factory=BoundedHistory)
    pending: int = 0
    approvals: list[PendingApproval] = attrs.field(factory=list)
    """Calls held for a person's approval by the thread's last run, until a run answers them."""


@attrs.define(eq=False)
class ConversationHandle(metaclass=NoPublicConstructor):
    """What the manager holds of a thread's actor: it submits runs and reads the history; made by the actor."""

    thread_id: str
    owner: str | None
    """The principal that created the thread; only its runs may use it."""
    _mailbox: trio.MemorySendChannel[RunOrder]
    _status: ThreadStatus

    @property
    def history(self) -> tuple[Message, ...]:
        """A copy of the thread's messages kept so far (input, assistant and tool messages of finished runs)."""
        return tuple(self._status.history.messages)

    @property
    def history_bytes(self) -> int:
        """The estimated size of the history kept (:mod:`yao_actors.history_budget`)."""
        return self._status.history.bytes

    @property
    def pending(self) -> int:
        """Runs submitted and not yet finished."""
        return self._status.pending

    async def submit(self, order: RunOrder) -> None:
        """Queue a run behind the thread's earlier ones (waits while ``RUN_QUEUE`` runs already wait)."""
        self._status.pending += 1
        try:
            await self._mailbox.send(order)
        except BaseException:
            self._status.pending -= 1
            raise

    def close(self) -> None:
        """Take no more runs: the actor ends once the runs already submitted are done."""
        self._mailbox.close()


@attrs.define(eq=False)
class _ConversationActor:
    """The actor's side: the inbox's receive end, the thread's history, and what its runs may use."""

    resources: RunResources
    inbox: trio.MemoryReceiveChannel[RunOrder]
    status: ThreadStatus
    on_history_grown: Callable[[], None]

    async def serve(self) -> None:
        """Execute the thread's runs one at a time until the inbox closes or the task is cancelled."""
        async with self.inbox:
            async for order in self.inbox:
                try:
                    await self.execute(order)
                finally:
                    self.status.pending -= 1

    async def execute(self, order: RunOrder) -> None:
        """Execute one run (in its span, counted and logged); it always ends with exactly one terminal event."""
        with RunObservation(order.assistant.id, order.run_id, order.thread_id, order.trace_context) as observed:
            try:
                await self._execute(order)
            finally:
                if order.result is not None:
                    result = order.result
                    code = result.code.value if result.code is not None else None
                    observed.ended(result.outcome.value, result.usage, code=code, error=result.error)

    async def _execute(self, order: RunOrder) -> None:
        """Execute one run; it always ends with exactly one terminal event (DESIGN invariant 6)."""
        order.started.set()
        if order.history is not None:
            self.status.history.replace(order.history)
        history = tuple(self.status.history.messages)
        run = Run(self.resources, RunEvents(order.run_id, order.thread_id, order.deliver), history)
        run.client_tools = order.client_tools
        ending: Ending = CANCELLED
        try:
            with order.scope, trio.move_on_after(order.assistant.timeouts.run) as deadline:
                await run.events.run_started()
                ending = await _start(run, order, self.status)
            if deadline.cancelled_caught:
                timeout = order.assistant.timeouts.run
                ending = RunError(f"the run deadline of {timeout:g} s expired", code=RunErrorCode.RUN_TIMEOUT)
        finally:
            # The close-out runs shielded: a cancelled run (its consumer left, the runtime is
            # closing) must still record its history and emit its one terminal event. It is
            # bounded by CLEANUP_GRACE, so a consumer that stopped reading cannot hold it.
            with trio.CancelScope(shield=True):
                unreported = run.settle()
                order.result = _conclude(run, order, ending)
                self.status.approvals.extend(order.result.interrupts)
                self.status.history.extend(run.transcript)
                # While this run still counts as pending, so its own thread is never the one forgotten.
                self.on_history_grown()
                with trio.move_on_after(CLEANUP_GRACE):
                    await _close_out(run, order.result, unreported)
                if not run.events.finished:
                    # The consumer did not drain its channel in time: the rest of the close-out goes
                    # past the channel (late events), and the stream hands it over after the last
                    # buffered event, so the consumer still sees exactly one terminal event.
                    order.late_events = await _close_out_late(run, order.result, unreported)
                order.end()


async def serve_conversation(
    thread_id: str,
    resources: RunResources,
    *,
    owner: str | None = None,
    max_history_bytes: int = MAX_THREAD_BYTES,
    on_history_grown: Callable[[], None] = lambda: None,
    task_status: trio.TaskStatus[ConversationHandle] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The actor of thread ``thread_id``: ``task_status.started(handle)``, then execute its runs in order.

    ``owner`` is the principal that created the thread. The thread keeps at most ``max_history_bytes`` of history; ``on_history_grown`` is called each time a
    run's messages joined it (the manager keeps all threads within their budget that way).
    """
    send, receive = trio.open_memory_channel[RunOrder](RUN_QUEUE)
    status = ThreadStatus(BoundedHistory(max_history_bytes))
    actor = _ConversationActor(resources, receive, status, on_history_grown)
    task_status.started(ConversationHandle._create(thread_id, owner, send, status))
    await actor.serve()


async def _start(run: Run, order: RunOrder, status: ThreadStatus) -> Ending:
    """Answer the calls held for approval, take the run's input into the transcript, and answer it.

    A tool message answering no open call, or a ``resume`` entry for no waiting interrupt (or an expired one),
    ends the run with its error before anything runs.
    """
    try:
        check_tool_answers(run.history, order.messages, held=[p.call.id for p in status.approvals])
        resolution = resolve(status.approvals, order.resume, run.resources.clock())
    except RunError as refused:
        return refused
    status.approvals.clear()
    resumed = await _run_approved(run, order.assistant, resolution)
    # Calls of client tools the input does not answer are answered first, so the history stays valid.
    given = [*answer_dangling_calls([*run.history, *resumed], order.messages), *order.messages]
    run.transcript.extend(given)
    window = window_history(run.history, order.assistant.history_max_messages)
    return await _answer(run, order, [*window, *resumed, *given])


async def _run_approved(run: Run, assistant: AssistantSpec, resolution: Resolution) -> list[Message]:
    """Run the approved calls and tell the model about the others; their tool messages, in the transcript too."""
    messages: list[Message] = []
    if resolution.approved:
        catalog = await run.catalog(assistant, ())
        run.batch = PendingBatch(resolution.approved, catalog)
        results = await execute_tool_calls(
            resolution.approved,
            catalog,
            run.resources.servers,
            batch_timeout=assistant.timeouts.turn,
            on_event=run.on_dispatch,
        )
        run.batch = None
        run.record(results, messages)
    messages.extend(resolution.refused)
    run.transcript.extend(resolution.refused)
    return messages


async def _answer(run: Run, order: RunOrder, conversation: list[Message]) -> Ending:
    """``Run.answer`` with every failure turned into a ``RunError`` (cancellation passes)."""
    failure: RunError | None = None
    try:
        return await run.answer(order.assistant, conversation, 0)
    except* RunError as group:
        failure = exception_leaves(group)[0]
    except* ModelError as group:
        failure = RunError(str(exception_leaves(group)[0]), code=RunErrorCode.MODEL_ERROR)
    except* Exception as group:
        error = exception_leaves(group)[0]
        logger.error("run %s failed", order.run_id, exc_info=error)
        failure = RunError(f"internal error: {type(error).__name__}: {error}", code=RunErrorCode.INTERNAL_ERROR)
    assert failure is not None
    return failure


def _conclude(run: Run, order: RunOrder, ending: Ending) -> RunResult:
    """The run's result; an answer's message joins the transcript."""
    result = RunResult(
        run_id=order.run_id,
        thread_id=order.thread_id,
        text=run.last_text,
        tool_results=tuple(run.results),
        usage=run.usage,
        outcome=Outcome.CANCELLED,
    )
    if isinstance(ending, RunError):
        return attrs.evolve(result, outcome=Outcome.ERROR, error=str(ending), code=ending.code)
    if isinstance(ending, Answer):
        if ending.message is not None:
            run.transcript.append(ending.message)
        return attrs.evolve(
            result,
            text=ending.text,
            outcome=ending.outcome,
            data=ending.data,
            note=ending.note,
            pending_tool_calls=ending.pending,
            interrupts=ending.interrupts,
        )
    return result


async def _close_out(run: Run, result: RunResult, unreported: Sequence[ToolCallResult]) -> None:
    """The last events of a run: what was left open, then exactly one terminal event."""
    events = run.events
    if events.seq == 0:
        await events.run_started()
    await run.emit_settled(unreported)
    if result.outcome is Outcome.ERROR:
        await events.run_error(result.error or "", code=result.code or RunErrorCode.RUN_ERROR, usage=run.usage)
    else:
        cancelled_run = result.outcome is Outcome.CANCELLED
        await events.run_finished(
            _finished_value(result),
            cancelled=cancelled_run,
            usage=run.usage,
            pending_tool_call_ids=result.pending_tool_calls,
            interrupts=[pending.interrupt() for pending in result.interrupts],
        )


async def _close_out_late(run: Run, result: RunResult, unreported: Sequence[ToolCallResult]) -> list[EventDict]:
    """The close-out events not delivered yet, numbered on from the last one sent, built without sending them."""
    captured: list[EventDict] = []

    async def capture(event: EventDict) -> None:
        captured.append(event)

    run.events.redirect(capture)
    await _close_out(run, result, unreported)
    return captured


def _finished_value(result: RunResult) -> dict[str, Any]:
    """``RUN_FINISHED.result``: the answer, how the run ended, and its tool calls in brief."""
    value: dict[str, Any] = {
        "text": result.text,
        "outcome": result.outcome.value,
        "toolCalls": [
            {"toolCallId": r.call_id, "name": r.name, "ok": r.ok, **({"kind": r.kind.value} if r.kind else {})}
            for r in result.tool_results
        ],
    }
    if result.note is not None:
        value["note"] = result.note
    if result.data is not None:
        value["data"] = result.data
    return value

"""The conversation actor: one per thread, it owns the thread's history and executes its runs in order.

A run is submitted as a :class:`RunOrder`; the actor executes orders one at a
time and closes each one out — exactly one terminal event, the result, the
history — even when the run was cancelled (DESIGN invariant 6).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, TypeVar

import attrs
import trio

from yao_actors.conversation.run import Answer, Run, RunResources
from yao_actors.conversation.window import window_history
from yao_actors.errors import ModelError, RunError
from yao_actors.events import EventDict, Outcome, RunEvents
from yao_actors.models.base import Message, Usage
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
    were collected (:meth:`ConversationManager.run`).
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
    code: str | None = None
    events: tuple[EventDict, ...] = ()


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
    only cost a trip through the scheduler per event).
    """

    assistant: AssistantSpec
    messages: tuple[Message, ...]
    run_id: str
    thread_id: str
    events: trio.MemorySendChannel[EventDict] | None
    collected: list[EventDict] = attrs.field(factory=list)
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    started: trio.Event = attrs.field(factory=trio.Event)
    done: trio.Event = attrs.field(factory=trio.Event)
    result: RunResult | None = None
    late_events: list[EventDict] = attrs.field(factory=list)

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


@attrs.define(eq=False)
class ConversationHandle:
    """A thread's conversation actor: submit runs to it; it owns the thread's history."""

    thread_id: str
    _mailbox: trio.MemorySendChannel[RunOrder]
    _history: list[Message] = attrs.field(factory=list)
    pending: int = 0
    """Runs submitted and not yet finished."""

    @property
    def history(self) -> tuple[Message, ...]:
        """A copy of the thread's messages so far (input, assistant and tool messages of finished runs)."""
        return tuple(self._history)

    async def submit(self, order: RunOrder) -> None:
        self.pending += 1
        try:
            await self._mailbox.send(order)
        except BaseException:
            self.pending -= 1
            raise

    def close(self) -> None:
        """Take no more runs: the actor ends once the runs already submitted are done."""
        self._mailbox.close()

    async def execute(self, resources: RunResources, order: RunOrder) -> None:
        """Execute one run; it always ends with exactly one terminal event (DESIGN invariant 6)."""
        order.started.set()
        run = Run(resources, RunEvents(order.run_id, order.thread_id, order.deliver), self.history)
        ending: Ending = CANCELLED
        try:
            with order.scope, trio.move_on_after(order.assistant.timeouts.run) as deadline:
                await run.events.run_started()
                run.transcript.extend(order.messages)
                history = window_history(run.history, order.assistant.history_max_messages)
                ending = await _answer(run, order, [*history, *order.messages])
            if deadline.cancelled_caught:
                timeout = order.assistant.timeouts.run
                ending = RunError(f"the run deadline of {timeout:g} s expired", code="run_timeout")
        finally:
            with trio.CancelScope(shield=True):
                unannounced = run.settle()
                order.result = _conclude(run, order, ending)
                self._history.extend(run.transcript)
                with trio.move_on_after(CLEANUP_GRACE):
                    await _announce(run, order.result, unannounced)
                if not run.events.finished:
                    # The consumer did not drain its channel in time: the rest of the close-out goes
                    # past the channel, and the stream hands it over after the last buffered event.
                    order.late_events = await _close_out_late(run, order.result, unannounced)
                order.end()


async def serve_conversation(
    handle: ConversationHandle,
    mailbox: trio.MemoryReceiveChannel[RunOrder],
    resources: RunResources,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The actor: execute the thread's runs one at a time until the mailbox closes or the task is cancelled."""
    task_status.started()
    async with mailbox:
        async for order in mailbox:
            try:
                await handle.execute(resources, order)
            finally:
                handle.pending -= 1


async def _answer(run: Run, order: RunOrder, conversation: list[Message]) -> Ending:
    """``Run.answer`` with every failure turned into a ``RunError`` (cancellation passes)."""
    failure: RunError | None = None
    try:
        return await run.answer(order.assistant, conversation, 0)
    except* RunError as group:
        failure = _first(group, RunError)
    except* ModelError as group:
        failure = RunError(str(_first(group, ModelError)), code="model_error")
    except* Exception as group:
        error = _first(group, Exception)
        logger.error("run %s failed", order.run_id, exc_info=error)
        failure = RunError(f"internal error: {type(error).__name__}: {error}", code="internal_error")
    assert failure is not None
    return failure


E = TypeVar("E", bound=BaseException)


def _first(group: BaseExceptionGroup[E], kind: type[E]) -> E:
    """The first leaf exception of an exception group."""
    leaf: BaseException = group
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    assert isinstance(leaf, kind)
    return leaf


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
        return attrs.evolve(result, text=ending.text, outcome=ending.outcome, data=ending.data, note=ending.note)
    return result


async def _announce(run: Run, result: RunResult, unannounced: Sequence[ToolCallResult]) -> None:
    """The last events of a run: what was left open, then exactly one terminal event."""
    events = run.events
    if events.seq == 0:
        await events.run_started()
    await run.announce_settled(unannounced)
    if result.outcome is Outcome.ERROR:
        await events.run_error(result.error or "", code=result.code or "run_error", usage=run.usage)
    else:
        cancelled_run = result.outcome is Outcome.CANCELLED
        await events.run_finished(_finished_value(result), cancelled=cancelled_run, usage=run.usage)


async def _close_out_late(run: Run, result: RunResult, unannounced: Sequence[ToolCallResult]) -> list[EventDict]:
    """The close-out events not delivered yet, numbered on from the last one sent, built without sending them."""
    captured: list[EventDict] = []

    async def capture(event: EventDict) -> None:
        captured.append(event)

    run.events.redirect(capture)
    await _announce(run, result, unannounced)
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

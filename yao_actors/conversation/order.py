"""A run order: what the caller of a run and the thread's actor share, and how others follow the run live.

The caller (:meth:`ConversationManager.open_run`) makes a :class:`RunOrder` and
submits it to the thread's actor; the actor executes it and delivers its events.
Every event also joins the order's log (:attr:`RunOrder.log`), which is what a
``resume`` follows while the run goes on in this process (:class:`FollowStream`)
and what :meth:`ConversationManager.run` returns.

A consumer that goes away cancels its run, unless it *detached* first
(:meth:`RunOrder.detach`): a detached run goes on without it, and is cancelled
only when nobody has followed it for the runtime's ``detach_grace`` seconds
(:meth:`RunOrder.serve_detached`). The caller reads the events from a :class:`RunStream`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import trio
from opentelemetry.context import Context

from yao_actors.conversation.approvals import PendingApproval
from yao_actors.errors import RunErrorCode
from yao_actors.events import TERMINAL_TYPES, EventDict, Outcome, SendEvent
from yao_actors.models.base import Message, Usage
from yao_actors.observability import tracing
from yao_actors.results import ToolCallResult
from yao_actors.specs import AssistantSpec


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

    ``text`` is filled whenever the run finished, also when the fallback
    answered because the tool loop failed: test :attr:`ok` for success.
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

    @property
    def ok(self) -> bool:
        """Whether the run ended normally: the assistant answered (``answered``) or a ``next`` hook returned data
        (``data``). ``fallback`` and ``degraded`` finished with a text that is not the assistant's answer;
        ``cancelled`` and ``error`` have none."""
        return self.outcome in (Outcome.ANSWERED, Outcome.DATA)


@attrs.define(eq=False)
class RunOrder:
    """A run submitted to a thread's actor; the caller keeps it to cancel the run and read its result.

    ``events`` is the consumer's channel (:meth:`ConversationManager.open_run`), or ``None``
    (:meth:`ConversationManager.run`, which returns the log at the end: a channel and a task
    reading it would only cost a trip through the scheduler per event). ``consumer``, when set,
    takes the events instead of the channel, awaited in the run's own task (a front end that
    forwards each event saves a task hand-off per event). ``principal`` owns the run's thread.
    ``sink`` gets every event too (the run's journal, set by the actor).
    """

    assistant: AssistantSpec
    messages: tuple[Message, ...]
    run_id: str
    thread_id: str
    events: trio.MemorySendChannel[EventDict] | None
    principal: str | None = None
    consumer: SendEvent | None = None
    consumer_error: Exception | None = None
    """What the ``consumer`` raised (other than a closed or broken channel): the run was cancelled then."""
    history: tuple[Message, ...] | None = None
    """When given, the thread's history becomes these messages before the run (an AG-UI HTTP client's conversation)."""
    client_tools: tuple[Mapping[str, Any], ...] = ()
    """The tools of the run's client (AG-UI frontend tools), as function tools."""
    resume: tuple[Mapping[str, Any], ...] = ()
    """AG-UI ``resume`` entries answering the interrupts of the thread's held calls."""
    log: list[EventDict] = attrs.field(factory=list)
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    started: trio.Event = attrs.field(factory=trio.Event)
    done: trio.Event = attrs.field(factory=trio.Event)
    result: RunResult | None = None
    late_events: list[EventDict] = attrs.field(factory=list)
    sink: Callable[[EventDict], None] | None = None
    detached: bool = False
    followers: int = 0
    trace_context: Context | None = attrs.field(factory=tracing.capture)
    """The submitter's trace context: the run's ``invoke_agent`` span starts under it."""
    on_end: Callable[[], object] | None = None
    """Called once the run is over, before anyone waiting for it goes on (the manager unlists the run)."""
    _grew: trio.lowlevel.ParkingLot = attrs.field(factory=trio.lowlevel.ParkingLot)
    _attachment: trio.lowlevel.ParkingLot = attrs.field(factory=trio.lowlevel.ParkingLot)

    def record(self, event: EventDict) -> None:
        """Add an event to the log (and the sink), waking the followers."""
        self.log.append(event)
        if self.sink is not None:
            self.sink(event)
        if self._grew:  # most runs have no follower: no wake-up to make
            self._grew.unpark_all()

    async def deliver(self, event: EventDict) -> None:
        """Send an event to the consumer and record it; a consumer gone without detaching cancels the run.

        An event whose sending was cancelled is not recorded: the emitter will number it again. A
        ``consumer`` that fails gets no more events, and the run is cancelled (its failure is kept in
        :attr:`consumer_error`): it never reaches the run's own code, which must still close out.
        """
        if not self.detached and self.consumer_error is None:
            try:
                if self.consumer is not None:
                    await self.consumer(event)
                elif self.events is not None:
                    await self.events.send(event)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                if not self.detached:
                    self.scope.cancel()
            except Exception as error:
                self.consumer_error = error
                self.scope.cancel()
        self.record(event)

    def detach(self) -> None:
        """The consumer stops reading; the run goes on (see :meth:`serve_detached`)."""
        self.detached = True

    def follow(self, change: int) -> None:
        """A follower came (``+1``) or went (``-1``)."""
        self.followers += change
        self._attachment.unpark_all()

    def end(self) -> None:
        """The run is over: no more events; whoever waits for it may go on.

        The consumer is let go: it is most often the front end's, which holds the run's stream, which holds this
        order, so a cycle would keep the run's events (megabytes for a big tool result) until a full collection.
        """
        self.consumer = None
        if self.on_end is not None:
            self.on_end()
        if self.events is not None:
            self.events.close()
        self.done.set()
        self._grew.unpark_all()
        self._attachment.unpark_all()

    async def wait_grown(self) -> None:
        """Return once an event joins the log or the run ends."""
        if not self.done.is_set():
            await self._grew.park()

    async def serve_detached(self, grace: float) -> None:
        """Cancel the (detached) run once nobody has followed it for ``grace`` seconds; return when it ends."""
        while not self.done.is_set():
            waited = trio.CancelScope(deadline=math.inf if self.followers else trio.current_time() + grace)
            with waited:
                await self._attachment.park()
            if waited.cancelled_caught and not self.followers:
                self.scope.cancel()
                return


class _OrderStream(trio.abc.ReceiveChannel[EventDict]):
    """A stream of a run order's events: the run's ids, and cancelling the run."""

    _order: RunOrder

    @property
    def run_id(self) -> str:
        return self._order.run_id

    @property
    def thread_id(self) -> str:
        return self._order.thread_id

    def cancel(self) -> None:
        """Cancel the run; it still ends with its terminal event (``RUN_FINISHED``, outcome ``cancelled``)."""
        self._order.scope.cancel()


class FollowStream(_OrderStream):
    """A run's logged events with ``seq`` above ``after_seq``, then its live ones, up to its terminal event."""

    def __init__(self, order: RunOrder, after_seq: int) -> None:
        self._order = order
        self._after = after_seq
        self._index = 0
        self._finished = False

    async def receive(self) -> EventDict:
        while not self._finished:
            log = self._order.log
            while self._index < len(log):
                event = log[self._index]
                self._index += 1
                if event["seq"] > self._after:
                    self._finished = event["type"] in TERMINAL_TYPES
                    await trio.lowlevel.checkpoint()
                    return event
            if self._order.done.is_set():
                break
            await self._order.wait_grown()
        await trio.lowlevel.checkpoint()
        raise trio.EndOfChannel

    async def aclose(self) -> None:
        self._finished = True
        await trio.lowlevel.checkpoint()


class RunStream(_OrderStream):
    """The events of one run, as a receive channel; also the run's ids, result and cancel."""

    def __init__(self, order: RunOrder, receive: trio.MemoryReceiveChannel[EventDict]) -> None:
        self._order = order
        self._receive = receive

    @property
    def result(self) -> RunResult | None:
        """The run's result, once it has ended."""
        return self._order.result

    def detach(self) -> None:
        """Stop reading without cancelling: the run goes on, and leaving the ``open_run`` block no longer
        cancels it. It is cancelled once nobody has followed it (``open_resume``) for the runtime's
        ``detach_grace`` seconds."""
        self._order.detach()

    async def wait_done(self) -> None:
        """Return once the run has ended (a detached run too: the websocket service keeps its slot until then)."""
        await self._order.done.wait()

    async def receive(self) -> EventDict:
        try:
            return await self._receive.receive()
        except trio.EndOfChannel:
            failure, self._order.consumer_error = self._order.consumer_error, None
            if failure is not None:
                raise failure from None  # the run's sink failed: its caller's error
            # A consumer too slow for the run's close-out still gets it, and its one terminal event.
            if not self._order.late_events:
                raise
            return self._order.late_events.pop(0)

    async def aclose(self) -> None:
        await self._receive.aclose()

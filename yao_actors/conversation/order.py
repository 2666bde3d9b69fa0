"""A run order: what the caller of a run and the thread's actor share, and how others follow the run live.

The caller (:meth:`ConversationManager.open_run`) makes a :class:`RunOrder` and
submits it to the thread's actor; the actor executes it and delivers its events.
Its events become visible in the order's outlet (:mod:`.outlet`), which the
caller's :class:`RunStream` reads, a ``resume`` follows while the run goes on in this
process (:class:`FollowStream`), and :meth:`ConversationManager.run` returns.

A consumer that goes away cancels its run, unless it *detached* first
(:meth:`RunOrder.detach`): a detached run goes on without it, and is cancelled
only when nobody has followed it for the runtime's ``detach_grace`` seconds
(:meth:`RunOrder.serve_detached`). The caller reads the events from a :class:`RunStream`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import trio
from opentelemetry.context import Context

from yao_actors.conversation.inputs import Pending
from yao_actors.conversation.outlet import OutletReader, RunOutlet
from yao_actors.errors import RunErrorCode
from yao_actors.events import EventDict, Outcome
from yao_actors.models.base import Message, Usage
from yao_actors.observability import tracing
from yao_actors.specs import AssistantSpec
from yao_actors.tools.results import ToolCallResult


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
    interrupts: tuple[Pending, ...] = ()
    authorizations: tuple[Mapping[str, Any], ...] = ()
    """``authorization_required`` interrupts (AG-UI ``Interrupt`` objects): servers the run's principal must
    authorize; not kept with the thread (resuming only goes on, :mod:`yao_actors.auth.principals`)."""

    @property
    def ok(self) -> bool:
        """Whether the run ended normally: the assistant answered (``answered``) or a ``next`` hook returned data
        (``data``). ``fallback`` and ``degraded`` finished with a text that is not the assistant's answer;
        ``cancelled`` and ``error`` have none."""
        return self.outcome in (Outcome.ANSWERED, Outcome.DATA)


@attrs.define(eq=False)
class RunOrder:
    """A run submitted to a thread's actor; the caller keeps it to cancel the run and read its result.

    The run's events become visible in its :attr:`outlet` (:mod:`.outlet`: once stored, with a durable
    store), which the caller's :class:`RunStream`, followers (:class:`FollowStream`) and
    :meth:`ConversationManager.run` read. ``principal`` owns the run's thread.
    """

    assistant: AssistantSpec
    messages: tuple[Message, ...]
    run_id: str
    thread_id: str
    principal: str | None = None
    outlet: RunOutlet = attrs.field(factory=RunOutlet)
    history: tuple[Message, ...] | None = None
    """When given, the thread's history becomes these messages before the run (an AG-UI HTTP client's conversation)."""
    client_tools: tuple[Mapping[str, Any], ...] = ()
    """The tools of the run's client (AG-UI frontend tools), as function tools."""
    resume: tuple[Mapping[str, Any], ...] = ()
    """AG-UI ``resume`` entries answering the interrupts of the thread's held calls."""
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    started: trio.Event = attrs.field(factory=trio.Event)
    done: trio.Event = attrs.field(factory=trio.Event)
    result: RunResult | None = None
    detached: bool = False
    followers: int = 0
    trace_context: Context | None = attrs.field(factory=tracing.capture)
    """The submitter's trace context: the run's ``invoke_agent`` span starts under it."""
    on_end: Callable[[], object] | None = None
    """Called once the run is over, before anyone waiting for it goes on (the manager unlists the run)."""
    _attachment: trio.lowlevel.ParkingLot = attrs.field(factory=trio.lowlevel.ParkingLot)

    @property
    def log(self) -> list[EventDict]:
        """The run's visible events so far (all of them once it ended)."""
        return self.outlet.log

    def detach(self) -> None:
        """The consumer stops reading; the run goes on (see :meth:`serve_detached`)."""
        self.detached = True
        self.outlet.unlimit()

    def follow(self, change: int) -> None:
        """A follower came (``+1``) or went (``-1``)."""
        self.followers += change
        self._attachment.unpark_all()

    def end(self, last: Sequence[EventDict] = ()) -> None:
        """The run is over: its ``last`` events (the terminal one) become visible; whoever waits for it may go on."""
        if self.on_end is not None:
            self.on_end()
        self.outlet.end(last)
        self.done.set()
        self._attachment.unpark_all()

    async def serve_detached(self, grace: float) -> None:
        """Cancel the (detached) run once nobody has followed it for ``grace`` seconds; return when it ends."""
        while not self.done.is_set():
            waited = trio.CancelScope(deadline=math.inf if self.followers else trio.current_time() + grace)
            with waited:
                await self._attachment.park()
            if waited.cancelled_caught and not self.followers:
                self.scope.cancel()
                return


class _OrderStream(OutletReader):
    """A stream of a run order's events: the run's ids, and cancelling the run."""

    def __init__(self, order: RunOrder, after_seq: int = 0, *, consumer: bool = False) -> None:
        super().__init__(order.outlet, after_seq, consumer=consumer)
        self._order = order

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
    """A run's visible events with ``seq`` above ``after_seq``, then its new ones, up to its terminal event."""

    def __init__(self, order: RunOrder, after_seq: int) -> None:
        super().__init__(order, after_seq)


class RunStream(_OrderStream):
    """The events of one run for its caller, as a receive channel; also the run's ids, result and cancel.

    The run waits for this reader when it gets too far ahead (:mod:`.outlet`), unless it detached.
    """

    def __init__(self, order: RunOrder) -> None:
        super().__init__(order, consumer=True)

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

    async def aclose(self) -> None:
        """Stop reading: the run is cancelled (it still ends with its terminal event), unless it detached."""
        if not self._order.detached:
            self._order.scope.cancel()
        self._order.outlet.unlimit()
        await super().aclose()

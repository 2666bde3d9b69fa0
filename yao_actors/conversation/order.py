"""A run order: a live run as its parts, by owner, and how its caller and others follow it.

The caller (:meth:`ConversationManager.open_run`) makes a :class:`RunOrder` of three parts and submits it to the
thread's actor: the immutable :class:`~yao_actors.conversation.request.RunRequest` (the caller's), the
:class:`RunControl` (the manager's: scope, started, done, result, detached, followers, changed only through its
methods) and the :class:`~yao_actors.conversation.streaming.outlet.RunOutlet` its events become visible in. The actor
executes it and delivers its events to the outlet, which the caller's :class:`RunStream` reads, a ``resume``
follows while the run goes on in this process (:class:`FollowStream`), and :meth:`ConversationManager.run`
returns.

A consumer that goes away cancels its run, unless it *detached* first
(:meth:`RunOrder.detach`): a detached run goes on without it, and is cancelled
only when nobody has followed it for the runtime's ``detach_grace`` seconds
(:meth:`RunControl.serve_detached`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs
import trio
from opentelemetry.context import Context

from yao_actors.conversation.interrupts.inputs import Pending
from yao_actors.conversation.request import RunRequest
from yao_actors.conversation.streaming.outlet import OutletReader, RunOutlet
from yao_actors.errors import RunErrorCode
from yao_actors.events import EventDict, Outcome
from yao_actors.models.base import Usage
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
class RunControl:
    """How a live run is steered, owned by the manager that submitted it: its cancel scope, whether it started and
    ended, its result, whether its consumer detached, who follows it. Changed only through its methods (the actor
    starts and ends the run and tells it of its task waits, its streams cancel, detach and follow it); the rest only
    read it.

    ``on_end`` is called once the run is over, before anyone waiting for it goes on (the manager unlists the run).
    """

    _on_end: Callable[[], object] = lambda: None
    _scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    _started: bool = False
    _done: trio.Event = attrs.field(factory=trio.Event)
    _result: RunResult | None = None
    _detached: bool = False
    _followers: int = 0
    _tasks: int = 0
    """How many of the run's calls wait on a task now (a detached run's grace stands still meanwhile)."""
    _attachment: trio.lowlevel.ParkingLot = attrs.field(factory=trio.lowlevel.ParkingLot)
    """Where :meth:`serve_detached` waits for a follower or a task wait to come or go, or the run to end."""

    @property
    def scope(self) -> trio.CancelScope:
        """The run's cancel scope (the actor runs the run in it)."""
        return self._scope

    @property
    def started(self) -> bool:
        """Whether the thread's actor has taken the run up (then it surely ends, with its close-out)."""
        return self._started

    @property
    def ended(self) -> bool:
        return self._done.is_set()

    @property
    def result(self) -> RunResult | None:
        """The run's result, once it ended."""
        return self._result

    @property
    def detached(self) -> bool:
        """Whether its consumer stopped reading without cancelling it."""
        return self._detached

    def start(self) -> None:
        """The actor takes the run up."""
        self._started = True

    def cancel(self) -> None:
        """Cancel the run; it still closes out, with its terminal event."""
        self._scope.cancel()

    def detach(self) -> None:
        """The consumer stops reading; the run goes on (see :meth:`serve_detached`)."""
        self._detached = True

    def follow(self, change: int) -> None:
        """A follower came (``+1``) or went (``-1``)."""
        self._followers += change
        self._attachment.unpark_all()

    def wait_on_tasks(self, change: int) -> None:
        """A call of the run began (``+1``) or ended (``-1``) waiting on a task."""
        self._tasks += change
        self._attachment.unpark_all()

    def end(self, result: RunResult) -> None:
        """The run is over with ``result``: whoever waits for it may go on."""
        self._result = result
        self._on_end()
        self._done.set()
        self._attachment.unpark_all()

    async def wait_done(self) -> None:
        """Return once the run has ended."""
        await self._done.wait()

    async def serve_detached(self, grace: float) -> None:
        """Cancel the (detached) run once nobody has followed it for ``grace`` seconds; return when it ends.

        The time the run waits on a task does not count: a client may leave during an hour-long task and resume
        the run later (the task is bounded by its ``task_timeout``); the grace starts again when the wait ends."""
        while not self._done.is_set():
            held = self._followers or self._tasks
            waited = trio.CancelScope(deadline=math.inf if held else trio.current_time() + grace)
            with waited:
                await self._attachment.park()
            if waited.cancelled_caught and not (self._followers or self._tasks):
                self._scope.cancel()
                return


@attrs.frozen(eq=False)
class RunOrder:
    """A run submitted to a thread's actor, in three parts by owner: the caller's immutable :attr:`request` (with
    its assistant resolved), the manager's :attr:`control`, and the :attr:`outlet` its events become visible in
    (:mod:`.streaming.outlet`: once stored, with a durable store), which the caller's :class:`RunStream`, followers
    (:class:`FollowStream`) and :meth:`ConversationManager.run` read.
    """

    request: RunRequest
    assistant: AssistantSpec
    """The request's assistant, resolved."""
    outlet: RunOutlet = attrs.field(factory=RunOutlet)
    control: RunControl = attrs.field(factory=RunControl)
    trace_context: Context | None = attrs.field(factory=tracing.capture)
    """The submitter's trace context: the run's ``invoke_agent`` span starts under it."""

    @property
    def run_id(self) -> str:
        return self.request.run_id

    @property
    def thread_id(self) -> str:
        return self.request.thread_id

    def detach(self) -> None:
        """The consumer stops reading; the run goes on, never waiting for it again."""
        self.control.detach()
        self.outlet.unlimit()

    def end(self, result: RunResult, last: Sequence[EventDict] = ()) -> None:
        """The run is over: its ``last`` events (the terminal one) become visible, its result is set, and whoever
        waits for it may go on (all at once: no reader runs in between)."""
        self.outlet.end(last)
        self.control.end(result)


class _OrderStream(OutletReader):
    """A stream of a run order's events: the run's ids, and cancelling the run."""

    def __init__(self, order: RunOrder, after_seq: int = 0, *, consumer: bool = False) -> None:
        super().__init__(order.outlet, after_seq, consumer=consumer)
        self._order = order
        self.run_id: Final = order.run_id
        self.thread_id: Final = order.thread_id

    def cancel(self) -> None:
        """Cancel the run; it still ends with its terminal event (``RUN_FINISHED``, outcome ``cancelled``)."""
        self._order.control.cancel()


class FollowStream(_OrderStream):
    """A run's visible events with ``seq`` above ``after_seq``, then its new ones, up to its terminal event."""

    def __init__(self, order: RunOrder, after_seq: int) -> None:
        super().__init__(order, after_seq)


class RunStream(_OrderStream):
    """The events of one run for its caller, as a receive channel; also the run's ids, result and cancel.

    The run waits for this reader when it gets too far ahead (:mod:`.streaming.outlet`), unless it detached.
    """

    def __init__(self, order: RunOrder) -> None:
        super().__init__(order, consumer=True)

    @property
    def result(self) -> RunResult | None:
        """The run's result, once it has ended."""
        return self._order.control.result

    def detach(self) -> None:
        """Stop reading without cancelling: the run goes on, and leaving the ``open_run`` block no longer
        cancels it. It is cancelled once nobody has followed it (``open_resume``) for the runtime's
        ``detach_grace`` seconds."""
        self._order.detach()

    async def wait_done(self) -> None:
        """Return once the run has ended (a detached run too: the websocket service keeps its slot until then)."""
        await self._order.control.wait_done()

    async def aclose(self) -> None:
        """Stop reading: the run is cancelled (it still ends with its terminal event), unless it detached."""
        if not self._order.control.detached:
            self._order.control.cancel()
        self._order.outlet.unlimit()
        await super().aclose()

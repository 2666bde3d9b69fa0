"""The outlet of a run: where its events become visible, and the streams that read them.

**Durable before visible.** A run emits its events into its journal (:mod:`~yao_actors.conversation.durable.journal`); with a store that outlives
the process (SQLite, Redis) an event becomes visible only once the journal has written it to the run's stored log,
and the batch the journal appends is the batch it then shows. So whatever any client saw of a run is in the store,
and a ``resume`` from ``seq`` 0 — on any worker, after any crash — returns exactly that, then the closing event
with the next ``seq``. With the memory store, which dies with the process, an event is visible as soon as it is
emitted and the journal writes behind it. Either way a run's terminal event is shown last, by :meth:`RunOutlet.end`,
once the run's record is closed and its result set.

Visible events join the outlet's :attr:`~RunOutlet.log`, which every reader follows: the run's own consumer
(:class:`RunStream`, from ``open_run``), followers (:class:`FollowStream`, a ``resume`` in this process) and
:meth:`ConversationManager.run`, which returns the log. Readers never hold the run's close-out: a consumer that
stopped reading finds the rest in the log whenever it reads again.

**Backpressure.** The run may get at most :attr:`RunOutlet.limit` events ahead of its own consumer; then its next
event waits (:meth:`RunOutlet.admit`) until the consumer has taken some. A run without a consumer (``run``), a
detached one, and a run closing out never wait: the log holds their events (a run's log lives as long as the run).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import attrs
import trio

from yao_actors.events import TERMINAL_TYPES, EventDict
from yao_actors.tasks import receive_now_or_wait


@attrs.define(eq=False)
class RunOutlet:
    """A run's visible events and how far its consumer has read them (see the module docstring)."""

    limit: int | None = None
    """How many events the run may emit ahead of what its consumer took (``None``: no consumer holds it back)."""
    log: list[EventDict] = attrs.field(factory=list)
    """The run's visible events, in ``seq`` order."""
    emitted: int = 0
    """Events the run emitted (visible or not yet): what :attr:`limit` counts against :attr:`consumed`."""
    consumed: int = 0
    """Events the run's own consumer took from the log."""
    done: bool = False
    """The run is over: :attr:`log` is complete, and ends with its one terminal event."""
    _grew: trio.lowlevel.ParkingLot = attrs.field(factory=trio.lowlevel.ParkingLot)
    _room: trio.lowlevel.ParkingLot = attrs.field(factory=trio.lowlevel.ParkingLot)

    @property
    def shown_seq(self) -> int:
        """The ``seq`` of the last visible event (0: none yet)."""
        return self.log[-1]["seq"] if self.log else 0

    async def admit(self) -> None:
        """Count one more event of the run, once it is less than :attr:`limit` events ahead of its consumer:
        wait until then (cancellable: cancelled, the event is not emitted, nor counted)."""
        if self.limit is not None:
            while self.limit is not None and self.emitted - self.consumed >= self.limit:
                await self._room.park()
        self.emitted += 1

    def show(self, events: Sequence[EventDict]) -> None:
        """Make events visible: they join the log and every reader waiting for one is woken."""
        self.log.extend(events)
        if self._grew:  # most runs have no reader waiting at this moment: no wake-up to make
            self._grew.unpark_all()

    def took(self, count: int) -> None:
        """The run's consumer took ``count`` events: the run may emit that many more."""
        self.consumed += count
        if self._room:
            self._room.unpark_all()

    def unlimit(self) -> None:
        """No consumer holds the run back any more (it detached, left, or the run is closing out)."""
        self.limit = None
        self._room.unpark_all()

    def end(self, last: Sequence[EventDict] = ()) -> None:
        """The run is over: show its ``last`` events (its terminal event) and wake every reader for the end."""
        self.done = True
        self.show(last)
        self._grew.unpark_all()
        self._room.unpark_all()

    async def wait_grown(self) -> None:
        """Return once an event joins the log or the run ends."""
        if not self.done:
            await self._grew.park()


class OutletReader(trio.abc.ReceiveChannel[EventDict]):
    """A reader of a run's log, from its first event with ``seq`` above ``after_seq`` to its terminal event.

    :meth:`receive_nowait` takes an event that is already visible without a trip through the scheduler (a
    front end forwarding a burst of events into its socket's queue takes them all at once); :meth:`receive`
    waits for the next one.
    """

    def __init__(self, outlet: RunOutlet, after_seq: int = 0, *, consumer: bool = False) -> None:
        self._outlet = outlet
        self._after = after_seq
        self._index = 0
        self._consumer = consumer
        self._finished = False

    def receive_nowait(self) -> EventDict:
        """The next visible event; ``trio.WouldBlock`` when there is none yet, ``trio.EndOfChannel`` at the end."""
        log = self._outlet.log
        while not self._finished and self._index < len(log):
            event = log[self._index]
            self._index += 1
            if self._consumer:
                self._outlet.took(1)
            if event["seq"] > self._after:
                self._finished = event["type"] in TERMINAL_TYPES
                return event
        if self._finished or self._outlet.done:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    async def receive(self) -> EventDict:
        while True:
            try:
                event = self.receive_nowait()
            except trio.WouldBlock:
                await self._outlet.wait_grown()
                continue
            except trio.EndOfChannel:
                await trio.lowlevel.checkpoint()
                raise
            await trio.lowlevel.checkpoint()
            return event

    async def aclose(self) -> None:
        self._finished = True
        await trio.lowlevel.checkpoint()


class EventSource(Protocol):
    """What :func:`forward_events` reads: a run's events, taken at once when there (an :class:`OutletReader`, a
    stored run's stream)."""

    def receive_nowait(self) -> EventDict: ...

    async def receive(self) -> EventDict: ...


async def forward_events(source: EventSource, forward: Callable[[EventDict], Awaitable[None]]) -> None:
    """Hand every event of ``source`` to ``forward``, in order, until its end: the events already there one after
    the other without a trip through the scheduler (a front end queues a burst for one socket write), then wait."""
    while True:
        try:
            event = await receive_now_or_wait(source)
        except trio.EndOfChannel:
            return
        await forward(event)

"""The journal of a run: what it writes to the conversation store, behind the run, one write at a time.

A run hands its journal each finished turn of history (an assistant message
with ``tool_calls`` together with all its tool messages, or the answer) and
every event it emits. A writer task (:meth:`RunJournal.serve`) writes them in
order while the run goes on, and the close-out waits for the rest
(:meth:`RunJournal.flush`). A turn and the events queued with it go in one
store call (``ConversationStore.append_turn``: one SQLite transaction, one
Redis round trip). Each store call is atomic, so a crash never leaves half a
turn; each runs shielded, so a cancellation never leaves one in doubt (written
or not?). The writer makes one write per wake; the events emitted meanwhile go
with the next turn or within :data:`EVENTS_DELAY`. Writes take turns without a
trip through the scheduler when none is going on
(:class:`~yao_actors.events.Turnstile`). The events are the run's
:class:`~yao_actors.events.WireEvent` values: a store keeps the text they went
on the wire as, encoded once.

**When the writer writes: once the process is idle.** A turn is queued as the
run goes on to its next model call and tool request. Written at once, the
store's work (for the memory store: encoding the events, measuring the
messages, ~0.1 ms) would run before that request reaches its server, and a run
whose tool answers in a millisecond would wait for it. So a woken writer first
waits until no task of the process can run
(``trio.testing.wait_all_tasks_blocked``, trio's public way of waiting for
that: the scheduler wakes it when nothing is runnable and no I/O is ready,
without spinning) — the run waits on its tool, whose request has gone out —
and writes in time the process would otherwise spend waiting. It waits at most
:data:`IDLE_WAIT` seconds: a busy service is never idle, and its turns still
reach the store within that bound (a process sharing the store, or a resume,
sees them that much later at most; a write that waited takes along what was
queued meanwhile). A wait that timed out tells the process is busy: for the next
:data:`BUSY_HOLD` seconds the writers of every run write at once instead of
waiting (a timed-out wait costs a ``Cancelled``, ~50 µs; on a busy service each
write paid one), then try waiting again. Nothing else changes: one write at a time, turns in order,
each store call atomic and shielded, and the close-out writes everything left
at once, without waiting, before the run counts as over. (A test's own
``wait_all_tasks_blocked()`` wakes in the same moment as a waiting writer, in
no set order: a test that reads the store waits for the run, not for that.)

The first :class:`~yao_actors.errors.StoreUnavailable` (or a write to a thread the
store no longer has, taken as one) stops the writing: the
journal keeps it in :attr:`RunJournal.failure`, writes nothing more, and the
run ends with ``RUN_ERROR`` ``store_unavailable``. :attr:`RunJournal.stored`
is the history that reached the store; the thread's in-memory copy takes only
that, so memory and store never disagree.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import trio
import trio.testing

from yao_actors.conversation.approvals import PendingApproval
from yao_actors.errors import RunError, RunErrorCode, StoreUnavailable
from yao_actors.events import EventDict, Turnstile
from yao_actors.history_budget import message_bytes
from yao_actors.models.base import Message
from yao_actors.store import ConversationStore, RunStatus

logger = logging.getLogger(__name__)

EVENTS_DELAY = 0.05
"""Seconds the events before a tool batch may wait to be written with the batch's turn (see ``kick_soon``)."""

IDLE_WAIT = 0.01
"""Seconds a write waits at most for the process to be idle (see the module docstring)."""

BUSY_HOLD = 0.1
"""Seconds the writes skip the wait for idle once such a wait timed out (see the module docstring)."""

_busy_until: trio.lowlevel.RunVar[float] = trio.lowlevel.RunVar("yao_actors.journal.busy_until", default=-math.inf)
"""Until when this process counts as busy (``trio.current_time()``): its writes do not wait for idle."""


def store_unavailable(error: StoreUnavailable) -> RunError:
    """The ``RunError`` of a run whose store failed."""
    return RunError(f"the conversation store is unavailable: {error}", code=RunErrorCode.STORE_UNAVAILABLE)


def lost_thread(thread_id: str, error: KeyError) -> StoreUnavailable:
    """The failure of a write to a thread (or run) the store no longer has (``KeyError``): someone forgot it."""
    return StoreUnavailable(
        f"thread {thread_id!r} is no longer in the store ({error.args[0] if error.args else error})"
    )


@attrs.define(eq=False)
class RunJournal:
    """The store writes of one run (see the module docstring). Made by the conversation actor per run."""

    store: ConversationStore
    thread_id: str
    run_id: str
    stored: list[Message] = attrs.field(factory=list)
    """The run's messages the store has: its input once :meth:`start` succeeded, then each written turn."""
    sizes: list[int] = attrs.field(factory=list)
    """The :func:`~yao_actors.history_budget.message_bytes` of each of :attr:`stored`, measured as it was written
    (by the store when it returns them, as the memory store does): the thread's history takes them."""
    failure: StoreUnavailable | None = None
    started: bool = False
    transcript: list[Message] = attrs.field(factory=list)
    """The run's transcript (the run appends to it); :meth:`checkpoint` queues what is new of it."""
    written: int = 0
    """How much of :attr:`transcript` the journal has been given."""
    _turns: list[Message] = attrs.field(factory=list)
    _events: list[EventDict] = attrs.field(factory=list)
    _kicked: bool = False
    """A turn is queued: the writer writes at once (set by :meth:`kick`, cleared when the writer wakes)."""
    _wake: trio.lowlevel.ParkingLot = attrs.field(factory=trio.lowlevel.ParkingLot)
    _writing: Turnstile = attrs.field(factory=Turnstile)
    """One write at a time (the writer's, the close-out's), in order; free, it costs no trip through the scheduler."""
    _due: float = math.inf
    _waiting: trio.CancelScope | None = None
    _serving: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    """The writer's scope: :meth:`close` cancels it when the writer is not parked."""
    _closed: bool = False

    async def start(self, assistant: str, messages: Sequence[Message]) -> None:
        """Record the run as running, with its input joining the thread's history, in one write.

        Raises ``RunError`` ``store_unavailable`` when the store is out of reach, and
        ``bad_request`` when the run id is already stored (runs are never overwritten).
        """
        try:
            with trio.CancelScope(shield=True):
                await self.store.start_run(self.thread_id, self.run_id, assistant, messages)
        except StoreUnavailable as error:
            self.failure = error
            raise store_unavailable(error) from error
        except ValueError:
            raise RunError(
                f"runId {self.run_id!r} is already used by a stored run", code=RunErrorCode.BAD_REQUEST
            ) from None
        except KeyError as error:
            self.failure = lost_thread(self.thread_id, error)
            raise store_unavailable(self.failure) from error
        self.started = True
        self._stored(messages)

    def event(self, event: EventDict) -> None:
        """Keep an event for the next write: with the next turn, or within :data:`EVENTS_DELAY` seconds,
        so that a process sharing the store can follow the run as it goes (none are written for a run
        whose start could not be stored)."""
        self._events.append(event)
        if self._due == math.inf:
            self.kick_soon()

    def turn(self, messages: Sequence[Message]) -> None:
        """Queue whole turns of history for writing; raises ``store_unavailable`` once a write has failed."""
        if self.failure is not None:
            raise store_unavailable(self.failure)
        self._turns.extend(messages)
        self.kick()

    def checkpoint(self, whole_turn: bool) -> None:
        """The run's checkpoint (``Run.checkpoint``): after a tool batch (``whole_turn``), queue the transcript's
        new messages; before one, have the events so far written soon.

        A method of the journal rather than a closure over the run: the run refers to the journal, the journal
        never to the run, so a finished run is freed by reference counting. (A cycle kept every run's
        messages, 1 MB each in the RSS test, until the next full collection: tens of MB of garbage.)
        """
        if whole_turn:
            self.turn(self._new_transcript())
        else:
            self.kick_soon()

    def _new_transcript(self) -> list[Message]:
        """The transcript's messages the journal has not been given yet; given now."""
        new, self.written = self.transcript[self.written :], len(self.transcript)
        return new

    async def write_rest(self) -> None:
        """The close-out's write: the transcript's messages not queued yet and everything queued, now, by the
        caller (the writer is not woken for them: it would only wait to find nothing left)."""
        if self.started and self.failure is None:
            self._turns.extend(self._new_transcript())
        await self.flush()

    def kick(self) -> None:
        """Wake the writer: what is queued is written as soon as the write before it is done."""
        self._kicked = True
        self._wake.unpark_all()

    def kick_soon(self) -> None:
        """Have the events so far written within :data:`EVENTS_DELAY` seconds, unless a turn comes first and
        takes them along (a fast tool batch then costs one write, a slow one still has its events stored)."""
        due = trio.current_time() + EVENTS_DELAY
        if due < self._due:
            self._due = due
            waiting = self._waiting
            if waiting is not None and due < waiting.deadline:  # waiting for idle: that deadline is sooner
                waiting.deadline = due

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The writer task: write what is queued each time it is woken (or due), until :meth:`close`.

        One write per wake, made once the process is idle or :data:`IDLE_WAIT` seconds later (at once while
        the process is busy): what is queued meanwhile goes along; the events a run emits while a turn is
        being written wait for the next turn, or their :data:`EVENTS_DELAY` (queued then, they set it), not
        for a write of their own.
        """
        task_status.started()
        with self._serving:
            while not self._closed:
                await self._wait_for_work()
                if self._closed:
                    return
                await self.flush(everything=False)

    async def _wait_for_work(self) -> None:
        """Until kicked or due, then until the process is idle (unless it is busy).

        One scope for both waits (a scope costs more than the rest of a wake), its deadline lowered (never
        raised) to :data:`IDLE_WAIT` from the kick. Due, the writer writes at once: the events have waited
        their :data:`EVENTS_DELAY`.
        """
        idle_by = math.inf
        with trio.CancelScope(deadline=self._due) as waiting:
            self._waiting = waiting
            if not self._kicked:
                await self._wake.park()
                if self._closed:
                    return
            now = trio.current_time()
            if now >= _busy_until.get():
                idle_by = now + IDLE_WAIT
                if idle_by < waiting.deadline:
                    waiting.deadline = idle_by
                await trio.testing.wait_all_tasks_blocked()
        self._waiting = None
        self._kicked = False
        self._due = math.inf
        if waiting.cancelled_caught and waiting.deadline == idle_by:
            _busy_until.set(trio.current_time() + BUSY_HOLD)  # never idle within IDLE_WAIT: busy

    def close(self) -> None:
        """End the writer (after the close-out's :meth:`flush`): a parked writer is woken and returns; one
        waiting for idle or writing is cancelled (a write is shielded: it completes)."""
        self._closed = True
        if self._wake:
            self._wake.unpark_all()
        else:
            self._serving.cancel()

    async def flush(self, *, everything: bool = True) -> None:
        """Write what is queued, the turns with the events, in one store write; with ``everything``, again
        until nothing is left (what the run queued meanwhile). A failure is kept in :attr:`failure`."""
        await self._writing.enter()
        try:
            while self.started and self.failure is None and (self._turns or self._events):
                await self._write()
                if not everything:
                    break
        finally:
            self._writing.leave()

    async def _write(self) -> None:
        """One store write of everything queued (shielded: a cancellation never leaves it in doubt)."""
        turns, self._turns = self._turns, []
        events, self._events = self._events, []
        try:
            with trio.CancelScope(shield=True):
                sizes = await self.store.append_turn(self.thread_id, self.run_id, turns, events)
            self._stored(turns, sizes)
        except StoreUnavailable as error:
            logger.warning("run %s: the conversation store failed: %s", self.run_id, error)
            self.failure = error
        except ValueError as error:
            # Another process closed the run's log (this run lost its thread's lease and was taken
            # for dead): what it adds now is not stored, and the run is being cancelled.
            logger.error("run %s: events not stored: %s", self.run_id, error)
        except KeyError as error:
            self.failure = lost_thread(self.thread_id, error)
            logger.error("run %s: %s", self.run_id, self.failure)

    def _stored(self, messages: Sequence[Message], sizes: Sequence[int] | None = None) -> None:
        """Messages the store took: kept with their sizes (the store's measures when it gave them)."""
        self.stored.extend(messages)
        if sizes is None or len(sizes) != len(messages):
            sizes = list(map(message_bytes, messages))
        self.sizes.extend(sizes)

    async def finish(self, status: RunStatus, outcome: str, usage: Mapping[str, Any]) -> None:
        """Close the run's record (after :meth:`flush`); nothing when the run never started or the store failed."""
        if not self.started or self.failure is not None:
            return
        try:
            with trio.CancelScope(shield=True):
                await self.store.finish_run(self.run_id, status=status, outcome=outcome, usage=usage)
        except StoreUnavailable as error:
            logger.warning("run %s: could not close its record: %s", self.run_id, error)
            self.failure = error

    async def keep_approvals(self, approvals: Sequence[PendingApproval]) -> None:
        """Write the thread's pending approvals to the store (``[]``: none wait any more), shielded, so a resume
        after a restart, or in another process, finds them. Raises ``RunError`` ``store_unavailable`` (kept in
        :attr:`failure`) when the store is out of reach."""
        try:
            with trio.CancelScope(shield=True):
                await self.store.save_approvals(self.thread_id, [pending.to_record() for pending in approvals])
        except StoreUnavailable as error:
            logger.warning("run %s: could not store the thread's pending approvals: %s", self.run_id, error)
            self.failure = error
            raise store_unavailable(error) from error

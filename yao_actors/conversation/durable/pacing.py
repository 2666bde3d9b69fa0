"""When a run's journal writes: once the process is idle, or when due (:class:`WritePacing`).

A turn is queued as the
run goes on to its next model call and tool request. Written at once, a
store's write (a SQLite transaction, a Redis round trip) would run before that
request reaches its server, and would cost a write per turn where a busy
process could group several. So a woken writer first
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

A store whose writes are work in this process and cost nothing to group (the memory store: it says so, its
``writes_in_step``) has its turns written as they are queued, in the run's step (:meth:`RunJournal.turn`), and
its ``RUN_STARTED`` once the run is started (:meth:`RunJournal.kick_started`): waking the writer and waiting for
idle cost more than the write itself.

Events the run emits between turns, with the memory store, are written with the next turn or within
:data:`EVENTS_DELAY` seconds (:meth:`WritePacing.kick_soon`), whichever comes first.
"""

from __future__ import annotations

import math

import attrs
import trio
import trio.testing

EVENTS_DELAY = 0.05
"""Seconds the events before a tool batch may wait to be written with the batch's turn (see :meth:`WritePacing.kick_soon`;
the memory store's runs only: a durable store's events are written as soon as the process is idle)."""

IDLE_WAIT = 0.01
"""Seconds a write waits at most for the process to be idle (see the module docstring)."""

BUSY_HOLD = 0.1
"""Seconds the writes skip the wait for idle once such a wait timed out (see the module docstring)."""

_busy_until: trio.lowlevel.RunVar[float] = trio.lowlevel.RunVar("yao_actors.journal.busy_until", default=-math.inf)
"""Until when this process counts as busy (``trio.current_time()``): its writes do not wait for idle."""


@attrs.define(eq=False)
class WritePacing:
    """When one run's writer writes (see the module docstring): woken by :meth:`kick` (a write at once) or due
    after :meth:`kick_soon`, then once the process is idle; :meth:`stop` ends the waiting for good."""

    _kicked: bool = False
    """Something is queued to be written at once (set by :meth:`kick`, cleared when the writer wakes)."""
    _wake: trio.lowlevel.ParkingLot = attrs.field(factory=trio.lowlevel.ParkingLot)
    _due: float = math.inf
    _waiting: trio.CancelScope | None = None
    _stopped: bool = False

    def kick(self) -> None:
        """Wake the writer: what is queued is written as soon as the write before it is done."""
        self._kicked = True
        if self._wake:
            self._wake.unpark_all()

    def kick_soon(self) -> None:
        """Have the events so far written within :data:`EVENTS_DELAY` seconds, unless a turn comes first and
        takes them along (a fast tool batch then costs one write, a slow one still has its events stored)."""
        if self._due != math.inf:
            return  # due already, and sooner: the clock only goes on
        due = self._due = trio.current_time() + EVENTS_DELAY
        waiting = self._waiting
        if waiting is not None and due < waiting.deadline:  # waiting for idle: that deadline is sooner
            waiting.deadline = due

    def stop(self) -> bool:
        """No more waits: a parked writer is woken (and returns); whether one was (else the caller cancels a
        writer that is waiting for idle, or writing)."""
        self._stopped = True
        if not self._wake:
            return False
        self._wake.unpark_all()
        return True

    async def wait_for_work(self) -> None:
        """Until kicked or due, then until the process is idle (unless it is busy).

        One scope for both waits (a scope costs more than the rest of a wake), its deadline lowered (never
        raised) to :data:`IDLE_WAIT` from the kick. Due, the writer writes at once: the events have waited
        their :data:`EVENTS_DELAY`.
        """
        idle_by = math.inf
        with trio.CancelScope(deadline=self._due) as waiting:
            self._waiting = waiting
            if not self._kicked:
                # Nothing queued for a write at once: park until the run queues a turn (``kick``) or its events
                # come due (this scope's deadline, which ``kick_soon`` lowers). A kick made while the writer was
                # writing is not lost: ``_kicked`` stays set, and the writer does not park at all.
                await self._wake.park()
                if self._stopped:
                    return
            now = trio.current_time()
            if now >= _busy_until.get():
                idle_by = now + IDLE_WAIT
                if idle_by < waiting.deadline:
                    waiting.deadline = idle_by
                # Once every task waits, the run's request has gone out to its tool or model: the store's
                # work then costs the run nothing (see the module docstring).
                await trio.testing.wait_all_tasks_blocked()
        self._waiting = None
        self._kicked = False
        self._due = math.inf
        if waiting.cancelled_caught and waiting.deadline == idle_by:
            _busy_until.set(trio.current_time() + BUSY_HOLD)  # never idle within IDLE_WAIT: busy

"""What a store is: every store protocol in one place, and the base implementations of a store's fast paths.

::

    ConversationStore     threads, runs, event logs, pending approvals (a backend per package:
    │                     yao_actors.store.memory, .sqlite, .redis)
    ├── ThreadLeases      leases(): one run of a thread at a time across processes (yao_actors.store.leases)
    ├── TokenRecords      oauth_tokens(): sealed OAuth records and pending authorizations (yao_actors.auth.vault)
    ├── ParkedCalls       parked_calls(): handshake-era calls held open by one process, answered from another
    │                     (yao_actors.tools.parked_relay)
    └── TaskRecords       tasks(): the open tasks of runs (tool calls a server answered with a task), kept with
                          their thread so that polling goes on after a crash, on any worker

Every method is a Trio checkpoint; a backend that cannot be reached raises
:class:`~yao_actors.errors.StoreUnavailable` and has then written nothing
of the call that failed (every write is one transaction). A store takes what it keeps as given: messages as
mappings, events as the text they went on the wire as (:class:`~yao_actors.store.records.EncodedEvent`), so it
depends on nothing of how an event or a tool's result is made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

import attrs
import trio

import yao_actors.store.records as records
from yao_actors.errors import RunIdTaken, UnknownThread
from yao_actors.specs import DEFAULT_EVENT_TTL as DEFAULT_EVENT_TTL  # a configuration value, re-exported
from yao_actors.store.task_handle import TaskHandle

POLL_INTERVAL: Final = 0.5
"""Seconds a store without a blocking read waits in :meth:`ConversationStore.wait_events`."""

OUTCOME_KEEP: Final = 600.0
"""Seconds a held call's answer or outcome nobody took is kept (its taker gave up or died)."""

#: The most records one :meth:`TokenRecords.expire` drops (the rest, at the next).
EXPIRE_BATCH = 1000


class TokenRecords(Protocol):
    """Sealed token records by (server, identity), kept as the caller sealed them: the store never sees a token
    (:mod:`yao_actors.auth.vault` seals each record first). Every method is a checkpoint, and a store out of reach
    raises :class:`~yao_actors.errors.StoreUnavailable`.

    A record may carry when it expires (the pending authorizations of :mod:`yao_actors.auth.states` do), in the
    clear beside the sealed text and indexed by it: :meth:`expire` drops those past their time without reading,
    let alone opening, any record."""

    async def load(self, server: str, identity: str) -> str | None:
        """The sealed text of the record, or ``None``."""
        ...

    async def save(self, server: str, identity: str, sealed: str, expires_at: float | None = None) -> None:
        """Keep ``sealed`` as the record (replacing it); with ``expires_at`` (POSIX time), :meth:`expire` drops it
        once that time has come."""
        ...

    async def delete(self, server: str, identity: str) -> bool:
        """Drop the record; whether there was one."""
        ...

    async def expire(self, server: str, now: float, most: int = EXPIRE_BATCH) -> int:
        """Drop up to ``most`` of ``server``'s records whose ``expires_at`` is ``now`` or earlier, by the expiry
        index (no record is read); how many."""
        ...

    async def keys(self) -> list[tuple[str, str]]:
        """Every record's (server, identity), sorted."""
        ...


class ParkedCalls(Protocol):
    """Held calls: a handshake-era call one process holds open, answered from another through the store.

    A handshake-era MCP server asks the user while its call is open (``elicitation/create``), so the call cannot
    be made again elsewhere: the process that runs it keeps it open until the answer comes, which may reach any
    process sharing the store (:mod:`yao_actors.tools.parked_relay` joins the two)::

        holder (the process holding the call)            requester (the process the resume reached)
        hold(ticket, holder, ttl)   before the interrupt goes out
        renew(...) every ttl/3      while it holds the call  holder(ticket) → is a live process holding it?
        take_answer(...)            waits for the answer ◀── deliver(ticket, answer)   at most once
        finish(ticket, outcome)     the call's outcome   ──▶ take_outcome(ticket)      once
        release(...)                gave up (timed out, answered in process, connection lost)

    An entry lives ``ttl`` seconds unless renewed: a holder that died (``kill -9``) stops renewing, and once the
    ttl has passed :meth:`holder` says nobody holds the call, and :meth:`deliver` refuses an answer. An outcome not
    taken is kept :data:`OUTCOME_KEEP` seconds. Answers and outcomes are JSON objects. Each method is one atomic
    step in the store; the ``take_*`` ones wait up to ``timeout`` seconds (``0``: just look). Memory keeps them in
    dicts, SQLite in a ``parked_calls`` row per ticket (polled), Redis in a hash with a PX expiry and two lists
    popped with BLPOP."""

    async def hold(self, ticket: str, holder: str, ttl: float) -> None:
        """Record that ``holder`` holds the call ``ticket`` open, for ``ttl`` seconds unless renewed."""
        ...

    async def renew(self, ticket: str, holder: str, ttl: float) -> bool:
        """Extend the holding by ``ttl`` seconds; ``False`` when ``holder`` no longer holds it (expired, released,
        finished)."""
        ...

    async def holder(self, ticket: str) -> str | None:
        """Who holds the call now; ``None`` when nobody does (never held, expired, released or finished)."""
        ...

    async def deliver(self, ticket: str, answer: Mapping[str, Any]) -> bool:
        """Give the held call its answer, once: ``False`` (nothing written) when nobody holds it or it has one."""
        ...

    async def take_answer(self, ticket: str, holder: str, timeout: float) -> dict[str, Any] | None:  # noqa: ASYNC109
        """The answer given to the call ``holder`` holds, once (a second take finds none); ``None`` when none came
        within ``timeout`` seconds."""
        ...

    async def finish(self, ticket: str, holder: str, outcome: Mapping[str, Any]) -> bool:
        """End the holding with the call's outcome, for :meth:`take_outcome`; ``False`` when ``holder`` no longer
        holds it."""
        ...

    async def take_outcome(self, ticket: str, timeout: float) -> dict[str, Any] | None:  # noqa: ASYNC109
        """The outcome the holder finished the call with, once; ``None`` when none came within ``timeout``."""
        ...

    async def release(self, ticket: str, holder: str) -> None:
        """End the holding without an outcome (an answer not taken goes with it), if ``holder`` holds it."""
        ...


class TaskRecords(Protocol):
    """The open tasks of runs: a :class:`~yao_actors.store.task_handle.TaskHandle` for each tool call a server
    answered with a task, saved before the run waits on it and removed once its result has reached the model.

    A handle is kept with its thread (``forget_thread`` deletes it) under ``(thread id, task id)``; what a process
    needs to go on polling the task after the one that made it died is all in it (it holds no secret). Every
    method is one atomic step and a checkpoint; a store out of reach raises
    :class:`~yao_actors.errors.StoreUnavailable`. Memory keeps them in a dict, SQLite in a ``tasks`` row each
    (schema version 7), Redis in a hash per thread."""

    async def save(self, handle: TaskHandle) -> None:
        """Keep ``handle`` (replacing the one of the same thread and task id); ``UnknownThread`` (nothing written)
        when its thread was not opened."""
        ...

    async def remove(self, thread_id: str, task_id: str) -> bool:
        """Drop the thread's handle of task ``task_id``; whether there was one."""
        ...

    async def for_thread(self, thread_id: str) -> list[TaskHandle]:
        """The thread's open tasks, oldest first (``[]`` for none, or for an unknown thread)."""
        ...

    async def for_run(self, run_id: str) -> list[TaskHandle]:
        """The open tasks of run ``run_id``, oldest first (``[]`` for none, or for an unknown run)."""
        ...


class ThreadLeases(Protocol):
    """The leases of one store (see the module docstring). Every method is one atomic step in the store."""

    async def take(self, thread_id: str, token: str, ttl: float, *, also_close: str | None = None) -> records.Taken:
        """Take the thread's lease for ``token`` (or extend it, when ``token`` holds it) for ``ttl`` seconds.

        When taken, every run of the thread still ``running`` (and ``also_close``, a run of that thread) is
        closed as interrupted: with the lease free, nobody is running it.
        """
        ...

    async def renew(self, thread_id: str, token: str, ttl: float) -> bool:
        """Extend the lease ``token`` holds by ``ttl`` seconds; ``False`` when it no longer holds it."""
        ...

    async def reclaim(self, thread_id: str, token: str, ttl: float, run_id: str) -> bool:
        """Take the lease back for ``token`` after it expired, if nobody took it meanwhile and run ``run_id`` is
        still running (nobody took it for dead): a run whose store was out of reach for longer than ``ttl``
        goes on. ``False`` (and nothing changed) otherwise."""
        ...

    async def release(self, thread_id: str, token: str) -> None:
        """Give the lease up, if ``token`` still holds it."""
        ...

    async def unleased_running_runs(self, owner: str) -> list[tuple[str, str]]:
        """The ``(run id, thread id)`` of every run the store has as running whose thread's lease is free (expired
        or released), but those ``owner`` started (the process asking runs them: they are alive): what a sweep
        looks at. (Read in bulk; :meth:`take` checks each again, atomically.)"""
        ...


class ConversationStore(Protocol):
    """Threads, runs and run event logs, kept between runs (and processes, when durable).

    Writes are atomic: every call writes all of what it was given or nothing.
    Reads of something unknown give an empty answer (``None``, ``[]``), never
    an error. :func:`~yao_actors.store.open_store` opens one; the runs a dead
    process left running are closed through thread leases (:mod:`yao_actors.store.leases`).

    Everything a store can do is here, and the runtime calls it without asking what kind of store it holds. The
    methods after :meth:`load_approvals`, and :meth:`wait_events`, have base implementations, which a store of
    one's own inherits by subclassing this class: :meth:`wait_events` polls, :meth:`take_and_start` and
    :meth:`append_last_turn` do their work in two calls, :meth:`writes_in_step` says no, :meth:`parked_calls` offers
    none, :meth:`problem` finds none, :meth:`thread_keepers` keeps no list. A backend overrides them where it does better (one write instead
    of two, a blocking read).
    """

    event_ttl: float
    """Seconds a run's event log is kept after its last event."""

    owner: str
    """This store object's token; runs it starts carry it."""

    @property
    def durable(self) -> bool:
        """Whether the store outlives this process, and other processes may share it: a run then takes its
        thread's lease, shows an event only once stored, and reloads a history another process may have added to."""
        ...

    def leases(self) -> ThreadLeases:
        """The store's thread leases (:mod:`yao_actors.store.leases`): the same object at every call."""
        ...

    def oauth_tokens(self) -> TokenRecords:
        """The store's sealed OAuth token records (:class:`TokenRecords`)."""
        ...

    # -- threads

    async def open_thread(self, thread_id: str, principal: str | None) -> records.ThreadInfo:
        """Create the thread owned by ``principal`` (``ThreadInfo.created``), or load it as stored.

        An existing thread keeps its owner: the caller compares
        ``ThreadInfo.principal`` with its own and treats another's thread as unknown.
        """
        ...

    async def get_thread(self, thread_id: str) -> records.ThreadInfo | None:
        """The thread, or ``None`` when it is not stored."""
        ...

    async def list_threads(
        self, principal: str | records.AnyPrincipal | None = records.ANY_PRINCIPAL, *, limit: int = 100
    ) -> list[records.ThreadInfo]:
        """Threads, newest first: every thread, or those owned by ``principal``."""
        ...

    async def load_history(self, thread_id: str) -> list[records.Message]:
        """The thread's messages in order (``[]`` for an unknown thread)."""
        ...

    async def append_messages(self, thread_id: str, messages: Sequence[records.Message]) -> None:
        """Append one turn (or a whole run's new messages) to an opened thread, all or nothing.

        Give an assistant message with ``tool_calls`` and all its tool messages
        in one call, so a crash never leaves a dangling call in the history.
        """
        ...

    async def forget_thread(self, thread_id: str) -> bool:
        """Delete the thread, its history, its runs and their event logs; whether it existed."""
        ...

    # -- runs

    async def start_run(
        self, thread_id: str, run_id: str, assistant: str, input_messages: Sequence[records.Message]
    ) -> records.RunRecord:
        """Record a run as running on an opened thread, appending its input to the history in the same write."""
        ...

    async def finish_run(
        self, run_id: str, *, status: records.RunStatus, outcome: str, usage: Mapping[str, Any] | None = None
    ) -> bool:
        """Close a running run; ``False`` (and nothing written) when it is unknown or no longer running."""
        ...

    async def get_run(self, run_id: str) -> records.RunRecord | None:
        """The run, or ``None`` when it is not stored."""
        ...

    async def list_runs(self, thread_id: str) -> list[records.RunRecord]:
        """The thread's runs in the order they started."""
        ...

    # -- event logs

    async def append_events(self, run_id: str, events: Sequence[records.EncodedEvent]) -> None:
        """Append a batch of a run's events (each with an integer ``seq`` above every stored one), kept as the
        text given (:class:`~yao_actors.store.records.EncodedEvent`).

        Refreshes the log's expiry to ``event_ttl`` seconds from now. A batch whose
        numbers do not rise above the log's last raises :class:`~yao_actors.errors.SeqConflict` and writes nothing.
        """
        ...

    async def append_turn(
        self,
        thread_id: str,
        run_id: str,
        messages: Sequence[records.Message],
        events: Sequence[records.EncodedEvent],
        *,
        finish: records.RunFinish | None = None,
    ) -> Sequence[int] | None:
        """Append a turn of a running run's history and a batch of its events in one write, all or nothing;
        with ``finish``, close the run's record in the same write (:meth:`finish_run`).

        What a run writes as it goes (its journal calls this once per turn, and once more with its terminal
        event and ``finish``): ``messages`` as :meth:`append_messages` takes them (a whole turn), ``events``
        as :meth:`append_events` does; either may be empty. :class:`~yao_actors.errors.UnknownThread` when the
        thread was not opened, :class:`~yao_actors.errors.UnknownRun` when the run is not stored on it,
        :class:`~yao_actors.errors.RunClosed` when the run is no longer running (another process closed it),
        :class:`~yao_actors.errors.InvalidStoreInput` or ``SeqConflict`` for a message or a batch those methods
        refuse; in each case nothing is written. Returns the messages' sizes
        (:func:`~yao_actors.history_budget.message_bytes`, one each) when the store measured them (the memory
        store does, for its budget), so the caller need not; else ``None``.
        """
        ...

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[records.EventDict]:
        """The run's stored events with ``seq > after_seq``, in order (``[]`` once expired); any integer
        ``after_seq`` is taken (:func:`~yao_actors.store.codec.seq_floor`), anything else is ``InvalidStoreInput``."""
        ...

    async def wait_events(self, run_id: str, after_seq: int, timeout: float) -> None:  # noqa: ASYNC109
        """Return once the run's log may hold events past ``after_seq``, or after at most ``timeout`` seconds.

        How a process follows a run going on in another one: Redis blocks on the run's stream
        (``XREAD BLOCK``) and returns as soon as an event is appended; the base (SQLite's and memory's) waits one
        poll interval (:data:`POLL_INTERVAL`, or ``timeout`` if shorter). Nothing is read: call
        :meth:`read_events` after.
        """
        await trio.sleep(min(timeout, POLL_INTERVAL))

    # -- pending approvals

    async def save_approvals(self, thread_id: str, approvals: Sequence[Mapping[str, Any]]) -> None:
        """Replace an opened thread's pending approvals (JSON objects, kept in order); ``[]`` clears them.

        They go with the thread: ``forget_thread`` deletes them. ``UnknownThread`` for a thread that was not
        opened; ``InvalidStoreInput`` (nothing written) for an approval that is not a JSON object.
        """
        ...

    async def load_approvals(self, thread_id: str) -> list[dict[str, Any]]:
        """The thread's pending approvals as last saved (``[]`` for none, or for an unknown thread)."""
        ...

    # -- with base implementations

    async def take_and_start(self, thread_id: str, token: str, ttl: float, start: records.RunStart) -> records.Taken:
        """Take the thread's lease for ``token`` and start the run ``start`` names, as one step:

        - the thread not opened: :class:`~yao_actors.errors.UnknownThread`; the run's id stored already:
          :class:`~yao_actors.errors.RunIdTaken`; the lease held by another token: ``Taken(False)``; in each case
          no lease is left behind and no run started;
        - else the lease is taken as :meth:`ThreadLeases.take` takes it (the thread's dead runs closed), and the
          run started as :meth:`start_run` starts it (``Taken.started``), unless the store holds another number of
          messages than ``start.expect_messages``: then only the lease is taken (the caller's copy of the history
          is behind; it reloads it and starts the run itself).

        The base takes the lease, then starts the run (giving the lease back when the start is refused); the
        backends do both in one write.
        """
        leases = self.leases()
        taken = await leases.take(thread_id, token, ttl)
        expected, stored = start.expect_messages, taken.stored_messages
        if not taken.taken or (None not in (expected, stored) and expected != stored):
            return taken
        try:
            await self.start_run(thread_id, start.run_id, start.assistant, start.messages)
        except (UnknownThread, RunIdTaken):
            await leases.release(thread_id, token)
            raise
        return attrs.evolve(taken, started=True)

    async def append_last_turn(
        self,
        thread_id: str,
        run_id: str,
        messages: Sequence[records.Message],
        events: Sequence[records.EncodedEvent],
        finish: records.RunFinish,
        *,
        release: str,
    ) -> Sequence[int] | None:
        """The run's close-out: :meth:`append_turn` with ``finish``, and the thread's lease ``release`` (a token)
        holds given up, when it still holds it (:meth:`ThreadLeases.release`). A lease is kept when the write is
        refused. The base makes the two calls; the backends give the lease up in the same write."""
        sizes = await self.append_turn(thread_id, run_id, messages, events, finish=finish)
        await self.leases().release(thread_id, release)
        return sizes

    @property
    def writes_in_step(self) -> bool:
        """Whether a running run's turn is written at once, in its caller's step (:meth:`append_turn_in_step`):
        ``False`` (the base), so a run's journal groups its writes while the process is busy and writes once it is
        idle (a store across a network or a file pays per write). A store whose writes are work in this process and
        cost nothing to group (the memory store) says ``True``: its runs then write each turn as it ends, with the
        events queued before it, without waking a writer. (The memory store says ``False`` for a subclass that
        changes how a turn is written, so that its own methods see every turn.)"""
        return False

    def append_turn_in_step(
        self,
        thread_id: str,
        run_id: str,
        messages: Sequence[records.Message],
        events: Sequence[records.EncodedEvent],
    ) -> Sequence[int] | None:
        """:meth:`append_turn` without ``finish``, done at once and without a checkpoint (refusing what it refuses),
        by a store that :attr:`writes_in_step`; the base, for a store that does not, raises ``TypeError``."""
        raise TypeError(f"{type(self).__name__} does not write in step (its writes_in_step is false)")

    def parked_calls(self) -> ParkedCalls | None:
        """The store's held calls (:class:`ParkedCalls`: a handshake-era call held open by one process, answered
        from another), the same object at every call; ``None`` (the base): such a call is answered only in the
        process holding it."""
        return None

    def tasks(self) -> TaskRecords | None:
        """The store's open tasks of runs (:class:`TaskRecords`), the same object at every call; ``None`` (the
        base): a task a server answers a call with is followed to its end by the process that made it, and is
        lost with it."""
        return None

    def problem(self) -> str | None:
        """What keeps the store from taking calls now, found without waiting (what readiness asks: the SQLite
        store's files deleted, replaced or unwritable), or ``None`` (the base: nothing to look at)."""
        return None

    def thread_keepers(self) -> list[records.ThreadKeeper]:
        """Those asked before the store forgets a thread (:class:`~yao_actors.store.records.ThreadKeeper`), a
        list a conversation manager adds itself to. Only a store that forgets threads asks them (the memory
        store's budget); the base gives a new empty list, which nobody asks."""
        return []

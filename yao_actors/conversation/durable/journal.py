"""The journal of a run: what it writes to the conversation store, behind the run, one write at a time.

A run hands its journal each finished turn of history (an assistant message with ``tool_calls`` together with all
its tool messages, or the answer) and every event it emits. A writer task (:meth:`RunJournal.serve`) writes them in
order while the run goes on, and the close-out waits for the rest (:meth:`RunJournal.flush`). A turn and the events
queued with it go in one store call (``ConversationStore.append_turn``: one SQLite transaction, one Redis round
trip); each is atomic and shielded, so neither a crash nor a cancellation leaves half a turn or one in doubt. One
write per wake; events emitted meanwhile go with the next turn or soon after (:mod:`.pacing`), through a
:class:`~yao_actors.tasks.Turnstile`; a store that writes in step (the memory store) has each turn written by
:meth:`RunJournal.turn` itself (its ``RUN_STARTED`` by :meth:`RunJournal.kick_started`). A store keeps the text
the events (:class:`~yao_actors.events.WireEvent`) went on the wire as, encoded once.

**Durable before visible** (:mod:`~yao_actors.conversation.streaming.outlet`): every event the run emits goes through
the journal (:meth:`RunJournal.emit`); with a durable store each write shows the events it appended. The terminal
event is held apart: the close-out (:meth:`RunJournal.close_out`) writes it with whatever is left and the run's
closed record in one store call, and it is shown last.

A write that fails because the store is out of reach is tried again for :data:`WRITE_PATIENCE` seconds (the
close-out's for :data:`~.close_out.CLOSE_PATIENCE`). If it stays out of reach, or the thread is gone from it, the
journal keeps the failure (:meth:`RunJournal.standing`), writes no more history, drops the events it could not
store (nobody saw them) and cancels the run (``on_failure``), which ends with ``RUN_ERROR`` ``store_unavailable``:
stored too when the store is back for the close-out, else shown without being stored (the store's sweep closes that
run as interrupted). A run the store has closed already (:class:`~yao_actors.errors.RunClosed`) is cancelled the
same way (:mod:`.close_out`). :attr:`CloseOut.stored` is the history that reached the store; the thread's
in-memory copy takes only that, so memory and store never disagree.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

import attrs
import trio

from yao_actors.conversation.durable.appending import append_patiently
from yao_actors.conversation.durable.close_out import (
    CLOSE_PATIENCE,
    CloseOut,
    Standing,
    closing_error,
    lost_thread,
    read_closing_events,
)
from yao_actors.conversation.durable.leasing import Starter
from yao_actors.conversation.durable.pacing import WritePacing
from yao_actors.conversation.interrupts.inputs import Pending
from yao_actors.conversation.streaming.outlet import RunOutlet
from yao_actors.errors import (
    InvalidStoreInput,
    RunClosed,
    RunError,
    RunErrorCode,
    RunIdTaken,
    SeqConflict,
    StoreError,
    StoreUnavailable,
    UnknownRun,
    UnknownThread,
    store_trouble_ends_the_run,
)
from yao_actors.events import TERMINAL_TYPES, EventDict, stored_events
from yao_actors.history_budget import message_bytes
from yao_actors.models.base import Message
from yao_actors.store import ConversationStore, RunFinish
from yao_actors.store.records import RunStart, Taken
from yao_actors.tasks import PATIENCE, Turnstile, patiently

logger = logging.getLogger(__name__)

WRITE_PATIENCE = PATIENCE
"""Seconds a write of a run going on is tried again while the store is out of reach, before the run fails."""


@attrs.define(eq=False)
class RunJournal:
    """The store writes of one run and the outlet its events become visible in (see the module docstring).

    Made by the conversation actor per run. ``durable``: an event is shown only once stored (a store that
    outlives the process); else as it is emitted. ``on_failure`` is called once when nothing more of the run can
    be stored (the actor cancels the run).
    """

    store: ConversationStore
    thread_id: str
    run_id: str
    outlet: RunOutlet
    durable: bool = True
    on_failure: Callable[[], object] = lambda: None
    transcript: list[Message] = attrs.field(factory=list)
    """The run's transcript (the run appends to it); :meth:`checkpoint` queues what is new of it."""
    _stored: list[Message] = attrs.field(factory=list)
    """The run's messages the store has: its input once :meth:`start` succeeded, then each written turn."""
    _sizes: list[int] = attrs.field(factory=list)
    """:func:`~yao_actors.history_budget.message_bytes` of each of :attr:`_stored`, as written (the history's)."""
    _failure: RunError | None = None
    """Why nothing more of the run is written: the ``store_unavailable`` error it ends with (:meth:`_failed`)."""
    _closed_elsewhere: RunClosed | None = None
    """The store had the run closed already when the journal wrote to it (another process took it for dead)."""
    _started: bool = False
    _written: int = 0
    """How much of :attr:`transcript` the journal has been given."""
    _terminal: EventDict | None = None
    """The run's terminal event, once emitted: written and shown by the close-out, never by the writer."""
    _released: bool = False
    """The close-out's write went through (with ``release``, it gave the thread's lease up too)."""
    _turns: list[Message] = attrs.field(factory=list)
    _events: list[EventDict] = attrs.field(factory=list)
    _pacing: WritePacing = attrs.field(factory=WritePacing)  # when the writer writes (:mod:`.pacing`)
    _serving: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    """The writer's scope: :meth:`close` cancels it when the writer is not parked."""
    _writing: Turnstile = attrs.field(factory=Turnstile)
    """One write at a time (the writer's, the close-out's), in order; free, it costs no trip through the scheduler."""
    _closed: bool = False
    _in_step: bool = attrs.field(init=False)
    """Turns are written as they are queued (:meth:`turn`): the store is this process's and says it writes in step."""

    @_in_step.default
    def _writes_in_step(self) -> bool:
        return not self.durable and self.store.writes_in_step  # a durable store outlives the process: never in it

    @property
    def failed(self) -> bool:
        """Whether nothing more of the run is written (the store failed, or has the run closed already)."""
        return self._failure is not None or self._closed_elsewhere is not None

    @property
    def stored(self) -> tuple[Message, ...]:
        """The run's messages the store has so far."""
        return tuple(self._stored)

    @property
    def sizes(self) -> tuple[int, ...]:
        """The measured size of each of :attr:`stored`."""
        return tuple(self._sizes)

    def standing(self) -> Standing:
        """How the run's writes stand now: what the close-out goes by before its own write."""
        failed = self.failed
        return Standing(
            started=self._started,
            writable=self._started and not failed,
            dropped=self._started and failed and self.durable,
            failure=self._failure,
        )

    async def start(self, assistant: str, given: Sequence[Message]) -> None:
        """Record the run as running, with its input joining the thread's history, in one write.

        What is stored is the transcript so far (the results of calls a ``resume`` answered) and ``given``, the
        run's input; once stored, ``given`` joins the transcript too, as written.

        Raises ``RunError`` ``store_unavailable`` when the store is out of reach, and
        ``bad_request`` when the run id is already stored (runs are never overwritten).
        """
        tries = 0
        messages = [*self.transcript, *given]

        async def start_run() -> None:
            nonlocal tries
            tries += 1
            await self.store.start_run(self.thread_id, self.run_id, assistant, messages)

        try:
            with trio.CancelScope(shield=True):
                await patiently(start_run)
        except StoreUnavailable as error:
            raise self._failed(error) from error
        except RunIdTaken:
            if tries == 1 or not await self._started_by_us():
                raise RunError(
                    f"runId {self.run_id!r} is already used by a stored run", code=RunErrorCode.BAD_REQUEST
                ) from None
        except (UnknownThread, UnknownRun) as error:
            raise self._failed(lost_thread(self.thread_id, error)) from error
        self._record_start(messages, given)
        self.kick_started()

    def _record_start(self, messages: Sequence[Message], given: Sequence[Message]) -> None:
        """The store recorded the run as running with ``messages`` (the transcript so far and ``given``)."""
        self._started = True
        self._took(messages)
        self.transcript.extend(given)
        self._written = len(self.transcript)

    def continued(self) -> None:
        """The run was started in the store by a process that died; this one goes on with it (task_resume)."""
        self._started = True

    def kick_started(self) -> None:
        """Once the run is started in the store and goes on: have what it emitted before (``RUN_STARTED``) written,
        here when the store writes in step (as :meth:`turn`), else by the writer (kicked sooner, it writes it alone)."""
        if self._events and not self._write_in_step():
            self._pacing.kick()

    def starting(
        self, starter: Starter, token: str, ttl: float, assistant: str, given: Sequence[Message], expect: int
    ) -> Callable[[], Awaitable[Taken]]:
        """One try at the thread's lease that starts the run too, as :meth:`start` would (the store's
        ``take_and_start``, for :func:`~yao_actors.conversation.durable.leasing.take_lease`): ``expect`` is how many
        messages the thread's copy in memory says the store holds (the store starts nothing when it holds
        another number; the run then reloads the history and starts itself, ``Taken.started`` being false).

        Raises ``RunError`` ``bad_request`` when the run id is already stored (nothing written), and
        ``store_unavailable`` when the thread is gone from the store; a try whose answer was lost leaves the
        next refused for its id, which counts as started when the stored run is this one.
        """
        messages = [*self.transcript, *given]
        start = RunStart(self.run_id, assistant, messages, expect)
        tries = 0

        async def once() -> Taken:
            nonlocal tries
            tries += 1
            return await starter(self.thread_id, token, ttl, start)

        async def attempt() -> Taken:
            nonlocal tries
            tries = 0
            try:
                with trio.CancelScope(shield=True):  # as :meth:`start`'s: a start is never left in doubt
                    taken = await patiently(once)
            except StoreUnavailable as error:
                raise self._failed(error) from error
            except RunIdTaken:
                lost = tries > 1  # an earlier try's answer was lost: it may have started the run
                if not lost or not await self._started_by_us():
                    raise RunError(
                        f"runId {self.run_id!r} is already used by a stored run", code=RunErrorCode.BAD_REQUEST
                    ) from None
                taken = Taken(True, started=True)  # the lost try took the lease and started the run, atomically
            except (UnknownThread, UnknownRun) as error:
                raise self._failed(lost_thread(self.thread_id, error)) from error
            if taken.started:
                self._record_start(messages, given)
            return taken

        return attempt

    async def check_new(self) -> None:
        """Raise ``RunError`` ``bad_request`` when the run's id is already stored (``store_unavailable`` when the
        store is out of reach): what :meth:`start` would refuse, asked before anything irreversible runs."""
        with store_trouble_ends_the_run():
            stored = await patiently(lambda: self.store.get_run(self.run_id))
        if stored is not None:
            raise RunError(f"runId {self.run_id!r} is already used by a stored run", code=RunErrorCode.BAD_REQUEST)

    async def _started_by_us(self) -> bool:
        """Whether the stored run is this one (a try whose answer was lost had recorded it)."""
        try:
            run = await self.store.get_run(self.run_id)
        except StoreUnavailable:
            return False
        return run is not None and run.owner == self.store.owner and run.thread_id == self.thread_id

    async def emit(self, event: EventDict) -> None:
        """How the run's events leave it (``RunEvents``' send): show the event, or queue it to be shown once written.

        Waits while the run is too far ahead of its consumer (:meth:`RunOutlet.admit`; cancelled, the event
        is not emitted). A terminal event is kept for the close-out. Once the store failed, a durable store's
        run drops its events until its close-out (whose write may still succeed): nobody sees what is not stored.
        """
        outlet = self.outlet
        await outlet.admit()
        if event["type"] in TERMINAL_TYPES:
            self._terminal = event
            return
        if not self.durable:
            outlet.show((event,))
        if self.failed and self._started and not self._closed:  # the close-out's events are still written
            return
        self._events.append(event)
        if self.durable:
            self._pacing.kick()
        else:
            self._pacing.kick_soon()

    def turn(self, messages: Sequence[Message]) -> None:
        """Queue whole turns of history for writing; raises ``store_unavailable`` once a write has failed. A store
        that writes in step (``writes_in_step``, a store in this process) has them written here, with the events
        queued before them, unless a write is going on: nothing is gained by grouping its writes."""
        if self._failure is not None:
            raise self._failure
        self._turns.extend(messages)
        if not self._write_in_step():
            self._pacing.kick()

    def _write_in_step(self) -> bool:
        """Write what is queued now, in the caller's step, when the store writes in step and no write is going on;
        whether it did (a refused write fails the run as a writer's does)."""
        if not (self._in_step and self._started and not self.failed and self._writing.pass_free()):
            return False
        try:
            turns, events = self._queued()
            sizes = self.store.append_turn_in_step(self.thread_id, self.run_id, turns, stored_events(events))
        except StoreError as error:
            self._refused(error)
        else:
            self._wrote(turns, events, sizes)
        finally:
            self._writing.leave()
        return True

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
            self._pacing.kick_soon()

    def _new_transcript(self) -> list[Message]:
        """The transcript's messages the journal has not been given yet; given now."""
        new, self._written = self.transcript[self._written :], len(self.transcript)
        return new

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The writer task: write what is queued each time it is woken (or due), until :meth:`close`.

        One write per wake, made once the process is idle or :data:`IDLE_WAIT` seconds later (at once while
        the process is busy): what is queued meanwhile goes along; the events a run emits while a write is
        going on wait for the next one (group commit).
        """
        task_status.started()
        with self._serving:
            while not self._closed:
                await self._pacing.wait_for_work()
                if self._closed:
                    return
                await self.flush(everything=False)

    async def close(self) -> None:
        """End the writer before the close-out, and wait for a write it is making: a parked writer is woken and
        returns; one waiting for idle or writing is cancelled (a write is shielded: it completes, or fails,
        first). Once this returns, :meth:`standing` says how the writes went."""
        self._closed = True
        if not self._pacing.stop():
            self._serving.cancel()
        await self._writing.enter()
        self._writing.leave()

    async def flush(self, *, everything: bool = True) -> None:
        """Write what is queued, the turns with the events, in one store write; with ``everything``, again
        until nothing is left (what the run queued meanwhile). A failure is kept in :attr:`failure`."""
        await self._writing.enter()
        try:
            while self._started and not self.failed and (self._turns or self._events):
                await self._write()
                if not everything:
                    break
        finally:
            self._writing.leave()

    async def _write(self) -> None:
        """One store write of everything queued (shielded: a cancellation never leaves it in doubt); a durable
        store's events are shown once written."""
        turns, events = self._queued()
        try:
            with trio.CancelScope(shield=True):
                sizes = await append_patiently(
                    self.store, self.thread_id, self.run_id, (turns, events, None), WRITE_PATIENCE
                )
        except StoreError as error:
            self._refused(error)
        else:
            self._wrote(turns, events, sizes)

    def _queued(self) -> tuple[list[Message], list[EventDict]]:
        """The turns and events queued, taken for one write."""
        turns, self._turns = self._turns, []
        events, self._events = self._events, []
        return turns, events

    def _wrote(self, turns: Sequence[Message], events: Sequence[EventDict], sizes: Sequence[int] | None) -> None:
        """A write of ``turns`` and ``events`` went through: the turns are stored, a durable store's events shown."""
        self._took(turns, sizes)
        if self.durable:
            self.outlet.show(events)

    def _refused(self, error: StoreError) -> None:
        """A write failed: nothing more of the run is written (:meth:`_fail`)."""
        if isinstance(error, StoreUnavailable | RunClosed | UnknownThread | UnknownRun):
            self._fail(error)
        elif isinstance(error, InvalidStoreInput | SeqConflict):  # a batch refused: a bug here, not the store's state
            logger.error("run %s: events not stored: %s", self.run_id, error)
            self._fail(StoreUnavailable(f"the store refused the run's events: {error}"))
        else:
            raise error

    def _fail(self, error: StoreUnavailable | RunClosed | UnknownThread | UnknownRun) -> None:
        """Nothing more of the run is written: keep why, drop the events not stored, cancel the run."""
        if isinstance(error, RunClosed):
            logger.error("run %s: %s", self.run_id, error)
            self._closed_elsewhere = error
        else:
            if isinstance(error, UnknownThread | UnknownRun):
                error = lost_thread(self.thread_id, error)
            logger.warning("run %s: the conversation store failed: %s", self.run_id, error)
            self._failed(error)
        self._turns.clear()
        if self.durable:
            self._events.clear()
        self.on_failure()

    def _failed(self, error: StoreUnavailable) -> RunError:
        """Keep ``error`` as why nothing more of the run is written, as the one ``RunError`` ``store_unavailable`` the
        run ends with (:meth:`~yao_actors.errors.StoreUnavailable.run_error`: what the store said goes to the log,
        not to the client); returned, for the caller to raise."""
        self._failure = error.run_error()
        return self._failure

    def _took(self, messages: Sequence[Message], sizes: Sequence[int] | None = None) -> None:
        """Messages the store took: kept with their sizes (the store's measures when it gave them)."""
        self._stored.extend(messages)
        if sizes is None or len(sizes) != len(messages):
            sizes = list(map(message_bytes, messages))
        self._sizes.extend(sizes)

    async def keep_approvals(self, approvals: Sequence[Pending]) -> None:
        """Write the thread's pending approvals to the store (``[]``: none wait any more), shielded, so a resume
        after a restart, or in another process, finds them. Raises ``RunError`` ``store_unavailable`` (kept in
        :attr:`failure`) when the store is out of reach."""
        try:
            with trio.CancelScope(shield=True):
                await self.store.save_approvals(self.thread_id, [pending.to_record() for pending in approvals])
        except StoreUnavailable as error:
            logger.warning("run %s: could not store the thread's pending approvals: %s", self.run_id, error)
            raise self._failed(error) from error

    async def close_out(self, finish: RunFinish, *, release: str | None = None) -> CloseOut:
        """The close-out's write: the rest of the history, the events not written yet, the terminal event and the
        run's closed record (``finish``), in one store call; what came of it, as a value the actor reads. With
        ``release`` (the run's lease token: ``append_last_turn``) the thread's lease is given up in that same write
        (:attr:`CloseOut.released`; else the caller releases it itself).

        When the store stayed out of reach (:data:`CLOSE_PATIENCE`) nothing was stored (:attr:`CloseOut.unstored`):
        the caller replaces the terminal event (``store_unavailable``) and shows :meth:`unstored_ending`. When the
        store has the run closed already (:attr:`CloseOut.closed_elsewhere`), the events to show are the store's
        own after the last one shown: its closing event. A run never recorded as started is not written; its
        events are shown as they are.
        """
        events = await self._close_write(finish, release)
        closing = None
        if self._closed_elsewhere is not None and events is not None:
            closing = closing_error(events)
        return CloseOut(
            events=tuple(events or ()),
            unstored=None if events is not None else self._failure or self._failed(StoreUnavailable("no answer")),
            closed_elsewhere=closing,
            stored=tuple(self._stored),
            sizes=tuple(self._sizes),
            in_step=not self.failed,
            released=events is not None and release is not None and self._released,
        )

    async def _close_write(self, finish: RunFinish, release: str | None) -> list[EventDict] | None:
        """:meth:`close_out`'s write; the events to show last, ``None`` when the store never took it."""
        assert self._terminal is not None, "the terminal event is emitted before the close-out"
        events = [*self._events, self._terminal] if self.durable else [self._terminal]
        if not self._started:
            return events
        await self._writing.enter()
        try:
            if self._closed_elsewhere is None:
                turns = [] if self._failure is not None else [*self._turns, *self._new_transcript()]
                try:
                    with trio.CancelScope(shield=True):
                        write = (turns, [*self._events, self._terminal], finish)
                        sizes = await append_patiently(
                            self.store, self.thread_id, self.run_id, write, CLOSE_PATIENCE, release
                        )
                except RunClosed as error:
                    logger.error("run %s: %s", self.run_id, error)
                    self._closed_elsewhere = error
                except StoreError as error:
                    if not isinstance(error, StoreUnavailable):
                        error = StoreUnavailable(f"the store refused the run's close: {error}")
                    logger.warning("run %s: the run's close was not stored: %s", self.run_id, error)
                    self._failed(error)
                    return None
                else:
                    self._released = True
                    if self._failure is None:
                        self._took(turns, sizes)
                    self._turns.clear()
                    self._events.clear()
                    return events
            return await read_closing_events(self.store, self.run_id, self.outlet.shown_seq)
        finally:
            self._writing.leave()

    def unstored_ending(self) -> list[EventDict]:
        """The close-out's events not shown yet, its terminal event last, for a close the store never took."""
        assert self._terminal is not None
        return [*self._events, self._terminal] if self.durable else [self._terminal]

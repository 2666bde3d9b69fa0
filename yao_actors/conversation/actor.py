"""The conversation actor: one per thread, it owns the thread's history and executes its runs in order.

A run is submitted as a :class:`~yao_actors.conversation.order.RunOrder`; the actor executes orders one at a
time and closes each one out — exactly one terminal event, the result, the
history in memory and in the store, the run's record — even when the run was cancelled: no run hangs, and none
ends twice.
The thread lives in the conversation store between runs; the actor holds a bounded copy of its history
while it is in memory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence

import attrs
import trio

from yao_actors.conversation.durable.close_out import CLOSE_PATIENCE
from yao_actors.conversation.durable.journal import RunJournal
from yao_actors.conversation.durable.leasing import LeasePolicy, keep_lease, release_lease, take_lease
from yao_actors.conversation.durable.task_keeping import TaskKeeper, task_timeout
from yao_actors.conversation.durable.task_resume import cannot_continue, readable_tasks, take_up_turn
from yao_actors.conversation.ending import CANCELLED, Ending, as_failed, conclude, emit_ending, finish_record
from yao_actors.conversation.interrupts.client_tools import answer_dangling_calls, check_tool_answers
from yao_actors.conversation.interrupts.inputs import Pending, stored_pending
from yao_actors.conversation.loop.resources import RunResources
from yao_actors.conversation.loop.run import Run
from yao_actors.conversation.loop.window import window_history
from yao_actors.conversation.order import RunOrder
from yao_actors.conversation.run_deadline import RunDeadline
from yao_actors.conversation.starting import answer, start_run
from yao_actors.conversation.thread import RUN_QUEUE, ConversationHandle, ThreadStatus
from yao_actors.errors import RunError, RunErrorCode, store_trouble_ends_the_run
from yao_actors.events import EventDict, Outcome, RunEvents
from yao_actors.history_budget import MAX_THREAD_BYTES
from yao_actors.models.base import Message
from yao_actors.observability.runs import RunObservation
from yao_actors.store import ConversationStore
from yao_actors.store.records import RunStatus, Taken
from yao_actors.tasks import patiently

CLEANUP_GRACE = CLOSE_PATIENCE + 5.0
"""Seconds a caller waits at most for a cancelled run to close out (its store's last write included)."""


@attrs.define(eq=False)
class _ConversationActor:
    """The actor's side: the inbox's receive end, the thread's history, its store, and what its runs may use."""

    resources: RunResources
    store: ConversationStore
    inbox: trio.MemoryReceiveChannel[RunOrder]
    status: ThreadStatus
    on_history_grown: Callable[[], None]
    leases: LeasePolicy
    renewing: trio.CancelScope | None = None
    """While the running run holds its thread's lease: the scope of the task renewing it."""

    async def serve(self) -> None:
        """Execute the thread's runs one at a time until the inbox closes or the task is cancelled."""
        with self.inbox:
            async for order in self.inbox:
                try:
                    await self.execute(order)
                finally:
                    self.status.run_done()

    async def execute(self, order: RunOrder) -> None:
        """Execute one run (in its span, counted and logged); it always ends with exactly one terminal event."""
        with RunObservation(order.assistant.id, order.run_id, order.thread_id, order.trace_context) as observed:
            await self._execute(order, observed)

    async def _execute(self, order: RunOrder, observed: RunObservation) -> None:
        """Execute one run with its journal's writer beside it (:mod:`yao_actors.conversation.durable.journal`)."""
        order.control.start()
        journal = RunJournal(
            self.store,
            order.thread_id,
            order.run_id,
            order.outlet,
            durable=self.store.durable,
            on_failure=order.control.cancel,  # nothing the run does now can be stored: it ends store_unavailable
        )
        async with trio.open_nursery() as helpers:
            helpers.start_soon(journal.serve)  # no head start needed: what it is given waits
            try:
                await self.execute_run(order, journal, observed, helpers)
            finally:
                await self.release(order)

    async def take_thread(
        self, order: RunOrder, journal: RunJournal, helpers: trio.Nursery
    ) -> tuple[Message, ...] | RunError:
        """Take the thread's lease when the store is shared (kept renewed in ``helpers``), starting the run in the
        same store call when it can (:meth:`folded_start`), bring the history up to date with the store's when
        another process added to it; the history the run starts from."""
        if self.leases.shared:
            token = self.leases.token(order.run_id)
            try:
                taken = await take_lease(self.leases, order.thread_id, token, self.folded_start(order, journal))
            except RunError as refused:
                return refused
            self.renewing = await helpers.start(
                keep_lease, self.leases, order.thread_id, order.run_id, order.control.cancel
            )
            if taken.started:  # the store held what the thread's copy says: nothing to reload
                journal.kick_started()
            elif taken.stored_messages is not None and taken.stored_messages != self.status.stored_messages:
                try:  # and the calls it holds for approval, which that process may have changed
                    with store_trouble_ends_the_run():
                        stored = await patiently(lambda: self.store.load_history(order.thread_id))
                        approvals = await patiently(lambda: self.store.load_approvals(order.thread_id))
                except RunError as refused:
                    return refused
                self.status.reload(stored, stored_pending(order.thread_id, approvals))
        if order.request.history is not None:
            # The client's conversation stands for this run (and the thread's copy in memory); the store
            # keeps appending what the runs add, as for any thread.
            self.status.use_history(order.request.history)
        return tuple(self.status.messages)

    def folded_start(self, order: RunOrder, journal: RunJournal) -> Callable[[], Awaitable[Taken]] | None:
        """The lease's try that starts the run too (one store call: :meth:`RunJournal.starting`), when the store
        has it and the run starts plainly: no calls held for approval nor answers to them (those run, or are
        refused, before the run starts), a copy of the history in step with the store's, and an input that
        the history takes (a refused one is refused before anything is written, as it always was)."""
        if self.leases.starter is None or self.status.approvals or order.request.resume or order.request.continues:
            return None
        expect = self.status.stored_messages
        if expect is None:
            return None
        request = order.request
        history = self.status.messages if request.history is None else request.history
        try:
            check_tool_answers(history, request.messages)
        except RunError:
            return None
        given = [*answer_dangling_calls(history, request.messages), *request.messages]
        ttl = self.leases.ttl
        return journal.starting(
            self.leases.starter, self.leases.token(order.run_id), ttl, order.assistant.id, given, expect
        )

    async def release(self, order: RunOrder, *, released: bool = False) -> None:
        """Give the thread's lease back (once the run's record is closed in the store); ``released``: the close-out's
        write gave it back already, and only its renewal stops."""
        if self.renewing is not None:
            self.renewing.cancel()
            self.renewing = None
            if not released:
                await release_lease(self.leases, order.thread_id, self.leases.token(order.run_id))

    async def execute_run(
        self, order: RunOrder, journal: RunJournal, observed: RunObservation, helpers: trio.Nursery
    ) -> None:
        """Execute one run; it always ends with exactly one terminal event, ``RUN_FINISHED`` or ``RUN_ERROR``.

        The store gets the run's input when it starts, each whole turn as the run goes (behind it), and
        the rest with its terminal event and closed record in the close-out's one write, before the
        terminal event is shown (:mod:`yao_actors.conversation.streaming.outlet`).
        """
        # The journal follows the run's transcript and is its checkpoint; the journal refers to no part of the
        # run (no closure over it, no cycle), so a finished run is freed at once by reference counting.
        # The run's deadline stands still while it waits on a task (task_timeout bounds that wait).
        deadline = RunDeadline.after(order.assistant.timeouts.run, order.control.wait_on_tasks)
        keeper = TaskKeeper(
            self.store,
            order.thread_id,
            order.run_id,
            order.request.principal,
            journal.flush,
            task_timeout(order),
            deadline.waiting,
        )
        run = Run(
            self.resources,
            RunEvents(order.run_id, order.thread_id, journal.emit),
            self.resources.servers.for_run(order.request.principal, self.resources.catalogs),
            transcript=journal.transcript,
            checkpoint=journal.checkpoint,
            client_tools=order.request.client_tools,
            task_watch=keeper.watch,
        )
        ending: Ending | None = CANCELLED
        try:
            with order.control.scope, deadline.scope:
                if order.request.continues:
                    ending = await self.continue_run(run, order, journal, helpers, keeper)
                else:
                    await run.events.run_started()
                    history = await self.take_thread(order, journal, helpers)
                    if isinstance(history, RunError):
                        ending = history
                    else:
                        ending = await start_run(run, order, history, self.status, journal)
            if deadline.scope.cancelled_caught:
                timeout = order.assistant.timeouts.run
                ending = RunError(f"the run deadline of {timeout:g} s expired", code=RunErrorCode.RUN_TIMEOUT)
        finally:
            # The close-out runs shielded: a cancelled run (its consumer left, the runtime is closing) must
            # still record its history and end with its one terminal event. Its consumer cannot hold it:
            # the events wait in the outlet's log for whoever reads them.
            with trio.CancelScope(shield=True):
                await self.close_out(run, order, journal, observed, ending or CANCELLED)
                await keeper.forget()  # the run is over in the store: its tasks need no keeping

    async def continue_run(
        self, run: Run, order: RunOrder, journal: RunJournal, helpers: trio.Nursery, keeper: TaskKeeper
    ) -> Ending:
        """Take up a run a dead process left waiting on a stored task (:mod:`.durable.task_resume`): under the
        thread's lease, its events numbered on from its log (which its followers here see first), its turn
        finished from the stored handles, then answered as any run's; its close-out removes those handles."""
        history = await self.take_thread(order, journal, helpers)
        if isinstance(history, RunError):
            return history
        try:
            with store_trouble_ends_the_run():
                stored = await self.store.get_run(order.run_id)
                events = await self.store.read_events(order.run_id)
                found, unreadable = await readable_tasks(self.store, order.run_id)
        except RunError as error:
            return error
        keeper.kept.extend(found)
        if stored is None or stored.status is not RunStatus.RUNNING:
            return cannot_continue(order.run_id, "it is not running any more")
        journal.continued()
        order.outlet.show(events)
        run.events.reopen(events[-1]["seq"] if events else 0)
        if unreadable is not None:  # a task record set aside: the run closes as interrupted, saying why
            return unreadable
        turn = await take_up_turn(run, order.run_id, history, events, self.store)
        if not isinstance(turn, list):
            return turn
        window = window_history(history, order.assistant.history_max_messages)
        return await answer(run, order, [*window, *turn])

    async def close_out(
        self, run: Run, order: RunOrder, journal: RunJournal, observed: RunObservation, ending: Ending
    ) -> None:
        """Settle the run: its result, its last events, one store write of them with its terminal event and
        closed record, the thread's copy of the history; then its terminal event is shown, last."""
        # From here on the run never waits for its consumer: a client that stopped reading must not hold the
        # close-out (and with it the thread's next run); the rest of the events wait in the outlet's log.
        order.outlet.unlimit()
        await journal.close()  # the writer ends; what is left goes in the close-out's write
        unreported = run.settle()
        result = conclude(run, order, ending)
        if result.interrupts and journal.standing().writable:
            # Stored before anyone sees the interrupt, so the resume finds them even after a restart.
            with contextlib.suppress(RunError):  # the journal keeps the failure: the run ends with it
                await journal.keep_approvals(result.interrupts)
        standing = journal.standing()
        if standing.dropped:  # the events it could not store were dropped: number on from those shown
            run.events.reopen(order.outlet.shown_seq)
            run.forget_unseen(order.outlet.log)
        if standing.failure is not None and result.outcome is not Outcome.ERROR:
            result = as_failed(result, standing.failure)
        await emit_ending(run, result, unreported)
        # The lease goes with the close-out (in its write, with the backends: one store call fewer per run).
        folded = self.renewing is not None
        closed = await journal.close_out(
            finish_record(result), release=self.leases.token(order.run_id) if folded else None
        )
        last: Sequence[EventDict] = closed.events
        if closed.unstored is not None:
            # The store never took the close: nobody saw its terminal event, one saying so replaces it, and the
            # close-out's events are shown without being stored (the one case where a client sees more than
            # the stored log; the sweep closes the run as interrupted later, and a resume numbers on from it).
            result = as_failed(result, closed.unstored)
            run.events.reopen(run.events.seq - 1)  # takes the terminal event back
            await emit_ending(run, result, ())
            last = journal.unstored_ending()
        elif closed.closed_elsewhere is not None:
            result = as_failed(result, closed.closed_elsewhere)
        # Counted before the terminal event is shown: whoever saw the run end sees it in the metrics.
        code = result.code.value if result.code is not None else None
        observed.ended(result.outcome.value, result.usage, code=code, error=result.error)
        if result.outcome is Outcome.INTERRUPT:
            self.status.hold(result.interrupts)
        # The run is over in the store: another process may take the thread now.
        await self.release(order, released=closed.released)
        # The thread keeps what its store has, so the two never disagree.
        self.status.run_closed(closed.stored, closed.sizes, in_step=closed.in_step)
        # While this run still counts as pending, so its own thread is never the one forgotten.
        self.on_history_grown()
        # Last, in one step (no reader runs in between): the terminal event becomes visible and the result is
        # set together, so whoever sees the run end finds its result, its history and its record in place.
        order.end(result, last)


def new_conversation(
    thread_id: str,
    resources: RunResources,
    store: ConversationStore,
    *,
    owner: str | None = None,
    history: Sequence[Message] = (),
    approvals: Sequence[Pending] = (),
    max_history_bytes: int = MAX_THREAD_BYTES,
    on_history_grown: Callable[[], None] = lambda: None,
    leases: LeasePolicy | None = None,
) -> tuple[ConversationHandle, Callable[[], Awaitable[None]]]:
    """The actor of thread ``thread_id``, made without a task: its handle, and what its task runs to execute the
    thread's runs in order (``nursery.start_soon(serve)``: the handle takes runs at once, queued until it runs).

    ``owner`` is the principal that owns the thread, ``history`` and ``approvals`` (its calls waiting for a
    person) what ``store`` holds of it (the thread was opened there). The thread keeps at most
    ``max_history_bytes`` of history in memory; ``on_history_grown`` is called each time a run's messages
    joined it (the manager keeps all threads within their budget that way). ``leases`` are the store's thread
    leases: with a shared store each run holds its thread's lease (:mod:`yao_actors.conversation.durable.leasing`).
    """
    send, receive = trio.open_memory_channel[RunOrder](RUN_QUEUE)
    status = ThreadStatus.of(max_history_bytes, history, approvals)
    actor = _ConversationActor(resources, store, receive, status, on_history_grown, leases or LeasePolicy.of(store))
    return ConversationHandle._create(thread_id, owner, send, status), actor.serve

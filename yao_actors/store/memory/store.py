"""The in-memory store: the library's default, gone with the process.

It is bounded the way a runtime's in-memory history is (:mod:`yao_actors.history_budget`): a thread's
history keeps at most ``max_thread_bytes`` (its oldest whole turns are dropped first), and all histories
together at most ``max_threads_bytes`` (the least recently written threads are forgotten first, with their
runs and logs; never a thread with a run in progress, which its conversation is still writing to). Sizes are
measured as the runtime's (:func:`~yao_actors.history_budget.message_bytes`). The runs' event logs have budgets of
the same sizes beside the histories': a thread's logs together at most ``max_thread_bytes``, all logs at most
``max_threads_bytes``; over either, the logs of the oldest finished runs are dropped first (as if expired), never
the log of a run in progress (:mod:`yao_actors.store.memory.event_logs`). A durable store keeps everything.

The conversation managers using the store are asked before a thread is forgotten (:attr:`MemoryStore.keepers`):
one keeps a thread whose runs are waiting (or that it is loading); otherwise each drops its own copy of the thread
with the store's, so the next run on the thread starts it anew instead of finding it gone from the store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import trio

import yao_actors.store.codec as codec
import yao_actors.store.records as records
from yao_actors.history_budget import MAX_THREAD_BYTES, MAX_THREADS_BYTES, keep_from, message_bytes
from yao_actors.store.backend import BackendStore, StoreParts, Turn
from yao_actors.store.memory.event_logs import EventLogs
from yao_actors.store.memory.leases import MemoryLeases
from yao_actors.store.memory.parked import MemoryParkedCalls
from yao_actors.store.memory.tasks import MemoryTasks
from yao_actors.store.memory.tokens import MemoryTokens
from yao_actors.store.protocol import DEFAULT_EVENT_TTL
from yao_actors.store.refusals import run_closed, run_id_taken, thread_not_opened, unknown_run


@attrs.define(eq=False)
class MemoryStore(BackendStore[MemoryLeases, MemoryParkedCalls]):
    """A :class:`~yao_actors.store.ConversationStore` in dicts.

    Events are kept as their JSON text (the text they went on the wire as: a run's events are encoded once,
    :class:`~yao_actors.store.records.EncodedEvent`) and decoded when read back, so a caller never shares a
    stored one and a write costs no copy. Messages are kept as given (the runtime never changes a message
    once recorded, and its in-memory history holds the same objects, so a thread
    costs its memory once) and copied out. ``clock`` gives POSIX time (tests move it).
    """

    event_ttl: float = DEFAULT_EVENT_TTL
    clock: Callable[[], float] = time.time
    owner: str = attrs.field(factory=codec.new_owner_token)
    max_thread_bytes: int = MAX_THREAD_BYTES
    max_threads_bytes: int = MAX_THREADS_BYTES
    keepers: list[records.ThreadKeeper] = attrs.field(factory=list)
    """Asked before the budget forgets a thread: any one keeping it keeps it; otherwise each drops its copy."""
    parts: StoreParts[MemoryLeases, MemoryParkedCalls] = attrs.field(init=False)
    _tasks: MemoryTasks = attrs.field(init=False)
    _threads: dict[str, records.ThreadInfo] = attrs.field(factory=dict, init=False)
    """Each thread as created (its ``updated_at`` is in :attr:`_written`), in the order they were created."""
    _written: dict[str, float] = attrs.field(factory=dict, init=False)
    """When each thread was last written, least recently written first: the order the budget forgets them in."""
    _running: dict[str, int] = attrs.field(factory=dict, init=False)
    """Threads with runs in progress, and how many: in use, so the budget never forgets them."""
    _bytes: dict[str, int] = attrs.field(factory=dict, init=False)
    _total_bytes: int = attrs.field(default=0, init=False)
    _messages: dict[str, list[records.Message]] = attrs.field(factory=dict, init=False)
    _sizes: dict[str, list[int]] = attrs.field(factory=dict, init=False)
    _runs: dict[str, records.RunRecord] = attrs.field(factory=dict, init=False)
    _thread_runs: dict[str, list[str]] = attrs.field(factory=dict, init=False)
    _logs: EventLogs = attrs.field(init=False)
    _approvals: dict[str, str] = attrs.field(factory=dict, init=False)

    @parts.default
    def _parts(self) -> StoreParts[MemoryLeases, MemoryParkedCalls]:
        return StoreParts(MemoryLeases(self), MemoryTokens(), MemoryParkedCalls())

    @_logs.default
    def _make_logs(self) -> EventLogs:
        return EventLogs(
            self._runs, self._thread_runs, self.clock, self.event_ttl, self.max_thread_bytes, self.max_threads_bytes
        )

    @_tasks.default
    def _make_tasks(self) -> MemoryTasks:
        return MemoryTasks(lambda thread_id: thread_id in self._threads)

    @property
    def durable(self) -> bool:
        return False  # its threads live and die with this process

    def tasks(self) -> MemoryTasks:
        return self._tasks

    def thread_keepers(self) -> list[records.ThreadKeeper]:
        return self.keepers

    # -- threads

    async def open_thread(self, thread_id: str, principal: str | None) -> records.ThreadInfo:
        await trio.lowlevel.checkpoint()
        if thread_id in self._threads:
            return self._info(thread_id)
        written = self.clock()
        now = records.utc(written)
        self._threads[thread_id] = records.ThreadInfo(thread_id, principal, now, now)
        self._written[thread_id] = written
        self._messages[thread_id] = []
        self._thread_runs[thread_id] = []
        return records.ThreadInfo(thread_id, principal, now, now, created=True)

    async def get_thread(self, thread_id: str) -> records.ThreadInfo | None:
        await trio.lowlevel.checkpoint()
        return self._info(thread_id) if thread_id in self._threads else None

    async def list_threads(
        self, principal: str | records.AnyPrincipal | None = records.ANY_PRINCIPAL, *, limit: int = 100
    ) -> list[records.ThreadInfo]:
        await trio.lowlevel.checkpoint()
        threads = [t for t in self._threads.values() if principal is records.ANY_PRINCIPAL or t.principal == principal]
        # Creation order breaks ties between threads created within one clock tick.
        threads.sort(key=lambda t: t.created_at)
        return [self._info(t.thread_id) for t in list(reversed(threads))[:limit]]

    def _info(self, thread_id: str) -> records.ThreadInfo:
        """A stored thread with its time of last write."""
        info = self._threads[thread_id]
        return attrs.evolve(info, updated_at=records.utc(self._written[thread_id]))

    async def load_history(self, thread_id: str) -> list[records.Message]:
        await trio.lowlevel.checkpoint()
        return [codec.decode_json(codec.encode_message(m)) for m in self._messages.get(thread_id, ())]

    async def append_messages(self, thread_id: str, messages: Sequence[records.Message]) -> None:
        await trio.lowlevel.checkpoint()
        self._append(thread_id, _checked(messages))

    def _append(self, thread_id: str, given: Sequence[records.Message]) -> list[int]:
        """Append checked messages to a thread's history (within its budget); returns their sizes."""
        if thread_id not in self._threads:
            raise thread_not_opened(thread_id)
        messages = self._messages[thread_id]
        sizes = self._sizes.setdefault(thread_id, [])
        measured = list(map(message_bytes, given))
        messages.extend(given)
        sizes.extend(measured)
        size = self._bytes.get(thread_id, 0) + sum(measured)
        if size > self.max_thread_bytes:
            cut = keep_from(messages, sizes, self.max_thread_bytes)
            size -= sum(sizes[:cut])
            del messages[:cut], sizes[:cut]
        self._total_bytes += size - self._bytes.get(thread_id, 0)
        self._bytes[thread_id] = size
        # Most recently written last: the first threads are the ones to forget.
        del self._written[thread_id]
        self._written[thread_id] = self.clock()
        if self._total_bytes > self.max_threads_bytes:
            self._fit_budget(thread_id)
        return measured

    def _fit_budget(self, writing: str) -> None:
        """Forget the least recently written threads until the histories fit ``max_threads_bytes`` again; never
        the thread being written, one with a run in progress (a conversation using it writes to it), or one a
        keeper keeps (:attr:`keepers`)."""
        for oldest in [t for t in self._written if t != writing and t not in self._running]:
            if self._total_bytes <= self.max_threads_bytes:
                break
            if any(keeper.keeps(oldest) for keeper in self.keepers):
                continue
            for keeper in self.keepers:
                keeper.drop(oldest)
            self._forget(oldest)

    async def forget_thread(self, thread_id: str) -> bool:
        await trio.lowlevel.checkpoint()
        if thread_id not in self._threads:
            return False
        self._forget(thread_id)
        return True

    def _forget(self, thread_id: str) -> None:
        del self._threads[thread_id], self._written[thread_id], self._messages[thread_id]
        self._running.pop(thread_id, None)
        self._sizes.pop(thread_id, None)
        self._total_bytes -= self._bytes.pop(thread_id, 0)
        self._approvals.pop(thread_id, None)
        self._tasks.forget_thread(thread_id)
        run_ids = self._thread_runs.pop(thread_id)
        for run_id in run_ids:
            del self._runs[run_id]
        self._logs.forget_thread(thread_id, run_ids)

    # -- runs

    async def start_run(
        self, thread_id: str, run_id: str, assistant: str, input_messages: Sequence[records.Message]
    ) -> records.RunRecord:
        await trio.lowlevel.checkpoint()
        given = _checked(input_messages)
        if run_id in self._runs:
            raise run_id_taken(run_id)
        return self._start(thread_id, run_id, assistant, given)

    async def take_and_start(self, thread_id: str, token: str, ttl: float, start: records.RunStart) -> records.Taken:
        """The lease and the run's start in one step. Its runs live and die with this process: no dead runs to
        close, and nobody else adds to its threads."""
        await trio.lowlevel.checkpoint()
        given = _checked(start.messages)
        if thread_id not in self._threads:
            raise thread_not_opened(thread_id)
        if start.run_id in self._runs:
            raise run_id_taken(start.run_id)
        if not self.parts.leases.hold(thread_id, token, ttl):
            return records.Taken(False)
        stored = len(self._messages.get(thread_id, ()))
        if start.expect_messages is not None and start.expect_messages != stored:
            return records.Taken(True, stored_messages=stored)
        self._start(thread_id, start.run_id, start.assistant, given)
        return records.Taken(True, stored_messages=stored, started=True)

    def _start(self, thread_id: str, run_id: str, assistant: str, given: list[records.Message]) -> records.RunRecord:
        self._append(thread_id, given)
        run = records.RunRecord(
            run_id, thread_id, assistant, records.RunStatus.RUNNING, records.utc(self.clock()), self.owner
        )
        self._runs[run_id] = run
        self._thread_runs[thread_id].append(run_id)
        self._running[thread_id] = self._running.get(thread_id, 0) + 1
        return run

    async def finish_run(
        self, run_id: str, *, status: records.RunStatus, outcome: str, usage: Mapping[str, Any] | None = None
    ) -> bool:
        await trio.lowlevel.checkpoint()
        run = self._runs.get(run_id)
        if run is None or run.status is not records.RunStatus.RUNNING:
            return False
        self._finish(run, status, outcome, usage)
        return True

    def _finish(
        self, run: records.RunRecord, status: records.RunStatus, outcome: str, usage: Mapping[str, Any] | None
    ) -> None:
        """Close a running run's record."""
        self._runs[run.run_id] = attrs.evolve(
            run, status=status, outcome=outcome, usage=dict(usage or {}), finished_at=records.utc(self.clock())
        )
        if self._running[run.thread_id] > 1:
            self._running[run.thread_id] -= 1
        else:
            del self._running[run.thread_id]

    async def get_run(self, run_id: str) -> records.RunRecord | None:
        await trio.lowlevel.checkpoint()
        return self._runs.get(run_id)

    async def list_runs(self, thread_id: str) -> list[records.RunRecord]:
        await trio.lowlevel.checkpoint()
        return [self._runs[run_id] for run_id in self._thread_runs.get(thread_id, ())]

    # -- event logs

    async def append_events(self, run_id: str, events: Sequence[records.EncodedEvent]) -> None:
        await trio.lowlevel.checkpoint()
        if run_id not in self._runs:
            codec.event_seqs(events)  # a malformed batch is refused as such first, as by the other backends
            raise unknown_run(run_id)
        self._logs.add(run_id, self._logs.checked(run_id, events))

    @property
    def writes_in_step(self) -> bool:
        """Yes: dicts in this process, a turn costs its own work and never a wait, so runs need not group them.
        A subclass that changes how a turn is written (:meth:`append_turn` or :meth:`write_turn`: a fault injected,
        a mirror, a meter) is written through its own methods, by the run's writer, unless it says yes itself."""
        kind = type(self)
        return kind.append_turn is MemoryStore.append_turn and kind.write_turn is MemoryStore.write_turn

    def append_turn_in_step(
        self,
        thread_id: str,
        run_id: str,
        messages: Sequence[records.Message],
        events: Sequence[records.EncodedEvent],
    ) -> list[int]:
        return self._append_turn(Turn(thread_id, run_id, messages, events))

    async def write_turn(self, turn: Turn) -> list[int]:
        """The turn (the run's close and the lease's release with it) in one step."""
        await trio.lowlevel.checkpoint()
        sizes = self._append_turn(turn)
        if turn.release is not None:
            self.parts.leases.drop(turn.thread_id, turn.release)
        return sizes

    def _append_turn(self, turn: Turn) -> list[int]:
        thread_id, run_id, events, finish = turn.thread_id, turn.run_id, turn.events, turn.finish
        given = _checked(turn.messages)
        if thread_id not in self._threads:
            raise thread_not_opened(thread_id)
        run = self._runs.get(run_id)
        if run is None or run.thread_id != thread_id:
            raise unknown_run(run_id, thread_id)
        if run.status is not records.RunStatus.RUNNING:
            raise run_closed(run_id, run.status.value)
        batch = self._logs.checked(run_id, events)  # everything is checked before anything is written
        sizes = self._append(thread_id, given) if given else []
        if events:
            self._logs.add(run_id, batch)
        if finish is not None:
            self._finish(run, finish.status, finish.outcome, finish.usage)
        return sizes

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[records.EventDict]:
        await trio.lowlevel.checkpoint()
        return self._logs.read(run_id, after_seq)

    # -- pending approvals

    async def save_approvals(self, thread_id: str, approvals: Sequence[Mapping[str, Any]]) -> None:
        await trio.lowlevel.checkpoint()
        encoded = codec.encode_approvals(approvals)  # kept as JSON text: a caller never shares a stored one
        if thread_id not in self._threads:
            raise thread_not_opened(thread_id)
        if approvals:
            self._approvals[thread_id] = encoded
        else:
            self._approvals.pop(thread_id, None)

    async def load_approvals(self, thread_id: str) -> list[dict[str, Any]]:
        await trio.lowlevel.checkpoint()
        return codec.decode_approvals(self._approvals.get(thread_id))


def _checked(messages: Sequence[records.Message]) -> list[records.Message]:
    """The messages, each checked as a store takes it (:func:`~yao_actors.store.codec.encode_message` refuses
    anything that is not a mapping with a string ``role``) without keeping the encoding."""
    for message in messages:
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            codec.encode_message(message)  # raises, naming the message
    return list(messages)

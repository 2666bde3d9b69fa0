"""Thread leases of a store in this process's memory: the memory store's, or those of a store of one's own used
by one process (its dead runs closed through its interface)."""

from __future__ import annotations

import time

import attrs
import trio

from yao_actors.errors import CorruptTaskRecord
from yao_actors.store.codec import encoded_interruption
from yao_actors.store.protocol import ConversationStore, TaskRecords
from yao_actors.store.records import RunStatus, Taken


@attrs.define(eq=False)
class MemoryLeases:
    """Leases of a store in this process's memory (a :class:`~yao_actors.store.memory.MemoryStore`'s, or those of
    a store of the embedder's that does not keep leases itself: its runs are closed through its interface)."""

    store: ConversationStore
    _held: dict[str, tuple[str, float]] = attrs.field(factory=dict, init=False)

    def _now(self) -> float:
        return trio.current_time()

    async def take(self, thread_id: str, token: str, ttl: float, *, also_close: str | None = None) -> Taken:
        await trio.lowlevel.checkpoint()
        if not self.hold(thread_id, token, ttl):
            return Taken(False)
        if not self.store.durable:
            # Its runs live and die with this process, which runs a thread's runs one at a time.
            return Taken(True)
        closed = await close_running_runs(self.store, thread_id, also_close)
        return Taken(True, closed, len(await self.store.load_history(thread_id)))

    def hold(self, thread_id: str, token: str, ttl: float) -> bool:
        """Take (or extend) the lease for ``token`` unless another holds it, without a checkpoint; whether taken."""
        held = self._held.get(thread_id)
        if held is not None and held[0] != token and held[1] > self._now():
            return False
        self._held[thread_id] = (token, self._now() + ttl)
        return True

    async def renew(self, thread_id: str, token: str, ttl: float) -> bool:
        await trio.lowlevel.checkpoint()
        held = self._held.get(thread_id)
        if held is None or held[0] != token:
            return False
        self._held[thread_id] = (token, self._now() + ttl)
        return True

    async def reclaim(self, thread_id: str, token: str, ttl: float, run_id: str) -> bool:
        held = self._held.get(thread_id)
        if held is not None and held[0] != token and held[1] > self._now():
            await trio.lowlevel.checkpoint()
            return False
        run = await self.store.get_run(run_id)
        if run is None or run.status is not RunStatus.RUNNING:
            return False
        self._held[thread_id] = (token, self._now() + ttl)
        return True

    async def release(self, thread_id: str, token: str) -> None:
        await trio.lowlevel.checkpoint()
        self.drop(thread_id, token)

    def drop(self, thread_id: str, token: str) -> None:
        """Release without a checkpoint (the memory store's ``append_turn(release=...)`` is one step)."""
        held = self._held.get(thread_id)
        if held is not None and held[0] == token:
            del self._held[thread_id]

    async def unleased_running_runs(self, owner: str) -> list[tuple[str, str]]:
        await trio.lowlevel.checkpoint()
        return []  # the runs of an in-process store die with the process that would sweep them


async def close_running_runs(store: ConversationStore, thread_id: str, also_close: str | None) -> tuple[str, ...]:
    """Close the thread's running runs as interrupted, through the store's interface (the lease is held), but those
    waiting on a stored task."""
    closed: list[str] = []
    records = store.tasks()
    for run in await store.list_runs(thread_id):
        if records is not None and await _waits_on_task(records, run.run_id):
            continue  # waiting on a stored task: taken up, not closed (yao_actors.conversation.durable.task_resume)
        if run.status is RunStatus.RUNNING or run.run_id == also_close:
            events = await store.read_events(run.run_id)
            seq = events[-1]["seq"] + 1 if events else 1
            if await store.finish_run(run.run_id, status=RunStatus.INTERRUPTED, outcome=RunStatus.INTERRUPTED.value):
                await store.append_events(run.run_id, [encoded_interruption(run.run_id, seq, time.time())])
                closed.append(run.run_id)
    return tuple(closed)


async def _waits_on_task(records: TaskRecords, run_id: str) -> bool:
    """Whether run ``run_id`` has a stored task (a record that does not read back counts: taking the run up sets
    it aside)."""
    try:
        return bool(await records.for_run(run_id))
    except CorruptTaskRecord:
        return True

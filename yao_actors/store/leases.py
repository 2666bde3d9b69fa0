"""Thread leases: one run of a thread at a time, in whichever process or machine shares the store (issue 17).

A run takes its thread's lease (a token with an expiry) before it touches the thread, renews it every third
of ``lease_ttl`` and releases it at the end. A process that dies stops renewing: its lease expires, and the
next one to take the thread's lease — a run on that thread, or a worker's periodic sweep — closes the run it
left ``running`` as ``interrupted`` in the same atomic step (terminal ``RUN_ERROR`` ``interrupted`` appended to
its log; its history holds only whole turns, as always). That replaces "close every run not mine" at start,
which is wrong once several processes share a store.

::

    ThreadLeases          what a store's ``leases()`` gives (the protocol is in yao_actors.store.base):
    ├── MemoryLeases      a dict; one process, so only the contract
    ├── SqliteLeases      a ``leases`` row per thread, taken in one transaction (yao_actors.store.sqlite_leases)
    └── RedisLeases       ``SET NX PX`` with a token, renewed and released by Lua scripts that check it
                          (yao_actors.store.redis_leases)

A taken lease also reports how many messages the store holds for the thread (``None`` when the store is not
shared), so a process that keeps a copy of the history in memory knows when another process added to it.
"""

from __future__ import annotations

import logging
import time

import attrs
import trio

from yao_actors.errors import StoreUnavailable
from yao_actors.specs import DEFAULT_LEASE_TTL as DEFAULT_LEASE_TTL  # configuration values, re-exported
from yao_actors.specs import DEFAULT_LEASE_WAIT as DEFAULT_LEASE_WAIT
from yao_actors.store.base import ConversationStore, RunStatus, Taken, ThreadLeases, interrupted_event

logger = logging.getLogger(__name__)

INTERRUPTED_MESSAGE = interrupted_event("", 0, 0.0)["message"]


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
    """Close the thread's running runs as interrupted, through the store's interface (the lease is held)."""
    closed: list[str] = []
    for run in await store.list_runs(thread_id):
        if run.status is RunStatus.RUNNING or run.run_id == also_close:
            events = await store.read_events(run.run_id)
            seq = events[-1]["seq"] + 1 if events else 1
            if await store.finish_run(run.run_id, status=RunStatus.INTERRUPTED, outcome=RunStatus.INTERRUPTED.value):
                await store.append_events(run.run_id, [interrupted_event(run.run_id, seq, time.time())])
                closed.append(run.run_id)
    return tuple(closed)


async def sweep_dead_runs(
    leases: ThreadLeases, token: str, ttl: float, *, owner: str, suspects: set[str] | None = None
) -> list[str]:
    """Close the running runs whose thread's lease is free (their process died); their ids.

    Runs ``owner`` (this process) started are never closed here: they are alive, and take their lease back
    when their store was out of reach too long (:meth:`ThreadLeases.reclaim`). With ``suspects`` (the runs the
    last sweep found unleased) a run is closed only when found unleased twice, so a process whose store came
    back has a renewal's time to take its lease back first; ``suspects`` is then updated for the next sweep.
    For each run closed the sweep takes its thread's lease itself (which closes the run), then releases it; a
    thread whose lease is held, here or elsewhere, is left alone. A thread the store fails on
    (``StoreUnavailable``) is logged and left for the next sweep, and the others are swept; only a store that
    cannot even list the runs raises it.
    """
    closed: list[str] = []
    failed: list[tuple[str, StoreUnavailable]] = []
    found = await leases.unleased_running_runs(owner)
    due = found if suspects is None else [(run, thread) for run, thread in found if run in suspects]
    for run_id, thread_id in due:
        try:
            taken = await leases.take(thread_id, token, ttl, also_close=run_id)
            if taken.taken:
                closed.extend(taken.closed)
                await leases.release(thread_id, token)
        except StoreUnavailable as error:  # the others are still swept: one thread's trouble is not theirs
            failed.append((thread_id, error))
    if suspects is not None:
        suspects.clear()
        suspects.update(run for run, _ in found if run not in closed)
    if closed:
        logger.warning("closed %d run(s) whose process died: %s", len(closed), ", ".join(closed))
    if failed:
        first, reason = failed[0]
        logger.warning(
            "the sweep for dead runs could not close the runs of %d thread(s), the first %r: %s",
            len(failed),
            first,
            reason,
        )
    return closed

"""Thread leases: one run of a thread at a time, in whichever process or machine shares the store (issue 17).

A run takes its thread's lease (a token with an expiry) before it touches the thread, renews it every third
of ``lease_ttl`` and releases it at the end. A process that dies stops renewing: its lease expires, and the
next one to take the thread's lease — a run on that thread, or a worker's periodic sweep — closes the run it
left ``running`` as ``interrupted`` in the same atomic step (terminal ``RUN_ERROR`` ``interrupted`` appended to
its log; its history holds only whole turns, as always). That replaces "close every run not mine" at start,
which is wrong once several processes share a store.

::

    ThreadLeases          what a store's ``leases()`` gives (the protocol is in yao_actors.store.protocol):
    ├── MemoryLeases      a dict; one process, so only the contract (yao_actors.store.memory.leases)
    ├── SqliteLeases      a ``leases`` row per thread, taken in one transaction (yao_actors.store.sqlite.leases)
    └── RedisLeases       ``SET NX PX`` with a token, renewed and released by Lua scripts that check it
                          (yao_actors.store.redis.leases)

A taken lease also reports how many messages the store holds for the thread (``None`` when the store is not
shared), so a process that keeps a copy of the history in memory knows when another process added to it.
"""

from __future__ import annotations

import logging

from yao_actors.errors import StoreUnavailable
from yao_actors.specs import DEFAULT_LEASE_TTL as DEFAULT_LEASE_TTL  # configuration values, re-exported
from yao_actors.specs import DEFAULT_LEASE_WAIT as DEFAULT_LEASE_WAIT
from yao_actors.store.memory.leases import MemoryLeases as MemoryLeases  # its public path before the backends' packages
from yao_actors.store.protocol import ThreadLeases

logger = logging.getLogger(__name__)


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

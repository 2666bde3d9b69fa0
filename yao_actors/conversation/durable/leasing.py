"""How runs use thread leases (:mod:`yao_actors.store.leases`): take one before the run, keep it, give it back.

:func:`take_lease` waits up to ``lease_wait`` for a thread leased elsewhere, then fails the run with
``RunError`` ``thread_busy``; :func:`keep_lease` renews it every third of ``lease_ttl`` while the run goes on
and calls ``on_lost`` when another holder took it (the run is then cancelled rather than run twice);
:func:`serve_sweeps` closes, in every process, the runs whose process died (their thread's lease expired).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable

import attrs
import trio

from yao_actors.errors import RunError, RunErrorCode, StoreUnavailable, store_trouble_ends_the_run
from yao_actors.store import ConversationStore
from yao_actors.store.leases import DEFAULT_LEASE_TTL, DEFAULT_LEASE_WAIT, sweep_dead_runs
from yao_actors.store.protocol import ThreadLeases
from yao_actors.store.records import RunStart, Taken
from yao_actors.tasks import patiently

logger = logging.getLogger(__name__)

Starter = Callable[[str, str, float, RunStart], Awaitable[Taken]]
"""A store's ``take_and_start(thread_id, token, ttl, start)``."""

POLL_INTERVAL = 0.2
"""Seconds between two attempts at a lease held elsewhere (at most a third of the lease's ttl)."""


@attrs.frozen
class LeasePolicy:
    """A runtime's leases: the store's backend, how long a lease lasts (``ttl``) and how long a run waits."""

    leases: ThreadLeases
    owner: str
    """The token prefix of this process (the store's ``owner``); a run's token is ``{owner}:{run id}``."""
    ttl: float = DEFAULT_LEASE_TTL
    wait: float = DEFAULT_LEASE_WAIT
    shared: bool = True
    """Whether other processes may share the store (``store.durable``); runs on a store of this process alone
    take no lease (one process runs a thread's runs one at a time anyway)."""
    starter: Starter | None = None
    """The store's ``take_and_start`` (:meth:`~yao_actors.store.ConversationStore.take_and_start`) for a shared
    store: a run takes its lease and starts in one store call; ``None`` where runs take no lease."""

    @classmethod
    def of(
        cls, store: ConversationStore, *, ttl: float = DEFAULT_LEASE_TTL, wait: float = DEFAULT_LEASE_WAIT
    ) -> LeasePolicy:
        """The policy of runs on ``store``."""
        shared = store.durable
        return cls(store.leases(), store.owner, ttl, wait, shared, store.take_and_start if shared else None)

    def token(self, run_id: str) -> str:
        return f"{self.owner}:{run_id}"


async def take_lease(
    policy: LeasePolicy, thread_id: str, token: str, attempt: Callable[[], Awaitable[Taken]] | None = None
) -> Taken:
    """The thread's lease for ``token``, waiting up to ``policy.wait`` while another holds it; ``attempt`` is one
    try at it that is patient with the store itself (the run journal's, :meth:`RunJournal.starting`: the store's
    ``take_and_start``), else the lease's ``take`` is tried (:func:`~yao_actors.tasks.patiently`).

    Raises ``RunError`` ``thread_busy`` when it is still held elsewhere after that; ``store_unavailable``
    when the store stays out of reach.
    """
    if attempt is None:
        attempt = functools.partial(patiently, functools.partial(policy.leases.take, thread_id, token, policy.ttl))
    with store_trouble_ends_the_run():
        with trio.move_on_after(policy.wait):
            while True:
                taken = await attempt()
                if taken.taken:
                    if taken.closed:
                        logger.warning("thread %s: closed run(s) whose process died: %s", thread_id, taken.closed)
                    return taken
                await trio.sleep(min(POLL_INTERVAL, policy.ttl / 3))
    raise RunError(
        f"thread {thread_id!r} is busy: a run elsewhere still holds it after {policy.wait:g} s (store.lease_wait)",
        code=RunErrorCode.THREAD_BUSY,
    )


async def keep_lease(
    policy: LeasePolicy,
    thread_id: str,
    run_id: str,
    on_lost: Callable[[], None],
    *,
    task_status: trio.TaskStatus[trio.CancelScope] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Renew run ``run_id``'s lease every third of its ttl until cancelled (``started`` gives the scope that
    stops it); ``on_lost()`` once another holder took it, or took the run for dead.

    A lease that expired while the store was out of reach is taken back when nobody else took it meanwhile
    (:meth:`~yao_actors.store.leases.ThreadLeases.reclaim`): an outage longer than the lease does not end a
    healthy run. (A run that needed the store meanwhile ended ``store_unavailable`` by itself.)
    """
    token = policy.token(run_id)
    with trio.CancelScope() as renewing:
        task_status.started(renewing)
        while True:
            await trio.sleep(policy.ttl / 3)
            try:
                kept = await policy.leases.renew(thread_id, token, policy.ttl)
                if not kept and await policy.leases.reclaim(thread_id, token, policy.ttl, run_id):
                    logger.warning(
                        "thread %s: its lease had expired; nobody took it, and run %s took it back", thread_id, run_id
                    )
                    kept = True
            except StoreUnavailable as error:
                logger.warning("thread %s: could not renew its lease: %s", thread_id, error)
                continue
            if not kept and renewing.cancel_called:
                # Stopped meanwhile: the run's close-out released the lease (in its own write) while this
                # renewal was on its way; the run is over, not lost.
                return
            if not kept:
                logger.error("thread %s: its lease expired and was taken elsewhere; the run is cancelled", thread_id)
                on_lost()
                return


async def release_lease(policy: LeasePolicy, thread_id: str, token: str) -> None:
    """Give the lease back (shielded: a cancelled run still frees its thread); an unreachable store lets it expire."""
    with trio.CancelScope(shield=True):
        try:
            await policy.leases.release(thread_id, token)
        except StoreUnavailable as error:
            logger.warning("thread %s: could not release its lease (it expires by itself): %s", thread_id, error)


async def serve_sweeps(policy: LeasePolicy, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Close the runs whose process died: a look before ``started()`` (a restarted process's first: what it finds
    unleased was left by a process that stopped before it started, and is closed at once), then one every half
    ``ttl``, which closes a run once two looks in a row found its lease free (so a process whose store was out of
    reach has a renewal's time to take its lease back): within about ``2 × ttl`` of its last renewal. This
    process's own runs are never closed here (:func:`~yao_actors.store.leases.sweep_dead_runs`)."""
    token = f"{policy.owner}:sweep"
    suspects: set[str] | None = None
    started = False
    while True:
        try:
            await sweep_dead_runs(policy.leases, token, policy.ttl, owner=policy.owner, suspects=suspects)
        except StoreUnavailable as error:
            logger.warning("the sweep for dead runs could not reach the store: %s", error)
        if not started:
            task_status.started()
            started, suspects = True, set()
        await trio.sleep(policy.ttl / 2)

"""The threads a runtime keeps in memory: each thread's actor by id, started on first use, within two budgets.

A thread's actor starts on the thread's first run here, with what the store holds of it (its history and its
calls waiting for a person). At most ``max_threads`` threads are kept, and their histories together within
``max_threads_bytes``: past either, the least recently used threads with no run in progress or waiting are
forgotten (their actors finish and end; the store still has them, and the next run loads them anew).
"""

from __future__ import annotations

import functools

import attrs
import trio

from yao_actors.conversation.actor import new_conversation
from yao_actors.conversation.durable.leasing import LeasePolicy
from yao_actors.conversation.interrupts.inputs import stored_pending
from yao_actors.conversation.loop.resources import RunResources
from yao_actors.conversation.thread import ConversationHandle
from yao_actors.errors import store_trouble_ends_the_run
from yao_actors.history_budget import idle_threads_to_forget
from yao_actors.models.base import Message
from yao_actors.store import ConversationStore
from yao_actors.tasks import patiently


@attrs.define(eq=False)
class KeptThreads:
    """The actors of the threads kept in memory, least recently used first; their tasks run in ``nursery``."""

    _resources: RunResources
    _store: ConversationStore
    _nursery: trio.Nursery
    _leases: LeasePolicy
    max_threads: int
    max_thread_bytes: int
    """The most history bytes one thread keeps in memory."""
    max_threads_bytes: int
    """The most history bytes all threads together keep in memory."""
    _threads: dict[str, ConversationHandle] = attrs.field(factory=dict)
    _history_bytes: dict[str, int] = attrs.field(factory=dict)
    """Each kept thread's history bytes as of its last run's end (or its start): what :attr:`total_bytes` sums."""
    total_bytes: int = 0
    """The histories of the kept threads together, kept as a running total: the budget check is O(1) per run."""
    _starting: trio.Lock = attrs.field(factory=trio.Lock)
    _loading: set[str] = attrs.field(factory=set)
    """Threads being loaded from the store (:meth:`_load`): a memory store keeps them meanwhile."""

    def __len__(self) -> int:
        return len(self._threads)

    async def get(self, thread_id: str, owner: str | None) -> ConversationHandle:
        """The actor of ``thread_id``, started on first use (then belonging to ``owner``), now the most recently
        used; starting one may forget the least recently used idle thread."""
        handle = self._threads.pop(thread_id, None)
        if handle is None:
            # One start at a time: two first runs of a thread must not start two actors for it.
            async with self._starting:
                handle = self._threads.pop(thread_id, None)
                if handle is None:
                    handle = await self._load(thread_id, owner)
        self._threads[thread_id] = handle  # most recently used last
        return handle

    async def _load(self, thread_id: str, owner: str | None) -> ConversationHandle:
        """Open the thread in the store (created for ``owner``, or as stored) and start its actor with its history
        and its calls waiting for approval."""
        self._loading.add(thread_id)
        try:
            with store_trouble_ends_the_run():
                info = await patiently(lambda: self._store.open_thread(thread_id, owner))
                # A thread this call created has nothing stored yet; another principal's is not loaded.
                stored = info.principal == owner and not info.created
                history = await patiently(lambda: self._store.load_history(thread_id)) if stored else []
                approvals = await patiently(lambda: self._store.load_approvals(thread_id)) if stored else []
        finally:
            self._loading.discard(thread_id)
        if len(self._threads) >= self.max_threads:
            self._forget_an_idle_thread()
        handle, serve = new_conversation(
            thread_id,
            self._resources,
            self._store,
            owner=info.principal,
            history=history,
            approvals=stored_pending(thread_id, approvals),
            max_history_bytes=self.max_thread_bytes,
            on_history_grown=functools.partial(self._fit_memory_budget, thread_id),
            leases=self._leases,
        )
        self._nursery.start_soon(serve)
        self._history_bytes[thread_id] = size = handle.history_bytes
        self.total_bytes += size
        return handle

    def _forget_an_idle_thread(self) -> None:
        for thread_id, handle in self._threads.items():
            if handle.pending == 0:
                self.close(thread_id)
                return

    def _fit_memory_budget(self, grown: str) -> None:
        """Thread ``grown``'s run has ended (its history changed): forget least recently used idle threads while
        the histories together exceed ``max_threads_bytes``.

        The total is kept as it goes (each thread's bytes change only in its own runs, and each run ends
        here), so a run within the budget costs O(1) here, however many threads are kept; only a run that
        takes the total over it looks through the threads, oldest first, and only as far as it needs.
        """
        handle = self._threads.get(grown)
        if handle is not None:  # not closed meanwhile
            size = handle.history_bytes
            self.total_bytes += size - self._history_bytes.get(grown, 0)
            self._history_bytes[grown] = size
        if self.total_bytes <= self.max_threads_bytes:
            return
        threads = ((tid, self._history_bytes[tid], kept.pending == 0) for tid, kept in self._threads.items())
        for thread_id in idle_threads_to_forget(threads, self.max_threads_bytes, total=self.total_bytes):
            self.close(thread_id)

    def keeps(self, thread_id: str) -> bool:
        """Whether the memory store must keep ``thread_id``: runs wait on it, or it is being loaded. (A thread it
        forgets is closed here too, :meth:`close`: the next run opens it anew.)"""
        handle = self._threads.get(thread_id)
        return thread_id in self._loading or (handle is not None and handle.pending > 0)

    def close(self, thread_id: str) -> None:
        """Forget a thread: its actor finishes the runs already submitted and ends; its history is dropped."""
        handle = self._threads.pop(thread_id, None)
        if handle is not None:
            self.total_bytes -= self._history_bytes.pop(thread_id, 0)
            handle.close()

    def ids(self) -> tuple[str, ...]:
        """The ids of the threads kept, least recently used first."""
        return tuple(self._threads)

    def history(self, thread_id: str) -> tuple[Message, ...]:
        """The messages a thread keeps in memory now (empty for a thread not in memory)."""
        handle = self._threads.get(thread_id)
        return () if handle is None else handle.history

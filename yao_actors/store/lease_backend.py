"""The thread leases of a store: its backend's (:mod:`yao_actors.store.leases`), chosen by the store's type."""

from __future__ import annotations

from yao_actors.store.base import ConversationStore
from yao_actors.store.leases import MemoryLeases, ThreadLeases
from yao_actors.store.sqlite import SqliteStore
from yao_actors.store.sqlite_leases import SqliteLeases


def lease_backend(store: ConversationStore) -> ThreadLeases:
    """The leases of ``store``: memory, SQLite or Redis (an unknown store gets the in-process kind)."""
    if isinstance(store, SqliteStore):
        return SqliteLeases(store)
    try:
        from yao_actors.store.redis import RedisStore
        from yao_actors.store.redis_leases import RedisLeases
    except ImportError:  # coredis is optional: then no store is a RedisStore
        pass
    else:
        if isinstance(store, RedisStore):
            return RedisLeases(store)
    return MemoryLeases(store)

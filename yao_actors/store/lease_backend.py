"""The thread leases of a store: its backend's (:mod:`yao_actors.store.leases`), chosen by the store's type."""

from __future__ import annotations

import sys

from yao_actors.store.base import ConversationStore
from yao_actors.store.leases import MemoryLeases, ThreadLeases
from yao_actors.store.sqlite import SqliteStore
from yao_actors.store.sqlite_leases import SqliteLeases

REDIS_MODULE = "yao_actors.store.redis"
"""The Redis store's module: imported (with coredis, ~0.6 s) only by whoever opens a Redis store."""


def lease_backend(store: ConversationStore) -> ThreadLeases:
    """The leases of ``store``: memory, SQLite or Redis (an unknown store gets the in-process kind).

    A :class:`~yao_actors.store.redis.RedisStore` exists only once its module was imported, so a process
    without one never imports coredis here.
    """
    if isinstance(store, SqliteStore):
        return SqliteLeases(store)
    redis = sys.modules.get(REDIS_MODULE)
    if redis is not None and isinstance(store, redis.RedisStore):
        from yao_actors.store.redis_leases import RedisLeases

        return RedisLeases(store)
    return MemoryLeases(store)

"""Durable conversations: where threads, runs and run event logs live between runs.

::

    ConversationStore     the interface (base.py): threads, runs, event logs, recovery
    ├── MemoryStore       the library's default; gone with the process
    ├── SqliteStore       one file on one machine; the service's default
    └── RedisStore        shared by processes and machines (yao_actors.store.redis; needs the
                          ``redis`` extra: coredis)

``open_store(StoreSpec)`` opens the one a ``store`` configuration section names
(``parse_store_spec``). Thread leases (``leases.py``; a backend per store type) keep one run of a thread at a
time across the processes sharing a store, and close the runs a dead process left running.
"""

from yao_actors.store.base import (
    ANY_PRINCIPAL,
    DEFAULT_EVENT_TTL,
    INTERRUPTED_CODE,
    ConversationStore,
    RunFinish,
    RunRecord,
    RunStatus,
    ThreadInfo,
)
from yao_actors.store.memory import MemoryStore, ThreadKeeper
from yao_actors.store.spec import StoreSpec, default_sqlite_path, open_store, parse_store_spec
from yao_actors.store.sqlite import SqliteStore, open_sqlite_store

__all__ = [
    "ANY_PRINCIPAL",
    "DEFAULT_EVENT_TTL",
    "INTERRUPTED_CODE",
    "ConversationStore",
    "MemoryStore",
    "RunFinish",
    "RunRecord",
    "RunStatus",
    "SqliteStore",
    "StoreSpec",
    "ThreadInfo",
    "ThreadKeeper",
    "default_sqlite_path",
    "open_sqlite_store",
    "open_store",
    "parse_store_spec",
]

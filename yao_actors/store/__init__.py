"""Durable conversations: where threads, runs and run event logs live between runs.

::

    ConversationStore     every store protocol (protocol.py), with the records it speaks in (records.py)
    ├── MemoryStore       the library's default; gone with the process (memory/)
    ├── SqliteStore       one file on one machine; the service's default (sqlite/)
    └── RedisStore        shared by processes and machines (redis/, imported as yao_actors.store.redis;
                          needs the ``redis`` extra: coredis)

Each backend's package holds its store, its thread leases, its held calls and its token records; what the backends
share beyond the protocol is in ``backend.py`` (their parts held once, a turn written as one write), the words
they refuse a write with in ``refusals.py``.
``open_store(StoreSpec)`` opens the one a ``store`` configuration section names (``parse_store_spec``). Thread
leases (``leases.py``) keep one run of a thread at a time across the processes sharing a store, and close the runs
a dead process left running.
"""

from yao_actors.store.memory import MemoryLeases, MemoryStore
from yao_actors.store.protocol import (
    DEFAULT_EVENT_TTL,
    ConversationStore,
    ParkedCalls,
    ThreadLeases,
    TokenRecords,
)
from yao_actors.store.records import (
    ANY_PRINCIPAL,
    INTERRUPTED_CODE,
    EncodedEvent,
    RunFinish,
    RunRecord,
    RunStart,
    RunStatus,
    Taken,
    ThreadInfo,
    ThreadKeeper,
)
from yao_actors.store.spec import StoreSpec, default_sqlite_path, open_store, parse_store_spec
from yao_actors.store.sqlite import SqliteStore, open_sqlite_store

__all__ = [
    "ANY_PRINCIPAL",
    "DEFAULT_EVENT_TTL",
    "INTERRUPTED_CODE",
    "ConversationStore",
    "EncodedEvent",
    "MemoryLeases",
    "MemoryStore",
    "ParkedCalls",
    "RunFinish",
    "RunRecord",
    "RunStart",
    "RunStatus",
    "SqliteStore",
    "StoreSpec",
    "Taken",
    "ThreadInfo",
    "ThreadKeeper",
    "ThreadLeases",
    "TokenRecords",
    "default_sqlite_path",
    "open_sqlite_store",
    "open_store",
    "parse_store_spec",
]

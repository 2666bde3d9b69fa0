"""The SQLite store: one file on one machine, the service's default (its schema, leases, held calls and tokens
beside it)."""

from yao_actors.store.sqlite.store import SqliteStore, open_sqlite_store

__all__ = ["SqliteStore", "open_sqlite_store"]

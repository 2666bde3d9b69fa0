"""The SQLite store's schema and how a file is opened: WAL mode, a ``busy_timeout``, and :data:`MIGRATIONS`, which
bring an older file up to date (the schema carries its version in ``schema_version``)."""

from __future__ import annotations

import os
import sqlite3
import time

from yao_actors.store.sqlite.files import check_before_open
from yao_actors.store.sqlite.tasks import TASKS_MIGRATION
from yao_actors.store.sqlite.transactions import transaction

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE threads (
            thread_id TEXT PRIMARY KEY,
            principal TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL)""",
        "CREATE INDEX threads_by_creation ON threads (created_at)",
        "CREATE INDEX threads_by_principal ON threads (principal, created_at)",
        """CREATE TABLE messages (
            id INTEGER PRIMARY KEY,
            thread_id TEXT NOT NULL REFERENCES threads ON DELETE CASCADE,
            message TEXT NOT NULL)""",
        "CREATE INDEX messages_by_thread ON messages (thread_id, id)",
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            thread_id TEXT NOT NULL REFERENCES threads ON DELETE CASCADE,
            assistant TEXT NOT NULL,
            status TEXT NOT NULL,
            outcome TEXT,
            usage TEXT NOT NULL DEFAULT '{}',
            started_at REAL NOT NULL,
            finished_at REAL,
            owner TEXT NOT NULL,
            events_expire_at REAL)""",
        "CREATE INDEX runs_by_thread ON runs (thread_id, started_at)",
        "CREATE INDEX runs_running ON runs (status) WHERE status = 'running'",
        "CREATE INDEX runs_by_event_expiry ON runs (events_expire_at)",
        """CREATE TABLE events (
            run_id TEXT NOT NULL REFERENCES runs ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            event TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)) WITHOUT ROWID""",
    ),
    (
        # A thread's pending approvals (a JSON array), gone with the thread.
        """CREATE TABLE approvals (
            thread_id TEXT PRIMARY KEY REFERENCES threads ON DELETE CASCADE,
            approvals TEXT NOT NULL)""",
    ),
    (
        # Thread leases (yao_actors.store.sqlite.leases). A file of 0.1 may have the table already: its leases
        # were made on first use, outside these versions.
        """CREATE TABLE IF NOT EXISTS leases (
            thread_id TEXT PRIMARY KEY,
            token TEXT NOT NULL,
            expires_at REAL NOT NULL)""",
    ),
    (
        # OAuth tokens, each record sealed by yao_actors.auth.vault (yao_actors.store.protocol).
        """CREATE TABLE oauth_tokens (
            server TEXT NOT NULL,
            identity TEXT NOT NULL,
            sealed TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (server, identity)) WITHOUT ROWID""",
    ),
    (
        # Handshake-era calls held open by one process, answered from another (yao_actors.store.sqlite.parked).
        """CREATE TABLE parked_calls (
            ticket TEXT PRIMARY KEY,
            holder TEXT NOT NULL,
            expires_at REAL NOT NULL,
            answer TEXT,
            answered INTEGER NOT NULL DEFAULT 0,
            outcome TEXT)""",
    ),
    (
        # Token records that expire (the pending OAuth authorizations), dropped by this index, never by reading.
        "ALTER TABLE oauth_tokens ADD COLUMN expires_at REAL",
        "CREATE INDEX oauth_tokens_by_expiry ON oauth_tokens (server, expires_at) WHERE expires_at IS NOT NULL",
        # The pending authorizations kept before: ten minutes from when they were written (yao_actors.auth.states).
        "UPDATE oauth_tokens SET expires_at = updated_at + 600 WHERE server = '(oauth-state)'",
    ),
    # The open tasks of runs (yao_actors.store.sqlite.tasks).
    TASKS_MIGRATION,
)
"""Schema version N is reached by running ``MIGRATIONS[N - 1]``; append, never edit."""


def connect(path: str, *, busy_timeout: float, exclusive: bool = False) -> sqlite3.Connection:
    """Open (creating it and its folder if needed) and migrate the store's file; blocking.

    ``exclusive``: the connection holds the file for itself from its first access to its close, and keeps
    the WAL index in its own memory rather than a memory-mapped ``-shm`` (:mod:`yao_actors.store.sqlite.files`).
    """
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    check_before_open(path, exclusive=exclusive)
    connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        if exclusive:  # before the first WAL access, or SQLite maps the -shm all the same
            connection.execute("PRAGMA locking_mode = EXCLUSIVE")
        _switch_to_wal(connection, busy_timeout)
        connection.execute("PRAGMA synchronous = NORMAL")
        connection.execute("PRAGMA foreign_keys = ON")
        transaction(connection, _migrate)
    except BaseException:
        connection.close()
        raise
    return connection


def _switch_to_wal(connection: sqlite3.Connection, busy_timeout: float) -> None:
    """``PRAGMA journal_mode = WAL``, tried again for up to ``busy_timeout`` seconds while the file is locked.

    Processes creating the file at once (``serve --workers N`` on a new store) race for the switch: SQLite refuses
    the loser at once with "database is locked", without waiting in its busy handler (it would risk a deadlock
    there); the winner is done within milliseconds, and the switch is then a no-op.
    """
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if error.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
        time.sleep(0.01)


def _migrate(connection: sqlite3.Connection) -> None:
    connection.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    row = connection.execute("SELECT version FROM schema_version").fetchone()
    current = 0 if row is None else int(row[0])
    if current > len(MIGRATIONS):
        raise sqlite3.DatabaseError(f"schema version {current} is newer than this program's {len(MIGRATIONS)}")
    for statements in MIGRATIONS[current:]:
        for statement in statements:
            connection.execute(statement)
    if row is None:
        connection.execute("INSERT INTO schema_version VALUES (?)", (len(MIGRATIONS),))
    else:
        connection.execute("UPDATE schema_version SET version = ?", (len(MIGRATIONS),))

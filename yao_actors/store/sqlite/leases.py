"""Thread leases in a SQLite store: a ``leases`` row per thread, taken, renewed and released in one transaction.

Processes on one machine sharing the file see one another's leases; the expiry is the store's clock (POSIX
time), so they must share a clock, which one machine does. The table is the store's schema version 3
(:data:`yao_actors.store.sqlite.schema.MIGRATIONS`).
"""

from __future__ import annotations

import sqlite3

import attrs

from yao_actors.store.codec import encoded_interruption
from yao_actors.store.records import INTERRUPTED_CODE, RunStatus, Taken
from yao_actors.store.sqlite.access import SqliteAccess


@attrs.define(eq=False)
class SqliteLeases:
    """The :class:`~yao_actors.store.protocol.ThreadLeases` of a :class:`~yao_actors.store.sqlite.SqliteStore`."""

    access: SqliteAccess

    async def take(self, thread_id: str, token: str, ttl: float, *, also_close: str | None = None) -> Taken:
        access = self.access
        now = access.clock()
        return await access.transaction(lambda db: take_in(db, thread_id, token, now + ttl, now, access.event_ttl))

    async def renew(self, thread_id: str, token: str, ttl: float) -> bool:
        expires = self.access.clock() + ttl
        cursor = await self.access.transaction(
            lambda db: db.execute(
                "UPDATE leases SET expires_at = ? WHERE thread_id = ? AND token = ?", (expires, thread_id, token)
            )
        )
        return cursor.rowcount == 1

    async def reclaim(self, thread_id: str, token: str, ttl: float, run_id: str) -> bool:
        now = self.access.clock()

        def work(db: sqlite3.Connection) -> bool:
            row = db.execute("SELECT token, expires_at FROM leases WHERE thread_id = ?", (thread_id,)).fetchone()
            if row is not None and row[0] != token and row[1] > now:
                return False
            status = db.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if status is None or status[0] != RunStatus.RUNNING.value:
                return False
            db.execute(
                "INSERT INTO leases VALUES (?, ?, ?) ON CONFLICT (thread_id)"
                " DO UPDATE SET token = excluded.token, expires_at = excluded.expires_at",
                (thread_id, token, now + ttl),
            )
            return True

        return await self.access.transaction(work)

    async def release(self, thread_id: str, token: str) -> None:
        await self.access.transaction(
            lambda db: db.execute("DELETE FROM leases WHERE thread_id = ? AND token = ?", (thread_id, token))
        )

    async def unleased_running_runs(self, owner: str) -> list[tuple[str, str]]:
        rows = await self.access.query(
            "SELECT runs.run_id, runs.thread_id FROM runs LEFT JOIN leases ON leases.thread_id = runs.thread_id"
            " WHERE runs.status = 'running' AND runs.owner != ?"
            " AND (leases.thread_id IS NULL OR leases.expires_at <= ?)",
            (owner, self.access.clock()),
        )
        return [(str(run_id), str(thread_id)) for run_id, thread_id in rows]


def take_in(db: sqlite3.Connection, thread_id: str, token: str, expires: float, now: float, event_ttl: float) -> Taken:
    """:meth:`SqliteLeases.take`'s work in a transaction of the caller's: the lease, unless another holds it, and the
    thread's runs still running closed as interrupted (``also_close`` among them, when it still runs), but those
    waiting on a stored task: another process takes them up (yao_actors.conversation.durable.task_resume)."""
    row = db.execute("SELECT token, expires_at FROM leases WHERE thread_id = ?", (thread_id,)).fetchone()
    if row is not None and row[0] != token and row[1] > now:
        return Taken(False)
    db.execute(
        "INSERT INTO leases VALUES (?, ?, ?) ON CONFLICT (thread_id)"
        " DO UPDATE SET token = excluded.token, expires_at = excluded.expires_at",
        (thread_id, token, expires),
    )
    running = db.execute(
        "SELECT run_id, (SELECT MAX(seq) FROM events WHERE events.run_id = runs.run_id) FROM runs"
        " WHERE thread_id = ? AND status = 'running'"
        " AND NOT EXISTS (SELECT 1 FROM tasks WHERE tasks.run_id = runs.run_id)",  # taken up, not closed: task_resume
        (thread_id,),
    ).fetchall()
    for run_id, last_seq in running:
        db.execute(
            "INSERT INTO events VALUES (?, ?, ?)", (run_id, *encoded_interruption(run_id, (last_seq or 0) + 1, now))
        )
        db.execute(
            "UPDATE runs SET status = ?, outcome = ?, finished_at = ?, events_expire_at = ? WHERE run_id = ?",
            (RunStatus.INTERRUPTED.value, INTERRUPTED_CODE, now, now + event_ttl, run_id),
        )
    count = db.execute("SELECT COUNT(*) FROM messages WHERE thread_id = ?", (thread_id,)).fetchone()[0]
    return Taken(True, tuple(run_id for run_id, _ in running), int(count))

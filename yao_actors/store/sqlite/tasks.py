"""The open tasks of runs in the SQLite store: a ``tasks`` row per (thread, task), the handle as JSON text, indexed
by run (schema version 7); its thread's row going takes it along (``ON DELETE CASCADE``)."""

from __future__ import annotations

import sqlite3

import attrs

from yao_actors.errors import UnknownThread
from yao_actors.store.sqlite.access import SqliteAccess
from yao_actors.store.task_handle import TaskHandle
from yao_actors.store.tasks import decode_handle, encode_handle

#: The schema version that adds the ``tasks`` table (:data:`yao_actors.store.sqlite.schema.MIGRATIONS`).
TASKS_MIGRATION: tuple[str, ...] = (
    """CREATE TABLE tasks (
        thread_id TEXT NOT NULL REFERENCES threads ON DELETE CASCADE,
        task_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        created_at REAL NOT NULL,
        handle TEXT NOT NULL,
        PRIMARY KEY (thread_id, task_id)) WITHOUT ROWID""",
    "CREATE INDEX tasks_by_run ON tasks (run_id, created_at)",
)


@attrs.frozen
class SqliteTasks:
    """The :class:`~yao_actors.store.protocol.TaskRecords` of a SQLite store."""

    store: SqliteAccess

    async def save(self, handle: TaskHandle) -> None:
        row = (handle.thread_id, handle.task_id, handle.run_id, handle.created_at, encode_handle(handle))

        def work(db: sqlite3.Connection) -> None:
            if db.execute("SELECT 1 FROM threads WHERE thread_id = ?", (handle.thread_id,)).fetchone() is None:
                raise UnknownThread(f"thread {handle.thread_id!r} was not opened")
            db.execute("INSERT OR REPLACE INTO tasks VALUES (?, ?, ?, ?, ?)", row)

        await self.store.transaction(work)

    async def remove(self, thread_id: str, task_id: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            cursor = db.execute("DELETE FROM tasks WHERE thread_id = ? AND task_id = ?", (thread_id, task_id))
            return cursor.rowcount > 0

        return bool(await self.store.transaction(work))

    async def for_thread(self, thread_id: str) -> list[TaskHandle]:
        rows = await self.store.query(
            "SELECT thread_id, task_id, handle FROM tasks WHERE thread_id = ? ORDER BY created_at, task_id",
            (thread_id,),
        )
        return [decode_handle(str(text), thread_id=str(t), task_id=str(k)) for t, k, text in rows]

    async def for_run(self, run_id: str) -> list[TaskHandle]:
        rows = await self.store.query(
            "SELECT thread_id, task_id, handle FROM tasks WHERE run_id = ? ORDER BY created_at, task_id", (run_id,)
        )
        return [decode_handle(str(text), thread_id=str(t), task_id=str(k)) for t, k, text in rows]

"""The SQLite store: one file on one machine, the service's default.

The standard library's ``sqlite3`` runs off the event loop, in a thread of the
store's own (:mod:`yao_actors.store.sqlite.worker`), on one connection, one call at a
time behind a Trio lock, so there is one writer per store object. The file is in
WAL mode (readers never block the writer; other processes may share it, unless the
store holds it ``exclusive``: :mod:`yao_actors.store.sqlite.files`) with a
``busy_timeout``; every call is one transaction (a run's turn, its messages and
its events, is one: :meth:`SqliteStore.append_turn`), and a call's rows go in
one multi-row ``INSERT``. The schema carries its
version in ``schema_version`` and :data:`~yao_actors.store.sqlite.schema.MIGRATIONS` brings an older file up
to date when it is opened.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

import yao_actors.store.codec as codec
import yao_actors.store.records as records
from yao_actors.store.backend import BackendStore, StoreParts, Turn
from yao_actors.store.protocol import DEFAULT_EVENT_TTL
from yao_actors.store.refusals import run_closed, run_id_taken, thread_not_opened, unknown_run
from yao_actors.store.sqlite.access import SqliteAccess, unavailable
from yao_actors.store.sqlite.files import WatchedFiles, watch_files
from yao_actors.store.sqlite.leases import SqliteLeases, take_in
from yao_actors.store.sqlite.parked import SqliteParkedCalls
from yao_actors.store.sqlite.rows import (
    RUN_COLUMNS,
    append_messages,
    insert_rows,
    purge_expired_events,
    run_of,
    start_in,
    thread_exists,
    thread_of,
)
from yao_actors.store.sqlite.schema import connect
from yao_actors.store.sqlite.tasks import SqliteTasks
from yao_actors.store.sqlite.tokens import SqliteTokens
from yao_actors.store.sqlite.worker import WorkerThread, open_worker_thread


@asynccontextmanager
async def open_sqlite_store(
    path: str | os.PathLike[str],
    *,
    event_ttl: float = DEFAULT_EVENT_TTL,
    busy_timeout: float = 5.0,
    exclusive: bool = False,
    clock: Callable[[], float] = time.time,
) -> AsyncIterator[SqliteStore]:
    """Open the store in the file at ``path`` and close its connection on exit.

    ``exclusive``: this store is the only one to open the file while it is open (no other process, no other
    store object): SQLite keeps its WAL index in the process's memory, where nothing done to a file can
    take the process down, and another opener is refused (``database is locked``). Otherwise the file is
    shared (``--workers``, the ``sqlite3`` shell, a backup tool) and the store checks its ``-shm`` before each
    call (:mod:`yao_actors.store.sqlite.files`). Either way a file deleted or replaced under the store makes
    its calls fail.

    Raises :class:`~yao_actors.errors.StoreUnavailable` when the file cannot be
    created, opened or migrated.
    """
    source = os.fspath(path)
    async with open_worker_thread(f"sqlite store {source}") as worker:

        def opening() -> tuple[sqlite3.Connection, WatchedFiles]:
            connection = connect(source, busy_timeout=busy_timeout, exclusive=exclusive)
            try:
                return connection, watch_files(source, exclusive=exclusive)
            except BaseException:
                connection.close()
                raise

        try:
            connection, files = await worker.run(opening)
        except (OSError, sqlite3.Error) as error:
            raise unavailable(source, error) from error
        try:
            yield SqliteStore(source, connection, worker, files, event_ttl=event_ttl, clock=clock)
        finally:
            with trio.CancelScope(shield=True):
                await worker.run(connection.close)
                files.close()


@attrs.define(eq=False)
class SqliteStore(BackendStore[SqliteLeases, SqliteParkedCalls]):
    """A :class:`~yao_actors.store.ConversationStore` in one SQLite file (open with :func:`open_sqlite_store`)."""

    path: str
    _connection: sqlite3.Connection = attrs.field(alias="connection")
    _worker: WorkerThread = attrs.field(alias="worker")
    files: WatchedFiles
    """The store's files, checked before each call."""
    event_ttl: float = DEFAULT_EVENT_TTL
    clock: Callable[[], float] = time.time
    owner: str = attrs.field(factory=codec.new_owner_token)
    access: SqliteAccess = attrs.field(init=False)
    """The way in that the store and each of its parts go through: every statement runs by it."""
    _next_purge: float = attrs.field(default=0.0, init=False)
    parts: StoreParts[SqliteLeases, SqliteParkedCalls] = attrs.field(init=False)

    @access.default
    def _access(self) -> SqliteAccess:
        return SqliteAccess(self.path, self._connection, self._worker, self.files, self.clock, self.event_ttl)

    @parts.default
    def _parts(self) -> StoreParts[SqliteLeases, SqliteParkedCalls]:
        access = self.access
        return StoreParts(SqliteLeases(access), SqliteTokens(access), SqliteParkedCalls(access))

    @property
    def durable(self) -> bool:
        return True

    def tasks(self) -> SqliteTasks:
        return SqliteTasks(self.access)

    def problem(self) -> str | None:
        """Its files deleted, replaced or unwritable: a few system calls, no wait for the store's thread."""
        return self.files.problem()

    # -- threads

    async def open_thread(self, thread_id: str, principal: str | None) -> records.ThreadInfo:
        now = self.clock()

        def work(db: sqlite3.Connection) -> records.ThreadInfo:
            inserted = db.execute("INSERT OR IGNORE INTO threads VALUES (?, ?, ?, ?)", (thread_id, principal, now, now))
            if inserted.rowcount == 1:
                return records.ThreadInfo(thread_id, principal, records.utc(now), records.utc(now), created=True)
            return thread_of(db.execute("SELECT * FROM threads WHERE thread_id = ?", (thread_id,)).fetchone())

        return await self.access.transaction(work)

    async def get_thread(self, thread_id: str) -> records.ThreadInfo | None:
        rows = await self.access.query("SELECT * FROM threads WHERE thread_id = ?", (thread_id,))
        return thread_of(rows[0]) if rows else None

    async def list_threads(
        self, principal: str | records.AnyPrincipal | None = records.ANY_PRINCIPAL, *, limit: int = 100
    ) -> list[records.ThreadInfo]:
        if principal is records.ANY_PRINCIPAL:
            query, parameters = "SELECT * FROM threads ORDER BY created_at DESC, rowid DESC LIMIT ?", (limit,)
        else:
            query = "SELECT * FROM threads WHERE principal IS ? ORDER BY created_at DESC, rowid DESC LIMIT ?"
            parameters = (principal, limit)  # type: ignore[assignment]
        return [thread_of(row) for row in await self.access.query(query, parameters)]

    async def load_history(self, thread_id: str) -> list[records.Message]:
        rows = await self.access.query("SELECT message FROM messages WHERE thread_id = ? ORDER BY id", (thread_id,))
        return [codec.decode_json(row[0]) for row in rows]

    async def append_messages(self, thread_id: str, messages: Sequence[records.Message]) -> None:
        encoded = [codec.encode_message(m) for m in messages]
        now = self.clock()
        await self.access.transaction(lambda db: append_messages(db, thread_id, encoded, now))

    async def forget_thread(self, thread_id: str) -> bool:
        cursor = await self.access.transaction(
            lambda db: db.execute("DELETE FROM threads WHERE thread_id = ?", (thread_id,))
        )
        return cursor.rowcount == 1

    # -- runs

    async def start_run(
        self, thread_id: str, run_id: str, assistant: str, input_messages: Sequence[records.Message]
    ) -> records.RunRecord:
        encoded = [codec.encode_message(m) for m in input_messages]
        now = self.clock()

        def work(db: sqlite3.Connection) -> None:
            if db.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone():
                raise run_id_taken(run_id)
            start_in(db, thread_id, run_id, assistant, self.owner, encoded, now)

        await self.access.transaction(work)
        return records.RunRecord(run_id, thread_id, assistant, records.RunStatus.RUNNING, records.utc(now), self.owner)

    async def take_and_start(self, thread_id: str, token: str, ttl: float, start: records.RunStart) -> records.Taken:
        """The lease and the run's start in one transaction."""
        encoded = [codec.encode_message(m) for m in start.messages]
        now = self.clock()

        def work(db: sqlite3.Connection) -> records.Taken:
            if not thread_exists(db, thread_id):
                raise thread_not_opened(thread_id)
            if db.execute("SELECT 1 FROM runs WHERE run_id = ?", (start.run_id,)).fetchone():
                raise run_id_taken(start.run_id)
            taken = take_in(db, thread_id, token, now + ttl, now, self.event_ttl)
            if not taken.taken or start.expect_messages not in (None, taken.stored_messages):
                return taken
            start_in(db, thread_id, start.run_id, start.assistant, self.owner, encoded, now)
            return attrs.evolve(taken, started=True)

        return await self.access.transaction(work)

    async def finish_run(
        self, run_id: str, *, status: records.RunStatus, outcome: str, usage: Mapping[str, Any] | None = None
    ) -> bool:
        parameters = (status.value, outcome, codec.encode_usage(usage), self.clock(), run_id)
        cursor = await self.access.transaction(
            lambda db: db.execute(
                "UPDATE runs SET status = ?, outcome = ?, usage = ?, finished_at = ?"
                " WHERE run_id = ? AND status = 'running'",
                parameters,
            )
        )
        return cursor.rowcount == 1

    async def get_run(self, run_id: str) -> records.RunRecord | None:
        rows = await self.access.query(f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,))
        return run_of(rows[0]) if rows else None

    async def list_runs(self, thread_id: str) -> list[records.RunRecord]:
        query = f"SELECT {RUN_COLUMNS} FROM runs WHERE thread_id = ? ORDER BY started_at, rowid"
        return [run_of(row) for row in await self.access.query(query, (thread_id,))]

    # -- event logs

    async def append_events(self, run_id: str, events: Sequence[records.EncodedEvent]) -> None:
        await self._write(run_id, events, None)

    async def write_turn(self, turn: Turn) -> None:
        """The turn (the run's close and the lease's release with it) in one transaction."""
        if turn.messages or turn.events or turn.finish is not None:
            await self._write(turn.run_id, turn.events, turn)

    async def _write(self, run_id: str, events: Sequence[records.EncodedEvent], turn: Turn | None) -> None:
        """A run's events, and a turn's messages (and the run's close, and the lease's release) when given, in one
        transaction; without ``turn``: only events, of a run on any thread, whether or not it is still running
        (what closes a dead run's log)."""
        thread_id = turn.thread_id if turn else None
        finish, release = (turn.finish, turn.release) if turn else (None, None)
        encoded = [codec.encode_message(m) for m in turn.messages] if turn else []
        seqs = codec.event_seqs(events)
        rows = [(run_id, seq, text) for seq, text in events]
        now = self.clock()
        purge = now >= self._next_purge

        def work(db: sqlite3.Connection) -> None:
            found = db.execute(
                "SELECT thread_id, (SELECT MAX(seq) FROM events WHERE run_id = ?), status FROM runs WHERE run_id = ?",
                (run_id, run_id),
            ).fetchone()
            if thread_id is None and found is None:
                raise unknown_run(run_id)
            if thread_id is not None:
                if found is None or found[0] != thread_id:
                    if not thread_exists(db, thread_id):
                        raise thread_not_opened(thread_id)
                    raise unknown_run(run_id, thread_id)
                if found[2] != records.RunStatus.RUNNING.value:
                    raise run_closed(run_id, found[2])
            codec.check_rises(run_id, seqs, found[1] or 0)
            if encoded:
                append_messages(db, found[0], encoded, now)
            if rows or thread_id is None:  # append_events refreshes the log's expiry even for an empty batch
                insert_rows(db, "INSERT INTO events VALUES", rows)
                db.execute("UPDATE runs SET events_expire_at = ? WHERE run_id = ?", (now + self.event_ttl, run_id))
            if finish is not None:
                db.execute(
                    "UPDATE runs SET status = ?, outcome = ?, usage = ?, finished_at = ? WHERE run_id = ?",
                    (finish.status.value, finish.outcome, codec.encode_usage(finish.usage), now, run_id),
                )
            if release is not None:
                db.execute("DELETE FROM leases WHERE thread_id = ? AND token = ?", (found[0], release))
            if purge:
                purge_expired_events(db, now)

        await self.access.transaction(work)
        if purge:
            self._next_purge = now + codec.purge_interval(self.event_ttl)

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[records.EventDict]:
        rows = await self.access.query(
            "SELECT event FROM events JOIN runs USING (run_id)"
            " WHERE run_id = ? AND seq > ? AND events_expire_at > ? ORDER BY seq",
            (run_id, codec.seq_floor(after_seq), self.clock()),
        )
        return [codec.decode_json(row[0]) for row in rows]

    # -- pending approvals

    async def save_approvals(self, thread_id: str, approvals: Sequence[Mapping[str, Any]]) -> None:
        encoded = codec.encode_approvals(approvals)

        def work(db: sqlite3.Connection) -> None:
            if db.execute("SELECT 1 FROM threads WHERE thread_id = ?", (thread_id,)).fetchone() is None:
                raise thread_not_opened(thread_id)
            if approvals:
                db.execute("INSERT OR REPLACE INTO approvals VALUES (?, ?)", (thread_id, encoded))
            else:
                db.execute("DELETE FROM approvals WHERE thread_id = ?", (thread_id,))

        await self.access.transaction(work)

    async def load_approvals(self, thread_id: str) -> list[dict[str, Any]]:
        rows = await self.access.query("SELECT approvals FROM approvals WHERE thread_id = ?", (thread_id,))
        return codec.decode_approvals(rows[0][0]) if rows else []

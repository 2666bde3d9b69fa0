"""The SQLite store's rows: how a thread's messages and a run are written in a transaction, and read back."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from yao_actors.store.codec import decode_json
from yao_actors.store.records import RunRecord, RunStatus, ThreadInfo, utc
from yao_actors.store.refusals import thread_not_opened

RUN_COLUMNS = "run_id, thread_id, assistant, status, started_at, owner, outcome, usage, finished_at"
"""The columns of a run's record, in :class:`~yao_actors.store.records.RunRecord`'s order (what :func:`run` reads)."""


def append_messages(db: sqlite3.Connection, thread_id: str, encoded: list[str], now: float) -> None:
    if db.execute("UPDATE threads SET updated_at = ? WHERE thread_id = ?", (now, thread_id)).rowcount != 1:
        raise thread_not_opened(thread_id)
    insert_rows(db, "INSERT INTO messages (thread_id, message) VALUES", [(thread_id, m) for m in encoded])


ROWS_PER_INSERT = 256
"""Rows one ``INSERT`` takes at most (SQLite allows 32,766 parameters to a statement)."""


def start_in(
    db: sqlite3.Connection, thread_id: str, run_id: str, assistant: str, owner: str, encoded: list[str], now: float
) -> None:
    """Record a run as running, its input appended to the thread's history (a run id not stored yet)."""
    append_messages(db, thread_id, encoded, now)
    db.execute(
        "INSERT INTO runs (run_id, thread_id, assistant, status, started_at, owner) VALUES (?, ?, ?, ?, ?, ?)",
        (run_id, thread_id, assistant, RunStatus.RUNNING.value, now, owner),
    )


def insert_rows(db: sqlite3.Connection, insert: str, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert ``rows`` with one multi-row ``INSERT`` per :data:`ROWS_PER_INSERT`.

    One statement step for a turn's rows rather than one each: each step gives up the GIL and takes it
    back, and while the run goes on in the event loop's thread every hand-over costs a thread switch.
    """
    for start in range(0, len(rows), ROWS_PER_INSERT):
        chunk = rows[start : start + ROWS_PER_INSERT]
        values = ", ".join(["(" + ", ".join("?" * len(chunk[0])) + ")"] * len(chunk))
        db.execute(f"{insert} {values}", [value for row in chunk for value in row])


def thread_exists(db: sqlite3.Connection, thread_id: str) -> bool:
    return db.execute("SELECT 1 FROM threads WHERE thread_id = ?", (thread_id,)).fetchone() is not None


def purge_expired_events(db: sqlite3.Connection, now: float) -> None:
    db.execute("DELETE FROM events WHERE run_id IN (SELECT run_id FROM runs WHERE events_expire_at <= ?)", (now,))
    db.execute("UPDATE runs SET events_expire_at = NULL WHERE events_expire_at <= ?", (now,))


def thread_of(row: tuple[Any, ...]) -> ThreadInfo:
    thread_id, principal, created_at, updated_at = row
    return ThreadInfo(thread_id, principal, utc(created_at), utc(updated_at))


def run_of(row: tuple[Any, ...]) -> RunRecord:
    run_id, thread_id, assistant, status, started_at, owner, outcome, usage, finished_at = row
    return RunRecord(
        run_id,
        thread_id,
        assistant,
        RunStatus(status),
        utc(started_at),
        owner,
        outcome=outcome,
        usage=decode_json(usage),
        finished_at=None if finished_at is None else utc(finished_at),
    )

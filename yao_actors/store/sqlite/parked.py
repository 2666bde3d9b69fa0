"""Held calls in a SQLite store: a ``parked_calls`` row per ticket, written in one transaction, polled for.

:class:`~yao_actors.store.protocol.ParkedCalls` for processes on one machine sharing the file. A row holds the
holder, when the holding expires (the store's clock), the answer once delivered (and whether the holder took it),
and the outcome once finished; the ``take_*`` calls look every :data:`~yao_actors.store.protocol.POLL_INTERVAL`
seconds. Rows whose time is up are deleted by the next :meth:`SqliteParkedCalls.hold`. The table came with one of
the store's schema versions (:data:`yao_actors.store.sqlite.schema.MIGRATIONS`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import trio

from yao_actors.store.codec import decode_json, encode_object
from yao_actors.store.protocol import OUTCOME_KEEP, POLL_INTERVAL
from yao_actors.store.sqlite.access import SqliteAccess

_HELD = "ticket = ? AND outcome IS NULL AND expires_at > ?"
"""The condition of a row whose call is held now."""


@attrs.define(eq=False)
class SqliteParkedCalls:
    """The :class:`~yao_actors.store.protocol.ParkedCalls` of a :class:`~yao_actors.store.sqlite.SqliteStore`."""

    access: SqliteAccess

    async def _update(self, statement: str, parameters: Sequence[Any]) -> bool:
        cursor = await self.access.transaction(lambda db: db.execute(statement, parameters))
        return cursor.rowcount == 1

    async def hold(self, ticket: str, holder: str, ttl: float) -> None:
        now = self.access.clock()

        def work(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM parked_calls WHERE expires_at <= ?", (now,))
            db.execute(
                "INSERT OR REPLACE INTO parked_calls (ticket, holder, expires_at) VALUES (?, ?, ?)",
                (ticket, holder, now + ttl),
            )

        await self.access.transaction(work)

    async def renew(self, ticket: str, holder: str, ttl: float) -> bool:
        now = self.access.clock()
        return await self._update(
            f"UPDATE parked_calls SET expires_at = ? WHERE {_HELD} AND holder = ?", (now + ttl, ticket, now, holder)
        )

    async def holder(self, ticket: str) -> str | None:
        rows = await self.access.query(f"SELECT holder FROM parked_calls WHERE {_HELD}", (ticket, self.access.clock()))
        return str(rows[0][0]) if rows else None

    async def deliver(self, ticket: str, answer: Mapping[str, Any]) -> bool:
        encoded = encode_object(answer, "answer")
        return await self._update(
            f"UPDATE parked_calls SET answer = ?, answered = 1 WHERE {_HELD} AND answered = 0",
            (encoded, ticket, self.access.clock()),
        )

    async def take_answer(self, ticket: str, holder: str, timeout: float) -> dict[str, Any] | None:  # noqa: ASYNC109
        def work(db: sqlite3.Connection) -> str | None:
            row = db.execute(
                f"SELECT answer FROM parked_calls WHERE {_HELD} AND holder = ? AND answer IS NOT NULL",
                (ticket, self.access.clock(), holder),
            ).fetchone()
            if row is not None:
                db.execute("UPDATE parked_calls SET answer = NULL WHERE ticket = ?", (ticket,))
            return None if row is None else str(row[0])

        return await self._poll("answer IS NOT NULL", ticket, work, timeout)

    async def finish(self, ticket: str, holder: str, outcome: Mapping[str, Any]) -> bool:
        encoded = encode_object(outcome, "outcome")
        now = self.access.clock()
        return await self._update(
            f"UPDATE parked_calls SET outcome = ?, answer = NULL, expires_at = ? WHERE {_HELD} AND holder = ?",
            (encoded, now + OUTCOME_KEEP, ticket, now, holder),
        )

    async def take_outcome(self, ticket: str, timeout: float) -> dict[str, Any] | None:  # noqa: ASYNC109
        def work(db: sqlite3.Connection) -> str | None:
            row = db.execute(
                "SELECT outcome FROM parked_calls WHERE ticket = ? AND outcome IS NOT NULL", (ticket,)
            ).fetchone()
            if row is not None:
                db.execute("DELETE FROM parked_calls WHERE ticket = ?", (ticket,))
            return None if row is None else str(row[0])

        return await self._poll("outcome IS NOT NULL", ticket, work, timeout)

    async def release(self, ticket: str, holder: str) -> None:
        now = self.access.clock()
        await self._update(f"DELETE FROM parked_calls WHERE {_HELD} AND holder = ?", (ticket, now, holder))

    async def _poll(
        self,
        ready: str,
        ticket: str,
        work: Callable[[sqlite3.Connection], str | None],
        timeout: float,  # noqa: ASYNC109
    ) -> dict[str, Any] | None:
        """Look every ``POLL_INTERVAL`` (a read) whether the ticket's row is ``ready``, for up to ``timeout``; then
        take what ``work`` finds, in a transaction."""
        deadline = trio.current_time() + timeout
        while True:
            if await self.access.query(f"SELECT 1 FROM parked_calls WHERE ticket = ? AND {ready}", (ticket,)):
                found = await self.access.transaction(work)
                if found is not None:
                    return decode_json(found)
            left = deadline - trio.current_time()
            if left <= 0:
                return None
            await trio.sleep(min(left, POLL_INTERVAL))

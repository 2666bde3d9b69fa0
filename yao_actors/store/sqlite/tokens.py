"""OAuth token records in the SQLite store: the ``oauth_tokens`` table (schema version 4), their expiries in its
``expires_at`` column and the index on it (schema version 6), so expired records are dropped without reading any."""

from __future__ import annotations

import sqlite3

import attrs

from yao_actors.store.protocol import EXPIRE_BATCH
from yao_actors.store.sqlite.access import SqliteAccess


@attrs.frozen
class SqliteTokens:
    """Token records in the SQLite store's ``oauth_tokens`` table."""

    access: SqliteAccess

    async def load(self, server: str, identity: str) -> str | None:
        rows = await self.access.query(
            "SELECT sealed FROM oauth_tokens WHERE server = ? AND identity = ?", (server, identity)
        )
        return str(rows[0][0]) if rows else None

    async def save(self, server: str, identity: str, sealed: str, expires_at: float | None = None) -> None:
        now = self.access.clock()
        await self.access.transaction(
            lambda db: db.execute(
                "INSERT OR REPLACE INTO oauth_tokens (server, identity, sealed, updated_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (server, identity, sealed, now, expires_at),
            )
        )

    async def delete(self, server: str, identity: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            cursor = db.execute("DELETE FROM oauth_tokens WHERE server = ? AND identity = ?", (server, identity))
            return cursor.rowcount > 0

        return bool(await self.access.transaction(work))

    async def expire(self, server: str, now: float, most: int = EXPIRE_BATCH) -> int:
        def work(db: sqlite3.Connection) -> int:
            cursor = db.execute(
                "DELETE FROM oauth_tokens WHERE (server, identity) IN (SELECT server, identity FROM oauth_tokens "
                "WHERE server = ? AND expires_at <= ? ORDER BY expires_at LIMIT ?)",
                (server, now, most),
            )
            return cursor.rowcount

        return int(await self.access.transaction(work))

    async def keys(self) -> list[tuple[str, str]]:
        rows = await self.access.query("SELECT server, identity FROM oauth_tokens ORDER BY server, identity", ())
        return [(str(server), str(identity)) for server, identity in rows]

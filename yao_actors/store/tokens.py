"""OAuth tokens in a conversation store: one sealed text per (server, identity), kept as the caller sealed it.

The store never sees a token: :mod:`yao_actors.auth.vault` seals each record (AES-GCM, :mod:`yao_actors.auth.cipher`)
before it comes here. Memory keeps them in a dict; SQLite in the ``oauth_tokens`` table (schema version 4); Redis
in one hash, ``<prefix>oauth:tokens``, whose fields are ``escape(server):escape(identity)``
(:mod:`yao_actors.store.redis_keys`), so no id can name another record.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

import attrs
import trio

from yao_actors.store.redis_keys import escape, unescape


class TokenRecords(Protocol):
    """Sealed token records by (server, identity); every method is a checkpoint, and a store out of reach raises
    :class:`~yao_actors.errors.StoreUnavailable`."""

    async def load(self, server: str, identity: str) -> str | None:
        """The sealed text of the record, or ``None``."""
        ...

    async def save(self, server: str, identity: str, sealed: str) -> None:
        """Keep ``sealed`` as the record (replacing it)."""
        ...

    async def delete(self, server: str, identity: str) -> bool:
        """Drop the record; whether there was one."""
        ...

    async def keys(self) -> list[tuple[str, str]]:
        """Every record's (server, identity), sorted."""
        ...


@attrs.define
class MemoryTokens:
    """Token records in a dict (the memory store's)."""

    _records: dict[tuple[str, str], str] = attrs.field(factory=dict)

    async def load(self, server: str, identity: str) -> str | None:
        await trio.lowlevel.checkpoint()
        return self._records.get((server, identity))

    async def save(self, server: str, identity: str, sealed: str) -> None:
        await trio.lowlevel.checkpoint()
        self._records[server, identity] = sealed

    async def delete(self, server: str, identity: str) -> bool:
        await trio.lowlevel.checkpoint()
        return self._records.pop((server, identity), None) is not None

    async def keys(self) -> list[tuple[str, str]]:
        await trio.lowlevel.checkpoint()
        return sorted(self._records)


class SqliteAccess(Protocol):
    """What :class:`SqliteTokens` needs of the SQLite store."""

    async def transaction(self, work: Callable[[sqlite3.Connection], Any]) -> Any: ...

    async def query(self, query: str, parameters: Any) -> list[Any]: ...


@attrs.frozen
class SqliteTokens:
    """Token records in the SQLite store's ``oauth_tokens`` table."""

    store: SqliteAccess
    clock: Callable[[], float] = time.time

    async def load(self, server: str, identity: str) -> str | None:
        rows = await self.store.query(
            "SELECT sealed FROM oauth_tokens WHERE server = ? AND identity = ?", (server, identity)
        )
        return str(rows[0][0]) if rows else None

    async def save(self, server: str, identity: str, sealed: str) -> None:
        now = self.clock()
        await self.store.transaction(
            lambda db: db.execute(
                "INSERT OR REPLACE INTO oauth_tokens (server, identity, sealed, updated_at) VALUES (?, ?, ?, ?)",
                (server, identity, sealed, now),
            )
        )

    async def delete(self, server: str, identity: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            cursor = db.execute("DELETE FROM oauth_tokens WHERE server = ? AND identity = ?", (server, identity))
            return cursor.rowcount > 0

        return bool(await self.store.transaction(work))

    async def keys(self) -> list[tuple[str, str]]:
        rows = await self.store.query("SELECT server, identity FROM oauth_tokens ORDER BY server, identity", ())
        return [(str(server), str(identity)) for server, identity in rows]


@attrs.frozen
class RedisTokens:
    """Token records in one Redis hash; ``reachable`` turns Redis's errors into ``StoreUnavailable``."""

    client: Any
    key: str
    reachable: Callable[[], AbstractContextManager[None]]

    async def load(self, server: str, identity: str) -> str | None:
        with self.reachable():
            value = await self.client.hget(self.key, _field(server, identity))
        return None if value is None else str(value)

    async def save(self, server: str, identity: str, sealed: str) -> None:
        with self.reachable():
            await self.client.hset(self.key, {_field(server, identity): sealed})

    async def delete(self, server: str, identity: str) -> bool:
        with self.reachable():
            return bool(await self.client.hdel(self.key, [_field(server, identity)]))

    async def keys(self) -> list[tuple[str, str]]:
        with self.reachable():
            fields = await self.client.hkeys(self.key)
        return sorted(
            (unescape(server), unescape(identity)) for server, _, identity in (f.partition(":") for f in fields)
        )


def _field(server: str, identity: str) -> str:
    return f"{escape(server)}:{escape(identity)}"

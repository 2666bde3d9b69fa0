"""OAuth tokens in a conversation store: one sealed text per (server, identity), kept as the caller sealed it.

The store never sees a token: :mod:`yao_actors.auth.vault` seals each record (AES-GCM, :mod:`yao_actors.auth.cipher`)
before it comes here. Memory keeps them in a dict; SQLite in the ``oauth_tokens`` table (schema version 4); Redis
in one hash, ``<prefix>oauth:tokens``, whose fields are ``escape(server):escape(identity)``
(:mod:`yao_actors.store.redis_keys`), so no id can name another record.

A record may carry when it expires (the pending authorizations of :mod:`yao_actors.auth.states` do), in the clear
beside the sealed text and indexed by it (SQLite: the ``expires_at`` column of schema version 6 and its index;
Redis: a sorted set per server, ``<prefix>oauth:expiry:<server>``; memory: a dict): :meth:`TokenRecords.expire`
drops those past their time without reading, let alone opening, any record.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import attrs
import trio

from yao_actors.store.redis_keys import RedisKeys, escape, unescape

#: The most records one :meth:`TokenRecords.expire` drops (the rest, at the next).
EXPIRE_BATCH = 1000


class TokenRecords(Protocol):
    """Sealed token records by (server, identity); every method is a checkpoint, and a store out of reach raises
    :class:`~yao_actors.errors.StoreUnavailable`."""

    async def load(self, server: str, identity: str) -> str | None:
        """The sealed text of the record, or ``None``."""
        ...

    async def save(self, server: str, identity: str, sealed: str, expires_at: float | None = None) -> None:
        """Keep ``sealed`` as the record (replacing it); with ``expires_at`` (POSIX time), :meth:`expire` drops it
        once that time has come."""
        ...

    async def delete(self, server: str, identity: str) -> bool:
        """Drop the record; whether there was one."""
        ...

    async def expire(self, server: str, now: float, most: int = EXPIRE_BATCH) -> int:
        """Drop up to ``most`` of ``server``'s records whose ``expires_at`` is ``now`` or earlier, by the expiry
        index (no record is read); how many."""
        ...

    async def keys(self) -> list[tuple[str, str]]:
        """Every record's (server, identity), sorted."""
        ...


@attrs.define
class MemoryTokens:
    """Token records in a dict (the memory store's), their expiries in another."""

    _records: dict[tuple[str, str], str] = attrs.field(factory=dict)
    _expiries: dict[tuple[str, str], float] = attrs.field(factory=dict)

    async def load(self, server: str, identity: str) -> str | None:
        await trio.lowlevel.checkpoint()
        return self._records.get((server, identity))

    async def save(self, server: str, identity: str, sealed: str, expires_at: float | None = None) -> None:
        await trio.lowlevel.checkpoint()
        self._records[server, identity] = sealed
        if expires_at is None:
            self._expiries.pop((server, identity), None)
        else:
            self._expiries[server, identity] = expires_at

    async def delete(self, server: str, identity: str) -> bool:
        await trio.lowlevel.checkpoint()
        self._expiries.pop((server, identity), None)
        return self._records.pop((server, identity), None) is not None

    async def expire(self, server: str, now: float, most: int = EXPIRE_BATCH) -> int:
        await trio.lowlevel.checkpoint()
        gone = [key for key, expires_at in self._expiries.items() if key[0] == server and expires_at <= now][:most]
        for key in gone:
            del self._expiries[key]
            del self._records[key]
        return len(gone)

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

    async def save(self, server: str, identity: str, sealed: str, expires_at: float | None = None) -> None:
        now = self.clock()
        await self.store.transaction(
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

        return bool(await self.store.transaction(work))

    async def expire(self, server: str, now: float, most: int = EXPIRE_BATCH) -> int:
        def work(db: sqlite3.Connection) -> int:
            cursor = db.execute(
                "DELETE FROM oauth_tokens WHERE (server, identity) IN (SELECT server, identity FROM oauth_tokens "
                "WHERE server = ? AND expires_at <= ? ORDER BY expires_at LIMIT ?)",
                (server, now, most),
            )
            return cursor.rowcount

        return int(await self.store.transaction(work))

    async def keys(self) -> list[tuple[str, str]]:
        rows = await self.store.query("SELECT server, identity FROM oauth_tokens ORDER BY server, identity", ())
        return [(str(server), str(identity)) for server, identity in rows]


class RedisAccess(Protocol):
    """What :class:`RedisTokens` needs of the Redis store."""

    client: Any

    @property
    def keys(self) -> RedisKeys: ...

    def reachable(self) -> AbstractContextManager[None]: ...

    async def run_script(self, script: Any, keys: Sequence[str], args: Sequence[str | int | float]) -> Any: ...


_SAVE = """
-- KEYS: the records' hash, the server's expiry index; ARGV: field, sealed text, expires_at ('' for none)
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] == '' then redis.call('ZREM', KEYS[2], ARGV[1]) else redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1]) end
return 1
"""

_DELETE = """
-- KEYS: the records' hash, the server's expiry index; ARGV: field
redis.call('ZREM', KEYS[2], ARGV[1])
return redis.call('HDEL', KEYS[1], ARGV[1])
"""

_EXPIRE = """
-- KEYS: the records' hash, the server's expiry index; ARGV: now, most
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, field in ipairs(gone) do
  redis.call('HDEL', KEYS[1], field)
  redis.call('ZREM', KEYS[2], field)
end
return #gone
"""


@attrs.define(eq=False)
class RedisTokens:
    """Token records in one Redis hash, their expiries in a sorted set per server; every write one script."""

    store: RedisAccess
    _scripts: dict[str, Any] = attrs.field(init=False)

    @_scripts.default
    def _register(self) -> dict[str, Any]:
        scripts = {"save": _SAVE, "delete": _DELETE, "expire": _EXPIRE}
        return {name: self.store.client.register_script(source) for name, source in scripts.items()}

    def _keys(self, server: str) -> list[str]:
        return [self.store.keys.oauth_tokens, self.store.keys.oauth_expiry(server)]

    async def load(self, server: str, identity: str) -> str | None:
        with self.store.reachable():
            value = await self.store.client.hget(self.store.keys.oauth_tokens, _field(server, identity))
        return None if value is None else str(value)

    async def save(self, server: str, identity: str, sealed: str, expires_at: float | None = None) -> None:
        expiry = "" if expires_at is None else repr(expires_at)
        await self.store.run_script(
            self._scripts["save"], self._keys(server), [_field(server, identity), sealed, expiry]
        )

    async def delete(self, server: str, identity: str) -> bool:
        return bool(
            await self.store.run_script(self._scripts["delete"], self._keys(server), [_field(server, identity)])
        )

    async def expire(self, server: str, now: float, most: int = EXPIRE_BATCH) -> int:
        return int(await self.store.run_script(self._scripts["expire"], self._keys(server), [repr(now), most]))

    async def keys(self) -> list[tuple[str, str]]:
        with self.store.reachable():
            fields = await self.store.client.hkeys(self.store.keys.oauth_tokens)
        return sorted(
            (unescape(server), unescape(identity)) for server, _, identity in (f.partition(":") for f in fields)
        )


def _field(server: str, identity: str) -> str:
    return f"{escape(server)}:{escape(identity)}"

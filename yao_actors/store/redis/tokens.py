"""OAuth token records in the Redis store: one hash, ``<prefix>oauth:tokens``, whose fields are
``escape(server):escape(identity)`` (:mod:`yao_actors.store.redis.keys`, so no id can name another record), and a
sorted set of expiries per server, ``<prefix>oauth:expiry:<server>``, by which expired records are dropped unread."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import attrs

from yao_actors.store.protocol import EXPIRE_BATCH
from yao_actors.store.redis.keys import RedisKeys, escape, unescape


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

"""OAuth token records in the Redis store: one hash, ``<prefix>oauth:tokens``, whose fields are
``escape(server):escape(identity)`` (:mod:`yao_actors.store.redis.keys`, so no id can name another record), and a
sorted set of expiries per server, ``<prefix>oauth:expiry:<server>``, by which expired records are dropped unread."""

from __future__ import annotations

import attrs

from yao_actors.store.protocol import EXPIRE_BATCH
from yao_actors.store.redis.access import RedisAccess, lua
from yao_actors.store.redis.keys import escape, unescape

_SAVE = lua("""
-- KEYS: the records' hash, the server's expiry index; ARGV: field, sealed text, expires_at ('' for none)
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] == '' then redis.call('ZREM', KEYS[2], ARGV[1]) else redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1]) end
return 1
""")

_DELETE = lua("""
-- KEYS: the records' hash, the server's expiry index; ARGV: field
redis.call('ZREM', KEYS[2], ARGV[1])
return redis.call('HDEL', KEYS[1], ARGV[1])
""")

_EXPIRE = lua("""
-- KEYS: the records' hash, the server's expiry index; ARGV: now, most
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, field in ipairs(gone) do
  redis.call('HDEL', KEYS[1], field)
  redis.call('ZREM', KEYS[2], field)
end
return #gone
""")


@attrs.define(eq=False)
class RedisTokens:
    """Token records in one Redis hash, their expiries in a sorted set per server; every write one script."""

    access: RedisAccess

    def _keys(self, server: str) -> list[str]:
        return [self.access.keys.oauth_tokens, self.access.keys.oauth_expiry(server)]

    async def load(self, server: str, identity: str) -> str | None:
        with self.access.reachable():
            value = await self.access.client.hget(self.access.keys.oauth_tokens, _field(server, identity))
        return None if value is None else str(value)

    async def save(self, server: str, identity: str, sealed: str, expires_at: float | None = None) -> None:
        expiry = "" if expires_at is None else repr(expires_at)
        await self.access.run(_SAVE, self._keys(server), [_field(server, identity), sealed, expiry])

    async def delete(self, server: str, identity: str) -> bool:
        return bool(await self.access.run(_DELETE, self._keys(server), [_field(server, identity)]))

    async def expire(self, server: str, now: float, most: int = EXPIRE_BATCH) -> int:
        return int(await self.access.run(_EXPIRE, self._keys(server), [repr(now), most]))

    async def keys(self) -> list[tuple[str, str]]:
        with self.access.reachable():
            fields = await self.access.client.hkeys(self.access.keys.oauth_tokens)
        return sorted(
            (unescape(server), unescape(identity)) for server, _, identity in (f.partition(":") for f in fields)
        )


def _field(server: str, identity: str) -> str:
    return f"{escape(server)}:{escape(identity)}"

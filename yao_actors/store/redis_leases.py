"""Thread leases in a Redis store: ``SET NX PX`` with a token; renewal and release are Lua scripts that check it.

The lease of thread ``id`` is the string key ``{prefix}thread:{id}:lease`` (the id escaped, as in every key of the
store: :mod:`yao_actors.store.redis_keys`) holding its holder's token, with
the lease's time to live as the key's (Redis' own clock, so machines need not agree on the time). Taking it
is one script: ``SET NX PX`` (or an extension when the token already holds it), then the thread's last run
(and the run a sweep names) closed as interrupted when still running, then the length of the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import attrs
import coredis

from yao_actors.store.base import INTERRUPTED_CODE, Taken
from yao_actors.store.leases import INTERRUPTED_MESSAGE
from yao_actors.store.redis_keys import ESCAPE_LUA, RedisKeys
from yao_actors.store.redis_scripts import LAST_SEQ_LUA


class RedisAccess(Protocol):
    """What the leases use of their :class:`~yao_actors.store.redis.RedisStore` (which makes them, and so is not
    imported here)."""

    client: coredis.Redis[str]
    prefix: str

    def clock(self) -> float: ...

    @property
    def keys(self) -> RedisKeys: ...

    @property
    def ttl_ms(self) -> int: ...

    def reachable(self) -> AbstractContextManager[None]: ...

    async def run_script(
        self, script: coredis.commands.Script[str], keys: Sequence[str], args: Sequence[str | int | float]
    ) -> Any: ...


_TAKE = (
    LAST_SEQ_LUA
    + ESCAPE_LUA
    + """
-- KEYS: lease, thread runs, running set, thread messages
-- ARGV: token, ttl ms, prefix, now, timestamp ms, message, code, run to close too ('' none), event ttl ms
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0, {}, 0} end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
local closed = {}
local function close(run_id)
  local run = ARGV[3] .. 'run:' .. escape(run_id)  -- RedisKeys.run, RedisKeys.events
  if redis.call('HGET', run, 'status') ~= 'running' then return end
  local stream = run .. ':events'
  local seq = last_seq(stream) + 1
  local event = cjson.encode({type = 'RUN_ERROR', message = ARGV[6], code = ARGV[7],
                              timestamp = tonumber(ARGV[5]), runId = run_id})
  redis.call('XADD', stream, '0-' .. seq, 'e', event)
  redis.call('PEXPIRE', stream, ARGV[9])
  redis.call('HSET', run, 'status', 'interrupted', 'outcome', 'interrupted', 'finishedAt', ARGV[4])
  redis.call('SREM', KEYS[3], run_id)
  closed[#closed + 1] = run_id
end
local last = redis.call('LINDEX', KEYS[2], -1)
if last then close(last) end
if ARGV[8] ~= '' and ARGV[8] ~= last then close(ARGV[8]) end
return {1, closed, redis.call('LLEN', KEYS[4])}
"""
)

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

_RECLAIM = """
-- KEYS: lease, run; ARGV: token, ttl ms
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[2], 'status') ~= 'running' then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


@attrs.define(eq=False)
class RedisLeases:
    """The :class:`~yao_actors.store.base.ThreadLeases` of a :class:`~yao_actors.store.redis.RedisStore`."""

    store: RedisAccess
    _scripts: dict[str, coredis.commands.Script[str]] = attrs.field(init=False)

    @_scripts.default
    def _register(self) -> dict[str, coredis.commands.Script[str]]:
        client = self.store.client
        return {
            name: client.register_script(source)
            for name, source in (("take", _TAKE), ("renew", _RENEW), ("reclaim", _RECLAIM), ("release", _RELEASE))
        }

    async def _script(self, name: str, keys: list[str], args: list[str | int | float]) -> Any:
        return await self.store.run_script(self._scripts[name], keys, args)

    async def take(self, thread_id: str, token: str, ttl: float, *, also_close: str | None = None) -> Taken:
        store = self.store
        now = store.clock()
        keys = [
            store.keys.lease(thread_id),
            store.keys.thread_runs(thread_id),
            store.keys.running,
            store.keys.messages(thread_id),
        ]
        args: list[str | int | float] = [
            token,
            _ms(ttl),
            store.prefix,
            repr(now),
            int(now * 1000),
            INTERRUPTED_MESSAGE,
            INTERRUPTED_CODE,
            also_close or "",
            store.ttl_ms,
        ]
        taken, closed, count = await self._script("take", keys, args)
        return Taken(bool(taken), tuple(str(run_id) for run_id in closed), int(count) if taken else None)

    async def renew(self, thread_id: str, token: str, ttl: float) -> bool:
        return bool(await self._script("renew", [self.store.keys.lease(thread_id)], [token, _ms(ttl)]))

    async def reclaim(self, thread_id: str, token: str, ttl: float, run_id: str) -> bool:
        keys = [self.store.keys.lease(thread_id), self.store.keys.run(run_id)]
        return bool(await self._script("reclaim", keys, [token, _ms(ttl)]))

    async def release(self, thread_id: str, token: str) -> None:
        await self._script("release", [self.store.keys.lease(thread_id)], [token])

    async def unleased_running_runs(self, owner: str) -> list[tuple[str, str]]:
        client = self.store.client
        with self.store.reachable():
            run_ids = sorted(await client.smembers(self.store.keys.running))
            if not run_ids:
                return []
            async with client.pipeline(transaction=False) as pipe:
                requests = [pipe.hmget(self.store.keys.run(run_id), ["threadId", "owner"]) for run_id in run_ids]
            found = [await request for request in requests]
            runs = [
                (run_id, str(thread))
                for run_id, (thread, started_by) in zip(run_ids, found, strict=True)
                if thread is not None and started_by != owner
            ]
            async with client.pipeline(transaction=False) as pipe:
                held = [pipe.exists([self.store.keys.lease(thread_id)]) for _, thread_id in runs]
            return [run for run, lease in zip(runs, held, strict=True) if not await lease]


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))

"""Thread leases in a Redis store: ``SET NX PX`` with a token; renewal and release are Lua scripts that check it.

The lease of thread ``id`` is the string key ``{prefix}thread:{id}:lease`` (the id escaped, as in every key of the
store: :mod:`yao_actors.store.redis.keys`) holding its holder's token, with
the lease's time to live as the key's (Redis' own clock, so machines need not agree on the time). Taking it
is one script: ``SET NX PX`` (or an extension when the token already holds it), then the thread's last run
(and the run a sweep names) closed as interrupted when still running, then the length of the history.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from yao_actors.store.records import INTERRUPTED_CODE, INTERRUPTED_MESSAGE, RunStart, Taken
from yao_actors.store.redis.access import RedisAccess, lua, ms
from yao_actors.store.redis.keys import ESCAPE_LUA
from yao_actors.store.redis.scripts import LAST_SEQ_LUA
from yao_actors.store.refusals import run_id_taken, thread_not_opened

_CLOSE_LUA = (
    LAST_SEQ_LUA
    + ESCAPE_LUA
    + """
-- Close a run still running as interrupted (its terminal RUN_ERROR appended); notes its id in closed.
-- how: prefix, now, timestamp ms, message, code, event ttl ms, the running set
local function close(run_id, how, closed)
  local run = how.prefix .. 'run:' .. escape(run_id)  -- RedisKeys.run, RedisKeys.events
  if redis.call('HGET', run, 'status') ~= 'running' then return end
  -- A run waiting on a stored task is taken up, not closed (yao_actors.store.redis.tasks, .conversation.durable);
  -- a record that does not decode is the taking up's to set aside: the run is left to it
  local thread = redis.call('HGET', run, 'threadId')
  if thread then
    for _, text in ipairs(redis.call('HVALS', how.prefix .. 'thread:' .. escape(thread) .. ':tasks')) do
      local ok, record = pcall(cjson.decode, text)
      if not ok or type(record) ~= 'table' or record.run_id == run_id then return end
    end
  end
  local stream = run .. ':events'
  local seq = last_seq(stream) + 1
  local event = cjson.encode({type = 'RUN_ERROR', message = how.message, code = how.code,
                              timestamp = tonumber(how.timestamp), runId = run_id})
  redis.call('XADD', stream, '0-' .. seq, 'e', event)
  redis.call('PEXPIRE', stream, how.event_ttl)
  redis.call('HSET', run, 'status', 'interrupted', 'outcome', 'interrupted', 'finishedAt', how.now)
  redis.call('SREM', how.running, run_id)
  closed[#closed + 1] = run_id
end
-- Take the lease (KEYS[1]) for ARGV[1] for ARGV[2] ms and close the thread's running runs (its last, and
-- also_close); the ids closed, or nil when another holds the lease.
local function take(thread_runs, also_close, how)
  if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    if redis.call('GET', KEYS[1]) ~= ARGV[1] then return nil end
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  local closed = {}
  local last = redis.call('LINDEX', thread_runs, -1)
  if last then close(last, how, closed) end
  if also_close ~= '' and also_close ~= last then close(also_close, how, closed) end
  return closed
end
local how = {prefix = ARGV[3], now = ARGV[4], timestamp = ARGV[5], message = ARGV[6], code = ARGV[7],
             event_ttl = ARGV[9], running = KEYS[3]}
"""
)

_TAKE = lua(
    _CLOSE_LUA
    + """
-- KEYS: lease, thread runs, running set, thread messages
-- ARGV: token, ttl ms, prefix, now, timestamp ms, message, code, run to close too ('' none), event ttl ms
local closed = take(KEYS[2], ARGV[8], how)
if not closed then return {0, {}, 0} end
return {1, closed, redis.call('LLEN', KEYS[4])}
"""
)

_TAKE_AND_START = lua(
    _CLOSE_LUA
    + """
-- KEYS: lease, thread runs, running set, thread messages, thread, run
-- ARGV: as _TAKE's (the 8th unused), then run id, thread id, assistant, owner, the messages the caller expects
-- the thread to hold ('' any), the run's input messages...
-- Returns {-2}: thread not opened; {-1}: run id stored; {0}: leased elsewhere (each: nothing written);
-- {1, closed, count}: lease taken, run not started (count differs); {2, closed, count}: both.
if redis.call('EXISTS', KEYS[5]) == 0 then return {-2, {}, 0} end
if redis.call('EXISTS', KEYS[6]) == 1 then return {-1, {}, 0} end
local closed = take(KEYS[2], '', how)
if not closed then return {0, {}, 0} end
local count = redis.call('LLEN', KEYS[4])
if ARGV[14] ~= '' and tonumber(ARGV[14]) ~= count then return {1, closed, count} end
redis.call('HSET', KEYS[6], 'threadId', ARGV[11], 'assistant', ARGV[12], 'status', 'running',
           'startedAt', ARGV[4], 'owner', ARGV[13], 'usage', '{}')
redis.call('RPUSH', KEYS[2], ARGV[10])
redis.call('SADD', KEYS[3], ARGV[10])
redis.call('HSET', KEYS[5], 'updatedAt', ARGV[4])
for i = 15, #ARGV, 1000 do redis.call('RPUSH', KEYS[4], unpack(ARGV, i, math.min(i + 999, #ARGV))) end
return {2, closed, count}
"""
)
"""The lease taken and the run started in one script (:meth:`~yao_actors.store.ConversationStore.take_and_start`)."""

_RENEW = lua("""
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
""")

_RECLAIM = lua("""
-- KEYS: lease, run; ARGV: token, ttl ms
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[2], 'status') ~= 'running' then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
""")

_RELEASE = lua("""
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
""")


@attrs.define(eq=False)
class RedisLeases:
    """The :class:`~yao_actors.store.protocol.ThreadLeases` of a :class:`~yao_actors.store.redis.RedisStore`."""

    access: RedisAccess

    async def take(self, thread_id: str, token: str, ttl: float, *, also_close: str | None = None) -> Taken:
        keys = self.access.keys
        store_keys = [keys.lease(thread_id), keys.thread_runs(thread_id), keys.running, keys.messages(thread_id)]
        args = self._take_args(token, ttl, self.access.clock(), also_close or "")
        taken, closed, count = await self.access.run(_TAKE, store_keys, args)
        return Taken(bool(taken), tuple(str(run_id) for run_id in closed), int(count) if taken else None)

    def _take_args(self, token: str, ttl: float, now: float, also_close: str) -> list[str | int | float]:
        return [
            token,
            ms(ttl),
            self.access.prefix,
            repr(now),
            int(now * 1000),
            INTERRUPTED_MESSAGE,
            INTERRUPTED_CODE,
            also_close,
            self.access.ttl_ms,
        ]

    async def take_and_start(
        self, thread_id: str, token: str, ttl: float, start: RunStart, owner: str, encoded: Sequence[str]
    ) -> Taken:
        """The store's ``take_and_start`` (:meth:`~yao_actors.store.ConversationStore.take_and_start`), one script;
        ``encoded``: the run's input messages as stored."""
        keys = self.access.keys
        store_keys = [
            keys.lease(thread_id),
            keys.thread_runs(thread_id),
            keys.running,
            keys.messages(thread_id),
            keys.thread(thread_id),
            keys.run(start.run_id),
        ]
        expect = "" if start.expect_messages is None else str(start.expect_messages)
        args = self._take_args(token, ttl, self.access.clock(), "")
        args += [start.run_id, thread_id, start.assistant, owner, expect, *encoded]
        done, closed, count = await self.access.run(_TAKE_AND_START, store_keys, args)
        if done == -2:
            raise thread_not_opened(thread_id)
        if done == -1:
            raise run_id_taken(start.run_id)
        if done == 0:
            return Taken(False)
        return Taken(True, tuple(str(run_id) for run_id in closed), int(count), started=done == 2)

    async def renew(self, thread_id: str, token: str, ttl: float) -> bool:
        return bool(await self.access.run(_RENEW, [self.access.keys.lease(thread_id)], [token, ms(ttl)]))

    async def reclaim(self, thread_id: str, token: str, ttl: float, run_id: str) -> bool:
        keys = [self.access.keys.lease(thread_id), self.access.keys.run(run_id)]
        return bool(await self.access.run(_RECLAIM, keys, [token, ms(ttl)]))

    async def release(self, thread_id: str, token: str) -> None:
        await self.access.run(_RELEASE, [self.access.keys.lease(thread_id)], [token])

    async def unleased_running_runs(self, owner: str) -> list[tuple[str, str]]:
        client, keys = self.access.client, self.access.keys
        with self.access.reachable():
            run_ids = sorted(await client.smembers(keys.running))
            if not run_ids:
                return []
            async with client.pipeline(transaction=False) as pipe:
                requests = [pipe.hmget(keys.run(run_id), ["threadId", "owner"]) for run_id in run_ids]
            found = [await request for request in requests]
            runs = [
                (run_id, str(thread))
                for run_id, (thread, started_by) in zip(run_ids, found, strict=True)
                if thread is not None and started_by != owner
            ]
            async with client.pipeline(transaction=False) as pipe:
                held = [pipe.exists([keys.lease(thread_id)]) for _, thread_id in runs]
            return [run for run, lease in zip(runs, held, strict=True) if not await lease]

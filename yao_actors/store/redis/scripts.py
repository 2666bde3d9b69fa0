"""The Lua scripts of the Redis store's threads, runs and event logs (:mod:`yao_actors.store.redis`; its leases,
held calls and token records keep theirs beside their code): each write is one of them, one round trip, applied
atomically by the server, run through :meth:`~yao_actors.store.redis.access.RedisAccess.run`. Their keys come from
:class:`~yao_actors.store.redis.keys.RedisKeys`; the few keys a script builds itself from ids it reads use the
same escape (:data:`~yao_actors.store.redis.keys.ESCAPE_LUA`).
"""

from __future__ import annotations

from yao_actors.store.redis.access import lua
from yao_actors.store.redis.keys import ESCAPE_LUA

# The key of a principal's thread index, built in a script from the principal a thread's hash names
# (RedisKeys.owner_index).
OWNER_KEY = (
    ESCAPE_LUA
    + "local function owner_key(prefix, principal) if principal then return prefix .. 'threads:owner:=' .. "
    + "escape(principal) end return prefix .. 'threads:owner:~' end\n"
)

OPEN_THREAD = lua("""
-- KEYS: thread, threads, the principal's threads; ARGV: thread id, now, principal (absent: none)
-- Returns whether it created the thread (1 or 0), then the thread's fields and values.
local created = 0
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'createdAt', ARGV[2], 'updatedAt', ARGV[2])
  if ARGV[3] then redis.call('HSET', KEYS[1], 'principal', ARGV[3]) end
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
  redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
  created = 1
end
local answer = redis.call('HGETALL', KEYS[1])
table.insert(answer, 1, created)
return answer
""")

START_RUN = lua("""
-- KEYS: thread, messages, thread runs, run, running; ARGV: now, run id, thread id, assistant, owner, messages...
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if KEYS[4] ~= '' then
  if redis.call('EXISTS', KEYS[4]) == 1 then return -1 end
  redis.call('HSET', KEYS[4], 'threadId', ARGV[3], 'assistant', ARGV[4], 'status', 'running',
             'startedAt', ARGV[1], 'owner', ARGV[5], 'usage', '{}')
  redis.call('RPUSH', KEYS[3], ARGV[2])
  redis.call('SADD', KEYS[5], ARGV[2])
end
redis.call('HSET', KEYS[1], 'updatedAt', ARGV[1])
if #ARGV > 5 then redis.call('RPUSH', KEYS[2], unpack(ARGV, 6)) end
return 1
""")
"""Appends messages to an opened thread and, given a run key, records the run in the same script."""

FINISH_RUN = lua("""
-- KEYS: run, running; ARGV: status, outcome, usage, now, run id
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'outcome', ARGV[2], 'usage', ARGV[3], 'finishedAt', ARGV[4])
redis.call('SREM', KEYS[2], ARGV[5])
return 1
""")

# The Lua function both append scripts (and the lease backend's take) use: the last event seq of a run's stream.
LAST_SEQ_LUA = """
local function last_seq(stream)
  local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
  if #last == 0 then return 0 end
  return tonumber(string.sub(last[1][1], 3))
end
"""

APPEND_EVENTS = lua(
    LAST_SEQ_LUA
    + """
-- KEYS: run, events; ARGV: ttl ms, then seq and JSON of each event
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, 0} end
local last = last_seq(KEYS[2])
if tonumber(ARGV[2]) <= last then return {0, last} end
for i = 2, #ARGV, 2 do redis.call('XADD', KEYS[2], '0-' .. ARGV[i], 'e', ARGV[i + 1]) end
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return {1, last}
"""
)

APPEND_TURN = lua(
    LAST_SEQ_LUA
    + """
local function lines(text)
  local found, start = {}, 1
  while start <= #text do
    local stop = string.find(text, '\\n', start, true) or #text + 1
    found[#found + 1] = string.sub(text, start, stop - 1)
    start = stop + 1
  end
  return found
end
-- KEYS: thread, messages, run, events, running; ARGV: now, ttl ms, thread id, the messages' JSON one a line,
-- the events' seqs one a line, the events' JSON one a line; to close the run too: status, outcome, usage, run id;
-- to release the thread's lease with the close: the lease as KEYS[6], its holder's token as ARGV[11]
if redis.call('EXISTS', KEYS[1]) == 0 then return {-2, 0} end
if redis.call('HGET', KEYS[3], 'threadId') ~= ARGV[3] then return {-1, 0} end
local status = redis.call('HGET', KEYS[3], 'status')
if status ~= 'running' then return {-3, status} end
local messages, seqs, events = lines(ARGV[4]), lines(ARGV[5]), lines(ARGV[6])
local last = 0
if #seqs > 0 then
  last = last_seq(KEYS[4])
  if tonumber(seqs[1]) <= last then return {0, last} end
end
if #messages > 0 then
  redis.call('HSET', KEYS[1], 'updatedAt', ARGV[1])
  for i = 1, #messages, 1000 do redis.call('RPUSH', KEYS[2], unpack(messages, i, math.min(i + 999, #messages))) end
end
if #seqs > 0 then
  for i = 1, #seqs do redis.call('XADD', KEYS[4], '0-' .. seqs[i], 'e', events[i]) end
  redis.call('PEXPIRE', KEYS[4], ARGV[2])
end
if ARGV[7] then
  redis.call('HSET', KEYS[3], 'status', ARGV[7], 'outcome', ARGV[8], 'usage', ARGV[9], 'finishedAt', ARGV[1])
  redis.call('SREM', KEYS[5], ARGV[10])
end
if ARGV[11] and redis.call('GET', KEYS[6]) == ARGV[11] then redis.call('DEL', KEYS[6]) end
return {1, last}
"""
)
"""A turn's messages and a batch of events (and, to close the run, its record and its thread's lease) in one
script (one round trip): all checked, then all written.

Compact JSON never holds a raw line feed (one in a string is escaped), so the messages and the events
travel one a line in a single argument each: a handful of arguments for coredis to prepare, however
long the turn."""

FORGET_THREAD = lua(
    OWNER_KEY
    + """
-- KEYS: thread, messages, thread runs, threads, running; ARGV: prefix, thread id
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local principal = redis.call('HGET', KEYS[1], 'principal')
for _, run_id in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
  local run = ARGV[1] .. 'run:' .. escape(run_id)  -- RedisKeys.run, RedisKeys.events
  redis.call('DEL', run, run .. ':events')
  redis.call('SREM', KEYS[5], run_id)
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[1] .. ':tasks')  -- yao_actors.store.redis.tasks.tasks_key
redis.call('ZREM', KEYS[4], ARGV[2])
redis.call('ZREM', owner_key(ARGV[1], principal), ARGV[2])
return 1
"""
)

SAVE_APPROVALS = lua("""
-- KEYS: thread; ARGV: the approvals' JSON array ('' clears them)
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[1] == '' then redis.call('HDEL', KEYS[1], 'approvals')
else redis.call('HSET', KEYS[1], 'approvals', ARGV[1]) end
return 1
""")
"""Sets or clears the pending approvals of an opened thread (a field of its hash: forgetting it deletes them)."""

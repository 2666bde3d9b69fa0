"""Held calls in a Redis store: a hash with an expiry per held call, and two lists that BLPOP waits on.

:class:`~yao_actors.store.protocol.ParkedCalls` for processes and machines sharing Redis. The call ``ticket`` is the
hash ``{prefix}parked:{ticket}`` (``holder``; ``answered`` once an answer came) whose time to live is the
holding's (Redis' own clock), renewed by its holder; ``…:answer`` is the list the answer is pushed to (the holder
waits on it with ``BLPOP``), ``…:outcome`` the one the outcome is pushed to (the requester waits on it). Each
write is one Lua script; finishing pushes the outcome and deletes the hash in one step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from yao_actors.store.codec import decode_json, encode_object
from yao_actors.store.protocol import OUTCOME_KEEP
from yao_actors.store.redis.access import RedisAccess, lua, ms

_HOLD = lua("""
-- KEYS: hash, answer, outcome; ARGV: holder, ttl ms
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('HSET', KEYS[1], 'holder', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
""")

_RENEW = lua("""
if redis.call('HGET', KEYS[1], 'holder') == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
""")

_DELIVER = lua("""
-- KEYS: hash, answer; ARGV: answer, keep ms
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HSETNX', KEYS[1], 'answered', '1') == 0 then return 0 end
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
""")

_FINISH = lua("""
-- KEYS: hash, answer, outcome; ARGV: holder, outcome, keep ms
if redis.call('HGET', KEYS[1], 'holder') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('RPUSH', KEYS[3], ARGV[2])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return 1
""")

_RELEASE = lua("""
if redis.call('HGET', KEYS[1], 'holder') == ARGV[1] then return redis.call('DEL', KEYS[1], KEYS[2]) end
return 0
""")


@attrs.define(eq=False)
class RedisParkedCalls:
    """The :class:`~yao_actors.store.protocol.ParkedCalls` of a :class:`~yao_actors.store.redis.RedisStore`."""

    access: RedisAccess

    def _keys(self, ticket: str) -> tuple[str, str, str]:
        key = self.access.keys.parked(ticket)
        return key, f"{key}:answer", f"{key}:outcome"

    async def hold(self, ticket: str, holder: str, ttl: float) -> None:
        await self.access.run(_HOLD, [*self._keys(ticket)], [holder, ms(ttl)])

    async def renew(self, ticket: str, holder: str, ttl: float) -> bool:
        return bool(await self.access.run(_RENEW, [self._keys(ticket)[0]], [holder, ms(ttl)]))

    async def holder(self, ticket: str) -> str | None:
        with self.access.reachable():
            found = await self.access.client.hget(self._keys(ticket)[0], "holder")
        return None if found is None else str(found)

    async def deliver(self, ticket: str, answer: Mapping[str, Any]) -> bool:
        encoded = encode_object(answer, "answer")
        key, answers, _ = self._keys(ticket)
        return bool(await self.access.run(_DELIVER, [key, answers], [encoded, ms(OUTCOME_KEEP)]))

    async def take_answer(self, ticket: str, holder: str, timeout: float) -> dict[str, Any] | None:  # noqa: ASYNC109
        key, answers, _ = self._keys(ticket)
        with self.access.reachable():
            if await self.access.client.hget(key, "holder") != holder:
                return None
        return await self._pop(answers, timeout)

    async def finish(self, ticket: str, holder: str, outcome: Mapping[str, Any]) -> bool:
        encoded = encode_object(outcome, "outcome")
        return bool(await self.access.run(_FINISH, [*self._keys(ticket)], [holder, encoded, ms(OUTCOME_KEEP)]))

    async def take_outcome(self, ticket: str, timeout: float) -> dict[str, Any] | None:  # noqa: ASYNC109
        return await self._pop(self._keys(ticket)[2], timeout)

    async def release(self, ticket: str, holder: str) -> None:
        key, answers, _ = self._keys(ticket)
        await self.access.run(_RELEASE, [key, answers], [holder])

    async def _pop(self, key: str, timeout: float) -> dict[str, Any] | None:  # noqa: ASYNC109
        """The first element of list ``key``, waiting up to ``timeout`` (a blocking command: coredis gives it a
        connection of its own, so the store's other calls go on)."""
        with self.access.reachable():
            if timeout <= 0:
                found = await self.access.client.lpop(key)
                return None if found is None else decode_json(str(found))
            popped = await self.access.client.blpop([key], timeout=max(timeout, 0.01))
        return None if popped is None else decode_json(str(popped[1]))

"""The Redis store's way in, one for all its parts: the store, its leases, its held calls and its token records
each go through the same :class:`RedisAccess` (the connection, the keys under the store's prefix, its clock), and
run their Lua scripts by digest through it.

A script is a module constant made by :func:`lua` (its digest computed once, bound to no connection): the part
that writes with it keeps its text beside its code, and :meth:`RedisAccess.run` loads it into a server that lacks
it (a new or restarted one) the first time it is needed there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import attrs
import coredis
import coredis.commands
import coredis.exceptions

from yao_actors.store.redis.keys import RedisKeys
from yao_actors.store.redis.reach import reachable

Lua = coredis.commands.Script[str]
"""A Lua script of the store (:func:`lua`)."""


def lua(source: str) -> Lua:
    """The script ``source``, with its digest (``EVALSHA``'s name for it), for :meth:`RedisAccess.run`."""
    return coredis.commands.Script[str](None, source)


@attrs.frozen(eq=False)
class RedisAccess:
    """What every part of a Redis store uses of it: made by the store, handed to its leases, held calls and
    token records."""

    client: coredis.Redis[str]
    """The store's connection."""
    url: str
    """Where the server is (shown without its password: :func:`~yao_actors.store.redis.reach.shown_url`)."""
    keys: RedisKeys
    """The store's keys (every id in them escaped)."""
    clock: Callable[[], float]
    """POSIX time (tests move it)."""
    event_ttl: float
    """Seconds a run's events are kept after its last append."""

    @property
    def prefix(self) -> str:
        return self.keys.prefix

    @property
    def ttl_ms(self) -> int:
        """How long a finished run's events are kept, in milliseconds."""
        return ms(self.event_ttl)

    def reachable(self) -> AbstractContextManager[None]:
        """A block in which whatever goes wrong in Redis raises :class:`~yao_actors.errors.StoreUnavailable`."""
        return reachable(self.url)

    async def run(self, script: Lua, keys: Sequence[str], args: Sequence[str | int | float]) -> Any:
        """Run ``script`` by its digest (``EVALSHA``), loading it first when the server does not have it."""
        with reachable(self.url):
            try:
                return await self.client.evalsha(script.sha, keys=keys, args=args)
            except coredis.exceptions.NoScriptError:  # a new or restarted server
                await self.client.script_load(script.script)
                return await self.client.evalsha(script.sha, keys=keys, args=args)


def ms(seconds: float) -> int:
    """``seconds`` as the whole milliseconds Redis takes for a time to live (at least 1)."""
    return max(1, int(seconds * 1000))

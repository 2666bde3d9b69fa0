"""The Redis store: threads shared by processes and machines (through coredis, which runs on Trio via anyio).

Every write is one Lua script: one round trip, applied atomically by the
server. Keys live under ``prefix``; ``{id}`` and ``{p}`` are the ids escaped
(:mod:`yao_actors.store.redis.keys`: ``%`` → ``%25``, ``:`` → ``%3A``, so no id
names another key; an id with neither character is its own escape, so the keys
of such ids are those stores written before escaping have, and stay readable)::

    {prefix}thread:{id}            hash    principal (absent: none), createdAt, updatedAt, approvals (absent: none;
                                           the pending approvals' JSON array)
    {prefix}thread:{id}:messages   list    the history, one JSON message an element
    {prefix}thread:{id}:runs       list    run ids (as given, not escaped) in start order
    {prefix}thread:{id}:lease      string  the token of the run holding the thread (yao_actors.store.redis.leases)
    {prefix}run:{id}               hash    threadId, assistant, status, outcome, usage, startedAt, finishedAt, owner
    {prefix}run:{id}:events        stream  entry id ``0-{seq}``, field ``e`` the event's JSON; expires ``event_ttl``
                                           after its last append (so XRANGE/XREAD from ``0-{N}`` give seq > N)
    {prefix}threads                zset    every thread id (as given), scored by creation time
    {prefix}threads:owner:{p}      zset    the thread ids of one principal (``={p}``, or ``~`` for none)
    {prefix}runs:running           set     the ids (as given) of runs still running (what recovery looks at)
    {prefix}parked:{ticket}        hash    holder, answered: a handshake-era call held open by a process
                                           (yao_actors.store.redis.parked), expiring unless renewed; its lists
                                           ``:answer`` and ``:outcome`` carry the answer there and the outcome back

Whatever goes wrong in Redis (out of reach, a timeout, an error answer of any
kind, a reply that cannot be parsed) is :class:`~yao_actors.errors.StoreUnavailable`
once it leaves the store (:meth:`RedisStore.reachable`): a run meeting it ends
``store_unavailable``, and the process goes on.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import coredis
import coredis.exceptions

import yao_actors.store.codec as codec
import yao_actors.store.records as records
from yao_actors.errors import exception_leaves
from yao_actors.store.backend import BackendStore, StoreParts, Turn
from yao_actors.store.protocol import DEFAULT_EVENT_TTL
from yao_actors.store.redis.access import RedisAccess
from yao_actors.store.redis.keys import RedisKeys
from yao_actors.store.redis.leases import RedisLeases
from yao_actors.store.redis.parked import RedisParkedCalls
from yao_actors.store.redis.reach import reachable
from yao_actors.store.redis.scripts import (
    APPEND_EVENTS,
    APPEND_TURN,
    FINISH_RUN,
    FORGET_THREAD,
    OPEN_THREAD,
    SAVE_APPROVALS,
    START_RUN,
)
from yao_actors.store.redis.tasks import RedisTasks
from yao_actors.store.redis.tokens import RedisTokens
from yao_actors.store.refusals import run_closed, run_id_taken, thread_not_opened, unknown_run

CONNECT_TIMEOUT = 5.0
"""Seconds to wait for a connection to Redis before the store counts as unavailable."""


@asynccontextmanager
async def open_redis_store(
    url: str,
    *,
    prefix: str = "yao:",
    event_ttl: float = DEFAULT_EVENT_TTL,
    clock: Callable[[], float] = time.time,
) -> AsyncIterator[RedisStore]:
    """Connect to the Redis server at ``url`` (checked with a ``PING``) and disconnect on exit.

    Raises :class:`~yao_actors.errors.StoreUnavailable` when it cannot be reached.
    """
    # coredis' client runs its connections in a task group, which wraps whatever leaves
    # its block in an exception group: unwrap the one exception it was given back.
    client = coredis.Redis.from_url(url, decode_responses=True, connect_timeout=CONNECT_TIMEOUT)
    try:
        async with client:
            with reachable(url):
                await client.ping()
            yield RedisStore(client, url, prefix=prefix, event_ttl=event_ttl, clock=clock)
    except BaseExceptionGroup as group:
        leaves = exception_leaves(group)
        raise (leaves[0] if len(leaves) == 1 else group) from None


@attrs.define(eq=False)
class RedisStore(BackendStore[RedisLeases, RedisParkedCalls]):
    """A :class:`~yao_actors.store.ConversationStore` in Redis (open with :func:`open_redis_store`)."""

    client: coredis.Redis[str]
    """The store's connection (its leases, held calls and token records share it: :attr:`access`)."""
    url: str
    prefix: str = "yao:"
    event_ttl: float = DEFAULT_EVENT_TTL
    clock: Callable[[], float] = time.time
    owner: str = attrs.field(factory=codec.new_owner_token)
    access: RedisAccess = attrs.field(init=False)
    """The way in that the store and each of its parts go through."""
    parts: StoreParts[RedisLeases, RedisParkedCalls] = attrs.field(init=False)
    _tasks: RedisTasks = attrs.field(init=False)

    @access.default
    def _access(self) -> RedisAccess:
        return RedisAccess(self.client, self.url, RedisKeys(self.prefix), self.clock, self.event_ttl)

    @parts.default
    def _parts(self) -> StoreParts[RedisLeases, RedisParkedCalls]:
        access = self.access
        return StoreParts(RedisLeases(access), RedisTokens(access), RedisParkedCalls(access))

    @_tasks.default
    def _make_tasks(self) -> RedisTasks:
        return RedisTasks(self.access)

    def tasks(self) -> RedisTasks:
        return self._tasks

    @property
    def durable(self) -> bool:
        return True

    @property
    def keys(self) -> RedisKeys:
        """The store's keys (every id in them escaped)."""
        return self.access.keys

    # -- threads

    async def open_thread(self, thread_id: str, principal: str | None) -> records.ThreadInfo:
        args: list[str | float] = [thread_id, repr(self.clock())]
        if principal is not None:
            args.append(principal)
        keys = self.keys
        created, *flat = await self.access.run(
            OPEN_THREAD, [keys.thread(thread_id), keys.threads, keys.owner_index(principal)], args
        )
        info = _thread(thread_id, dict(zip(flat[::2], flat[1::2], strict=True)))
        return attrs.evolve(info, created=created == 1)

    async def get_thread(self, thread_id: str) -> records.ThreadInfo | None:
        with self.access.reachable():
            fields = await self.client.hgetall(self.keys.thread(thread_id))
        return _thread(thread_id, fields) if fields else None

    async def list_threads(
        self, principal: str | records.AnyPrincipal | None = records.ANY_PRINCIPAL, *, limit: int = 100
    ) -> list[records.ThreadInfo]:
        index = self.keys.threads if principal is records.ANY_PRINCIPAL else self.keys.owner_index(principal)
        with self.access.reachable():
            ids = [str(i) for i in await self.client.zrange(index, 0, limit - 1, rev=True)]
            found = await self._hgetall_each([self.keys.thread(i) for i in ids])
        return [_thread(i, fields) for i, fields in zip(ids, found, strict=True) if fields]

    async def _hgetall_each(self, keys: Sequence[str]) -> list[dict[str, str]]:
        """Every hash in one round trip."""
        if not keys:
            return []
        async with self.client.pipeline(transaction=False) as pipe:
            requests = [pipe.hgetall(key) for key in keys]
        return [dict(await request) for request in requests]

    async def load_history(self, thread_id: str) -> list[records.Message]:
        with self.access.reachable():
            items = await self.client.lrange(self.keys.messages(thread_id), 0, -1)
        return [codec.decode_json(item) for item in items]

    async def append_messages(self, thread_id: str, messages: Sequence[records.Message]) -> None:
        await self._start_or_append(thread_id, [codec.encode_message(m) for m in messages], self.clock(), None)

    async def _start_or_append(
        self, thread_id: str, encoded: list[str], now: float, run: tuple[str, str] | None
    ) -> None:
        run_id, assistant = run or ("", "")
        keys = [
            self.keys.thread(thread_id),
            self.keys.messages(thread_id),
            self.keys.thread_runs(thread_id),
            self.keys.run(run_id) if run else "",
            self.keys.running,
        ]
        args = [repr(now), run_id, thread_id, assistant, self.owner, *encoded]
        answer = await self.access.run(START_RUN, keys, args)
        if answer == 0:
            raise thread_not_opened(thread_id)
        if answer == -1:
            raise run_id_taken(run_id)

    async def forget_thread(self, thread_id: str) -> bool:
        keys = [
            self.keys.thread(thread_id),
            self.keys.messages(thread_id),
            self.keys.thread_runs(thread_id),
            self.keys.threads,
            self.keys.running,
        ]
        return bool(await self.access.run(FORGET_THREAD, keys, [self.prefix, thread_id]))

    # -- runs

    async def start_run(
        self, thread_id: str, run_id: str, assistant: str, input_messages: Sequence[records.Message]
    ) -> records.RunRecord:
        started = self.clock()
        encoded = [codec.encode_message(m) for m in input_messages]
        await self._start_or_append(thread_id, encoded, started, (run_id, assistant))
        return records.RunRecord(
            run_id, thread_id, assistant, records.RunStatus.RUNNING, records.utc(started), self.owner
        )

    async def take_and_start(self, thread_id: str, token: str, ttl: float, start: records.RunStart) -> records.Taken:
        """The lease and the run's start in one script."""
        encoded = [codec.encode_message(m) for m in start.messages]
        return await self.parts.leases.take_and_start(thread_id, token, ttl, start, self.owner, encoded)

    async def finish_run(
        self, run_id: str, *, status: records.RunStatus, outcome: str, usage: Mapping[str, Any] | None = None
    ) -> bool:
        keys = [self.keys.run(run_id), self.keys.running]
        args = [status.value, outcome, codec.encode_usage(usage), repr(self.clock()), run_id]
        return bool(await self.access.run(FINISH_RUN, keys, args))

    async def get_run(self, run_id: str) -> records.RunRecord | None:
        with self.access.reachable():
            fields = await self.client.hgetall(self.keys.run(run_id))
        return _run(run_id, fields) if fields else None

    async def list_runs(self, thread_id: str) -> list[records.RunRecord]:
        with self.access.reachable():
            ids = await self.client.lrange(self.keys.thread_runs(thread_id), 0, -1)
            found = await self._hgetall_each([self.keys.run(i) for i in ids])
        return [_run(i, fields) for i, fields in zip(ids, found, strict=True) if fields]

    # -- event logs

    async def append_events(self, run_id: str, events: Sequence[records.EncodedEvent]) -> None:
        seqs = codec.event_seqs(events)
        if not seqs:
            return
        args: list[str | int] = [self.access.ttl_ms]
        for seq, text in events:
            args += [seq, text]
        done, last = await self.access.run(APPEND_EVENTS, [self.keys.run(run_id), self.keys.events(run_id)], args)
        if done == -1:
            raise unknown_run(run_id)
        if done == 0:
            codec.check_rises(run_id, seqs, int(last))

    async def write_turn(self, turn: Turn) -> None:
        """The turn (the run's close and the lease's release with it) in one script."""
        thread_id, run_id, events, finish = turn.thread_id, turn.run_id, turn.events, turn.finish
        encoded = [codec.encode_message(m) for m in turn.messages]
        seqs = codec.event_seqs(events)
        if not encoded and not seqs and finish is None:
            return
        args = [
            repr(self.clock()),
            str(self.access.ttl_ms),
            thread_id,
            "\n".join(encoded),
            "\n".join(map(str, seqs)),
            "\n".join(text for _, text in events),
        ]
        if finish is not None:
            args += [finish.status.value, finish.outcome, codec.encode_usage(finish.usage), run_id]
        keys = [
            self.keys.thread(thread_id),
            self.keys.messages(thread_id),
            self.keys.run(run_id),
            self.keys.events(run_id),
            self.keys.running,
        ]
        if turn.release is not None:
            args.append(turn.release)
            keys.append(self.keys.lease(thread_id))
        done, last = await self.access.run(APPEND_TURN, keys, args)
        if done == -3:
            raise run_closed(run_id, last)
        if done == -2:
            raise thread_not_opened(thread_id)
        if done == -1:
            raise unknown_run(run_id, thread_id)
        if done == 0:
            codec.check_rises(run_id, seqs, int(last))

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[records.EventDict]:
        with self.access.reachable():
            entries = await self.client.xrange(self.keys.events(run_id), f"(0-{codec.seq_floor(after_seq)}", "+")
        return [_event(str(entry.identifier), str(entry.field_values["e"])) for entry in entries]

    async def wait_events(self, run_id: str, after_seq: int, timeout: float) -> None:  # noqa: ASYNC109
        # A blocking command: coredis gives it a connection of its own, so the store's other calls go on.
        with self.access.reachable():
            await self.client.xread(
                {self.keys.events(run_id): f"0-{codec.seq_floor(after_seq)}"},
                count=1,
                block=max(1, int(timeout * 1000)),
            )

    # -- pending approvals

    async def save_approvals(self, thread_id: str, approvals: Sequence[Mapping[str, Any]]) -> None:
        encoded = codec.encode_approvals(approvals) if approvals else ""
        if not await self.access.run(SAVE_APPROVALS, [self.keys.thread(thread_id)], [encoded]):
            raise thread_not_opened(thread_id)

    async def load_approvals(self, thread_id: str) -> list[dict[str, Any]]:
        with self.access.reachable():
            text = await self.client.hget(self.keys.thread(thread_id), "approvals")
        return codec.decode_approvals(text)


def _event(identifier: str, text: str) -> records.EventDict:
    """A stored event with its ``seq`` from the stream entry's id (``0-{seq}``)."""
    event = codec.decode_json(text)
    event["seq"] = int(identifier.partition("-")[2])
    return event


def _thread(thread_id: str, fields: Mapping[str, str]) -> records.ThreadInfo:
    return records.ThreadInfo(
        thread_id,
        fields.get("principal"),
        records.utc(float(fields["createdAt"])),
        records.utc(float(fields["updatedAt"])),
    )


def _run(run_id: str, fields: Mapping[str, str]) -> records.RunRecord:
    finished = fields.get("finishedAt")
    return records.RunRecord(
        run_id,
        fields["threadId"],
        fields["assistant"],
        records.RunStatus(fields["status"]),
        records.utc(float(fields["startedAt"])),
        fields["owner"],
        outcome=fields.get("outcome"),
        usage=json.loads(fields.get("usage", "{}")),
        finished_at=None if finished is None else records.utc(float(finished)),
    )

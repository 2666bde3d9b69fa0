"""The open tasks of runs in the Redis store: a hash per thread, ``<prefix>thread:<thread id>:tasks``, whose fields
are the escaped task ids and values the handles' JSON text (:mod:`yao_actors.store.tasks`); forgetting the thread
deletes it with the thread's other keys. A run's tasks are found through its thread (the run's hash names it)."""

from __future__ import annotations

import attrs

from yao_actors.errors import UnknownThread
from yao_actors.store.redis.access import RedisAccess, lua
from yao_actors.store.redis.keys import RedisKeys, escape, unescape
from yao_actors.store.task_handle import TaskHandle
from yao_actors.store.tasks import decode_handle, encode_handle, oldest_first

_SAVE = lua("""
-- KEYS: the thread's hash, its tasks' hash; ARGV: field (the escaped task id), the handle's JSON text
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1
""")


def tasks_key(keys: RedisKeys, thread_id: str) -> str:
    """The hash of the thread's open tasks (the thread's key with ``:tasks``, so no id can name another's)."""
    return f"{keys.thread(thread_id)}:tasks"


@attrs.frozen(eq=False)
class RedisTasks:
    """The :class:`~yao_actors.store.protocol.TaskRecords` of a Redis store."""

    store: RedisAccess

    async def save(self, handle: TaskHandle) -> None:
        keys = [self.store.keys.thread(handle.thread_id), tasks_key(self.store.keys, handle.thread_id)]
        saved = await self.store.run(_SAVE, keys, [escape(handle.task_id), encode_handle(handle)])
        if not saved:
            raise UnknownThread(f"thread {handle.thread_id!r} was not opened")

    async def remove(self, thread_id: str, task_id: str) -> bool:
        with self.store.reachable():
            return bool(await self.store.client.hdel(tasks_key(self.store.keys, thread_id), [escape(task_id)]))

    async def for_thread(self, thread_id: str) -> list[TaskHandle]:
        with self.store.reachable():
            texts = await self.store.client.hgetall(tasks_key(self.store.keys, thread_id))
        return oldest_first(
            decode_handle(text, thread_id=thread_id, task_id=unescape(str(field))) for field, text in texts.items()
        )

    async def for_run(self, run_id: str) -> list[TaskHandle]:
        with self.store.reachable():
            thread_id = await self.store.client.hget(self.store.keys.run(run_id), "threadId")
        if thread_id is None:
            return []
        return [handle for handle in await self.for_thread(str(thread_id)) if handle.run_id == run_id]

"""The open tasks of runs in the memory store: a dict by (thread id, task id), each handle kept as the text
every backend keeps (:mod:`yao_actors.store.tasks`)."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import trio

from yao_actors.errors import UnknownThread
from yao_actors.store.task_handle import TaskHandle
from yao_actors.store.tasks import decode_handle, encode_handle, oldest_first


@attrs.define(eq=False)
class MemoryTasks:
    """The :class:`~yao_actors.store.protocol.TaskRecords` of a memory store; ``has_thread`` says whether a thread
    is opened there."""

    has_thread: Callable[[str], bool]
    _handles: dict[tuple[str, str], str] = attrs.field(factory=dict, init=False)

    async def save(self, handle: TaskHandle) -> None:
        await trio.lowlevel.checkpoint()
        if not self.has_thread(handle.thread_id):
            raise UnknownThread(f"thread {handle.thread_id!r} was not opened")
        self._handles[handle.thread_id, handle.task_id] = encode_handle(handle)

    async def remove(self, thread_id: str, task_id: str) -> bool:
        await trio.lowlevel.checkpoint()
        return self._handles.pop((thread_id, task_id), None) is not None

    async def for_thread(self, thread_id: str) -> list[TaskHandle]:
        await trio.lowlevel.checkpoint()
        handles = self._handles.items()
        return oldest_first([decode_handle(text, thread_id=t, task_id=k) for (t, k), text in handles if t == thread_id])

    async def for_run(self, run_id: str) -> list[TaskHandle]:
        await trio.lowlevel.checkpoint()
        handles = [decode_handle(text, thread_id=t, task_id=k) for (t, k), text in self._handles.items()]
        return oldest_first([handle for handle in handles if handle.run_id == run_id])

    def forget_thread(self, thread_id: str) -> None:
        """Drop the thread's handles (the store forgets the thread)."""
        for key in [key for key in self._handles if key[0] == thread_id]:
            del self._handles[key]

"""The conversation manager: the actors of a runtime by thread id, and the way to start runs on them.

:meth:`ConversationManager.open_run` yields a run's events as a bounded receive
channel (:class:`RunStream`); :meth:`ConversationManager.run` returns its
:class:`~yao_actors.conversation.actor.RunResult` with every event.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager

import attrs
import trio

from yao_actors.catalog import CatalogCache
from yao_actors.conversation.actor import CLEANUP_GRACE, ConversationHandle, RunOrder, RunResult, serve_conversation
from yao_actors.conversation.run import RunResources
from yao_actors.dispatch import ToolServer
from yao_actors.events import EventDict
from yao_actors.models.base import Message, Model
from yao_actors.specs import AssistantSpec

EVENT_BUFFER = 16
"""Events a run may get ahead of its consumer before it waits."""

RUN_QUEUE = 8
"""Runs that may wait for their turn on one thread before submitting waits too."""

MAX_THREADS = 1000
"""Threads a runtime keeps; past that the least recently used idle thread is forgotten."""

MAX_DELEGATION_DEPTH = 4

MessagesInput = str | Sequence[Message]
"""A run's input: one user message as text, or a list of chat messages."""


def new_id() -> str:
    return uuid.uuid4().hex


def input_messages(messages: MessagesInput) -> tuple[Message, ...]:
    """A run's input as chat messages (text is one user message)."""
    if isinstance(messages, str):
        return ({"role": "user", "content": messages},)
    return tuple(dict(m) for m in messages)


class RunStream(trio.abc.ReceiveChannel[EventDict]):
    """The events of one run, as a receive channel; also the run's ids, result and cancel."""

    def __init__(self, order: RunOrder, receive: trio.MemoryReceiveChannel[EventDict]) -> None:
        self._order = order
        self._receive = receive

    @property
    def run_id(self) -> str:
        return self._order.run_id

    @property
    def thread_id(self) -> str:
        return self._order.thread_id

    @property
    def result(self) -> RunResult | None:
        """The run's result, once it has ended."""
        return self._order.result

    def cancel(self) -> None:
        """Cancel the run; it still ends with its terminal event (``RUN_FINISHED``, outcome ``cancelled``)."""
        self._order.scope.cancel()

    async def receive(self) -> EventDict:
        try:
            return await self._receive.receive()
        except trio.EndOfChannel:
            # A consumer too slow for the run's close-out still gets it, and its one terminal event.
            if not self._order.late_events:
                raise
            return self._order.late_events.pop(0)

    async def aclose(self) -> None:
        await self._receive.aclose()


@attrs.define(eq=False)
class ConversationManager:
    """The conversation actors of a runtime, by thread id, and the way to start runs on them.

    ``assistants``, ``servers`` and ``models`` are what runs use (servers by id,
    models by id); ``nursery`` is where the actors live (the runtime's);
    ``prompts`` the global system prompts (``Config.prompts``).
    """

    assistants: Mapping[str, AssistantSpec]
    servers: Mapping[str, ToolServer]
    models: Mapping[str, Model]
    nursery: trio.Nursery
    catalogs: CatalogCache = attrs.field(factory=CatalogCache)
    max_threads: int = MAX_THREADS
    prompts: tuple[str, ...] = ()
    _threads: dict[str, ConversationHandle] = attrs.field(factory=dict, init=False)
    _resources: RunResources = attrs.field(init=False)

    @_resources.default
    def _what_runs_use(self) -> RunResources:
        return RunResources(self.assistants, self.servers, self.models, self.catalogs, self.prompts)

    def assistant(self, ref: str | AssistantSpec) -> AssistantSpec:
        """An assistant by id (or the spec itself); ``RunError`` code ``unknown_assistant`` if there is none."""
        return self._resources.assistant(ref)

    def thread(self, thread_id: str) -> ConversationHandle:
        """The actor of ``thread_id``, started on first use.

        At most ``max_threads`` threads are kept: a new one forgets the least
        recently used thread that has no run in progress or waiting, so the
        actors and histories of a long-running service stay bounded.
        """
        handle = self._threads.pop(thread_id, None)
        if handle is None:
            if len(self._threads) >= self.max_threads:
                self._forget_an_idle_thread()
            send, receive = trio.open_memory_channel[RunOrder](RUN_QUEUE)
            handle = ConversationHandle(thread_id, send)
            self.nursery.start_soon(serve_conversation, handle, receive, self._resources)
        self._threads[thread_id] = handle  # most recently used last
        return handle

    def _forget_an_idle_thread(self) -> None:
        for thread_id, handle in self._threads.items():
            if handle.pending == 0:
                self.close_thread(thread_id)
                return

    def close_thread(self, thread_id: str) -> None:
        """Forget a thread: its actor finishes the runs already submitted and ends; its history is dropped."""
        handle = self._threads.pop(thread_id, None)
        if handle is not None:
            handle.close()

    def history(self, thread_id: str) -> tuple[Message, ...]:
        """The messages a thread has kept so far (empty for an unknown thread)."""
        handle = self._threads.get(thread_id)
        return () if handle is None else handle.history

    @asynccontextmanager
    async def open_run(
        self,
        assistant: str | AssistantSpec,
        messages: MessagesInput,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
    ) -> AsyncIterator[RunStream]:
        """Start a run and yield its events; leaving the block early cancels the run.

        ``thread_id=None`` starts a new thread. The run waits for the runs
        submitted before it on the same thread. An unknown assistant raises
        ``RunError`` (code ``unknown_assistant``) before any event. On exit the
        run is over: its history is recorded and ``stream.result`` is set.
        """
        spec = self.assistant(assistant)
        order_events, receive = trio.open_memory_channel[EventDict](EVENT_BUFFER)
        order = RunOrder(spec, input_messages(messages), run_id or new_id(), thread_id or new_id(), order_events)
        try:
            with receive:
                await self.thread(order.thread_id).submit(order)
                yield RunStream(order, receive)
        finally:
            await _wait_out(order)

    async def run(
        self,
        assistant: str | AssistantSpec,
        messages: MessagesInput,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
    ) -> RunResult:
        """Run to the end and return the result with every event.

        Cancelling the caller cancels the run, as leaving :meth:`open_run` does.
        """
        spec = self.assistant(assistant)
        order = RunOrder(spec, input_messages(messages), run_id or new_id(), thread_id or new_id(), None)
        try:
            await self.thread(order.thread_id).submit(order)
            await order.done.wait()
        finally:
            await _wait_out(order)
        assert order.result is not None
        return attrs.evolve(order.result, events=tuple(order.collected))


async def _wait_out(order: RunOrder) -> None:
    """Cancel a run that is still going, and wait until it has recorded its result and ended (if it started)."""
    order.scope.cancel()
    if order.started.is_set():
        with trio.CancelScope(shield=True), trio.move_on_after(2 * CLEANUP_GRACE):
            await order.done.wait()

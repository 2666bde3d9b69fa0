"""The conversation manager: the actors of a runtime by thread id, and the way to start runs on them.

:meth:`ConversationManager.open_run` yields a run's events as a bounded receive
channel (:class:`RunStream`); :meth:`ConversationManager.run` returns its
:class:`~yao_actors.conversation.actor.RunResult` with every event.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from yao_actors.catalog import CatalogCache
from yao_actors.conversation.actor import CLEANUP_GRACE, ConversationHandle, RunOrder, RunResult, serve_conversation
from yao_actors.conversation.approvals import ApprovalPolicy
from yao_actors.conversation.client_tools import check_client_tools
from yao_actors.conversation.run import RunResources, request_tools
from yao_actors.dispatch import ToolServer
from yao_actors.errors import ConfigError, RunError, RunErrorCode
from yao_actors.events import EventDict
from yao_actors.handles import NoPublicConstructor
from yao_actors.history_budget import MAX_THREAD_BYTES, MAX_THREADS_BYTES, idle_threads_to_forget
from yao_actors.models.base import Message, Model
from yao_actors.specs import AssistantSpec
from yao_actors.tasks import open_owned_nursery

EVENT_BUFFER = 16
"""Events a run may get ahead of its consumer before it waits."""

MAX_THREADS = 1000
"""Threads a runtime keeps; past that the least recently used idle thread is forgotten."""

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


@attrs.frozen
class ConversationStatistics:
    """A snapshot of a manager: the threads it keeps, and the actors still running (closed threads finishing)."""

    threads: int
    actors: int


@attrs.define(eq=False)
class ConversationManager(metaclass=NoPublicConstructor):
    """The conversation actors of a runtime, by thread id, and the way to start runs on them.

    Made by :func:`open_conversations`, which owns the nursery the actors live in.
    """

    _resources: RunResources
    _nursery: trio.Nursery
    _max_threads: int
    _max_thread_bytes: int
    _max_threads_bytes: int
    _threads: dict[str, ConversationHandle] = attrs.field(factory=dict)
    _starting: trio.Lock = attrs.field(factory=trio.Lock)

    @property
    def max_thread_bytes(self) -> int:
        """The most history bytes one thread keeps in memory."""
        return self._max_thread_bytes

    @property
    def max_threads_bytes(self) -> int:
        """The most history bytes all threads together keep in memory."""
        return self._max_threads_bytes

    def assistant(self, ref: str | AssistantSpec) -> AssistantSpec:
        """An assistant by id (or the spec itself); ``RunError`` code ``unknown_assistant`` if there is none."""
        return self._resources.assistant(ref)

    async def owned_thread(self, thread_id: str, principal: str | None) -> ConversationHandle:
        """The actor of ``thread_id`` for a run of ``principal``; a new thread becomes that principal's.

        Another principal's thread is ``RunError`` code ``unknown_thread``, exactly as if it did not exist,
        so its id reveals nothing.
        """
        handle = await self.thread(thread_id, owner=principal)
        if handle.owner != principal:
            raise RunError(f"unknown thread {thread_id!r}", code=RunErrorCode.UNKNOWN_THREAD)
        return handle

    async def thread(self, thread_id: str, *, owner: str | None = None) -> ConversationHandle:
        """The actor of ``thread_id``, started on first use (then belonging to ``owner``).

        At most ``max_threads`` threads are kept: a new one forgets the least
        recently used thread that has no run in progress or waiting, so the
        actors and histories of a long-running service stay bounded.
        """
        handle = self._threads.pop(thread_id, None)
        if handle is None:
            # One start at a time: two first runs of a thread must not start two actors for it.
            async with self._starting:
                handle = self._threads.pop(thread_id, None)
                if handle is None:
                    if len(self._threads) >= self._max_threads:
                        self._forget_an_idle_thread()
                    handle = await self._nursery.start(
                        functools.partial(
                            serve_conversation,
                            thread_id,
                            self._resources,
                            owner=owner,
                            max_history_bytes=self._max_thread_bytes,
                            on_history_grown=self._fit_memory_budget,
                        )
                    )
        self._threads[thread_id] = handle  # most recently used last
        return handle

    def _forget_an_idle_thread(self) -> None:
        for thread_id, handle in self._threads.items():
            if handle.pending == 0:
                self.close_thread(thread_id)
                return

    def _fit_memory_budget(self) -> None:
        """Forget least recently used idle threads while the histories together exceed ``max_threads_bytes``."""
        threads = ((tid, handle.history_bytes, handle.pending == 0) for tid, handle in self._threads.items())
        for thread_id in idle_threads_to_forget(threads, self._max_threads_bytes):
            self.close_thread(thread_id)

    def close_thread(self, thread_id: str) -> None:
        """Forget a thread: its actor finishes the runs already submitted and ends; its history is dropped."""
        handle = self._threads.pop(thread_id, None)
        if handle is not None:
            handle.close()

    def history(self, thread_id: str) -> tuple[Message, ...]:
        """The messages a thread has kept so far (empty for an unknown thread)."""
        handle = self._threads.get(thread_id)
        return () if handle is None else handle.history

    def statistics(self) -> ConversationStatistics:
        return ConversationStatistics(threads=len(self._threads), actors=len(self._nursery.child_tasks))

    @asynccontextmanager
    async def open_run(
        self,
        assistant: str | AssistantSpec,
        messages: MessagesInput,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        principal: str | None = None,
        history: Sequence[Message] | None = None,
        client_tools: Sequence[Mapping[str, Any]] = (),
        resume: Sequence[Mapping[str, Any]] = (),
    ) -> AsyncIterator[RunStream]:
        """Start a run and yield its events; leaving the block early cancels the run.

        ``thread_id=None`` starts a new thread. The run waits for the runs
        submitted before it on the same thread. An unknown assistant raises
        ``RunError`` (code ``unknown_assistant``) before any event. On exit the
        run is over: its history is recorded and ``stream.result`` is set. A thread belongs to the
        ``principal`` that created it; another principal's run on it raises ``RunError`` (``unknown_thread``).
        ``history``, when given, replaces the thread's history before the run (an AG-UI HTTP client sends the
        whole conversation on every run: the history, then ``messages``). ``client_tools`` are the client's own
        tools (function tools; :mod:`~yao_actors.conversation.client_tools`): one named like a tool of the
        assistant raises ``RunError`` (``bad_request``) before the run starts. ``resume`` entries answer the
        thread's calls held for approval (:mod:`~yao_actors.conversation.approvals`).
        """
        spec = self.assistant(assistant)
        await self._check_client_tools(spec, client_tools)
        order_events, receive = trio.open_memory_channel[EventDict](EVENT_BUFFER)
        order = RunOrder(spec, input_messages(messages), run_id or new_id(), thread_id or new_id(), order_events)
        order.history = None if history is None else tuple(dict(m) for m in history)
        order.client_tools, order.resume = tuple(client_tools), tuple(resume)
        try:
            with receive:
                await (await self.owned_thread(order.thread_id, principal)).submit(order)
                yield RunStream(order, receive)
        finally:
            await _wait_out(order)

    async def _check_client_tools(self, spec: AssistantSpec, client_tools: Sequence[Mapping[str, Any]]) -> None:
        """Refuse client tools named like the assistant's tools (a catalog that cannot be built is the run's error)."""
        if not client_tools:
            return
        try:
            catalog = await self._resources.catalogs.get(spec, self._resources.servers)
        except ConfigError:
            return
        check_client_tools(client_tools, request_tools(spec, catalog))

    async def run(
        self,
        assistant: str | AssistantSpec,
        messages: MessagesInput,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        principal: str | None = None,
        client_tools: Sequence[Mapping[str, Any]] = (),
        resume: Sequence[Mapping[str, Any]] = (),
    ) -> RunResult:
        """Run to the end and return the result with every event.

        Cancelling the caller cancels the run, as leaving :meth:`open_run` does; ``principal``,
        ``client_tools`` and ``resume`` as there.
        """
        spec = self.assistant(assistant)
        await self._check_client_tools(spec, client_tools)
        order = RunOrder(spec, input_messages(messages), run_id or new_id(), thread_id or new_id(), None)
        order.client_tools, order.resume = tuple(client_tools), tuple(resume)
        try:
            await (await self.owned_thread(order.thread_id, principal)).submit(order)
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


@asynccontextmanager
async def open_conversations(
    assistants: Mapping[str, AssistantSpec],
    servers: Mapping[str, ToolServer],
    models: Mapping[str, Model],
    *,
    max_threads: int = MAX_THREADS,
    max_thread_bytes: int = MAX_THREAD_BYTES,
    max_threads_bytes: int = MAX_THREADS_BYTES,
    prompts: Sequence[str] = (),
    catalogs: CatalogCache | None = None,
    approvals: ApprovalPolicy | None = None,
    clock: Callable[[], float] = time.time,
) -> AsyncIterator[ConversationManager]:
    """A conversation manager whose actors live in a nursery of its own; on exit every run is cancelled.

    ``assistants``, ``servers`` and ``models`` (by id) are everything runs may
    use. At most ``max_threads`` threads are kept; ``max_thread_bytes`` bounds
    the history one thread keeps in memory and ``max_threads_bytes`` all of them
    together (:mod:`yao_actors.history_budget`). ``prompts`` are the global
    system prompts (``Config.prompts``); ``catalogs`` a cache of the tool
    catalogs to share (the runtime checks tool names with it). Cancelled runs
    still close out (history, one terminal event) before the block exits.
    """
    resources = RunResources(
        assistants, servers, models, catalogs or CatalogCache(), tuple(prompts), approvals or ApprovalPolicy(), clock
    )
    async with open_owned_nursery() as nursery:
        yield ConversationManager._create(resources, nursery, max_threads, max_thread_bytes, max_threads_bytes)

"""The conversation manager: the actors of a runtime by thread id, and the way to start runs on them.

:meth:`ConversationManager.open_run` yields a run's events as a bounded receive
channel (:class:`RunStream`); :meth:`ConversationManager.run` returns its
:class:`~yao_actors.conversation.actor.RunResult` with every event.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from yao_actors.conversation.app_requests import AppRequest, ShownApps, answer_app_request
from yao_actors.conversation.durable.leasing import LeasePolicy
from yao_actors.conversation.durable.replay import StoredRunStream, ThreadHistory, stored_run_stream
from yao_actors.conversation.interrupts.approvals import ApprovalPolicy
from yao_actors.conversation.interrupts.client_tools import check_client_tools
from yao_actors.conversation.kept_threads import KeptThreads
from yao_actors.conversation.live_runs import LiveRuns
from yao_actors.conversation.loop.prompt import request_tools
from yao_actors.conversation.loop.resources import RunResources
from yao_actors.conversation.order import FollowStream, RunOrder, RunResult, RunStream
from yao_actors.conversation.request import MessagesInput, RunRequest, as_request
from yao_actors.conversation.streaming.outlet import RunOutlet
from yao_actors.conversation.thread import ConversationHandle
from yao_actors.errors import ConfigError, RunError, RunErrorCode, store_trouble_ends_the_run
from yao_actors.events import DEFAULT_MEDIA_BYTES
from yao_actors.handles import NoPublicConstructor
from yao_actors.history_budget import MAX_THREAD_BYTES, MAX_THREADS_BYTES
from yao_actors.models.base import Message, Model
from yao_actors.specs import AssistantSpec
from yao_actors.store import ConversationStore, MemoryStore, ThreadInfo, ThreadKeeper
from yao_actors.store.records import RunStatus
from yao_actors.tasks import open_owned_nursery
from yao_actors.tools.catalog import CatalogCache
from yao_actors.tools.directory import ServerDirectory, ServerRouter
from yao_actors.tools.tool_server import ToolServer

logger = logging.getLogger(__name__)

EVENT_BUFFER = 16
"""Events a run may get ahead of its consumer before it waits."""

MAX_THREADS = 1000
"""Threads a runtime keeps; past that the least recently used idle thread is forgotten."""

DETACH_GRACE = 30.0
"""Seconds a detached run goes on unfollowed before it is cancelled (``server.detach_grace``)."""


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
    _store: ConversationStore
    _threads: KeptThreads
    _live: LiveRuns
    _shown_apps: ShownApps = attrs.field(factory=ShownApps)
    """Which threads showed which MCP Apps, as found in the store (an app's requests check it)."""

    @property
    def store(self) -> ConversationStore:
        """Where threads live between runs."""
        return self._store

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
        actors and histories of a long-running service stay bounded (:mod:`.kept_threads`).
        """
        return await self._threads.get(thread_id, owner)

    def close_thread(self, thread_id: str) -> None:
        """Forget a thread: its actor finishes the runs already submitted and ends; its history is dropped."""
        self._threads.close(thread_id)

    def thread_ids(self) -> tuple[str, ...]:
        """The ids of the threads kept, least recently used first."""
        return self._threads.ids()

    def history(self, thread_id: str) -> tuple[Message, ...]:
        """The messages a thread keeps in memory now (empty for a thread not in memory); see :meth:`load_thread`."""
        return self._threads.history(thread_id)

    async def _owned_info(self, thread_id: str, principal: str | None) -> ThreadInfo | None:
        """The stored thread when ``principal`` owns it, else ``None`` (another's thread is as unknown)."""
        with store_trouble_ends_the_run():
            info = await self._store.get_thread(thread_id)
        return info if info is not None and info.principal == principal else None

    async def load_thread(self, thread_id: str, *, principal: str | None = None) -> ThreadHistory:
        """A thread as its store has it: every message and its runs (empty for an unknown thread or another
        principal's). ``RunError`` ``store_unavailable`` when the store is out of reach."""
        if await self._owned_info(thread_id, principal) is None:
            return ThreadHistory(thread_id, (), ())
        with store_trouble_ends_the_run():
            messages = await self._store.load_history(thread_id)
            runs = await self._store.list_runs(thread_id)
        return ThreadHistory(thread_id, tuple(messages), tuple(runs))

    async def app_request(self, request: AppRequest, *, principal: str | None = None) -> dict[str, Any]:
        """Answer an app's proxied MCP request (:mod:`~yao_actors.conversation.app_requests`); its refusal is
        ``AppRequestRefused``, the store out of reach ``RunError`` ``store_unavailable``."""
        with store_trouble_ends_the_run():
            return await answer_app_request(self._resources, self._store, request, principal, self._shown_apps)

    async def list_threads(self, *, principal: str | None = None, limit: int = 100) -> list[ThreadInfo]:
        """The threads ``principal`` owns, newest first."""
        with store_trouble_ends_the_run():
            return await self._store.list_threads(principal, limit=limit)

    async def forget(self, thread_id: str, *, principal: str | None = None) -> bool:
        """Delete a thread of ``principal`` and its runs, in memory and in the store; ``False`` when it is
        unknown (or another's). Its runs in flight or waiting are cancelled and closed out first."""
        if await self._owned_info(thread_id, principal) is None:
            return False
        await self._live.cancel_thread(thread_id)
        self.close_thread(thread_id)
        with store_trouble_ends_the_run():
            return await self._store.forget_thread(thread_id)

    @asynccontextmanager
    async def open_resume(
        self, run_id: str, *, after_seq: int = 0, principal: str | None = None
    ) -> AsyncIterator[FollowStream | StoredRunStream]:
        """A run's events with ``seq`` above ``after_seq``, ending with its one terminal event.

        A run going on in this process is followed live (its log, then its new events); any other comes
        from the store. Unknown (or another principal's) runs raise ``RunError`` ``unknown_run``. While
        the block is open a detached run is not cancelled; leaving it starts its ``detach_grace`` again.
        """
        with self._live.following(run_id, after_seq, principal) as live:
            if live is not None:
                yield live
                return
        with store_trouble_ends_the_run():
            stored = await stored_run_stream(self._store, run_id, after_seq, principal)
        if stored is None:
            raise RunError(f"unknown run {run_id!r}", code=RunErrorCode.UNKNOWN_RUN)
        yield stored

    async def adopt(self, run_id: str, thread_id: str) -> None:
        """Take up run ``run_id`` of thread ``thread_id``, which a dead process left waiting on a stored task
        (:mod:`~yao_actors.conversation.durable.task_resume`): it goes on here under its own id, on the thread's
        actor, unfollowed until a client resumes it (``open_resume``). A run already going on here, no longer
        running, or of an assistant this runtime does not have is left alone."""
        if run_id in self._live:
            return
        with store_trouble_ends_the_run():
            record = await self._store.get_run(run_id)
            info = await self._store.get_thread(thread_id)
        if record is None or info is None or record.status is not RunStatus.RUNNING:
            return
        request = RunRequest(record.assistant, (), thread_id, run_id, principal=info.principal, continues=True)
        try:
            order = await self._order(request, RunOutlet())
            await self._submit(order)
        except RunError as refused:
            logger.warning("run %s waits on a task, and cannot be taken up here: %s", run_id, refused)
            return

    def statistics(self) -> ConversationStatistics:
        return ConversationStatistics(threads=len(self._threads), actors=len(self._nursery.child_tasks))

    @asynccontextmanager
    async def open_run(
        self, request: RunRequest | str | AssistantSpec, messages: MessagesInput | None = None, /, **options: Any
    ) -> AsyncIterator[RunStream]:
        """Start a run and yield its events; leaving the block early cancels the run.

        ``request`` is a :class:`~yao_actors.conversation.request.RunRequest`, or an assistant with the run's
        ``messages`` and the request's other fields as keywords (:func:`~yao_actors.conversation.request.as_request`).
        A request without a ``thread_id`` starts a new thread. The run waits for the runs
        submitted before it on the same thread. An unknown assistant raises
        ``RunError`` (code ``unknown_assistant``) before any event. On exit the
        run is over: its history is recorded and ``stream.result`` is set. A thread belongs to the
        ``principal`` that created it; another principal's run on it raises ``RunError`` (``unknown_thread``).
        ``history``, when given, replaces the thread's history before the run (an AG-UI HTTP client sends the
        whole conversation on every run: the history, then ``messages``). ``client_tools`` are the client's own
        tools (function tools; :mod:`~yao_actors.conversation.interrupts.client_tools`): one named like a tool of the
        assistant raises ``RunError`` (``bad_request``) before the run starts. ``resume`` entries answer the
        thread's calls held for approval (:mod:`~yao_actors.conversation.interrupts.approvals`).

        The stream yields the run's events as they become visible (once stored, with a durable store:
        :mod:`~yao_actors.conversation.streaming.outlet`); the run waits when it is ``EVENT_BUFFER`` events ahead of
        its reader, never in its close-out. ``stream.receive_nowait()`` takes an event already visible
        without a trip through the scheduler (a front end forwarding a burst of events takes them at once).

        Resource handling: the run lives in the manager's nursery, not the caller's; leaving the block cancels
        it (unless the stream detached) and waits, shielded, up to ``CLEANUP_GRACE`` seconds for its close-out,
        so on exit its history and record are in the store. A detached run goes on, followed or not, for
        ``detach_grace`` seconds.

        Error handling: a request refused before the run is queued (unknown assistant or thread, a client tool
        named like the assistant's, a run id already going on, the store out of reach) raises ``RunError``
        before the block is entered; once queued, every failure of the run is its ``RUN_ERROR`` event and
        ``stream.result``, never an exception here.
        """
        order = await self._order(as_request(request, messages, options), RunOutlet(limit=EVENT_BUFFER))
        stream = RunStream(order)
        try:
            await self._submit(order)
            yield stream
        finally:
            await self._live.wait_out(order)

    async def _order(self, request: RunRequest, outlet: RunOutlet) -> RunOrder:
        """The order for ``request``: its assistant resolved, its client tools checked, its events to ``outlet``."""
        spec = self.assistant(request.assistant)
        await self._check_client_tools(spec, request.client_tools)
        return self._live.order(request, spec, outlet)

    async def _check_client_tools(self, spec: AssistantSpec, client_tools: Sequence[Mapping[str, Any]]) -> None:
        """Refuse client tools named like the assistant's tools (a catalog that cannot be built is the run's error)."""
        if not client_tools:
            return
        try:
            catalog = await self._resources.catalogs.get(spec, self._resources.servers.sources)
        except ConfigError:
            return
        check_client_tools(client_tools, request_tools(spec, catalog))

    async def run(
        self, request: RunRequest | str | AssistantSpec, messages: MessagesInput | None = None, /, **options: Any
    ) -> RunResult:
        """Run to the end and return the result with every event; ``request`` as for :meth:`open_run`.

        Cancelling the caller cancels the run, as leaving :meth:`open_run` does. Nobody reads the run's events
        as they come: the run never waits for a reader, and the result carries them all.
        """
        order = await self._order(as_request(request, messages, options), RunOutlet())
        try:
            await self._submit(order)
            await order.control.wait_done()
        finally:
            await self._live.wait_out(order)
        assert order.control.result is not None
        return attrs.evolve(order.control.result, events=tuple(order.outlet.log))

    async def _submit(self, order: RunOrder) -> None:
        """Queue the order on its thread (``principal``'s) and list it as live until it ends."""
        self._live.check_new(order.run_id)
        handle = await self.owned_thread(order.thread_id, order.request.principal)
        await self._live.submit(order, handle)


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
    store: ConversationStore | None = None,
    detach_grace: float = DETACH_GRACE,
    approvals: ApprovalPolicy | None = None,
    clock: Callable[[], float] = time.time,
    leases: LeasePolicy | None = None,
    media_bytes: int = DEFAULT_MEDIA_BYTES,
    routers: Mapping[str, ServerRouter] | None = None,
) -> AsyncIterator[ConversationManager]:
    """A conversation manager whose actors live in a nursery of its own; on exit every run is cancelled.

    ``assistants``, ``servers`` and ``models`` (by id) are everything runs may
    use. At most ``max_threads`` threads are kept; ``max_thread_bytes`` bounds
    the history one thread keeps in memory and ``max_threads_bytes`` all of them
    together (:mod:`yao_actors.history_budget`). ``prompts`` are the global
    system prompts (``Config.prompts``); ``catalogs`` a cache of the tool
    catalogs to share (the runtime checks tool names with it). Threads live in
    ``store`` between runs (default: a new :class:`~yao_actors.store.MemoryStore`);
    a run whose consumer detached goes on for ``detach_grace`` seconds unfollowed. ``leases`` say how runs
    hold their thread's lease in a shared store (default: the store's, with the default ttl and wait).
    ``media_bytes`` is the image and audio data one ``TOOL_CALL_RESULT`` event carries at most. ``routers``
    stand for the servers connected per principal: each run gets its principal's views of them.

    Resource handling:

      The manager's nursery holds one actor task per thread in use (started on a thread's first run, ended when
      the thread is forgotten) and the grace timers of detached runs. However the block is left, every run
      still going on is cancelled and closes out (its history and record in the store, its one terminal event)
      before the block exits. The ``store`` is the caller's: it is neither opened nor closed here.

    Error handling:

      A run's failure ends that run only (its ``RUN_ERROR``); an actor never raises into the manager. What the
      manager raises itself is ``RunError``: a refused request before its run is queued, and
      ``store_unavailable`` when the store cannot open or read a thread. An exception raised by the block
      comes out as itself.
    """
    resources = RunResources(
        assistants,
        ServerDirectory(servers, routers or {}),
        models,
        catalogs or CatalogCache(),
        tuple(prompts),
        approvals or ApprovalPolicy(),
        clock,
        media_bytes,
    )
    store = store if store is not None else MemoryStore()
    async with open_owned_nursery() as nursery:
        leases = leases or LeasePolicy.of(store)
        threads = KeptThreads(resources, store, nursery, leases, max_threads, max_thread_bytes, max_threads_bytes)
        live = LiveRuns(nursery, detach_grace)
        manager = ConversationManager._create(resources, nursery, store, threads, live)
        # A memory store asks before its budget forgets a thread (a durable store never forgets one).
        keepers = store.thread_keepers()
        keeper = ThreadKeeper(threads.keeps, threads.close)
        keepers.append(keeper)
        try:
            yield manager
        finally:
            keepers.remove(keeper)

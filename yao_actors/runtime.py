"""The runtime: one nursery holding a supervised actor for every configured MCP server.

``async with open_runtime(config) as runtime:`` starts every server actor at
once (a stdio server takes about a second to start; they start side by side, and
one that fails to start is reported and retried without holding up the others),
exposes their handles as ``runtime.servers[id]``, and on exit stops them all: no
stdio child is left running, even when the body raised or was cancelled.

Runs go through ``runtime.open_run(request)`` (an async context manager yielding
the run's events) or ``runtime.run(request)`` (the whole result), where the
:class:`~yao_actors.conversation.request.RunRequest` may be built for you
(``runtime.run("default", "question", thread_id="t1")``); both are served by the conversation manager the runtime opens over its servers.
Threads live in the conversation store the config's ``store`` section names
(memory when it has none), opened with the runtime: a run still marked running
by a process that died is closed ``interrupted`` then. ``runtime.history``,
``runtime.threads``, ``runtime.forget`` and ``runtime.open_resume`` read and
change what it holds. The runtime's nursery is its own: nothing outside it
starts tasks there.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import attrs
import trio

from yao_actors.auth.desk import AuthorizationDesk
from yao_actors.auth.starters import Starters, server_starters, start_servers
from yao_actors.config.check import check_config
from yao_actors.config.providers import build_model
from yao_actors.conversation import (
    ConversationManager,
    FollowStream,
    MessagesInput,
    RunRequest,
    RunResult,
    RunStream,
    StoredRunStream,
    ThreadHistory,
    open_conversations,
)
from yao_actors.conversation.app_requests import AppRequest
from yao_actors.conversation.durable.leasing import LeasePolicy, serve_sweeps
from yao_actors.conversation.durable.task_resume import serve_task_resumes
from yao_actors.conversation.interrupts.approvals import ApprovalPolicy
from yao_actors.conversation.request import as_request
from yao_actors.errors import ConfigError, NotReady, store_trouble_ends_the_run
from yao_actors.handles import NoPublicConstructor
from yao_actors.models import Model
from yao_actors.specs import BUILTIN_MODEL_IDS, AssistantSpec, Config, ModelSpec, StoreSpec
from yao_actors.store import ConversationStore, MemoryStore, ThreadInfo, open_store
from yao_actors.tasks import open_owned_nursery
from yao_actors.tools.catalog import Catalog, CatalogCache
from yao_actors.tools.directory import ServerRouter
from yao_actors.tools.input_requests import InputHandler
from yao_actors.tools.server_actor import ServerHandle, ServerState
from yao_actors.tools.tool_server import ToolSource
from yao_actors.transports import Connector, open_client


@attrs.define(eq=False)
class Runtime(metaclass=NoPublicConstructor):
    """A running configuration: its server handles and the models runs may use.

    ``models`` maps model ids to model objects given to ``open_runtime``
    (overriding or adding to ``config.models``). Made by :func:`open_runtime` only.
    """

    config: Config
    servers: Mapping[str, ServerHandle]
    """The server actors' handles, by id: every principal's runs call these."""
    models: Mapping[str, Model]
    conversations: ConversationManager
    _catalogs: CatalogCache = attrs.field(factory=CatalogCache)
    routers: Mapping[str, ServerRouter] = attrs.field(factory=dict)
    """The servers connected per principal (``identity: "principal"``), by id: each run gets its principal's own
    view of one (:mod:`yao_actors.tools.directory`); a router itself takes no calls."""
    authorizations: AuthorizationDesk | None = None
    """Where principals' authorizations of ``identity: "principal"`` servers are kept and finished (the service's
    ``/oauth/callback``); ``None`` when the config has no such server."""

    async def catalog(self, assistant: str) -> Catalog:
        """The tools offered to ``assistant``'s model now, as its runs get them (from the servers that are ready).

        Raises :class:`~yao_actors.errors.ConfigError` if two of its tools collide on a flat name.
        """
        return await self._catalogs.get(self.config.assistants[assistant], self.sources)

    @property
    def sources(self) -> dict[str, ServerHandle | ServerRouter]:
        """Every started server by id, in config order, as a status reader or a catalog for no principal reads it:
        the handles and the routers."""
        both: dict[str, ServerHandle | ServerRouter] = {**self.servers, **self.routers}
        return {server_id: both[server_id] for server_id in self.config.servers if server_id in both}

    async def tools_not_offered(self) -> dict[str, dict[str, str]]:
        """By assistant, the servers whose tools its ``max_tools`` cap leaves out, and which (only those with some)."""
        found: dict[str, dict[str, str]] = {}
        for assistant_id in self.config.assistants:
            try:
                reasons = (await self.catalog(assistant_id)).not_offered()
            except ConfigError:  # refused at start; nothing to say here
                continue
            if reasons:
                found[assistant_id] = reasons
        return found

    async def wait_ready(self, timeout: float | None = None) -> None:  # noqa: ASYNC109 - reports who is late
        """Wait until every (enabled) server is ready: connected, its tools listed.

        Raises :class:`~yao_actors.errors.NotReady` naming each server that is
        not, with its state and last error, once ``timeout`` seconds have passed
        (``None``: no limit) — or as soon as the others are ready and a server has
        given up (``down``, after ``restart.max_restarts`` failed attempts, when that is set).
        """
        with trio.move_on_after(math.inf if timeout is None else timeout):
            for handle in self.servers.values():
                await handle.wait_for_state(
                    ServerState.READY, ServerState.DOWN, ServerState.NEEDS_AUTH, ServerState.STOPPED
                )
        not_ready = {
            server_id: f"{handle.state.value}: {handle.statistics().last_error or 'no connection yet'}"
            for server_id, handle in self.servers.items()
            if handle.state is not ServerState.READY
        }
        if not_ready:
            raise NotReady(not_ready)

    def open_run(
        self, request: RunRequest | str, messages: MessagesInput | None = None, /, **options: Any
    ) -> AbstractAsyncContextManager[RunStream]:
        """Start a run; yields a receive channel of its AG-UI event dicts.

        ``request`` is a :class:`~yao_actors.RunRequest` (built once, passed whole), or the assistant's id
        followed by the run's ``messages`` (text is one user message) and the request's other fields as
        keywords, from which the request is built: ``runtime.open_run("default", "question", thread_id="t1")``.

        A request without a ``thread_id`` starts a new thread; a run on a busy thread waits for
        the runs before it. Leaving the block early cancels the run (in-flight
        model and tool calls are cancelled, unfinished tool calls get
        ``cancelled`` results). ``stream.cancel()`` cancels it too while you keep
        reading up to its terminal event. A thread belongs to the
        ``principal`` that created it (``None`` is a principal too). ``history``, when given, replaces the
        thread's history before the run (what an AG-UI client that sends the whole conversation needs;
        ``messages`` are then the new part). ``client_tools`` are tools the client runs itself (AG-UI frontend
        tools, as OpenAI function tools): a call of one ends the run with outcome ``client_tools`` and
        ``pendingToolCallIds``; the client sends its result as a ``tool`` message in the next run's
        ``messages``. ``resume`` entries (AG-UI ``{"interruptId", "status", "payload"}``) answer the thread's
        calls held for approval. With a durable store an event reaches the stream once it is stored
        (:mod:`yao_actors.conversation.streaming.outlet`).

        Resource handling: the run lives in the runtime's nursery, not yours. Leaving the block cancels it
        (unless you called ``stream.detach()``: it then goes on for ``detach_grace`` seconds, waiting for
        :meth:`open_resume`) and waits, shielded and bounded, for its close-out: when the block has exited, the
        run's history and record are in the store.

        Error handling: a request refused before the run starts raises
        :class:`~yao_actors.errors.RunError` when the block is entered (``unknown_assistant``,
        ``unknown_thread`` for another principal's thread, ``bad_request`` for a client tool named like one of
        the assistant's or a run id already going on, ``store_unavailable``); a mixed call (a request and
        keywords) is ``TypeError``. Once started, whatever happens to the run — a model or tool failure, its
        deadline, the store failing — is its ``RUN_ERROR`` event and ``stream.result``, never an exception.
        """
        return self.conversations.open_run(as_request(request, messages, options))

    async def run(
        self, request: RunRequest | str, messages: MessagesInput | None = None, /, **options: Any
    ) -> RunResult:
        """Run to the end: ``.text``, ``.tool_results``, ``.usage``, ``.outcome``, ``.events``; ``request`` as in
        :meth:`open_run` (``runtime.run("default", "question", thread_id="t1")`` builds it)."""
        return await self.conversations.run(as_request(request, messages, options))

    @property
    def store(self) -> ConversationStore:
        """Where the runtime's threads live between runs (the config's ``store``)."""
        return self.conversations.store

    def store_problem(self) -> str | None:
        """Why the conversation store cannot take calls now, as far as a look costing no wait can tell (``None``:
        nothing found); what the service's ``/readyz`` asks."""
        return self.store.problem()

    async def run_exists(self, run_id: str) -> bool:
        """Whether a run with id ``run_id`` is stored, whoever's (a new run cannot take its id); ``RunError``
        ``store_unavailable`` when the store cannot say. ``POST /agui`` asks before it answers 200."""
        with store_trouble_ends_the_run():
            return await self.store.get_run(run_id) is not None

    async def history(self, thread_id: str, *, principal: str | None = None) -> ThreadHistory:
        """A thread's stored messages and runs (empty for an unknown thread, or another principal's);
        ``.to_wire()`` is the websocket's ``MESSAGES_SNAPSHOT``."""
        return await self.conversations.load_thread(thread_id, principal=principal)

    async def app_request(self, request: AppRequest, *, principal: str | None = None) -> dict[str, Any]:
        """The MCP result of an app's proxied request (MCP Apps) on ``principal``'s thread: through the path a
        model's call takes; ``AppRequestRefused`` saying why when it is not one an app may make."""
        return await self.conversations.app_request(request, principal=principal)

    async def threads(self, *, principal: str | None = None, limit: int = 100) -> list[ThreadInfo]:
        """The threads ``principal`` owns, newest first."""
        return await self.conversations.list_threads(principal=principal, limit=limit)

    async def forget(self, thread_id: str, *, principal: str | None = None) -> bool:
        """Delete a thread and its runs (cancelling those in flight first); ``False`` when unknown (or another's)."""
        return await self.conversations.forget(thread_id, principal=principal)

    def open_resume(
        self, run_id: str, *, after_seq: int = 0, principal: str | None = None
    ) -> AbstractAsyncContextManager[FollowStream | StoredRunStream]:
        """A run's events with ``seq`` above ``after_seq``: stored, then live while it goes on in this process,
        ending with its one terminal event. ``RunError`` ``unknown_run`` for a run not stored (or another's).
        A run whose consumer detached (:meth:`RunStream.detach`) is kept going while someone follows it."""
        return self.conversations.open_resume(run_id, after_seq=after_seq, principal=principal)


@asynccontextmanager
async def open_runtime(
    config: Config,
    *,
    models: Mapping[str, Model] | None = None,
    connect: Connector = open_client,
    ready_timeout: float | None = None,
    store: ConversationStore | None = None,
    input_handler: InputHandler | None = None,
) -> AsyncIterator[Runtime]:
    """Start every server actor of ``config`` at once; stop them all when the block exits.

    ``models`` maps model ids to model objects (a ``FunctionModel``, a
    ``TestModel``, or any object implementing :class:`~yao_actors.models.Model`),
    overriding or adding to the models of ``config``. The references between
    the records are checked once, with both sets of models known
    (:func:`~yao_actors.config.check_config`): an unknown model or server raises
    :class:`~yao_actors.errors.ConfigError` before anything starts; two tools of an assistant's servers under one flat name
    raise it once the servers are up (:func:`check_tool_names`). ``connect`` is
    how server actors reach their servers (tests pass their own). ``store`` is an
    open conversation store to use instead of opening the config's ``store``
    (:class:`~yao_actors.errors.StoreUnavailable` when that cannot be reached).
    ``input_handler`` answers, in process, what a server asks the user during a call
    (:class:`~yao_actors.tools.input_requests.InputRequest` in, ``InputAnswer`` out);
    without it the run ends with an ``interrupt`` outcome and the next run's ``resume`` answers.

    The block is entered after each server's *first* connection attempt, even one
    that failed (it is retried in the background, and runs meanwhile lack its
    tools). With ``ready_timeout`` (seconds) it is entered only once every server
    is ready: :meth:`Runtime.wait_ready` runs first. A server with ``disabled=True`` is not started. A server
    with ``auth`` (OAuth) is connected with the tokens kept in the store (:mod:`yao_actors.auth`); one with
    ``auth.identity: "principal"`` gets a router instead of an actor, connecting each run's principal with its own
    tokens (:mod:`yao_actors.auth.principals`; ``runtime.authorizations`` finishes their authorizations); so does
    one with ``identity: "principal"``, each principal with a connection (a stdio server: a process) of its own.

    Resource handling:

      Everything the runtime starts lives in a nursery of its own, inside the block: one actor per server (a
      stdio server's child process, an HTTP server's connection), one per thread in use, the lease sweeper of a
      shared store, and the store the config names (``store`` given: yours, never closed here). However the
      block is left — normally, by an exception, or cancelled — every run still going on is cancelled and
      closes out first (its terminal event, its history and record in the store), then every server actor
      stops and no child process is left running, then the config's store is closed.

    Error handling:

      Refusals come before anything starts: a bad config reference or colliding tool names raise
      :class:`~yao_actors.errors.ConfigError`, an unreachable config store
      :class:`~yao_actors.errors.StoreUnavailable`, and with ``ready_timeout`` a server not ready in time
      :class:`~yao_actors.errors.NotReady` (after stopping everything). A server that fails later is
      restarted by its actor and never ends the runtime; a run's failure ends that run only. An exception
      raised by the block comes out as itself, not wrapped in the nursery's exception group.
    """
    check_config(config, models=models or {})
    resolved = resolve_models(config, models or {})
    async with contextlib.AsyncExitStack() as stack:
        if store is None:
            store = await stack.enter_async_context(_open_config_store(config))
        starters = server_starters(config, store, connect, input_handler)
        async with _open_checked_runtime(config, resolved, starters, ready_timeout, store) as runtime:
            runtime.authorizations = starters.desk
            yield runtime


@asynccontextmanager
async def _open_checked_runtime(
    config: Config,
    models: Mapping[str, Model],
    starters: Starters,
    ready_timeout: float | None,
    store: ConversationStore,
) -> AsyncIterator[Runtime]:
    """:func:`open_runtime` once its config is checked, its models resolved and its store open; ``starters`` start
    its servers."""
    spec = config.store or StoreSpec()
    leases = LeasePolicy.of(store, ttl=spec.lease_ttl, wait=spec.lease_wait)
    async with open_owned_nursery() as nursery:
        if leases.shared:
            await nursery.start(serve_sweeps, leases)  # closes the runs a dead process left, now and periodically
        servers, routers = await start_servers(
            nursery, [s for s in config.servers.values() if not s.disabled], starters
        )
        catalogs = CatalogCache()
        await check_tool_names(config.assistants.values(), {**servers, **routers}, catalogs)
        async with open_conversations(
            config.assistants,
            servers,
            models,
            max_thread_bytes=config.service.max_thread_bytes,
            max_threads_bytes=config.service.max_threads_bytes,
            prompts=config.prompts,
            catalogs=catalogs,
            store=store,
            detach_grace=config.service.detach_grace,
            media_bytes=config.service.max_frame_bytes,
            approvals=ApprovalPolicy({s.id: s.approval for s in config.servers.values() if s.approval}),
            leases=leases,
            routers=routers,
        ) as conversations:
            runtime = Runtime._create(config, servers, models, conversations, catalogs, routers)
            if ready_timeout is not None:
                await runtime.wait_ready(ready_timeout)
            async with open_owned_nursery() as resumes:  # the body's own error comes out unwrapped
                records = store.tasks()
                if leases.shared and records is not None:  # runs a dead process left waiting on tasks go on here
                    interval = leases.ttl / 2
                    adopt = conversations.adopt
                    await resumes.start(serve_task_resumes, leases.leases, records, leases.owner, interval, adopt)
                yield runtime


def _open_config_store(config: Config) -> AbstractAsyncContextManager[ConversationStore]:
    """The config's store; a memory store (the default) keeps the in-memory history budgets of ``server``."""
    spec = config.store or StoreSpec()
    if spec.type != "memory":
        return open_store(spec)
    budgets = config.service
    memory = MemoryStore(
        spec.event_ttl, max_thread_bytes=budgets.max_thread_bytes, max_threads_bytes=budgets.max_threads_bytes
    )
    return contextlib.nullcontext(memory)


async def check_tool_names(
    assistants: Iterable[AssistantSpec], servers: Mapping[str, ToolSource], catalogs: CatalogCache
) -> None:
    """Refuse, at start, an assistant whose servers' tools collide on a flat name: two tools
    claiming one name would misroute calls, so the configuration is refused instead, naming both.

    Builds each assistant's catalog from the servers that are up (which also
    warms the cache for the first runs); :class:`ConfigError` names both sources
    of every collision.
    """
    problems: list[str] = []
    for assistant in assistants:
        try:
            await catalogs.get(assistant, servers)
        except ConfigError as error:
            problems.extend(f"assistants.{assistant.id}.mcp.servers: {problem}" for problem in error.problems)
    if problems:
        raise ConfigError(problems)


def resolve_models(config: Config, overrides: Mapping[str, Model]) -> dict[str, Model]:
    """The model objects of a runtime: the config's, the built-in offline ones, then ``overrides``.

    The references were checked by :func:`~yao_actors.config.check_config`.
    """
    specs: dict[str, ModelSpec] = {
        model_id: ModelSpec(id=model_id, provider=model_id)  # type: ignore[arg-type]
        for model_id in BUILTIN_MODEL_IDS
    }
    specs.update(config.models)
    models: dict[str, Model] = {model_id: build_model(spec) for model_id, spec in specs.items()}
    models.update(overrides)
    return models

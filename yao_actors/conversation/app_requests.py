"""An app's own requests (MCP Apps), as ``@ag-ui/mcp-apps-middleware`` proxies them: answered through the path a
model's call takes, never a second one.

An app rendered from a run's ``ACTIVITY_SNAPSHOT`` talks to its server through the client, which sends each request
as ``forwardedProps.__proxiedMCPRequest: {serverId, method, params}`` (``serverHash`` in place of ``serverId`` is
taken too). Only these are answered, and only for the principal that owns the request's thread, on which an
activity of that server's app was emitted:

- ``resources/read`` of a ``ui://`` resource of that server;
- ``tools/call`` of a tool of that server its app may call (``_meta.ui.visibility`` omitted or naming ``app``)
  and the assistant of the run that showed it may call (its ``mcp.servers`` entry for the server, ``tools`` too):
  through dispatch (the principal's own connection, the schema gate on its arguments, the server's and the
  assistant's deadlines, metrics and traces); a tool that needs a person's approval is refused, since an app's
  call has nobody to ask;
- ``ping``, to the server;
- ``notifications/message`` (the app's log line): logged here, answered ``{"success": true}``.

Everything else raises :class:`AppRequestRefused` with what was refused and why. What comes back is the MCP
result as the server sent it, within the size an event carries (``RunResources.media_bytes``); nothing is
written to the thread.
"""

from __future__ import annotations

import datetime
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

import attrs
import trio

from yao_actors.conversation.loop.resources import RunResources
from yao_actors.errors import ErrorKind
from yao_actors.events import encode_json
from yao_actors.models.base import ToolCall
from yao_actors.observability import tracing
from yao_actors.observability.metrics import APP_REQUESTS, labelled
from yao_actors.specs import AssistantSpec, ServerSpec
from yao_actors.store.protocol import ConversationStore
from yao_actors.store.records import RunStatus
from yao_actors.store.task_handle import TaskHandle
from yao_actors.tools.apps import ACTIVITY_TYPE, APP, is_app_uri, server_hash
from yao_actors.tools.catalog import build_catalog
from yao_actors.tools.dispatch import collect_tool_calls
from yao_actors.tools.forwarding import ForwardingServer
from yao_actors.tools.input_requests import InputRound
from yao_actors.tools.naming import ToolRef
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.task_input import task_of_round
from yao_actors.tools.tool_server import NO_OPTIONS, CallOptions, ToolServer

logger = logging.getLogger(__name__)

#: The methods an app may ask for, as the middleware allows them.
APP_METHODS: Final = ("tools/call", "resources/read", "notifications/message", "ping")
#: The key of ``forwardedProps`` that carries an app's request.
PROXIED_KEY: Final = "__proxiedMCPRequest"
#: Tools of one server an app may call, at most, in the catalog its calls go through.
MAX_APP_TOOLS: Final = 1000
#: Characters of an app's log line kept in the service's log.
LOG_TEXT: Final = 2000


class AppRequestRefused(Exception):
    """An app's request this runtime does not answer; the message says what and why."""


@attrs.frozen
class AppRequest:
    """One proxied request of an app: on thread ``thread_id``, for server ``server_id`` (or the one whose
    ``serverHash`` is ``server_hash``), MCP ``method`` with ``params``."""

    thread_id: str
    method: str
    params: Mapping[str, Any] = attrs.field(factory=dict)
    server_id: str | None = None
    server_hash: str | None = None

    @classmethod
    def of(cls, thread_id: str, value: Any) -> AppRequest:
        """The request in ``forwardedProps.__proxiedMCPRequest``; :class:`AppRequestRefused` naming the field
        that is wrong."""
        where = f"forwardedProps.{PROXIED_KEY}"
        if not isinstance(value, Mapping):
            raise AppRequestRefused(f"{where}: expected an object with serverId, method and params")
        method, params = value.get("method"), value.get("params", {})
        server_id, hash_ = value.get("serverId"), value.get("serverHash")
        if not isinstance(method, str):
            raise AppRequestRefused(f"{where}.method: expected a string")
        if not isinstance(params, Mapping):
            raise AppRequestRefused(f"{where}.params: expected an object")
        for key, given in (("serverId", server_id), ("serverHash", hash_)):
            if given is not None and not isinstance(given, str):
                raise AppRequestRefused(f"{where}.{key}: expected a string")
        if server_id is None and hash_ is None:
            raise AppRequestRefused(f"{where}: names no server (serverId)")
        return cls(thread_id, method, dict(params), server_id, hash_)


@attrs.define(eq=False)
class _Unseen:
    """What was read of a thread that had shown no app of a server: each run's events up to a ``seq``, and the runs
    that had ended when read (their events read whole: nothing is added to a closed run)."""

    read_to: dict[str, int] = attrs.field(factory=dict)
    closed: set[str] = attrs.field(factory=set)


_Key = tuple[str, str | None, datetime.datetime, str]


@attrs.define(eq=False)
class ShownApps:
    """The threads found to have shown an app of a server, and the assistant of the run that showed it: a bounded
    memory of what the store said (``size`` entries, the least recently used dropped first), so an app's
    requests do not read a thread's events each time. A thread found *not* to have shown one is remembered too,
    with how far its runs were read: a refused request reads only the events written since (a new run's, a
    running run's latest), never the whole thread again. Keyed by the thread as stored (its owner and creation
    time): a thread forgotten and made again is another thread."""

    size: int = 1024
    _found: OrderedDict[_Key, str | _Unseen] = attrs.field(factory=OrderedDict, init=False)

    async def assistant(self, store: ConversationStore, thread_id: str, principal: str | None, server_id: str) -> str:
        """The assistant of the last run of ``principal``'s thread that showed an app of ``server_id``;
        :class:`AppRequestRefused` when the thread is not theirs, or no such app was shown on it."""
        info = await store.get_thread(thread_id)
        if info is None or info.principal != principal:
            raise AppRequestRefused(f"no thread {thread_id!r} is stored")
        key = (thread_id, principal, info.created_at, server_id)
        found = self._found.get(key)
        if not isinstance(found, str):
            unseen = found or _Unseen()
            found = await _shown_on(store, thread_id, server_id, unseen)
            self._found[key] = found or unseen
            while len(self._found) > self.size:
                self._found.popitem(last=False)
        self._found.move_to_end(key)
        if found is None:
            raise AppRequestRefused(f"no app of server {server_id!r} was shown on thread {thread_id!r}")
        return found


async def answer_app_request(
    resources: RunResources,
    store: ConversationStore,
    request: AppRequest,
    principal: str | None,
    shown: ShownApps | None = None,
) -> dict[str, Any]:
    """The MCP result of an app's request, or :class:`AppRequestRefused` (see the module docstring); ``shown``
    remembers which threads showed which apps (a fresh one: none). Each is counted in ``yao_app_requests_total``
    (a server not configured counts under ``server=""``, a method outside the list under ``method="other"``)."""
    server = request.server_id or ""
    server = server if server in resources.servers.sources else ""
    method = request.method if request.method in APP_METHODS else "other"
    try:
        answer = await _answer(resources, store, request, principal, shown or ShownApps())
    except AppRequestRefused:
        labelled(APP_REQUESTS, server, method, "refused").inc()
        raise
    except Exception:
        labelled(APP_REQUESTS, server, method, "error").inc()
        raise
    labelled(APP_REQUESTS, server, method, "ok").inc()
    return answer


async def _answer(
    resources: RunResources, store: ConversationStore, request: AppRequest, principal: str | None, shown: ShownApps
) -> dict[str, Any]:
    if request.method not in APP_METHODS:
        allowed = ", ".join(APP_METHODS)
        raise AppRequestRefused(f"MCP method not allowed for an app: {request.method!r} (allowed: {allowed})")
    spec = _server(resources, request)
    assistant = resources.assistant(await shown.assistant(store, request.thread_id, principal, spec.id))
    servers = resources.servers.for_run(principal, resources.catalogs)  # the principal's, as their runs get them
    bound = await servers.bind((spec.id,))
    if spec.id in bound.needed or spec.id in bound.problems:
        why = "must be authorized first" if spec.id in bound.needed else bound.problems[spec.id]
        raise AppRequestRefused(f"server {spec.id!r} {why}")
    attributes = {tracing.SERVER: spec.id, "yao.app.method": request.method}
    with tracing.open_span("app_request", attributes, target=request.method):
        if request.method == "notifications/message":
            _log(spec.id, request.params)
            return {"success": True}
        if request.method == "tools/call":
            answer = await _call(resources, assistant, servers.by_id, spec, request)
        else:
            answer = await _request(servers.by_id[spec.id], assistant, request)
    size = len(encode_json(answer).encode())
    if size > resources.media_bytes:
        raise AppRequestRefused(
            f"the answer to {request.method} is {size} bytes, over the {resources.media_bytes} allowed"
        )
    return answer


def _server(resources: RunResources, request: AppRequest) -> ServerSpec:
    """The server the request names, when it is configured with ``apps`` on."""
    specs = {server_id: server.spec for server_id, server in resources.servers.sources.items()}
    spec = specs.get(request.server_id or "")
    if spec is None and request.server_id is None:
        spec = next((s for s in specs.values() if server_hash(s) == request.server_hash), None)
    if spec is None or not spec.apps:
        named = request.server_id or request.server_hash or ""
        raise AppRequestRefused(f"Unknown server: {named} (no server with apps)")
    return spec


async def _shown_on(store: ConversationStore, thread_id: str, server_id: str, unseen: _Unseen) -> str | None:
    """The assistant of the last run of the thread that showed an app of ``server_id`` (its events read, newest
    run first, past what ``unseen`` says was read already, which it then records), or ``None``."""
    for run in reversed(await store.list_runs(thread_id)):
        if run.run_id in unseen.closed:
            continue
        ended = run.status != RunStatus.RUNNING  # (read before its events: all of them are stored by then)
        events = await store.read_events(run.run_id, unseen.read_to.get(run.run_id, 0))
        if any(_is_app_activity(event, server_id) for event in events):
            return run.assistant
        if events and isinstance(events[-1].get("seq"), int):
            unseen.read_to[run.run_id] = events[-1]["seq"]
        if ended:
            unseen.closed.add(run.run_id)
            unseen.read_to.pop(run.run_id, None)
    return None


def _is_app_activity(event: Mapping[str, Any], server_id: str) -> bool:
    """Whether a stored event is an ``ACTIVITY_SNAPSHOT`` of an app of ``server_id``."""
    content = event.get("content")
    is_app = event.get("type") == "ACTIVITY_SNAPSHOT" and event.get("activityType") == ACTIVITY_TYPE
    return is_app and isinstance(content, Mapping) and content.get("serverId") == server_id


async def _request(server: ToolServer, assistant: AssistantSpec, request: AppRequest) -> dict[str, Any]:
    """``resources/read`` of a ``ui://`` resource, or ``ping``, on the server's (principal's) connection."""
    uri = ""
    if request.method == "resources/read":
        uri = request.params.get("uri")  # type: ignore[assignment]
        if not isinstance(uri, str) or not is_app_uri(uri):
            raise AppRequestRefused(f"resources/read: an app reads only ui:// resources of its server, not {uri!r}")
    options = CallOptions(deadline=trio.current_time() + assistant.timeouts.turn, method=request.method)
    try:
        outcome = await server.call_tool(uri, {}, attrs.evolve(options, keep_result=True))
    except trio.TooSlowError:
        raise AppRequestRefused(f"{request.method} timed out after {assistant.timeouts.turn:g}s") from None
    return _kept(outcome, f"{request.method} {uri}".strip())


async def _call(
    resources: RunResources,
    assistant: AssistantSpec,
    servers: Mapping[str, ToolServer],
    spec: ServerSpec,
    request: AppRequest,
) -> dict[str, Any]:
    """``tools/call`` of a tool the app may call, through dispatch, as one call of a model's turn."""
    name, arguments = request.params.get("name"), request.params.get("arguments", {})
    if not isinstance(name, str) or not isinstance(arguments, Mapping):
        raise AppRequestRefused("tools/call: params must have a tool name and an arguments object")
    # The assistant's own entry for the server, its tool list included: an app reaches only what its assistant may.
    ref = next((ref for ref in assistant.servers if ref.server_id == spec.id), None)
    if ref is None:
        raise AppRequestRefused(f"tools/call: assistant {assistant.id!r} does not use server {spec.id!r}")
    catalog = await build_catalog((ref,), servers, max_tools=MAX_APP_TOOLS, audience=APP)
    entry = catalog.entry_of(ToolRef(spec.id, name))
    if entry is None:
        raise AppRequestRefused(f"tools/call: {name!r} is not a tool of server {spec.id!r} its app may call")
    if resources.approvals.needs(assistant, entry.name, spec.id, name, entry.hints):
        raise AppRequestRefused(f"tools/call: {name!r} needs a person's approval, which an app's call cannot ask")
    keeping = _Keeping(servers[spec.id])
    call = ToolCall(f"app-{spec.id}-{name}", entry.name, json.dumps(arguments))
    turn = assistant.timeouts.turn
    # The turn bounds an app's call whole, a task its server answers it with included (a run's call waits for its
    # task up to task_timeout; an app's request is answered within the turn): past it the task is cancelled.
    with trio.move_on_after(turn) as waited:
        [result] = await collect_tool_calls([call], catalog, {**servers, spec.id: keeping}, batch_timeout=turn)
    if waited.cancelled_caught:
        raise AppRequestRefused(f"tools/call {name!r}: timeout: no answer within {turn:g}s")
    if keeping.kept is not None:
        return dict(keeping.kept)  # what the server answered, an ``isError`` result too
    if result.kind is ErrorKind.INPUT_REQUIRED:  # nobody answers an app's call: its task is not left waiting
        await _cancel_asking_task(servers[spec.id], spec.id, request.thread_id, name, result.result)
    kind = result.kind.value if result.kind is not None else ErrorKind.TOOL_ERROR.value
    raise AppRequestRefused(f"tools/call {name!r}: {kind}: {result.error}")


async def _cancel_asking_task(server: ToolServer, server_id: str, thread_id: str, tool: str, asked: object) -> None:
    """Have the server stop the task an app's refused call left waiting for input (``asked``, the call's input
    round, names it) with ``tasks/cancel``."""
    task = task_of_round(asked.request_state) if isinstance(asked, InputRound) else None
    if task is None:
        return
    now = time.time()
    handle = TaskHandle(server_id, task.task_id, task.design, "", tool, {}, "", thread_id, now, now)
    await server.cancel_task(handle)


def _kept(outcome: ToolOutcome, what: str) -> dict[str, Any]:
    if outcome.app_result is None:
        raise AppRequestRefused(f"{what}: {outcome.error or 'no answer'}")
    return dict(outcome.app_result)


def _log(server_id: str, params: Mapping[str, Any]) -> None:
    text = encode_json(params)
    level = params.get("level")
    if len(text) > LOG_TEXT:
        text = text[:LOG_TEXT] + "…"
    logger.info("app of server %r logs (%s): %s", server_id, level, text, extra={"server": server_id, "source": "app"})


class _Keeping(ForwardingServer):
    """A server whose one call keeps the MCP result as the server sent it (``kept``), for the app; the rest of what
    a run's server does, it passes on."""

    def __init__(self, server: ToolServer) -> None:
        super().__init__(server)
        self.kept: Mapping[str, Any] | None = None
        """The MCP result of the last call, as the server sent it."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None, options: CallOptions = NO_OPTIONS
    ) -> ToolOutcome:
        outcome = await self.server.call_tool(name, arguments, attrs.evolve(options, keep_result=True))
        self.kept = outcome.app_result
        return outcome

    async def poll_task(self, handle: TaskHandle, options: CallOptions = NO_OPTIONS) -> ToolOutcome:
        outcome = await self.server.poll_task(handle, attrs.evolve(options, keep_result=True))
        self.kept = outcome.app_result
        return outcome

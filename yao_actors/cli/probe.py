"""Reaching a configuration's servers and models once, for the commands that look at them: ``check --connect``,
``tools`` and ``call``.

:func:`open_probe` starts the enabled servers (or the ones named) as a runtime would, but each gets one connection
attempt within a deadline and no restarts: a server is then ``ready`` or ``down`` with why. :func:`server_reports`
and :func:`probe_model` say how each server and model answered; :func:`tool_offers` says of every tool of the ready
servers which assistants offer it to their model, and why the others do not.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import mcp.types
import trio

from yao_actors.auth.keys import oauth_of, oauth_servers, per_principal, principal_servers
from yao_actors.config.providers import build_model
from yao_actors.errors import ConfigError, ModelError
from yao_actors.runtime import Runtime, open_runtime
from yao_actors.specs import Config, ModelSpec, RestartPolicy, StoreSpec
from yao_actors.tools.apps import NO_INTERFACE, ToolInterface, tool_interface
from yao_actors.tools.catalog import Catalog
from yao_actors.tools.input_requests import InputHandler
from yao_actors.tools.naming import ToolRef
from yao_actors.tools.schema_gate import tool_schema_notes
from yao_actors.tools.task_wire import task_support
from yao_actors.tools.tool_server import ServerState

#: What a model is asked when it is probed.
PROBE_PROMPT = "Reply with the single word: ok"
#: What is said of a server with ``auth.identity: "principal"``: it has no tools of its own to list.
PER_PRINCIPAL = (
    "auth.identity 'principal': connected per principal, on demand; its tools depend on each principal's login "
    "and are listed to that principal's runs only (none can be listed here)"
)
#: What is said of a server without OAuth with ``identity: "principal"``.
PER_PRINCIPAL_CONNECTION = (
    "identity 'principal': connected per principal, on demand (a connection each); its tools are listed to each "
    "principal's runs only (none can be listed here)"
)


def _per_principal(config: Config, server_id: str) -> str | None:
    """What is said of a server each principal has a connection of its own to, or ``None`` for another."""
    spec = config.servers.get(server_id)
    if spec is None or not per_principal(spec):
        return None
    return PER_PRINCIPAL if oauth_of(spec) else PER_PRINCIPAL_CONNECTION


@asynccontextmanager
async def open_probe(
    config: Config,
    *,
    deadline_s: float,
    only: Iterable[str] | None = None,
    logins: StoreSpec | None = None,
    input_handler: InputHandler | None = None,
) -> AsyncIterator[Runtime]:
    """A runtime of ``config``'s enabled servers (or those in ``only``, and then no assistants), each with one
    connection attempt of at most ``deadline_s`` seconds and no restart. Threads are kept in memory, unless a server
    logs in with the service's identity: its tokens are in ``logins`` (the store ``serve`` and ``yao-actors auth
    login`` use with this config), which the probe then opens (it runs no thread there). Entered once every server
    is ``ready``, ``down`` or ``needs_auth`` (a login is not waited for: it is said in the reports). ``input_handler``
    answers what a server asks during a call (:func:`~yao_actors.runtime.open_runtime`)."""
    chosen = set(config.servers) if only is None else set(only)
    once = RestartPolicy(max_restarts=0)
    servers = {
        server_id: attrs.evolve(spec, restart=once, connect_timeout=min(spec.connect_timeout, deadline_s))
        for server_id, spec in config.servers.items()
        if server_id in chosen
    }
    assistants = config.assistants if only is None else {}
    probed = attrs.evolve(config, servers=servers, assistants=assistants)
    store = logins if set(oauth_servers(probed)) - set(principal_servers(probed)) else None
    async with open_runtime(attrs.evolve(probed, store=store), input_handler=input_handler) as runtime:
        for handle in runtime.servers.values():
            await handle.wait_for_state(ServerState.READY, ServerState.DOWN, ServerState.NEEDS_AUTH)
        yield runtime


@attrs.frozen
class Report:
    """How one server or model answered: ``ok``, and what to say (its tools, its answer, or why it failed)."""

    what: str
    ok: bool
    detail: str
    notes: tuple[str, ...] = ()
    """What else to say, one line each (what of the server's tools' schemas is not enforced)."""


async def server_reports(runtime: Runtime) -> list[Report]:
    """One report per server of ``runtime`` (disabled ones are said to be so)."""
    reports = []
    for server_id in runtime.config.servers:
        handle = runtime.servers.get(server_id)
        if said := server_id in runtime.routers and _per_principal(runtime.config, server_id):
            reports.append(Report(f"server {server_id}", True, said))
        elif handle is None:
            reports.append(Report(f"server {server_id}", True, "disabled: not started"))
        elif handle.state is ServerState.READY:
            tools = await handle.list_tools()
            notes = tuple(f"tool {tool.name!r}: {note}" for tool in tools for note in tool_schema_notes(tool))
            reports.append(Report(f"server {server_id}", True, f"ready, {len(tools)} tool(s)", notes))
        else:
            stats = handle.statistics()
            reports.append(Report(f"server {server_id}", False, stats.last_error or handle.state.value))
    return reports


async def probe_model(spec: ModelSpec, *, deadline_s: float) -> Report:
    """Ask the model ``spec`` one short question, once (no retries), within ``deadline_s`` seconds."""
    what = f"model {spec.id}"
    if spec.provider != "openai":
        return Report(what, True, "offline, nothing to reach")
    model = build_model(attrs.evolve(spec, max_retries=0))
    started = trio.current_time()
    with trio.move_on_after(deadline_s):
        try:
            completion = await model.complete([{"role": "user", "content": PROBE_PROMPT}], [])
        except ModelError as error:
            return Report(what, False, f"{spec.base_url}: {error}")
        took = trio.current_time() - started
        return Report(what, True, f"{spec.base_url} answered in {took:.1f}s: {completion.text.strip()[:40]!r}")
    return Report(what, False, f"{spec.base_url}: no answer within {deadline_s:g}s")


@attrs.frozen
class ToolOffer:
    """One tool of a ready server: by assistant, the flat name its model is offered it under, or why it is not."""

    server: str
    tool: str
    title: str | None
    description: str
    input_schema: Mapping[str, Any]
    offered: Mapping[str, str]
    not_offered: Mapping[str, str]
    schema_notes: tuple[str, ...] = ()
    """What of the tool's schemas is not enforced (:func:`~yao_actors.tools.schema_gate.tool_schema_notes`)."""
    interface: ToolInterface = NO_INTERFACE
    """Its app (MCP Apps: ``_meta.ui``) and who may call it, whether or not its server's ``apps`` is on."""
    apps: bool = True
    """Its server's ``apps``: whether its app is shown."""
    tasks: str = "forbidden"
    """The tool's ``execution.taskSupport``: whether a call of it may (``"optional"``) or must (``"required"``)
    run as an MCP task (2025-11-25; a 2026-07-28 server decides per call and says nothing here)."""


async def tool_offers(runtime: Runtime) -> list[ToolOffer]:
    """Every tool of the ready servers of ``runtime``, in server and listing order, with who offers it (none of a
    server with ``auth.identity: "principal"``: its :func:`server_reports` line says why)."""
    catalogs: dict[str, Catalog | str] = {}
    for assistant_id in runtime.config.assistants:
        try:
            catalogs[assistant_id] = await runtime.catalog(assistant_id)
        except ConfigError as error:
            catalogs[assistant_id] = f"its catalog is refused: {'; '.join(error.problems)}"
    offers = []
    for server_id, handle in runtime.servers.items():
        for tool in await handle.list_tools():
            offered: dict[str, str] = {}
            refused: dict[str, str] = {}
            for assistant_id, catalog in catalogs.items():
                if isinstance(catalog, str):
                    refused[assistant_id] = catalog
                elif (entry := catalog.entry_of(ToolRef(server_id, tool.name))) is not None:
                    offered[assistant_id] = entry.name
                else:
                    refused[assistant_id] = _why_not(runtime.config, assistant_id, catalog, server_id, tool)
            title = tool.title or (tool.annotations.title if tool.annotations else None)
            offers.append(
                ToolOffer(
                    server_id,
                    tool.name,
                    title,
                    tool.description or "",
                    tool.input_schema,
                    offered,
                    refused,
                    tool_schema_notes(tool),
                    tool_interface(tool),
                    handle.spec.apps,
                    task_support(tool),
                )
            )
    return offers


def _why_not(config: Config, assistant_id: str, catalog: Catalog, server_id: str, tool: mcp.types.Tool) -> str:
    if not tool_interface(tool).for_model:
        return "only its app may call it (_meta.ui.visibility)"
    return _why_not_listed(config, assistant_id, catalog, server_id, tool.name)


def _why_not_listed(config: Config, assistant_id: str, catalog: Catalog, server_id: str, tool: str) -> str:
    refs = [ref for ref in config.assistants[assistant_id].servers if ref.server_id == server_id]
    if not refs:
        return "its server is not in the assistant's mcp.servers"
    if all(ref.tools and tool not in ref.tools for ref in refs):
        return "not in the assistant's tool list for this server"
    if tool in catalog.capped.get(server_id, ()) or server_id in catalog.unlisted:
        return f"past the assistant's max_tools ({catalog.max_tools})"
    return "not offered"


async def cap_warnings(runtime: Runtime) -> list[str]:
    """One warning per assistant whose ``max_tools`` cap hides tools of ready servers: which, and how to choose the
    ones it gets (a tools filter in its ``mcp.servers``) — a model never sees the tools past the cap."""
    warnings = []
    for assistant_id in runtime.config.assistants:
        try:
            catalog = await runtime.catalog(assistant_id)
        except ConfigError:  # said by check's own problems
            continue
        hidden = {server_id: list(tools) for server_id, tools in catalog.capped.items()}
        for server_id in catalog.unlisted:
            hidden[server_id] = [tool.name for tool in await runtime.servers[server_id].list_tools()]
        names = [f"{server_id}.{tool}" for server_id, tools in hidden.items() for tool in tools]
        if not names:
            continue
        server_id, tools = next((s, t) for s, t in hidden.items() if t)
        example = json.dumps({server_id: tools[:2]})
        warnings.append(
            f"assistant {assistant_id}: its max_tools ({catalog.max_tools}) hides {len(names)} tool(s) from the "
            f"model: {', '.join(names)}; choose the tools it gets with a tools filter in its mcp.servers (e.g. "
            f"{example}; `yao-actors tools` lists them all), or raise its max_tools"
        )
    return warnings

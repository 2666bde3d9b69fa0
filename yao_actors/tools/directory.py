"""The runtime's servers and routers by id, and a run's servers bound to its principal.

A server that serves everyone alike (a server actor's handle) is a :class:`~yao_actors.tools.tool_server.ToolServer`
every run calls as it is. A server connected per principal has no connection, tools or calls of its own: a
:class:`ServerRouter` stands for it, and a run gets, in its place, that principal's own view of it
(:meth:`ServerRouter.bind`: its own connection, its own tools). :func:`bind_servers` makes a run's servers so; the
run then calls the servers it got, and never asks which kind it holds. What the principal must do first (authorize
a server) and which servers could not connect come back beside them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

import attrs

from yao_actors.errors import AuthorizationRequired
from yao_actors.tools.tool_server import Binding, ServerStatistics, ToolServer, ToolSource


class ServerRouter(ToolSource, Protocol):
    """A server connected per principal, as the runtime holds it: what a catalog, a status reader and a resume
    read of it, and each principal's view of it (:meth:`bind`). Its state is its own (``ready`` while it can
    connect principals); it lists no tools (they are each principal's) and takes no calls (a view does)."""

    def statistics(self) -> ServerStatistics: ...

    async def bind(self, principal: str | None) -> Binding:
        """The server as ``principal``'s runs use it: their view of it, and why they cannot use it yet."""
        ...

    async def reaches_parked(self, ticket: str) -> bool:
        """Whether a call held open under ``ticket`` is held by one of its principals' connections, here or in a
        process sharing the store."""
        ...


@attrs.frozen
class Bound:
    """A run's servers as its principal sees them (``bindings``: its views of the routers, by id), the servers
    it must authorize, and those that could not connect (why); ``changed`` when a server was added (a view)."""

    servers: Mapping[str, ToolServer]
    bindings: Mapping[str, Binding] = attrs.field(factory=dict)
    needed: Mapping[str, AuthorizationRequired] = attrs.field(factory=dict)
    problems: Mapping[str, str] = attrs.field(factory=dict)
    changed: bool = False


async def bind_servers(
    servers: Mapping[str, ToolServer],
    routers: Mapping[str, ServerRouter],
    server_ids: Iterable[str],
    principal: str | None,
    held: Mapping[str, Binding] | None = None,
) -> Bound:
    """``servers`` with the router of each of ``server_ids`` bound to ``principal``: the binding the run ``held``
    already, else a new one (an id of a shared server stays as it is; an id the runtime has not is left out)."""
    bindings: dict[str, Binding] = {}
    needed: dict[str, AuthorizationRequired] = {}
    problems: dict[str, str] = {}
    for server_id in sorted(set(server_ids)):
        router = routers.get(server_id)
        if router is None:
            continue
        binding = (held or {}).get(server_id) or await router.bind(principal)
        bindings[server_id] = binding  # one without a connection is not ready: its tools are not offered
        if binding.needed is not None:
            needed[server_id] = binding.needed
        elif binding.problem is not None:
            problems[server_id] = binding.problem
    views = {server_id: binding.server for server_id, binding in bindings.items()}
    changed = any(servers.get(server_id) is not view for server_id, view in views.items())
    return Bound({**servers, **views} if changed else servers, bindings, needed, problems, changed)

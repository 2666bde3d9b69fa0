"""The runtime's servers and routers by id (:class:`ServerDirectory`), and a run's servers bound to its principal
(:class:`RunServers`).

A server that serves everyone alike (a server actor's handle) is a :class:`~yao_actors.tools.tool_server.ToolServer`
every run calls as it is. A server connected per principal has no connection, tools or calls of its own: a
:class:`ServerRouter` stands for it, and a run gets, in its place, that principal's own view of it
(:meth:`ServerRouter.bind`: its own connection, its own tools). A run is given its :class:`RunServers` when it
starts; it binds the servers it names as it comes to them (a create hook may replace the assistant's servers, a
delegate names another assistant's), each once a run, so a server the run never names is never connected nor asks
for authorization. The run then calls the servers it got, and never asks which kind it holds. What the principal
must do first (authorize a server) and which servers could not connect come back from each binding.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

import attrs

from yao_actors.errors import AuthorizationRequired
from yao_actors.tools.catalog import CatalogCache
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


@attrs.frozen
class ServerDirectory:
    """The runtime's servers by id, as its runs find them: the server actors' handles every run calls as they are
    (``servers``), and the routers of the servers connected per principal (``routers``)."""

    servers: Mapping[str, ToolServer] = attrs.field(factory=dict)
    routers: Mapping[str, ServerRouter] = attrs.field(factory=dict)

    @property
    def sources(self) -> dict[str, ToolSource]:
        """What a catalog for no principal reads: the servers, and the routers (which list no tools of their own)."""
        return {**self.routers, **self.servers}

    def for_run(self, principal: str | None, catalogs: CatalogCache) -> RunServers:
        """The servers of a run of ``principal``, none of them bound yet; its catalogs come from ``catalogs`` (the
        runtime's cache) until a principal's view joins them."""
        return RunServers(self, principal, catalogs)


@attrs.define(eq=False)
class RunServers:
    """The servers of one run, as its principal sees them: :attr:`by_id` is what the run calls.

    :meth:`bind` puts the principal's view of each router named in place of it, once a run (the binding is kept
    for the rest of the run: a delegate naming the server again gets the same view). Until then nothing of the
    principal's is connected. Once a view has joined, the run's catalogs come from a cache of its own
    (:attr:`catalogs`): a view's tools are that principal's only.
    """

    directory: ServerDirectory
    principal: str | None
    catalogs: CatalogCache
    by_id: Mapping[str, ToolServer] = attrs.field(init=False)
    _bindings: dict[str, Binding] = attrs.field(init=False, factory=dict)

    def __attrs_post_init__(self) -> None:
        self.by_id = self.directory.servers

    def get(self, server_id: str) -> ToolServer | None:
        """The server the run calls under ``server_id`` (``None``: none, or a router not bound yet)."""
        return self.by_id.get(server_id)

    async def bind(self, server_ids: Iterable[str]) -> Bound:
        """Bind the routers among ``server_ids`` to the run's principal (those bound already keep their view);
        what the principal must authorize and which could not connect, of all ``server_ids``, come back."""
        bound = await bind_servers(self.by_id, self.directory.routers, server_ids, self.principal, self._bindings)
        self._bindings.update(bound.bindings)
        if bound.changed:
            self.by_id = bound.servers
            self.catalogs = CatalogCache()
        return bound

    async def reaches_parked(self, server_id: str, ticket: str) -> bool:
        """Whether a call held open under ``ticket`` by server ``server_id`` is held by a live server actor."""
        server = self.by_id.get(server_id) or self.directory.routers.get(server_id)
        return server is not None and await server.reaches_parked(ticket)

"""A run's servers, bound to the run's principal before it builds its catalog.

Every server of the runtime is asked the same thing (:meth:`~yao_actors.tools.tool_server.ToolServer.bind`):
a server that serves everyone alike answers with itself, a server connected per principal with that
principal's own view of it (its own connection, its own tools). A run then calls the servers it got, and
never asks which kind it holds. What the principal must do first (authorize a server) and which servers could
not connect come back beside them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from yao_actors.errors import AuthorizationRequired
from yao_actors.tools.tool_server import ToolServer


@attrs.frozen
class Bound:
    """A run's servers as its principal sees them, the servers it must authorize, and those that could not
    connect (why); ``changed`` when any server is not the one the runtime holds (a principal's view)."""

    servers: Mapping[str, ToolServer]
    needed: Mapping[str, AuthorizationRequired] = attrs.field(factory=dict)
    problems: Mapping[str, str] = attrs.field(factory=dict)
    changed: bool = False


async def bind_servers(servers: Mapping[str, ToolServer], server_ids: Iterable[str], principal: str | None) -> Bound:
    """``servers`` with each of ``server_ids`` bound to ``principal`` (an id the runtime has not is left out)."""
    bound: dict[str, ToolServer] = {}
    needed: dict[str, AuthorizationRequired] = {}
    problems: dict[str, str] = {}
    for server_id in sorted(set(server_ids)):
        server = servers.get(server_id)
        if server is None:
            continue
        binding = await server.bind(principal)
        if binding.server is not server:
            bound[server_id] = binding.server  # one without a connection is not ready: its tools are not offered
        if binding.needed is not None:
            needed[server_id] = binding.needed
        elif binding.problem is not None:
            problems[server_id] = binding.problem
    if not bound:
        return Bound(servers, needed, problems)
    return Bound({**servers, **bound}, needed, problems, changed=True)

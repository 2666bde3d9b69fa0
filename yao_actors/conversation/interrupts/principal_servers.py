"""A run's servers as its principal sees them, and the ``authorization_required`` interrupt.

A server with ``auth.identity: "principal"`` is a router in the runtime's servers
(:class:`~yao_actors.auth.principals.PrincipalServers`); before a run builds its catalog, :func:`bind_principal`
puts in its place that principal's own view of it (its own connection, its own tools), so every catalog, call
and resume of the run goes there and nowhere else. A principal that must authorize the server first gets a
``needs_auth`` view (the run's ``server_status`` event says so) and is named in :attr:`Bound.needed`; the run then ends with an AG-UI ``Interrupt`` per such server
(:func:`authorization_interrupt`): ``reason: "authorization_required"``, the authorization ``url``, a ``message``,
``expiresAt`` (the URL's ten minutes) and ``metadata.server``. Its id, ``authorization-<server>``, stays the same
until the server is authorized. A ``resume`` entry naming it (:func:`is_authorization_resume`) answers nothing:
the run goes on with the thread as it is — and ends with the same interrupt again while the principal has still
not authorized.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from yao_actors.auth.states import STATE_TTL
from yao_actors.errors import AuthorizationRequired
from yao_actors.specs import ServerRef

#: The ``reason`` of the interrupt that sends a principal to authorize a server.
AUTHORIZATION_REASON: Final = "authorization_required"
_PREFIX: Final = "authorization-"


@attrs.frozen
class Bound:
    """A run's servers with its principal's views in place, the servers it must authorize, and the views that
    could not connect (why)."""

    servers: Mapping[str, Any]
    needed: Mapping[str, AuthorizationRequired]
    problems: Mapping[str, str]


async def bind_principal(servers: Mapping[str, Any], refs: Sequence[ServerRef], principal: str | None) -> Bound | None:
    """``servers`` with each router among ``refs`` bound to ``principal``; ``None`` when there is none."""
    routers = {ref.server_id for ref in refs if callable(getattr(servers.get(ref.server_id), "bind_principal", None))}
    if not routers:
        return None
    bound, needed, problems = dict(servers), {}, {}
    for server_id in sorted(routers):
        view = await servers[server_id].bind_principal(principal)
        bound[server_id] = view  # one without a connection is not ready: its tools are not offered
        if view.needed is not None:
            needed[server_id] = view.needed
        elif view.problem is not None:
            problems[server_id] = view.problem
    return Bound(bound, needed, problems)


def authorization_interrupt(needed: AuthorizationRequired, now: float) -> dict[str, Any]:
    """The AG-UI ``Interrupt`` of ``needed`` (module docstring)."""
    expires = datetime.datetime.fromtimestamp(now + STATE_TTL, datetime.UTC)
    return {
        "id": _PREFIX + needed.server,
        "reason": AUTHORIZATION_REASON,
        "message": str(needed),
        "url": needed.url,
        "expiresAt": expires.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        # The URL also in metadata: AG-UI's Interrupt has no url field, and its official client keeps only the fields
        # it knows (and metadata) of an interrupt.
        "metadata": {"server": needed.server, "url": needed.url},
    }


def is_authorization_resume(entry: Mapping[str, Any]) -> bool:
    """Whether a ``resume`` entry answers an ``authorization_required`` interrupt (it only says: go on)."""
    interrupt_id = entry.get("interruptId") if isinstance(entry, Mapping) else None
    return isinstance(interrupt_id, str) and interrupt_id.startswith(_PREFIX)

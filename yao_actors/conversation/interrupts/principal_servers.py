"""The ``authorization_required`` interrupt: a principal must authorize a server before their runs use it.

A server with ``auth.identity: "principal"`` has a router beside the runtime's servers
(:class:`~yao_actors.auth.principals.PrincipalServers`). A run is given its servers bound to its principal
(:class:`~yao_actors.tools.directory.RunServers`): the first catalog naming the server gives the run that principal's
own view of it (its own connection, its own tools), kept for the run, so every catalog, call and resume of the run
goes there and nowhere else. A principal that must authorize the server first gets a ``needs_auth`` view (the
run's ``server_status`` event says so) and is named in :attr:`~yao_actors.tools.directory.Bound.needed`; the run
then ends with an AG-UI ``Interrupt`` per such server
(:func:`authorization_interrupt`): ``reason: "authorization_required"``, the authorization ``url``, a ``message``,
``expiresAt`` (the URL's ten minutes) and ``metadata.server``. Its id, ``authorization-<server>``, stays the same
until the server is authorized. A ``resume`` entry naming it (:func:`is_authorization_resume`) answers nothing:
the run goes on with the thread as it is — and ends with the same interrupt again while the principal has still
not authorized.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Final

from yao_actors.auth.states import STATE_TTL
from yao_actors.errors import AuthorizationRequired

#: The ``reason`` of the interrupt that sends a principal to authorize a server.
AUTHORIZATION_REASON: Final = "authorization_required"
_PREFIX: Final = "authorization-"


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

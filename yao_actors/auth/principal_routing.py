"""Where ``identity: "principal"`` servers join the runtime: a router serves each in place of a server actor.

:func:`principal_routing` is the runtime's way to start one: :func:`serve_principal_servers` (a
:class:`~yao_actors.auth.principals.PrincipalServers` router, whose principals' actors live in its nursery); the
runtime keeps the routers beside the other servers' handles (``runtime.routers``), never among them.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import trio

from yao_actors.auth.desk import AuthorizationDesk
from yao_actors.auth.keys import oauth_of, per_principal
from yao_actors.auth.principals import PrincipalServers, ServeActor
from yao_actors.observability.metrics import SERVER_UP, labelled
from yao_actors.specs import ServerSpec
from yao_actors.tools.parked_relay import ParkedRelay
from yao_actors.transports import Connector

logger = logging.getLogger(__name__)


async def serve_principal_servers(
    spec: ServerSpec,
    *,
    desk: AuthorizationDesk | None,
    connect: Connector,
    serve_actor: ServeActor,
    relay: ParkedRelay | None = None,
    task_status: trio.TaskStatus[PrincipalServers] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the router of ``spec`` until cancelled; its principals' actors live in its nursery (``desk``: where
    principals authorize a server with OAuth, ``None`` for one without)."""
    auth = oauth_of(spec)
    assert (auth is None) is (desk is None)  # principal_routing: the runtime has a desk when such a server has OAuth
    logger.info(
        "server %r: %sidentity 'principal': connected per principal, on demand; its tools depend on each "
        "principal's %s (their names are checked against the other servers' at each run, not at start)",
        spec.id,
        "auth." if auth else "",
        "login" if auth else "connection",
    )
    up = labelled(SERVER_UP, spec.id)  # the router's: ready to connect principals, whichever are connected now
    try:
        async with trio.open_nursery() as nursery:
            clock = time.time if desk is None else desk.states.clock
            router = PrincipalServers(spec, auth, desk, connect, serve_actor, nursery, clock=clock, relay=relay)
            nursery.start_soon(router.close_idle)
            up.set(1)
            task_status.started(router)
            await trio.sleep_forever()
    finally:
        up.set(0)


def principal_routing(
    serve_actor: ServeActor,
    connect: Connector,
    desk: AuthorizationDesk | None,
    relay: ParkedRelay | None = None,
) -> ServeActor:
    """The runtime's way to start the router of an ``identity: "principal"`` server, whose principals' actors
    ``serve_actor`` starts on ``connect``, wrapped with their own tokens for a server with OAuth (``desk``: where
    they authorize, when there is such a server; ``relay``: the store's held calls, as the actors have it)."""

    async def start(spec: ServerSpec, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        assert per_principal(spec)  # the runtime routes only these here
        await serve_principal_servers(
            spec,
            desk=desk if oauth_of(spec) else None,
            connect=connect,
            serve_actor=serve_actor,
            relay=relay,
            task_status=task_status,
        )

    return start

"""Starting a runtime's servers, each with what it connects with: an actor per server, a router per server
connected per principal.

:func:`server_starters` makes, from a config and its store, how each is started: a server actor on the runtime's
connector (wrapped with the OAuth tokens kept in the store for a server with ``auth``), its input handler and the
store's held calls (``relay``); and, when the config has servers connected per principal, their routers
(:mod:`yao_actors.auth.principal_routing`), with the desk where principals authorize them.
:func:`start_servers` starts them all at once.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable

import attrs
import trio

from yao_actors.auth.desk import AuthorizationDesk, open_desk
from yao_actors.auth.flow import authorizing
from yao_actors.auth.keys import oauth_of, oauth_servers, per_principal, principal_servers
from yao_actors.auth.principal_routing import principal_routing
from yao_actors.auth.vault import open_vault
from yao_actors.specs import Config, ServerSpec, StoreSpec
from yao_actors.store import ConversationStore
from yao_actors.tools.directory import ServerRouter
from yao_actors.tools.input_requests import InputHandler
from yao_actors.tools.parked_relay import relay_of
from yao_actors.tools.server_actor import ServerHandle, serve_mcp_server
from yao_actors.transports import Connector

ServeServer = Callable[..., Awaitable[None]]
"""``serve_mcp_server`` with the runtime's connector and input handler: takes the spec and ``task_status``."""


@attrs.frozen
class Starters:
    """How a runtime starts its servers: ``serve`` a server actor, ``route`` the router of a server connected per
    principal (``None``: the config has none), and ``desk``, where principals authorize those with OAuth."""

    serve: ServeServer
    route: ServeServer | None = None
    desk: AuthorizationDesk | None = None


def server_starters(
    config: Config, store: ConversationStore, connect: Connector, input_handler: InputHandler | None
) -> Starters:
    """How the servers of ``config`` are started, their tokens and held calls kept in ``store``."""
    plain, desk = connect, None
    spec = config.store or StoreSpec()
    if oauth_servers(config):
        vault = open_vault(store, spec.secret_key)
        connect = authorizing(connect, vault)
    relay = relay_of(store, spec.lease_ttl)  # held calls answered from other workers
    serve: ServeServer = functools.partial(serve_mcp_server, connect=connect, input_handler=input_handler, relay=relay)
    route: ServeServer | None = None
    if principals := principal_servers(config):
        if any(oauth_of(config.servers[server_id]) for server_id in principals):
            desk = open_desk(store, vault, config.service.public_url)
        actor = functools.partial(serve_mcp_server, input_handler=input_handler, relay=relay, publish_up=False)
        route = principal_routing(actor, plain, desk, relay)
    return Starters(serve, route, desk)


async def start_servers(
    nursery: trio.Nursery, specs: Iterable[ServerSpec], starters: Starters
) -> tuple[dict[str, ServerHandle], dict[str, ServerRouter]]:
    """Start one actor per spec (a router per spec connected per principal), all at once, in ``nursery``; their
    handles and their routers by id, in config order."""
    handles: dict[str, ServerHandle] = {}
    routers: dict[str, ServerRouter] = {}

    async def start(spec: ServerSpec) -> None:
        if starters.route is not None and per_principal(spec):
            routers[spec.id] = await nursery.start(starters.route, spec)
        else:
            handles[spec.id] = await nursery.start(starters.serve, spec)

    ordered = list(specs)
    async with trio.open_nursery() as starting:
        for spec in ordered:
            starting.start_soon(start, spec)
    return {s.id: handles[s.id] for s in ordered if s.id in handles}, {
        s.id: routers[s.id] for s in ordered if s.id in routers
    }

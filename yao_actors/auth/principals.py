"""Servers with ``identity: "principal"`` (``auth.identity`` with OAuth): one connection (a server actor) per
principal, on demand.

Such a server has no actor of its own: the runtime holds a :class:`PrincipalServers` router for it, beside its
servers (``runtime.routers``; it takes no calls). A run binds it to the run's principal
(:meth:`PrincipalServers.bind_principal`) before building its catalog, and gets a
:class:`~yao_actors.auth.principal_view.PrincipalView`: the server actor of *that* principal, connected with that
principal's tokens only (the vault's record ``(server, "principal:<name>")``), started in the router's nursery the first time and kept for the
next runs. The tools the run is offered are that connection's; its calls go there. One principal's tokens never
serve another's call: no connection holds two principals' tokens, and a view serves only its principal.

- **No usable token** (never authorized, or a refresh was refused: that connection is closed): the binding raises
  :class:`~yao_actors.errors.AuthorizationRequired` with a fresh authorization URL
  (:func:`~yao_actors.auth.asking.begin_authorization`); the run ends with an ``authorization_required``
  interrupt (:mod:`yao_actors.conversation.interrupts.principal_servers`).
- **The authorization server cannot be reached** (or the service has no URL for the redirect): the view is
  ``down`` and says why; the server's tools are not offered and its calls are ``server_unavailable``.
- **Refresh**: a connection whose access token is due for its refresh when a run binds it (and no call is using
  it) is opened again, so the refresh happens then: one that is refused asks the principal in that run. A token
  the server ends early is found out by a call, which fails saying so; the next run asks. A connection whose
  principal's tokens are gone from the store (a logout) is closed when a run binds it (and no call is using it).
- **Bounded**: at most :data:`MAX_PRINCIPALS` connections per server are open at once. A new principal's closes
  the least recently used one no call is using; when every one is in use, the new principal's view is ``down``
  ("too many principals at once") for that run. A connection no call used for :data:`IDLE_CLOSE` seconds is
  closed; the principal's next run opens it again (its tokens stay in the store).

A server without OAuth (``identity: "principal"``: a stdio server, say) has nothing to authorize: a principal's
connection is opened when a run of theirs binds it, and kept, bounded and closed when idle, as above. Each
principal's calls then go to a process of their own, so what the server keeps for one principal (its state, the
questions it asks the user) never meets another's calls.

The router itself reports ``ready`` (``/readyz``, and ``yao_mcp_server_up`` 1 while it runs): it is ready to
connect principals; their connections' states are their runs' business (their actors leave that metric alone).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Final

import attrs
import mcp
import mcp.types
import trio

from yao_actors.auth.asking import begin_authorization
from yao_actors.auth.desk import AuthorizationDesk
from yao_actors.auth.flow import REFRESH_MARGIN, open_authorized
from yao_actors.auth.keys import oauth_of
from yao_actors.auth.principal_view import PrincipalConnection, PrincipalView
from yao_actors.auth.vault import Grant, StoreTokenStorage, TokenVault, principal_identity
from yao_actors.errors import AuthorizationError, AuthorizationRequired, NeedsLogin, StoreUnavailable
from yao_actors.specs import OAuthSpec, ServerSpec
from yao_actors.store.task_handle import TaskHandle
from yao_actors.tools.parked_relay import ParkedRelay
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.server_handle import ServerHandle
from yao_actors.tools.tool_server import NO_OPTIONS, Binding, CallOptions, ServerState, ServerStatistics
from yao_actors.transports import Connector, Link

logger = logging.getLogger(__name__)

#: Connections one server keeps open at once (one per principal).
MAX_PRINCIPALS: Final = 64
#: Seconds a principal's connection stays open with no call using it.
IDLE_CLOSE: Final = 300.0


ServeActor = Callable[..., Awaitable[None]]
"""``serve_mcp_server`` with the runtime's input handler: takes the spec, ``connect`` and ``task_status``."""


@attrs.define(eq=False)
class PrincipalServers:
    """The router of one ``identity: "principal"`` server (module docstring); made by :func:`serve_principal_servers`."""

    spec: ServerSpec
    auth: OAuthSpec | None
    """The server's OAuth (each principal's tokens), or ``None``: a connection of its own is all a principal gets."""
    desk: AuthorizationDesk | None
    connect: Connector
    serve_actor: ServeActor
    nursery: trio.Nursery
    max_principals: int = MAX_PRINCIPALS
    idle_close: float = IDLE_CLOSE
    clock: Callable[[], float] = time.time
    relay: ParkedRelay | None = None
    """The store's held calls: how a call one of this server's connections holds in another process is reached."""
    connections: dict[str, PrincipalConnection] = attrs.field(factory=dict)
    opening: dict[str, trio.Lock] = attrs.field(factory=dict)
    starting: int = 0
    """Connections being opened (their first connection attempt not over yet)."""

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def state(self) -> ServerState:
        """Its own: ready to connect principals as long as it runs (their connections' states are their runs')."""
        return ServerState.READY

    @property
    def tools_version(self) -> int:
        """Its own list of tools never changes: it has none (each principal's connection has its own)."""
        return 0

    async def list_tools(self) -> tuple[mcp.types.Tool, ...]:
        """None of its own: a catalog built for no principal offers none of this server's tools."""
        await trio.lowlevel.checkpoint()
        return ()

    async def poll_task(self, handle: TaskHandle, options: CallOptions = NO_OPTIONS) -> ToolOutcome:
        """Go on polling a stored task on the connection of the principal that made it (``handle.principal``): a
        run taken up elsewhere polls its task through here (the router itself takes no calls)."""
        view = await self.bind_principal(handle.principal)
        return await view.poll_task(handle, options)

    def statistics(self) -> ServerStatistics:
        """Ready, with the calls of every principal's connection summed (no principal named)."""
        each = [c.handle.statistics() for c in self.connections.values()]
        return ServerStatistics(
            state=ServerState.READY,
            restarts=sum(s.restarts for s in each),
            in_flight=sum(s.in_flight for s in each),
            queued=sum(s.queued for s in each),
            calls=sum(s.calls for s in each),
            errors=sum(s.errors for s in each),
            last_error=None,
            tools_version=0,
            pid=None,
        )

    def holds_parked(self, ticket: str) -> bool:
        """Whether a principal's connection holds a call open under ``ticket`` (the run that answers it binds
        its own principal's view before it resumes the call there)."""
        return any(c.handle.holds_parked(ticket) for c in self.connections.values())

    async def reaches_parked(self, ticket: str) -> bool:
        """Whether a call held under ``ticket`` is held open by a principal's connection here, or by a live process
        sharing the store (the resume then answers it through its own principal's view)."""
        if self.holds_parked(ticket):
            await trio.lowlevel.checkpoint()
            return True
        return self.relay is not None and await self.relay.reachable(ticket)

    async def bind(self, principal: str | None) -> Binding:
        """The server as ``principal``'s runs use it: their view of it (:meth:`bind_principal`)."""
        return (await self.bind_principal(principal)).binding()

    async def bind_principal(self, principal: str | None) -> PrincipalView:
        """``principal``'s view of the server: its connection, or why there is none (``needed``: it must
        authorize first)."""
        name = principal or ""
        try:
            connection = await self.connection(name)
        except AuthorizationRequired as needed:
            return PrincipalView(self, name, None, str(needed), needed)
        except AuthorizationError as error:
            return PrincipalView(self, name, None, str(error))
        except StoreUnavailable as error:  # its tokens, or the pending state, cannot be read or kept now
            return PrincipalView(self, name, None, self.store_out_of_reach(error))
        return PrincipalView(self, name, connection)

    def store_out_of_reach(self, error: StoreUnavailable) -> str:
        """What a run is told when the store cannot give a principal's tokens: not the store's error, which may
        name its address (a Redis URL with its password); that goes to the log."""
        logger.warning("server %r: a principal's tokens cannot be read or kept: %s", self.id, error)
        return f"server {self.id!r}: the conversation store is out of reach (the service's log says why)"

    async def connection(self, name: str) -> PrincipalConnection:
        """The open connection of principal ``name``, opened when it has none (module docstring); one at a time
        per principal, so two runs starting together share one connection."""
        lock = self.opening.setdefault(name, trio.Lock())
        try:
            async with lock:
                return await self._connection(name)
        finally:
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                self.opening.pop(name, None)

    async def _connection(self, name: str) -> PrincipalConnection:
        if self.auth is None:  # nothing to authorize: the principal's connection, opened if it has none
            opened = self.connections.get(name) or await self.open(name)
            opened.last_used = trio.current_time()
            return opened
        storage = self.storage(name)
        grant = await storage.load()
        usable = grant.usable(self.clock(), configured_client=self.auth.client_id is not None)
        connection = self.connections.get(name)  # after the load: a call may have started on it meanwhile
        if connection is not None and connection.handle.state is ServerState.NEEDS_AUTH:
            self.close(name)  # its refresh was refused: it asks again
            connection = None
        if connection is not None and connection.idle and (not usable or self.expiring(grant)):
            # Opened again, its token is refreshed now, before the run is offered its tools: a refresh that is
            # refused asks the principal again in this run, rather than failing one of its calls. Its tokens gone
            # from the store (`auth logout --principal`, in any process) end it too: the run asks again.
            self.close(name)
            connection = None
        if connection is None:
            if not usable:
                raise AuthorizationRequired(self.id, await self.ask(name, storage))
            connection = await self.open(name)
            if connection.handle.state is ServerState.NEEDS_AUTH:
                self.close(name)
                raise AuthorizationRequired(self.id, await self.ask(name, storage))
        connection.last_used = trio.current_time()
        return connection

    def expiring(self, grant: Grant) -> bool:
        """Whether ``grant``'s access token is due for its refresh (as :mod:`yao_actors.auth.flow` reckons it)."""
        if grant.tokens is None or grant.expires_at is None:
            return False
        lifetime = grant.tokens.expires_in
        margin = REFRESH_MARGIN if lifetime is None else min(REFRESH_MARGIN, lifetime / 10)
        return self.clock() >= grant.expires_at - margin

    def storage(self, name: str) -> StoreTokenStorage:
        assert self.desk is not None  # a router with OAuth has its desk
        return StoreTokenStorage(self.desk.vault, self.id, principal_identity(name), self.clock)

    async def ask(self, name: str, storage: StoreTokenStorage) -> str:
        """A fresh authorization URL for principal ``name``."""
        assert self.auth is not None  # asked only of a router with OAuth, which has its desk
        assert self.desk is not None
        redirect_uri = self.desk.redirect_uri
        if redirect_uri is None:
            raise AuthorizationError(
                f"server {self.id!r} needs each principal's authorization, and there is no address for the "
                "redirect: set server.public_url (or run it under `yao-actors serve`)"
            )
        return await begin_authorization(
            self.spec.transport.url,  # type: ignore[union-attr]  # oauth_of: an HTTP or SSE server
            self.auth,
            storage,
            self.desk.states,
            principal=name,
            redirect_uri=redirect_uri,
            client_metadata_url=self.desk.client_metadata_url,
            discovery=self.desk.discovery,
        )

    async def open(self, name: str) -> PrincipalConnection:
        """Start principal ``name``'s actor (after its first connection attempt), within :attr:`max_principals`."""
        # The ones still connecting count too: several principals opening at once stay within the bound.
        if len(self.connections) + self.starting >= self.max_principals:
            idle = [(c.last_used, n) for n, c in self.connections.items() if c.idle]
            if not idle:
                raise AuthorizationError(
                    f"server {self.id!r} has connections open for {self.max_principals} principals, all in use "
                    "(the most at once): try again shortly"
                )
            self.close(min(idle)[1])
        scope = trio.CancelScope()
        self.starting += 1
        try:
            handle: ServerHandle = await self.nursery.start(self._serve, name, scope)
        finally:
            self.starting -= 1
        connection = self.connections[name] = PrincipalConnection(handle, scope, trio.current_time())
        return connection

    async def _serve(self, name: str, scope: trio.CancelScope, task_status: trio.TaskStatus[ServerHandle]) -> None:
        connect = self.connect
        if self.desk is not None:  # each principal's tokens
            connect = principal_connector(connect, self.desk.vault, principal_identity(name), self.clock)
        try:
            with scope:
                await self.serve_actor(self.spec, connect=connect, task_status=task_status)
        finally:
            kept = self.connections.get(name)
            if kept is not None and kept.scope is scope:
                del self.connections[name]

    def close(self, name: str) -> None:
        """Close principal ``name``'s connection (its actor stops; its tokens stay in the store)."""
        connection = self.connections.pop(name, None)
        if connection is not None:
            connection.scope.cancel()

    async def close_idle(self) -> None:
        """Close, now and then, the connections no call used for :attr:`idle_close` seconds."""
        while True:
            await trio.sleep(self.idle_close / 4)
            now = trio.current_time()
            for name, connection in list(self.connections.items()):
                if connection.idle and now - connection.last_used >= self.idle_close:
                    self.close(name)


def principal_connector(
    connect: Connector, vault: TokenVault, identity: str, clock: Callable[[], float] = time.time
) -> Connector:
    """``connect`` for one principal: the server's OAuth flow on that principal's tokens only."""

    def connector(spec: ServerSpec, *, link: Link, **options: Any) -> AbstractAsyncContextManager[mcp.Client]:
        auth = oauth_of(spec)
        assert auth is not None  # a router exists only for a server with auth
        storage = StoreTokenStorage(vault, spec.id, identity, clock)
        return open_authorized(connect, spec, auth, storage, link, options, needs=_asks_again)

    return connector


def _asks_again(server: str) -> NeedsLogin:
    return NeedsLogin(
        f"server {server!r} needs the user's authorization again (it was revoked or has expired): the user's next "
        "run asks for it"
    )

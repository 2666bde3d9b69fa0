"""The websocket service: admit connections within the limits, serve the page and the routes, shut down gracefully.

- :class:`Service` — the handle: where it listens, :meth:`Service.statistics`, :meth:`Service.shutdown`.
- :func:`open_front` — the service without a listener, for connections an ASGI server hands it
  (:mod:`yao_actors.aio.asgi`); listening on TCP (:func:`~yao_actors.service.listening.open_service`,
  :func:`~yao_actors.service.listening.serve_service`) is :mod:`yao_actors.service.listening`, on top of it.

Each TCP connection first passes :mod:`yao_actors.service.gate`: a plain HTTP request goes to the service's
routes (:class:`~yao_actors.service.http.Routes`: the page on ``/``, AG-UI's ``POST /agui``, and
:mod:`yao_actors.service.http_endpoints`: ``/healthz``, ``/readyz``, ``/metrics``); a websocket
upgrade goes on to the handshake (:class:`~yao_actors.service.websocket.ServerWebSocket`, on wsproto) and its checks — Origin, bearer token (401), the connection limit (503) — and is then served by a
:class:`~yao_actors.service.connection.Connection`. The runtime is the caller's: the service never starts or
stops it, and a client can never make it spawn a process or reach a URL (servers come only from the config).
"""

from __future__ import annotations

import functools
import importlib.resources
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Final, Protocol

import attrs
import trio
from trio_websocket import ConnectionClosed

from yao_actors.config import ServiceSpec
from yao_actors.observability.metrics import WEBSOCKET_CONNECTIONS
from yao_actors.service.agui_http import AGUI_PATH, AguiExchange
from yao_actors.service.apps_host import add_apps_routes, apps_only, page_with_apps_origin
from yao_actors.service.auth import Credential, Handshake, resolve_credentials, selected_subprotocol
from yao_actors.service.budget import RunBudget, principal_share
from yao_actors.service.connection import CLOSE_INTERNAL_ERROR, Connection
from yao_actors.service.gate import RequestHead, read_head
from yao_actors.service.http import BadRequest, Exchange, Routes, read_request, refuse
from yao_actors.service.http_endpoints import Endpoints, Observable
from yao_actors.service.oauth_routes import OAuthRoutes
from yao_actors.service.relay import Refusal, admit_client
from yao_actors.service.served import ServedRuntime
from yao_actors.service.websocket import MessageSocket, ServerWebSocket, UpgradeRequest

logger = logging.getLogger(__name__)

#: Seconds a new connection has to send its request head and finish the handshake.
HANDSHAKE_TIMEOUT: Final = 10.0
#: Seconds a connection has to flush its last frames and finish the closing handshake.
CLOSE_TIMEOUT: Final = 5.0
#: Messages this many times larger than ``max_frame_bytes`` close the connection (1009); frames between the two
#: limits are refused with ``frame_too_large`` and the connection goes on.
HARD_FRAME_FACTOR: Final = 4


@attrs.frozen
class ServiceStatistics:
    """A snapshot of the service: open connections (websockets and ``/agui`` streams) and runs in flight."""

    connections: int
    runs: int
    closing: bool


@attrs.frozen
class Admitted:
    """An accepted websocket's principal (``None``: no tokens, every local client is one principal)."""

    principal: str | None


class Stoppable(Protocol):
    """What shutdown needs of a connection (a websocket, or one ``/agui`` request): stop it gracefully."""

    def stop(self) -> None: ...


@attrs.define(eq=False)
class Service:
    """A websocket service (made by :func:`open_front`; listening on TCP, by
    :func:`~yao_actors.service.listening.open_service`)."""

    spec: ServiceSpec
    host: str
    port: int
    _runtime: ServedRuntime
    _credentials: tuple[Credential, ...]
    _page: bytes
    _endpoints: Endpoints
    _nursery: trio.Nursery
    _budget: RunBudget
    _connections: set[Stoppable] = attrs.field(factory=set, init=False)
    _routes: Routes = attrs.field(factory=Routes, init=False)
    _admitted: int = attrs.field(default=0, init=False)
    _listening: trio.CancelScope = attrs.field(factory=trio.CancelScope, init=False)
    _changed: trio.lowlevel.ParkingLot = attrs.field(factory=trio.lowlevel.ParkingLot, init=False)
    _stopped: trio.Event = attrs.field(factory=trio.Event, init=False)

    @property
    def url(self) -> str:
        """The websocket URL clients connect to."""
        return f"ws://{_url_host(self.host)}:{self.port}/"

    @property
    def page_url(self) -> str:
        """The URL of the browser page."""
        return f"http://{_url_host(self.host)}:{self.port}/"

    def statistics(self) -> ServiceStatistics:
        """Open connections and runs in flight, now."""
        return ServiceStatistics(connections=self._admitted, runs=self._budget.active, closing=self._budget.closing)

    async def shutdown(self) -> None:
        """Shut down gracefully; idempotent.

        Refuses new runs and websocket upgrades (503) at once, lets runs in flight (detached ones too) finish
        for up to ``shutdown_grace`` seconds, then cancels the rest (each still sends its terminal event) and
        closes every connection with code 1001. Through the grace the listener stays open for plain HTTP, so ``/healthz``
        answers 503 and load balancers drain; it closes when the grace ends (or the last run does).
        """
        if self._budget.closing:
            await self._stopped.wait()
            return
        self._budget.closing = True
        logger.info(
            "shutting down: %d run(s) in flight get up to %gs",
            self._budget.active,
            self.spec.shutdown_grace,
            extra={"runs": self._budget.active, "connections": self._admitted},
        )
        with trio.move_on_after(self.spec.shutdown_grace):
            await self._budget.wait_idle()
        self._listening.cancel()
        self._budget.cancel_detached()
        for connection in list(self._connections):
            connection.stop()
        with trio.move_on_after(CLOSE_TIMEOUT):
            await self._budget.wait_idle()  # the runs just cancelled write their terminal events
            while self._admitted:
                await self._changed.park()
        self._stopped.set()

    async def wait_stopped(self) -> None:
        """Return once :meth:`shutdown` has finished."""
        await self._stopped.wait()

    def __attrs_post_init__(self) -> None:
        self._routes.add("/", self._serve_page)
        self._routes.add("/index.html", self._serve_page)
        self._routes.add("/favicon.ico", self._serve_icon)
        self._endpoints.add_to(self._routes)
        self._routes.add(AGUI_PATH, self._serve_agui, ("POST", "OPTIONS"), prefix=True)
        add_apps_routes(self._routes, self.spec)

    async def serve_exchange(self, exchange: Exchange) -> None:
        """Answer a plain HTTP request read elsewhere (an ASGI server's) through the service's routes."""
        await self._routes.serve(exchange)

    async def serve_websocket(self, ws: MessageSocket, request: UpgradeRequest) -> None:
        """Check and accept (or refuse) a websocket upgrade read elsewhere (an ASGI server's), then serve it."""
        admitted = None
        with trio.move_on_after(HANDSHAKE_TIMEOUT):
            admitted = await self._admit(ws, request)
        if admitted is not None:
            await self._serve_connection(ws, admitted.principal)

    async def _serve_page(self, exchange: Exchange) -> None:
        """The page, told the origin its MCP Apps are hosted on (not served on a configured apps origin)."""
        host = exchange.request.headers.get("host")
        if apps_only(self.spec, host):
            await exchange.respond(404, b"this origin hosts MCP Apps only\n", "text/plain; charset=utf-8")
            return
        await exchange.respond(200, page_with_apps_origin(self._page, self.spec, host), "text/html; charset=utf-8")

    async def _serve_icon(self, exchange: Exchange) -> None:
        """The page's icon (a browser asks for ``/favicon.ico`` by itself; a 404 there looks like a fault)."""
        await exchange.respond(200, _icon(), "image/png", [("cache-control", "max-age=86400")])

    async def _serve_agui(self, exchange: Exchange) -> None:
        """One AG-UI request; while it runs it counts as a connection (limits, shutdown)."""
        if self._budget.closing or self._admitted >= self.spec.max_connections:
            body = {"error": {"code": "too_many_connections", "message": "too many connections, or shutting down"}}
            await exchange.respond_json(503, body)
            return
        agui = AguiExchange(exchange, self._runtime, self.spec, self._credentials, self._budget)
        self._admitted += 1
        self._connections.add(agui)
        try:
            await agui.serve()
        finally:
            self._connections.discard(agui)
            self._release()

    async def _serve_http(self, stream: trio.SocketStream, head: RequestHead) -> None:
        """A plain HTTP request: read it within the handshake deadline, then its route answers it (a client that
        takes nothing of the answer for ``idle_timeout`` seconds is dropped)."""
        exchange = None
        with trio.move_on_after(HANDSHAKE_TIMEOUT):
            try:
                exchange = await read_request(
                    stream, head, max_body=self.spec.max_frame_bytes, write_timeout=self.spec.idle_timeout
                )
            except BadRequest as error:
                await refuse(stream, error.status, str(error))
        if exchange is not None:
            await self._routes.serve(exchange)

    async def _serve_listeners(self, listeners: list[trio.SocketListener]) -> None:
        """Accept connections until shutdown; each is handled in the service's nursery."""
        with self._listening:
            await trio.serve_listeners(self._handle_stream, listeners, handler_nursery=self._nursery)

    async def _handle_stream(self, stream: trio.SocketStream) -> None:
        """One TCP connection: a plain HTTP request is answered, an upgrade gets the handshake and the connection."""
        head = None
        try:
            with trio.move_on_after(HANDSHAKE_TIMEOUT):
                head = await read_head(stream)
            if head is not None and not head.is_websocket:
                await self._serve_http(stream, head)
            elif head is not None:
                await self._serve_websocket(stream, head)
        except* (ConnectionClosed, trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except* Exception as group:  # one connection's failure must not end the service
            logger.error("connection handler failed; dropping the connection", exc_info=group)
        # trio.serve_listeners closes the stream (forcefully) once this returns: no second close here.

    async def _serve_websocket(self, stream: trio.SocketStream, head: RequestHead) -> None:
        """Finish the websocket handshake within its deadline, then serve the connection."""
        ws = ServerWebSocket(
            stream,
            max_message_size=self.spec.max_frame_bytes * HARD_FRAME_FACTOR,
            reply_timeout=self.spec.idle_timeout / 2,  # as long as a keepalive ping may take to go out
        )
        admitted = None
        with trio.move_on_after(HANDSHAKE_TIMEOUT):
            request = await ws.handshake(head)
            if request is not None:
                admitted = await self._admit(ws, request)
        if admitted is not None:
            await self._serve_connection(ws, admitted.principal)

    async def _admit(self, ws: MessageSocket, request: UpgradeRequest) -> Admitted | None:
        """Check the handshake (Origin, token: :func:`~yao_actors.service.relay.admit_client`, as ``/agui`` does;
        the connection limit) and accept it, or refuse it (``None``)."""
        handshake = Handshake(headers=request.headers, subprotocols=request.subprotocols)
        principal = admit_client(handshake, self.spec, self._credentials)
        origin = handshake.headers.get("origin")
        if isinstance(principal, Refusal):
            logger.warning(
                "refused a connection (%d): %s", principal.status, principal.message, extra={"origin": origin}
            )
            headers = [(name.encode(), value.encode()) for name, value in principal.headers]
            body = b"origin not allowed\n" if principal.status == 403 else principal.message.encode() + b"\n"
            await ws.reject(principal.status, extra_headers=headers, body=body)
        elif self._budget.closing or self._admitted >= self.spec.max_connections:
            reason = "shutting down" if self._budget.closing else f"at the limit of {self.spec.max_connections}"
            logger.warning("refused a connection (503): %s", reason, extra={"origin": origin})
            await ws.reject(503, body=b"too many connections, or shutting down\n")
        else:
            self._admitted += 1
            try:
                await ws.accept(request, selected_subprotocol(handshake))
            except BaseException:
                self._release()
                raise
            WEBSOCKET_CONNECTIONS.inc()
            return Admitted(principal)
        return None

    async def _serve_connection(self, ws: MessageSocket, principal: str | None) -> None:
        """Serve an accepted connection, then close it with its close code and free its slot.

        A failure inside the connection is logged with its traceback and ends this connection only (1011).
        """
        connection = Connection(ws=ws, runtime=self._runtime, spec=self.spec, budget=self._budget, principal=principal)
        self._connections.add(connection)
        try:
            try:
                await connection.serve()
            except Exception as error:
                logger.error("connection failed; closing it", exc_info=error)
                connection.close_code, connection.close_reason = CLOSE_INTERNAL_ERROR, "internal error"
            if not connection.lost:
                with trio.move_on_after(CLOSE_TIMEOUT):
                    await ws.aclose(connection.close_code, connection.close_reason)
        finally:
            self._connections.discard(connection)
            WEBSOCKET_CONNECTIONS.dec()
            self._release()

    def _release(self) -> None:
        """Free a connection slot."""
        self._admitted -= 1
        self._changed.unpark_all()


@functools.cache
def _icon() -> bytes:
    return importlib.resources.files("yao_actors.service").joinpath("favicon.png").read_bytes()


@asynccontextmanager
async def open_front(
    runtime: ServedRuntime, spec: ServiceSpec, *, servers: Mapping[str, Observable] | None = None, port: int = 0
) -> AsyncIterator[Service]:
    """The service without a listener: connections are handed to it (:meth:`Service.serve_exchange`,
    :meth:`Service.serve_websocket`), as the ASGI application does; shut down gracefully when the block ends.
    ``servers`` as for :func:`~yao_actors.service.listening.open_service`; ``port`` is only what
    :attr:`Service.url` shows."""
    credentials = resolve_credentials(spec)
    page = importlib.resources.files("yao_actors.service").joinpath("page.html").read_bytes()
    async with trio.open_nursery() as nursery:
        principals = len({credential.principal for credential in credentials})
        share = principal_share(spec, principals)
        budget = RunBudget(limit=spec.max_runs, per_principal=share, nursery=nursery)  # detached runs wait here
        endpoints = Endpoints(
            runtime.sources if servers is None else servers,
            credentials,
            lambda: budget.closing,
            required=frozenset(spec.required_servers),
            store_problem=runtime.store_problem,
            not_offered=runtime.tools_not_offered,
        )
        desk = runtime.authorizations
        if desk is not None and desk.base_url is None and port:  # without server.public_url: the redirect comes here
            desk.base_url = f"http://{_url_host(spec.host)}:{port}"
        service = Service(
            spec=spec,
            host=spec.host,
            port=port,
            runtime=runtime,
            credentials=credentials,
            page=page,
            endpoints=endpoints,
            nursery=nursery,
            budget=budget,
        )
        if desk is not None:
            OAuthRoutes(desk).add_to(service._routes)
        try:
            yield service
            await service.shutdown()
        finally:
            nursery.cancel_scope.cancel()


def _url_host(host: str) -> str:
    """A host as it appears in a URL (IPv6 in brackets; a wildcard address shown as loopback)."""
    if host in ("0.0.0.0", "", "::"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host

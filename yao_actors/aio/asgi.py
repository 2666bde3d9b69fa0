"""The service's HTTP side as an ASGI application, the Trio runtime running as a guest of the ASGI server's loop.

``yao = yao_actors.asgi.app(config)`` serves what ``yao-actors serve`` serves on its port — ``POST /agui`` (SSE),
the websocket (any path the service's own serves it on), ``/healthz``, ``/readyz``, ``/metrics`` and the page — to
any ASGI server (uvicorn), alone or mounted under a path of a FastAPI or Starlette application. The ASGI lifespan
starts the runtime and the service (:func:`yao_actors.service.frontend.open_front`) in a Trio guest run on the
server's loop (:mod:`yao_actors.aio.guest`) and shuts them down gracefully; a mounted application gets no lifespan
events of its own, so its parent's lifespan enters ``yao.running()`` instead.

Each request is handed to the service whole, through :class:`~yao_actors.service.http.Exchange` and
:class:`~yao_actors.service.websocket.MessageSocket` adapters over the ASGI ``receive`` and ``send``: the routes,
the Origin and token checks, the limits, the events and the shutdown are the service's own. What the ASGI server does
instead: it listens (``server.host`` and ``server.port`` are not read, nor is a token demanded beyond loopback: put
one in ``server.tokens`` when it listens beyond), and it keeps websockets alive (its own pings; the service's are
not sent).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, MutableMapping, Sequence
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Any

import trio
from trio_websocket import CloseReason, ConnectionClosed

from yao_actors import aio
from yao_actors.aio.guest import GUEST_SWITCH_INTERVAL, Guest, open_guest
from yao_actors.models import Model
from yao_actors.runtime import open_runtime
from yao_actors.service.frontend import HANDSHAKE_TIMEOUT, Service, open_front
from yao_actors.service.http import BadRequest, ClientStalled, Headers, HttpRequest
from yao_actors.service.websocket import ABNORMAL_CLOSURE, MESSAGE_TOO_BIG, UpgradeRequest
from yao_actors.specs import Config
from yao_actors.transports import Connector, open_client

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Coroutine[Any, Any, Message]]
Send = Callable[[Message], Coroutine[Any, Any, None]]


class AsgiApp:
    """The ASGI application (made by :func:`app`); ``runtime`` is the asyncio runtime while it runs."""

    def __init__(
        self,
        config: Config,
        *,
        models: Mapping[str, Model] | None,
        connect: Connector,
        switch_interval: float | None = GUEST_SWITCH_INTERVAL,
        body_timeout: float = HANDSHAKE_TIMEOUT,
    ) -> None:
        self.config = config
        self.body_timeout = body_timeout
        self._switch_interval = switch_interval
        self._models = models
        self._connect = connect
        self._guest: Guest | None = None
        self._service: Service | None = None
        self.runtime: aio.Runtime | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[AsgiApp]:
        """Run the runtime and the service for the block (the ASGI lifespan does this); graceful shutdown at its end:
        new runs refused, those in flight given ``server.shutdown_grace`` seconds, then every actor stopped."""
        async with open_guest(self._open(), switch_interval=self._switch_interval) as (guest, (runtime, service)):
            self._guest, self._service, self.runtime = guest, service, aio.Runtime(guest, runtime)
            try:
                yield self
                await guest.call(service.shutdown)
            finally:
                self._guest = self._service = self.runtime = None

    async def drain(self) -> None:
        """On the host: the service's graceful shutdown, now — new runs and websockets refused, those in flight given
        ``server.shutdown_grace`` seconds and then their terminal events, every connection closed as the service
        closes it (1001). An ASGI server calls it before it closes connections itself (uvicorn would close each
        websocket with 1012 at once): :class:`yao_actors.aio.asgi_server.GracefulServer`. Idempotent; the lifespan's
        end then only stops the runtime."""
        guest, service = self._guest, self._service
        if guest is not None and service is not None:
            await guest.call(service.shutdown)

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[tuple[Any, Service]]:
        """In the guest run: the runtime, then the service over it."""
        async with (
            open_runtime(self.config, models=self._models, connect=self._connect) as runtime,
            open_front(runtime, self.config.service) as service,
        ):
            yield runtime, service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        guest, service = self._guest, self._service
        if guest is None or service is None:
            if scope["type"] == "http":
                await _refuse(send, 503, "not_running", "the yao_actors application is not running")
            else:
                await send({"type": "websocket.close", "code": 1013})
            return
        headers = _headers(scope)
        if scope["type"] == "http":
            await guest.call(self._serve_http, guest, service, scope, receive, send, headers)
        elif scope["type"] == "websocket" and (await receive())["type"] == "websocket.connect":
            upgrade = UpgradeRequest(headers, tuple(scope.get("subprotocols") or ()), key=b"", after_head=b"")
            limit = self.config.service.max_frame_bytes * 4  # as the service's own (HARD_FRAME_FACTOR)
            ws = AsgiWebSocket(guest, receive, send, scope, max_message_size=limit)
            try:
                await guest.call(_serve, service.serve_websocket, ws, upgrade)
            finally:
                ws.stop_reading()

    async def _serve_http(
        self, guest: Guest, service: Service, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]
    ) -> None:
        """In the guest: read the request within :attr:`body_timeout` seconds (the service's own deadline for a
        request: a body that trickles in is cut, 408), then answer it through the service's routes."""
        request = None
        try:
            with trio.move_on_after(self.body_timeout):
                request = await read_request(
                    scope, partial(guest.host, receive), headers, self.config.service.max_frame_bytes
                )
            if request is None:
                raise BadRequest(408, f"the request did not arrive whole within {self.body_timeout:g}s")
        except BadRequest as error:
            await guest.host(_refuse, send, error.status, "bad_request", str(error))
            return
        except ClientGone:
            return
        exchange = AsgiExchange(request, guest, receive, send, self.config.service.idle_timeout)
        await _serve(service.serve_exchange, exchange)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """Start at ``lifespan.startup``, stop at ``lifespan.shutdown``; a failure to start is ``startup.failed``."""
        await receive()
        started = False
        try:
            async with self.running():
                await send({"type": "lifespan.startup.complete"})
                started = True
                await receive()
        except Exception as error:
            kind = "shutdown" if started else "startup"
            logger.error("yao_actors failed at %s", kind, exc_info=error)
            await send({"type": f"lifespan.{kind}.failed", "message": f"{type(error).__name__}: {error}"})
            return
        await send({"type": "lifespan.shutdown.complete"})


def app(
    config: Config,
    *,
    models: Mapping[str, Model] | None = None,
    connect: Connector = open_client,
    switch_interval: float | None = GUEST_SWITCH_INTERVAL,
    body_timeout: float = HANDSHAKE_TIMEOUT,
) -> AsgiApp:
    """The ASGI application serving ``config`` (``models`` and ``connect`` as for :func:`yao_actors.open_runtime`;
    ``switch_interval``: the GIL's while it runs, :func:`yao_actors.aio.guest.open_guest`; ``body_timeout``: the seconds
    an HTTP request has to arrive whole, the native service's deadline by default)."""
    return AsgiApp(config, models=models, connect=connect, switch_interval=switch_interval, body_timeout=body_timeout)


async def _serve(serve: Callable[..., Awaitable[None]], *args: Any) -> None:
    """In the guest: one request or websocket through the service; a client gone is no failure, a failure is
    logged and ends this request only (as the service's own connections)."""
    try:
        await serve(*args)
    except* (ConnectionClosed, trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    except* Exception as group:
        logger.error("connection handler failed; dropping the connection", exc_info=group)


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers, names lower-case, the first value of each (as the service's own reader keeps them)."""
    headers: dict[str, str] = {}
    for name, value in scope.get("headers") or ():
        headers.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return headers


def _route_path(scope: Scope) -> str:
    """The path below where the application is mounted (``root_path``), as the service's routes know them."""
    path: str = scope["path"]
    root = scope.get("root_path") or ""
    if root and path.startswith(root):
        path = path[len(root) :]
    return path or "/"


class ClientGone(Exception):
    """The ASGI server said the client left (``http.disconnect``) before its request was whole."""


async def read_request(
    scope: Scope, receive: Callable[[], Awaitable[Message]], headers: dict[str, str], max_body: int
) -> HttpRequest:
    """The whole request, its body bounded by ``max_body`` (:class:`BadRequest` 413, as the service's own; 400 for a
    malformed length), each message from ``receive``; :class:`ClientGone` when the client leaves first. The caller
    bounds the time it takes."""
    length = headers.get("content-length", "0")
    if not length.isdigit():
        raise BadRequest(400, f"malformed HTTP request: content-length {length!r}")
    if int(length) > max_body:
        raise BadRequest(413, f"the body of {int(length)} bytes exceeds the limit of {max_body} bytes")
    body = bytearray()
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        body += message.get("body", b"")
        more = bool(message.get("more_body"))
        if len(body) > max_body:
            raise BadRequest(413, f"the body exceeds the limit of {max_body} bytes")
    query = scope.get("query_string") or b""
    target = _route_path(scope) + ("?" + query.decode("latin-1") if query else "")
    return HttpRequest(scope["method"], target, headers, bytes(body))


async def _refuse(send: Send, status: int, code: str, message: str) -> None:
    """Answer a request the service never sees (unreadable, or before the application runs) with a JSON error, and
    have the server close the connection (what is left of the request is not read)."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class AsgiExchange:
    """An :class:`~yao_actors.service.http.Exchange` over ASGI, used in the guest: each write is one ASGI message.

    As the service's own: a write the client takes nothing of for ``write_timeout`` seconds drops it
    (:class:`ClientStalled`); once the server says the client is gone (``http.disconnect``, or a send failing)
    every write raises ``trio.BrokenResourceError``.
    """

    def __init__(self, request: HttpRequest, guest: Guest, receive: Receive, send: Send, write_timeout: float) -> None:
        self.request = request
        self._guest = guest
        self._receive = receive
        self._send = send
        self._write_timeout = write_timeout
        self._writing = trio.StrictFIFOLock()
        self._gone = False
        self._ended = False

    async def respond(self, status: int, body: bytes, content_type: str, headers: Headers = ()) -> None:
        fields = [("content-type", content_type), ("content-length", str(len(body))), *headers]
        await self.start_stream(status, content_type, fields[1:])
        await self._write({"type": "http.response.body", "body": b"" if self.request.method == "HEAD" else body})
        self._ended = True

    async def respond_json(self, status: int, value: Any, headers: Headers = ()) -> None:
        body = json.dumps(value, ensure_ascii=False).encode()
        await self.respond(status, body, "application/json", headers)

    async def start_stream(self, status: int, content_type: str, headers: Headers = ()) -> None:
        fields = [("content-type", content_type), *headers, ("cache-control", "no-store")]
        encoded = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in fields]
        await self._write({"type": "http.response.start", "status": status, "headers": encoded})

    async def send(self, data: bytes) -> None:
        await self._write({"type": "http.response.body", "body": data, "more_body": True})

    async def end(self) -> None:
        await self._write({"type": "http.response.body", "body": b""})
        self._ended = True

    async def wait_closed(self) -> None:
        """Return once the server says the client has gone."""
        while (await self._guest.host(self._receive))["type"] != "http.disconnect":
            pass
        self._gone = True

    async def _write(self, message: Message) -> None:
        async with self._writing:
            if self._ended:
                raise trio.ClosedResourceError("the answer has ended")
            if self._gone:
                raise trio.BrokenResourceError("the client has gone")
            with trio.move_on_after(self._write_timeout):
                try:
                    await self._guest.host(self._send, message)
                except OSError as error:  # ASGI: a send to a client that has gone
                    self._gone = True
                    raise trio.BrokenResourceError(str(error)) from error
                return
            self._gone = True
            raise ClientStalled(f"the client took nothing of the answer for {self._write_timeout:g}s")


class AsgiWebSocket:
    """A :class:`~yao_actors.service.websocket.MessageSocket` over an ASGI websocket, used in the guest.

    One reading host task at a time, kept across ``get_message`` deadlines (a deadline never cancels a read).
    ``ping`` sends nothing: the ASGI server keeps the connection alive with its own pings and reports a client
    that stopped answering as a disconnect.
    """

    awaiting_pong = False

    def __init__(self, guest: Guest, receive: Receive, send: Send, scope: Scope, *, max_message_size: int) -> None:
        self._guest = guest
        self._receive = receive
        self._send = send
        self._denial = "websocket.http.response" in (scope.get("extensions") or {})
        self._max_message_size = max_message_size
        self._reading: Any = None
        self.closed: CloseReason | None = None

    async def accept(self, request: UpgradeRequest, subprotocol: str | None) -> None:
        await self._write([{"type": "websocket.accept", "subprotocol": subprotocol}])

    async def reject(
        self, status: int, *, extra_headers: Sequence[tuple[bytes, bytes]] = (), body: bytes = b""
    ) -> None:
        """Refuse with ``status`` and ``body`` (a server without ASGI's denial response answers 403)."""
        self.closed = CloseReason(ABNORMAL_CLOSURE, "rejected")
        if not self._denial:
            await self._guest.host(self._send, {"type": "websocket.close", "code": 1008})
            return
        headers = [*extra_headers, (b"content-type", b"text/plain; charset=utf-8")]
        start = {"type": "websocket.http.response.start", "status": status, "headers": headers}
        await self._guest.host(_send_all, self._send, [start, {"type": "websocket.http.response.body", "body": body}])

    async def get_message(self, deadline: float = math.inf) -> str | bytes | None:
        if self.closed is not None:
            raise ConnectionClosed(self.closed)
        if self._reading is None:
            self._reading = self._guest.start_host(self._receive)
        with trio.move_on_at(deadline):
            message = await self._guest.wait_host(self._reading)
            self._reading = None
            if message["type"] == "websocket.disconnect":
                self.closed = CloseReason(message.get("code", 1005), message.get("reason") or None)
                raise ConnectionClosed(self.closed)
            text = message.get("text")
            data: str | bytes = text if text is not None else message.get("bytes") or b""
            if len(data) > self._max_message_size:
                await self.aclose(MESSAGE_TOO_BIG, f"Exceeded maximum message size: {self._max_message_size} bytes")
                raise ConnectionClosed(self.closed)
            return data
        return None

    def stop_reading(self) -> None:
        """On the host, once the service is done with the websocket: drop a read still waiting."""
        if self._reading is not None:
            self._reading.cancel()

    async def send_messages(self, messages: Sequence[str | bytes]) -> None:
        """Send ``messages`` in order, each its own text message, in one trip to the host."""
        if self.closed is not None:
            raise ConnectionClosed(self.closed)
        texts = [m if isinstance(m, str) else m.decode() for m in messages]
        await self._write([{"type": "websocket.send", "text": text} for text in texts])

    async def ping(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self, code: int, reason: str | None) -> None:
        if self.closed is not None:
            return
        self.closed = CloseReason(code, reason)
        with suppress(OSError):  # the client has gone already
            await self._guest.host(self._send, {"type": "websocket.close", "code": code, "reason": reason or ""})

    async def _write(self, messages: list[Message]) -> None:
        try:
            await self._guest.host(_send_all, self._send, messages)
        except OSError:  # ASGI: a send to a client that has gone
            self.closed = self.closed or CloseReason(ABNORMAL_CLOSURE, None)
            raise ConnectionClosed(self.closed) from None


async def _send_all(send: Send, messages: list[Message]) -> None:
    """On the host: send ``messages`` in order."""
    for message in messages:
        await send(message)

"""Plain HTTP on the service's port: one request per connection, read and answered with h11.

The gate (:mod:`yao_actors.service.gate`) has read the request head; :func:`read_request` hands those bytes
and the body to an ``h11`` server connection, bounded in size, and gives an :class:`HttpExchange`: the request
and the ways to answer it — a whole body (:meth:`HttpExchange.respond`, :meth:`HttpExchange.respond_json`) or
a stream of chunks (:meth:`HttpExchange.start_stream`, :meth:`HttpExchange.send`, :meth:`HttpExchange.end`).
Every answer says ``Connection: close``: the service serves one request per TCP connection. Every write has a
deadline (``write_timeout``, the service's ``idle_timeout``): a client that takes nothing of an answer for that
long is dropped (:class:`ClientStalled`), so a client that never reads cannot hold the task (and what it
holds) that writes to it.

What handlers use of an exchange is :class:`Exchange` (the ASGI application, :mod:`yao_actors.aio.asgi`, has its own).
:class:`Routes` is the one routing point of the service's plain HTTP: paths (or path prefixes) to handlers,
each with the methods it takes; anything else is 404, a known path with another method 405.
"""

from __future__ import annotations

import http
import json
import logging
import math
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final, Protocol

import attrs
import h11
import trio

from yao_actors.service.gate import RequestHead, RequestStart

logger = logging.getLogger(__name__)

#: The reason phrases of RFC 9110 where Python's differ (3.11 still says "Request Entity Too Large").
_REASONS: Final = {413: b"Content Too Large", 422: b"Unprocessable Content"}


def reason_phrase(status: int) -> bytes:
    """The reason phrase of a status line: RFC 9110's, never empty for a status the standard names (some clients and
    proxies show the phrase, and an empty one reads as a broken server)."""
    if status in _REASONS:
        return _REASONS[status]
    try:
        return http.HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


Headers = Iterable[tuple[str, str]]

#: The most bytes handed to the socket under one write deadline: a client that takes less than this in
#: ``write_timeout`` seconds is taken as one that takes nothing, and dropped.
WRITE_PIECE: Final = 65536


class BadRequest(Exception):
    """The request cannot be read: malformed HTTP (400) or a body over the limit (413)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ClientStalled(trio.BrokenResourceError):
    """The client took no bytes of an answer for ``write_timeout`` seconds: it is dropped, as if it had left."""


@attrs.frozen
class HttpRequest(RequestStart):
    """A whole request: its method, target and headers, and its body."""

    body: bytes


class Exchange(Protocol):
    """What a route's handler needs of a request and its answer (an :class:`HttpExchange`, or an ASGI one)."""

    @property
    def request(self) -> HttpRequest: ...

    async def respond(self, status: int, body: bytes, content_type: str, headers: Headers = ()) -> None: ...

    async def respond_json(self, status: int, value: Any, headers: Headers = ()) -> None: ...

    async def start_stream(self, status: int, content_type: str, headers: Headers = ()) -> None: ...

    async def send(self, data: bytes) -> None: ...

    async def end(self) -> None: ...

    async def wait_closed(self) -> None: ...


@attrs.define(eq=False)
class HttpExchange:
    """One request and its answer on a TCP stream (the stream stays its owner's).

    ``write_timeout``: the seconds a write may go without the client taking any of it (see :data:`WRITE_PIECE`);
    past that the exchange raises :class:`ClientStalled`, and every later write too.
    """

    stream: trio.abc.Stream
    request: HttpRequest
    _connection: h11.Connection
    write_timeout: float = math.inf
    _stalled: bool = attrs.field(default=False, init=False)
    #: One write at a time, whole (a stream's chunks and its owner's probes may come from two tasks).
    _writing: trio.StrictFIFOLock = attrs.field(factory=trio.StrictFIFOLock, init=False)

    async def respond(self, status: int, body: bytes, content_type: str, headers: Headers = ()) -> None:
        """Answer with a whole body (none for ``HEAD``)."""
        fields = [("content-type", content_type), ("content-length", str(len(body))), *headers]
        await self._send(h11.Response(status_code=status, headers=_fields(fields), reason=reason_phrase(status)))
        if self.request.method != "HEAD" and body:
            await self._send(h11.Data(data=body))
        await self._send(h11.EndOfMessage())

    async def respond_json(self, status: int, value: Any, headers: Headers = ()) -> None:
        """Answer with a JSON body."""
        body = json.dumps(value, ensure_ascii=False).encode()
        await self.respond(status, body, "application/json", headers)

    async def start_stream(self, status: int, content_type: str, headers: Headers = ()) -> None:
        """Start an answer whose body follows in chunks (:meth:`send`, then :meth:`end`)."""
        fields = [("content-type", content_type), *headers]
        await self._send(h11.Response(status_code=status, headers=_fields(fields), reason=reason_phrase(status)))

    async def send(self, data: bytes) -> None:
        """Send one chunk of a streamed body."""
        await self._send(h11.Data(data=data))

    async def end(self) -> None:
        """End a streamed body."""
        await self._send(h11.EndOfMessage())

    async def wait_closed(self) -> None:
        """Return when the client closes its side of the connection (reading and dropping anything it sends)."""
        while await self.stream.receive_some(4096):
            pass

    async def _send(self, event: h11.Event) -> None:
        """Send one h11 event, after any write going on; ``ClosedResourceError`` once the answer has ended."""
        async with self._writing:
            if self._connection.our_state is not h11.SEND_RESPONSE and self._connection.our_state is not h11.SEND_BODY:
                raise trio.ClosedResourceError("the answer has ended")
            data = self._connection.send(event)
            if data:
                await self._write(data)

    async def _write(self, data: bytes) -> None:
        """Send ``data`` a piece at a time, each within ``write_timeout``; a client that takes none is dropped."""
        if self._stalled:
            raise ClientStalled("the client was dropped: it took nothing of the answer")
        view = memoryview(data)
        for start in range(0, len(view), WRITE_PIECE):
            with trio.move_on_after(self.write_timeout):
                await self.stream.send_all(view[start : start + WRITE_PIECE])
                continue
            self._stalled = True  # part of a piece may have gone out: nothing more can follow it
            logger.info(
                "dropped an HTTP client of %s that took nothing of the answer for %gs",
                self.request.path,
                self.write_timeout,
                extra={"path": self.request.path},
            )
            raise ClientStalled(f"the client took nothing of the answer for {self.write_timeout:g}s")


def _fields(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Response headers, every one saying the connection closes after it."""
    return [*pairs, ("cache-control", "no-store"), ("connection", "close")]


async def read_request(
    stream: trio.abc.Stream, head: RequestHead, *, max_body: int, write_timeout: float = math.inf
) -> HttpExchange:
    """Read the rest of the request whose head the gate read; raise :class:`BadRequest` when it cannot be.

    A body over ``max_body`` bytes is refused (413) as soon as its length says so, without reading it.
    ``write_timeout`` is the answer's (see :class:`HttpExchange`).
    """
    connection = h11.Connection(h11.SERVER)
    connection.receive_data(head.raw)
    request: h11.Request | None = None
    body = bytearray()
    while True:
        try:
            event = connection.next_event()
        except h11.RemoteProtocolError as error:
            raise BadRequest(400, f"malformed HTTP request: {error}") from None
        if event is h11.NEED_DATA:
            data = await stream.receive_some(65536)
            if not data:
                raise BadRequest(400, "the request ended before its body did")
            connection.receive_data(bytes(data))
        elif isinstance(event, h11.Request):
            request = event
            length = dict(event.headers).get(b"content-length")
            if length is not None and int(length) > max_body:
                raise BadRequest(413, f"the body of {int(length)} bytes exceeds the limit of {max_body} bytes")
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > max_body:
                raise BadRequest(413, f"the body exceeds the limit of {max_body} bytes")
        elif isinstance(event, h11.EndOfMessage) and request is not None:
            headers: dict[str, str] = {}
            for name, value in request.headers:
                headers.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
            parsed = HttpRequest(
                request.method.decode("latin-1"), request.target.decode("latin-1"), headers, bytes(body)
            )
            return HttpExchange(stream, parsed, connection, write_timeout)
        else:  # pragma: no cover - h11 yields nothing else before EndOfMessage on a server
            raise BadRequest(400, "malformed HTTP request")


async def refuse(stream: trio.abc.Stream, status: int, message: str) -> None:
    """Answer a request that could not be read, with a JSON error, outside any h11 state."""
    body = json.dumps({"error": {"code": "bad_request", "message": message}}).encode()
    head = (
        f"HTTP/1.1 {status} {reason_phrase(status).decode()}\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    ).encode("latin-1")
    await stream.send_all(head + body)


Handler = Callable[[Exchange], Awaitable[None]]


@attrs.frozen
class Route:
    """A handler and the methods it takes; ``prefix``: it also serves every path below its own (``/x/...``)."""

    handler: Handler
    methods: frozenset[str]
    prefix: bool = False


@attrs.define(eq=False)
class Routes:
    """The service's plain HTTP paths: :meth:`add` routes, :meth:`serve` an exchange (404 / 405 otherwise)."""

    _routes: dict[str, Route] = attrs.field(factory=dict)

    def add(
        self, path: str, handler: Handler, methods: Iterable[str] = ("GET", "HEAD"), *, prefix: bool = False
    ) -> None:
        """Serve ``path`` (and, with ``prefix``, every ``path/...``) with ``handler`` for ``methods``."""
        self._routes[path] = Route(handler, frozenset(methods), prefix)

    def find(self, path: str) -> Route | None:
        """The route of ``path``: an exact one, else the longest prefix route containing it."""
        route = self._routes.get(path)
        if route is not None:
            return route
        matches = [p for p, r in self._routes.items() if r.prefix and path.startswith(p.rstrip("/") + "/")]
        return self._routes[max(matches, key=len)] if matches else None

    async def serve(self, exchange: Exchange) -> None:
        """Hand the exchange to its route's handler, or answer 404 / 405."""
        route = self.find(exchange.request.path)
        if route is None:
            await exchange.respond(404, b"not found\n", "text/plain; charset=utf-8")
        elif exchange.request.method not in route.methods:
            allow = ", ".join(sorted(route.methods))
            await exchange.respond(405, b"method not allowed\n", "text/plain; charset=utf-8", [("allow", allow)])
        else:
            await route.handler(exchange)

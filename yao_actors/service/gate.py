"""The door of every TCP connection: plain HTTP requests are answered here, websocket upgrades go on to trio-websocket.

trio-websocket answers any request without ``Upgrade: websocket`` with a bare 400 before a handler sees it, so
the service reads the request head itself first, with ``h11`` (:func:`read_head`). A plain request is answered
here (:func:`answer_http`, with what :mod:`yao_actors.service.http_endpoints` says: the page, health, metrics);
an upgrade is handed to trio-websocket over a :class:`ReplayStream` that gives back the bytes already read, so
one port serves both.
"""

from __future__ import annotations

import http
from collections.abc import Mapping
from typing import Final

import attrs
import h11
import trio
from wsproto.frame_protocol import FrameProtocol

#: The largest request head accepted (request line and headers).
MAX_HEAD_BYTES: Final = 16 * 1024


@attrs.frozen
class RequestHead:
    """The parsed head of an HTTP request, and every byte read so far (``raw``) for replay.

    ``headers`` has lower-cased names, the first value of each. ``parser`` is the ``h11`` connection that read
    it, which writes the answer (:func:`answer_http`).
    """

    method: str
    target: str
    headers: Mapping[str, str]
    raw: bytes
    parser: h11.Connection = attrs.field(eq=False, repr=False)

    @property
    def path(self) -> str:
        """The target without its query string."""
        return self.target.split("?", 1)[0]

    @property
    def is_websocket(self) -> bool:
        """Whether the request asks to upgrade to a websocket."""
        return self.headers.get("upgrade", "").lower() == "websocket"


async def read_head(stream: trio.abc.ReceiveStream) -> RequestHead | None:
    """Read and parse the request head; ``None`` if the peer closed early, sent too much or something not HTTP."""
    parser = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
    raw = bytearray()
    while True:
        try:
            event = parser.next_event()
        except h11.RemoteProtocolError:
            return None
        if isinstance(event, h11.Request):
            break
        if event is not h11.NEED_DATA:
            return None
        data = await stream.receive_some(4096)
        if not data:
            return None
        raw += data
        parser.receive_data(bytes(data))
    headers: dict[str, str] = {}
    for name, value in event.headers:
        headers.setdefault(name.decode("latin-1"), value.decode("latin-1"))
    return RequestHead(
        method=event.method.decode("latin-1"),
        target=event.target.decode("latin-1"),
        headers=headers,
        raw=bytes(raw),
        parser=parser,
    )


@attrs.frozen
class HttpResponse:
    """What to answer a plain HTTP request: a status, a body and its type, more headers."""

    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()


async def answer_http(stream: trio.abc.SendStream, head: RequestHead, response: HttpResponse) -> None:
    """Write ``response`` to the request of ``head`` (no body for ``HEAD``) and end the exchange (``Connection: close``)."""
    headers = [
        ("Content-Type", response.content_type),
        ("Content-Length", str(len(response.body))),
        ("Cache-Control", "no-store"),
        ("Connection", "close"),
        *response.headers,
    ]
    parser = head.parser
    data = (
        parser.send(
            h11.Response(status_code=response.status, headers=headers, reason=http.HTTPStatus(response.status).phrase)
        )
        or b""
    )
    if head.method != "HEAD":
        data += parser.send(h11.Data(data=response.body)) or b""
    data += parser.send(h11.EndOfMessage()) or b""
    await stream.send_all(data)


def close_frame(code: int, reason: str) -> bytes:
    """A server's websocket close frame, for a connection trio-websocket dropped without one (see ReplayStream)."""
    return bytes(FrameProtocol(client=False, extensions=[]).close(code, reason))


class ReplayStream(trio.abc.Stream):
    """A stream that first gives back ``prefix`` (bytes already read from ``inner``), then reads ``inner``.

    Closing it does not close ``inner``, which stays its owner's: when the client breaks the protocol (invalid
    UTF-8 in a text frame, say), trio-websocket closes the stream without sending a close frame, and the owner
    can still send one (:func:`close_frame`) before closing the TCP connection.
    """

    def __init__(self, prefix: bytes, inner: trio.abc.Stream) -> None:
        self._prefix = prefix
        self._inner = inner
        self._closed = False

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        """Return replayed bytes while any are left, then read from the inner stream."""
        self._check_open()
        if self._prefix:
            size = len(self._prefix) if max_bytes is None else max_bytes
            chunk, self._prefix = self._prefix[:size], self._prefix[size:]
            await trio.lowlevel.checkpoint()
            return chunk
        return await self._inner.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Send on the inner stream."""
        self._check_open()
        await self._inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        """Delegate to the inner stream."""
        await self._inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        """Stop using the inner stream (its owner closes it)."""
        self._closed = True
        await trio.lowlevel.checkpoint()

    def _check_open(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the stream was closed")

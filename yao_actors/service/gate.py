"""The door of every TCP connection: plain HTTP GETs get the browser page, websocket upgrades go on to trio-websocket.

trio-websocket answers any request without ``Upgrade: websocket`` with a bare 400 before a handler sees it, so
the service reads the request head itself first (:func:`read_head`). A plain request goes on to
:mod:`yao_actors.service.http` (the page, ``POST /agui``, 404 elsewhere); an upgrade is handed to trio-websocket
over a :class:`ReplayStream` that gives back the bytes already read, so one port serves both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

import attrs
import trio
from wsproto.frame_protocol import FrameProtocol

#: The largest request head accepted (request line and headers).
MAX_HEAD_BYTES: Final = 16 * 1024
_END_OF_HEAD: Final = b"\r\n\r\n"


@attrs.frozen
class RequestHead:
    """The parsed head of an HTTP request, and every byte read so far (``raw``) for replay."""

    method: str
    target: str
    headers: Mapping[str, str]
    raw: bytes

    @property
    def is_websocket(self) -> bool:
        """Whether the request asks to upgrade to a websocket."""
        return self.headers.get("upgrade", "").lower() == "websocket"


async def read_head(stream: trio.abc.ReceiveStream) -> RequestHead | None:
    """Read up to the end of the request head; ``None`` if the peer closed early or sent something too large."""
    buffer = bytearray()
    while _END_OF_HEAD not in buffer:
        if len(buffer) > MAX_HEAD_BYTES:
            return None
        data = await stream.receive_some(4096)
        if not data:
            return None
        buffer += data
    head = bytes(buffer).split(_END_OF_HEAD, 1)[0].decode("latin-1")
    request_line, *header_lines = head.split("\r\n")
    method, _, rest = request_line.partition(" ")
    target = rest.rpartition(" ")[0] or rest
    headers: dict[str, str] = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), value.strip())
    return RequestHead(method=method, target=target, headers=headers, raw=bytes(buffer))


def _open() -> bool:
    return True


def close_frame(code: int, reason: str) -> bytes:
    """A server's websocket close frame, for a connection trio-websocket dropped without one (see ReplayStream)."""
    return bytes(FrameProtocol(client=False, extensions=[]).close(code, reason))


class ReplayStream(trio.abc.Stream):
    """A stream that first gives back ``prefix`` (bytes already read from ``inner``), then reads ``inner``.

    Each write goes out whole, also when several tasks write (trio-websocket's own writes, and the
    connection's writer: :class:`~yao_actors.service.wire.MessageWriter`). Closing it does not close ``inner``, which stays its owner's: when the client breaks the protocol (invalid
    UTF-8 in a text frame, say), trio-websocket closes the stream without sending a close frame, and the owner
    can still send one (:func:`close_frame`) before closing the TCP connection.
    """

    def __init__(self, prefix: bytes, inner: trio.abc.Stream) -> None:
        self._prefix = prefix
        self._inner = inner
        self._closed = False
        self._sending = trio.StrictFIFOLock()

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
        """Send on the inner stream, whole: writes from several tasks never interleave."""
        await self.send_all_while(data, _open)

    async def send_all_while(self, data: bytes | bytearray | memoryview, still_open: Callable[[], bool]) -> bool:
        """Send ``data`` whole, unless ``still_open()`` is false once it is this write's turn (then ``False``).

        A free lock is taken without a trip through the scheduler (the write itself has one).
        """
        self._check_open()
        try:
            self._sending.acquire_nowait()
        except trio.WouldBlock:
            await self._sending.acquire()
        try:
            if not still_open():
                return False
            await self._inner.send_all(data)
            return True
        finally:
            self._sending.release()

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

"""Several websocket text messages in one socket write, on a trio-websocket server connection.

trio-websocket sends each message on its own: it frames it with wsproto, takes the connection's send lock (a
checkpoint: a trip through the scheduler) and writes it to the socket. A connection whose writer has a batch
of messages ready (a run's events emitted together) pays that per message. :class:`MessageWriter` frames the
batch itself (RFC 6455 §5.2: a server's text frames are unmasked, one final frame per message, no extension
is ever negotiated by the front end) and writes the bytes once, under trio-websocket's own send lock, so its
reader task's pongs and close replies and the keepalive's pings never interleave with them. Each message is
still its own websocket message; the client cannot tell the difference.

This uses trio-websocket's connection internals as its ``_send`` does (the send lock, the stream, the wsproto
connection, the abort on a broken stream). :func:`direct_writes_supported` checks they are all there and
that the connection is a server's with no extension; when they are not (another trio-websocket version),
:class:`MessageWriter` sends message by message through the public ``send_message`` instead, and
``tests/service/test_wire.py`` fails, so the fast path cannot vanish unnoticed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection
from wsproto.connection import ConnectionState

#: FIN and the text opcode (RFC 6455 §5.2): the first byte of every frame written here.
_FIN_TEXT: Final = 0x81
#: Payloads up to this many bytes have their length in the second byte itself.
_SHORT: Final = 125


def text_frame(text: str | bytes) -> tuple[bytes, bytes]:
    """The header and payload of one unmasked, final text frame holding ``text`` (``bytes``: UTF-8 already).

    ``text`` must be valid UTF-8 (:func:`~yao_actors.service.protocol.encode` guarantees it): a lone surrogate
    raises ``UnicodeEncodeError`` here, as it would in wsproto.
    """
    payload = text.encode() if isinstance(text, str) else text
    size = len(payload)
    if size <= _SHORT:
        return bytes((_FIN_TEXT, size)), payload
    if size < 1 << 16:
        return bytes((_FIN_TEXT, 126)) + size.to_bytes(2, "big"), payload
    return bytes((_FIN_TEXT, 127)) + size.to_bytes(8, "big"), payload


def direct_writes_supported(ws: WebSocketConnection) -> bool:
    """Whether ``ws`` has the trio-websocket internals a direct write needs, is a server's, and has no extension."""
    lock = getattr(ws, "_stream_lock", None)
    protocol = getattr(getattr(ws, "_wsproto", None), "connection", None)
    frames = getattr(protocol, "_proto", None)
    return (
        isinstance(lock, trio.StrictFIFOLock)
        and hasattr(ws, "_stream")
        and callable(getattr(ws, "_abort_web_socket", None))
        and hasattr(ws, "_close_reason")
        and frames is not None
        and getattr(frames, "client", True) is False
        and getattr(frames, "extensions", None) == []
    )


class MessageWriter:
    """Sends batches of text messages on one server websocket, each batch in one socket write.

    Only one task may use a writer (the connection's writer task); other tasks may still send on the
    websocket through trio-websocket (pings, pongs, the close frame): the send lock orders them.
    """

    def __init__(self, ws: WebSocketConnection) -> None:
        self._ws = ws
        self.direct = direct_writes_supported(ws)

    async def send(self, messages: Sequence[str | bytes]) -> None:
        """Send ``messages`` in order, each its own websocket message; ``ConnectionClosed`` if the client left.

        ``bytes`` are text already encoded as UTF-8 (never a binary message). Waits (and checkpoints) while
        the socket's buffer is full, as a single send does.
        """
        ws: Any = self._ws
        if not self.direct:
            for message in messages:
                await ws.send_message(message if isinstance(message, str) else message.decode())
            return
        if ws._close_reason is not None or ws._wsproto.state is not ConnectionState.OPEN:
            raise ConnectionClosed(ws._close_reason)
        parts: list[bytes] = []
        for message in messages:
            parts.extend(text_frame(message))
        data = b"".join(parts)
        lock: trio.StrictFIFOLock = ws._stream_lock
        try:
            lock.acquire_nowait()  # free (the usual case): no trip through the scheduler; the write has one
        except trio.WouldBlock:
            await lock.acquire()
        try:
            await ws._stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            await ws._abort_web_socket()  # as trio-websocket's own send does: the connection is closed (1006)
            raise ConnectionClosed(ws._close_reason) from None
        finally:
            lock.release()

"""Several websocket text messages in one socket write, beside trio-websocket.

trio-websocket sends each message on its own: it frames it with wsproto, takes its send lock (a checkpoint:
a trip through the scheduler) and writes it to the stream. A connection whose writer has a batch of messages
ready (a run's events emitted together) would pay that per message. :class:`MessageWriter` frames the batch
itself (RFC 6455 §5.2: a server's text frames are unmasked, one final frame per message; the front end never
accepts an extension, so there is nothing else to apply) and writes the bytes once on the stream under the
websocket (:class:`~yao_actors.service.gate.ReplayStream`), which is the front end's own: its lock keeps each
write whole, so trio-websocket's own writes (pongs, pings, the close frame) never interleave with a batch, and
a batch is not written once trio-websocket has begun closing (:attr:`WebSocketConnection.closed` is set
before its close frame goes out). Each message is still its own websocket message; a client cannot tell.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, Protocol

from trio_websocket import ConnectionClosed, WebSocketConnection

#: FIN and the text opcode (RFC 6455 §5.2): the first byte of every frame written here.
_FIN_TEXT: Final = 0x81
#: Payloads up to this many bytes have their length in the second byte itself.
_SHORT: Final = 125


class WholeWrites(Protocol):
    """A stream whose writes are each sent whole (:class:`~yao_actors.service.gate.ReplayStream`)."""

    async def send_all_while(self, data: bytes, still_open: Callable[[], bool]) -> bool:
        """Send ``data`` whole, unless ``still_open()`` is false once it is this write's turn (``False``)."""
        ...


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


class MessageWriter:
    """Sends batches of text messages on one server websocket, each batch in one write on ``stream``.

    ``stream`` is the stream the websocket was made over; without one (``None``) the messages go one by one
    through ``ws.send_message``. Only one task may use a writer (the connection's writer task).
    """

    def __init__(self, ws: WebSocketConnection, stream: WholeWrites | None) -> None:
        self._ws = ws
        self._stream = stream

    async def send(self, messages: Sequence[str | bytes]) -> None:
        """Send ``messages`` in order, each its own websocket message; ``ConnectionClosed`` once it is closing.

        ``bytes`` are text already encoded as UTF-8 (never a binary message). A broken stream raises trio's
        ``BrokenResourceError`` (the client is gone). Waits (and checkpoints) while the socket's buffer is full,
        as a single send does.
        """
        ws = self._ws
        if self._stream is None:
            for message in messages:
                await ws.send_message(message if isinstance(message, str) else message.decode())
            return
        if ws.closed is not None:
            raise ConnectionClosed(ws.closed)
        parts: list[bytes] = []
        for message in messages:
            parts.extend(text_frame(message))
        if not await self._stream.send_all_while(b"".join(parts), lambda: ws.closed is None):
            raise ConnectionClosed(ws.closed)

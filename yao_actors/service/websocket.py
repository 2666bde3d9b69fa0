"""The server side of one websocket, on wsproto, read by the task that serves the connection.

trio-websocket's server side gives each connection a reader task that moves every message to the handler
through a channel, a lock per message sent, an event per ping, and a closing handshake waited for through
another event: about as much CPU per connection and run as the front end's own code. :class:`ServerWebSocket`
does what the service needs of a websocket with none of that:

- the opening handshake on the request head the gate has already read and parsed (:meth:`ServerWebSocket.handshake`:
  wsproto's checks, without parsing the head a second time through h11), then :meth:`~ServerWebSocket.accept`
  or :meth:`~ServerWebSocket.reject` (an HTTP status with a body);
- reading in the caller's own task (:meth:`~ServerWebSocket.get_message`, with a deadline for the caller's
  idle and keepalive timers): pings are answered, pongs noted (:attr:`~ServerWebSocket.awaiting_pong`), a
  fragmented message is put together, one longer than ``max_message_size`` closes the connection (1009), a
  frame that breaks the protocol closes it with wsproto's code and reason (1002, 1007), and the client's
  close is answered;
- writing a batch of text messages in one socket write (:meth:`~ServerWebSocket.send_messages`, each framed
  by :func:`~yao_actors.service.wire.text_frame`), each write whole under one lock shared with the pongs,
  pings and close frame;
- closing (:meth:`~ServerWebSocket.aclose`): the close frame, then reading until the client's answer, so the
  socket is not closed with unread bytes (which would reset it and could lose the close frame).

A connection that ended, whoever ended it, raises trio-websocket's ``ConnectionClosed`` with its code and
reason (:attr:`~ServerWebSocket.closed`), as trio-websocket does; clients (the chat client, tests) still use
trio-websocket. The service never accepts an extension, so frames need no extension processing.
"""

from __future__ import annotations

import http
import math
from collections.abc import Mapping, Sequence
from typing import Final, Protocol

import attrs
import trio
from trio_websocket import CloseReason, ConnectionClosed
from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Ping, Pong, TextMessage
from wsproto.utilities import generate_accept_token

from yao_actors.service.gate import RequestHead
from yao_actors.service.wire import text_frame

#: Bytes asked of the socket per read.
RECEIVE_BYTES: Final = 65536
#: The close code of a message longer than the limit (RFC 6455 §7.4.1), and of a connection dropped (1006).
MESSAGE_TOO_BIG: Final = 1009
ABNORMAL_CLOSURE: Final = 1006
_END_OF_HEAD: Final = b"\r\n\r\n"
#: The one websocket version (RFC 6455), and the header naming it in a refusal.
WEBSOCKET_VERSION: Final = "13"
_VERSION_HEADER: Final = (b"sec-websocket-version", WEBSOCKET_VERSION.encode())


@attrs.frozen
class UpgradeRequest:
    """A valid websocket upgrade request: its headers (names lower-cased, the first value of each), the
    subprotocols it proposes, its key, and the bytes the client sent after it."""

    headers: Mapping[str, str]
    subprotocols: tuple[str, ...]
    key: bytes
    after_head: bytes

    @classmethod
    def parse(cls, head: RequestHead) -> UpgradeRequest | tuple[int, str, list[tuple[bytes, bytes]]]:
        """The request, or why it is refused: an HTTP status, a message and headers (what wsproto refuses)."""
        headers = head.headers
        if head.method != "GET":
            return 400, "Request method must be GET", []
        if "upgrade" not in _tokens(headers.get("connection", "")):
            return 400, "Missing header, 'Connection: Upgrade'", []
        version = headers.get("sec-websocket-version")
        if version != WEBSOCKET_VERSION:
            return 426 if version else 400, "Missing header, 'Sec-WebSocket-Version'", [_VERSION_HEADER]
        key = headers.get("sec-websocket-key")
        if key is None:
            return 400, "Missing header, 'Sec-WebSocket-Key'", []
        if headers.get("upgrade", "").lower() != "websocket":
            return 400, "Missing header, 'Upgrade: websocket'", []
        if "host" not in headers:
            return 400, "Missing header, 'Host'", []
        raw_head, _, after_head = head.raw.partition(_END_OF_HEAD)
        subprotocols: list[str] = []
        if "sec-websocket-protocol" in headers:  # every such header counts, not only the first
            for line in raw_head.decode("latin-1").split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "sec-websocket-protocol":
                    subprotocols += [token.strip() for token in value.split(",") if token.strip()]
        return cls(headers=headers, subprotocols=tuple(subprotocols), key=key.encode("latin-1"), after_head=after_head)


class MessageSocket(Protocol):
    """What the service needs of an accepted-or-not websocket: a :class:`ServerWebSocket`, or an ASGI server's
    (:mod:`yao_actors.aio.asgi`). ``get_message``, ``send_messages`` and ``aclose`` as :class:`ServerWebSocket`'s."""

    @property
    def awaiting_pong(self) -> bool: ...

    async def accept(self, request: UpgradeRequest, subprotocol: str | None) -> None: ...

    async def reject(
        self, status: int, *, extra_headers: Sequence[tuple[bytes, bytes]] = (), body: bytes = b""
    ) -> None: ...

    async def get_message(self, deadline: float = math.inf) -> str | bytes | None: ...

    async def send_messages(self, messages: Sequence[str | bytes]) -> None: ...

    async def ping(self) -> None: ...

    async def aclose(self, code: int, reason: str | None) -> None: ...


def _tokens(value: str) -> list[str]:
    """A comma-separated header's tokens, lower-cased."""
    return [token.strip().lower() for token in value.split(",")]


class ServerWebSocket:
    """One server websocket over ``stream`` (a TCP connection the caller owns and closes).

    One task reads (:meth:`handshake`, then :meth:`get_message`, then :meth:`aclose`); any task may write.
    What the reader sends itself (a pong, the answer to the client's close, the close frame of a broken rule)
    must go out within ``reply_timeout`` seconds, or the client is taken as gone (1006): a client that sends
    and never reads cannot hold the reader.
    """

    def __init__(self, stream: trio.abc.Stream, *, max_message_size: int, reply_timeout: float = math.inf) -> None:
        self._stream = stream
        self._max_message_size = max_message_size
        self._reply_timeout = reply_timeout
        self._protocol = Connection(ConnectionType.SERVER)
        self._sending = trio.StrictFIFOLock()
        self._parts: list[str | bytes | bytearray] = []
        self._size = 0
        #: Why the connection ended (``None`` while it is open); set before the close frame goes out.
        self.closed: CloseReason | None = None
        #: A ping went out and no pong has come back since.
        self.awaiting_pong = False

    # ------------------------------------------------------------------ the opening handshake

    async def handshake(self, head: RequestHead) -> UpgradeRequest | None:
        """Check the upgrade request the gate read (RFC 6455 §4.2.1, as wsproto checks it); ``None`` when it is not
        a valid one, after answering it 400 (426 for another websocket version).

        Bytes after the request head (frames the client sent at once) are read after :meth:`accept`.
        """
        request = UpgradeRequest.parse(head)
        if isinstance(request, UpgradeRequest):
            return request
        status, message, headers = request
        await self.reject(status, extra_headers=headers, body=message.encode() + b"\n")
        return None

    async def accept(self, request: UpgradeRequest, subprotocol: str | None) -> None:
        """Accept the upgrade (selecting ``subprotocol``, no extension)."""
        lines = [
            b"HTTP/1.1 101 Switching Protocols",
            b"upgrade: websocket",
            b"connection: Upgrade",
            b"sec-websocket-accept: " + generate_accept_token(request.key),
        ]
        if subprotocol is not None:
            lines.append(b"sec-websocket-protocol: " + subprotocol.encode())
        await self._write(b"\r\n".join(lines) + b"\r\n\r\n")
        if request.after_head:
            self._protocol.receive_data(request.after_head)

    async def reject(
        self, status: int, *, extra_headers: Sequence[tuple[bytes, bytes]] = (), body: bytes = b""
    ) -> None:
        """Refuse the upgrade with an HTTP ``status`` and ``body``."""
        lines = [
            f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}".encode(),
            *(name + b": " + value for name, value in extra_headers),
            b"content-type: text/plain; charset=utf-8",
            b"content-length: " + str(len(body)).encode(),
            b"connection: close",
        ]
        self.closed = CloseReason(ABNORMAL_CLOSURE, "rejected")
        await self._write(b"\r\n".join(lines) + b"\r\n\r\n" + body)

    # ------------------------------------------------------------------ reading

    async def get_message(self, deadline: float = math.inf) -> str | bytes | None:
        """The next message (``bytes``: a binary one), or ``None`` once ``deadline`` passes with none complete.

        Only waiting for the socket is bounded by ``deadline``: a pong, the answer to the client's close and
        the close frame of a broken rule go out whole. Raises ``ConnectionClosed`` once the connection ends.
        """
        protocol = self._protocol
        while True:
            for event in protocol.events():
                if isinstance(event, TextMessage | BytesMessage):
                    message = await self._collect(event.data, event.message_finished)
                    if message is not None:
                        return message
                elif isinstance(event, Ping):
                    await self._reply(protocol.send(event.response()))
                elif isinstance(event, Pong):
                    self.awaiting_pong = False
                elif isinstance(event, CloseConnection):
                    await self._closed_by(event)
                if self.closed is not None:
                    raise ConnectionClosed(self.closed)
            if deadline == math.inf:
                data = await self._receive()
            else:
                with trio.move_on_at(deadline) as waited:
                    data = await self._receive()
                if waited.cancelled_caught:
                    return None
            if not data:
                self._dropped()
                raise ConnectionClosed(self.closed)
            protocol.receive_data(data)

    async def _receive(self) -> bytes:
        """Bytes from the socket; empty once the client is gone."""
        try:
            data = await self._stream.receive_some(RECEIVE_BYTES)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return b""
        return data if isinstance(data, bytes) else bytes(data)

    async def _collect(self, data: str | bytes | bytearray, finished: bool) -> str | bytes | None:
        """Add a fragment; the whole message once ``finished``. One too long closes the connection (1009)."""
        size = self._size + len(data)
        if size > self._max_message_size:
            self._parts, self._size = [], 0
            reason = f"Exceeded maximum message size: {self._max_message_size} bytes"
            await self._close(MESSAGE_TOO_BIG, reason, reply=True)
            return None
        if finished and not self._parts:
            return data if isinstance(data, str | bytes) else bytes(data)
        self._parts.append(data)
        self._size = size
        if not finished:
            return None
        parts, self._parts, self._size = self._parts, [], 0
        return "".join(parts) if isinstance(data, str) else b"".join(parts)  # type: ignore[arg-type]

    async def _closed_by(self, event: CloseConnection) -> None:
        """The client closed (answer it), broke the protocol (wsproto's code and reason), or dropped (1006)."""
        state = self._protocol.state
        if state is ConnectionState.REMOTE_CLOSING:
            self.closed = CloseReason(event.code, event.reason)
            await self._reply(self._protocol.send(event.response()))
        elif state is ConnectionState.OPEN:  # a frame broke the protocol: wsproto says how
            await self._close(event.code, event.reason, reply=True)
        else:
            self.closed = self.closed or CloseReason(event.code, event.reason)

    def _dropped(self) -> None:
        """The client went away without a closing handshake."""
        if self.closed is None:
            self.closed = CloseReason(ABNORMAL_CLOSURE, None)

    # ------------------------------------------------------------------ writing

    async def send_messages(self, messages: Sequence[str | bytes]) -> None:
        """Send ``messages`` in order in one socket write, each its own text message (``bytes``: UTF-8 text).

        Raises ``ConnectionClosed`` once the connection is closing, trio's ``BrokenResourceError`` when the
        client is gone; waits (and checkpoints) while the socket's buffer is full.
        """
        if self.closed is not None:
            raise ConnectionClosed(self.closed)
        parts: list[bytes] = []
        for message in messages:
            parts.extend(text_frame(message))
        if not await self._write(b"".join(parts), while_open=True):
            raise ConnectionClosed(self.closed)

    async def ping(self) -> None:
        """Send a ping; :attr:`awaiting_pong` until the pong comes back (read by :meth:`get_message`)."""
        if self.closed is not None:
            raise ConnectionClosed(self.closed)
        self.awaiting_pong = True
        await self._write(self._protocol.send(Ping()), while_open=True)

    async def _reply(self, data: bytes) -> None:
        """Write what the reader answers, within ``reply_timeout``; ``ConnectionClosed`` (1006) if it cannot."""
        with trio.move_on_after(self._reply_timeout):
            await self._write(data)
            return
        self._dropped()
        raise ConnectionClosed(self.closed)

    async def _write(self, data: bytes, *, while_open: bool = False) -> bool:
        """Write ``data`` whole (writes never interleave); with ``while_open``, not once closing (``False``).

        A free lock is taken without a trip through the scheduler (the write itself has one).
        """
        try:
            self._sending.acquire_nowait()
        except trio.WouldBlock:
            await self._sending.acquire()
        try:
            if while_open and self.closed is not None:
                return False
            await self._stream.send_all(data)
            return True
        finally:
            self._sending.release()

    # ------------------------------------------------------------------ closing

    async def _close(self, code: int, reason: str | None, *, reply: bool = False) -> None:
        """Begin the closing handshake: record why, send the close frame (once; ``reply``: within the reply
        timeout)."""
        if self._protocol.state is not ConnectionState.OPEN:
            self.closed = self.closed or CloseReason(code, reason)
            return
        self.closed = CloseReason(code, reason)
        frame = self._protocol.send(CloseConnection(code=code, reason=reason))
        await (self._reply(frame) if reply else self._write(frame))

    async def aclose(self, code: int, reason: str | None) -> None:
        """Close with ``code`` and ``reason``, then read (discarding messages) until the client answers or leaves.

        Does not close the stream (its owner does); bound it with a timeout.
        """
        try:
            await self._close(code, reason)
            while self._protocol.state is ConnectionState.LOCAL_CLOSING:
                data = await self._receive()
                if not data:
                    return
                self._protocol.receive_data(data)
                for _ in self._protocol.events():
                    pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._dropped()

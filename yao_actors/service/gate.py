"""The door of every TCP connection: plain HTTP requests go to the routes, websocket upgrades to the handshake.

The service reads the request head itself first (:func:`read_head`). A plain request goes on to
:mod:`yao_actors.service.http` (the page, ``POST /agui``, 404 elsewhere); an upgrade goes on to
:class:`~yao_actors.service.websocket.ServerWebSocket` with the bytes already read, so one port serves both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs
import trio

#: The largest request head accepted (request line and headers).
MAX_HEAD_BYTES: Final = 16 * 1024
_END_OF_HEAD: Final = b"\r\n\r\n"


@attrs.frozen
class RequestStart:
    """What every HTTP request starts with: method, target and headers (names lower-case, first value kept)."""

    method: str
    target: str
    headers: Mapping[str, str]

    @property
    def path(self) -> str:
        """The target without its query string."""
        return self.target.split("?", 1)[0]


@attrs.frozen
class RequestHead(RequestStart):
    """The parsed head of an HTTP request, and every byte read so far (``raw``) for replay."""

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

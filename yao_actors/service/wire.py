"""A server's text frame, built directly: several of a run's events go out in one socket write.

:class:`~yao_actors.service.websocket.ServerWebSocket` frames a batch of messages ready together (a run's events
emitted together) itself and writes the bytes once. RFC 6455 §5.2: a server's text frames are unmasked, one
final frame per message; the front end never accepts an extension, so there is nothing else to apply. The
frames are byte for byte wsproto's; each message is still its own websocket message, a client cannot tell.
"""

from __future__ import annotations

from typing import Final

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

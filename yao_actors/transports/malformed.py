"""A server's message that cannot be parsed: the request it answers fails at once, said in one log line.

The MCP SDK parses each message whole (pydantic's JSON reader): a message nested deeper than that reader goes
(``structuredContent`` 900 levels deep), or one holding a lone surrogate escape (``"\\ud800"``), is not a message
to it. Its HTTP transports then answer the request the message answered with a JSON-RPC ``PARSE_ERROR`` (the POST
says which request it was). Over stdio nothing would: the line would be dropped and its call would wait out its
whole deadline. :func:`unparsed` does for a stdio line what the SDK does for an HTTP answer: when the line is a
response whose ``id`` can be read (its top level names it before ``result`` or ``error``, as every SDK writes it),
the request with that id gets a ``PARSE_ERROR`` now, whose ``data`` says what was wrong; the line itself is never
parsed into values.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Final

import mcp.types
import pydantic
from mcp.shared.message import SessionMessage

logger = logging.getLogger(__name__)

#: What a request answered by a message that cannot be parsed is told (the ``message`` of its ``PARSE_ERROR``).
MALFORMED: Final = "malformed answer from the server"

#: Bytes of a line looked at for its id (a JSON-RPC message names its id before its result).
SCANNED: Final = 65536
#: A JSON string literal, or one bracket.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[][{}]')
#: After a key: the colon, and a number or a string (the forms of a JSON-RPC id).
_ID_VALUE = re.compile(rb'\s*:\s*(-?\d+(?![\d.eE])|"[^"\\]*(?:\\.[^"\\]*)*")')
_KEY_COLON = re.compile(rb"\s*:")


def unparsed(line: bytes | bytearray, error: ValueError, server: str) -> SessionMessage | Exception:
    """What the session gets for ``line``, which did not parse (``error``): a ``PARSE_ERROR`` for the request it
    answers, or else ``error`` itself (the session drops it). Either way one WARNING line says so, for ``server``."""
    reason = _reason(error)
    request_id = _response_id(bytes(line))
    if request_id is None:
        logger.warning("server %s: a message that cannot be read was dropped: %s", server, reason)
        return error
    logger.warning("server %s: %s to request %r: %s", server, MALFORMED, request_id, reason)
    failure = mcp.types.ErrorData(code=mcp.types.PARSE_ERROR, message=MALFORMED, data=reason)
    return SessionMessage(mcp.types.JSONRPCError(jsonrpc="2.0", id=request_id, error=failure))


def _reason(error: ValueError) -> str:
    """What was wrong, in one line (the JSON reader's own words when the JSON itself could not be read)."""
    if isinstance(error, pydantic.ValidationError):
        first = error.errors(include_url=False, include_input=False)[0]
        if first["type"] == "json_invalid":
            return str(first["msg"])
    return "not a JSON-RPC message"


def _response_id(line: bytes) -> int | str | None:
    """The ``id`` of a JSON-RPC response ``line`` (an object whose top level has ``id`` and then ``result`` or
    ``error``, and no ``method`` before), read without parsing its values and within its first :data:`SCANNED`
    bytes; ``None`` when it is not one or its id is not readable there."""
    depth = 0
    found: int | str | None = None
    for token in _TOKEN.finditer(line, 0, SCANNED):
        text = token.group()
        if text in (b"{", b"["):
            depth += 1
        elif text in (b"}", b"]"):
            depth -= 1
        elif depth == 1 and _KEY_COLON.match(line, token.end()):
            key = text[1:-1]
            if key == b"method":
                return None
            if key in (b"result", b"error"):
                return found
            if key == b"id" and (value := _ID_VALUE.match(line, token.end())) is not None:
                parsed = json.loads(value.group(1))
                found = parsed if isinstance(parsed, int | str) else None
    return None


__all__ = ["MALFORMED", "unparsed"]

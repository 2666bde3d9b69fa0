"""The MCP SDK's own error reports about a connection, said in one line of ours with the server's id.

The SDK's HTTP transports log what goes wrong under them with ``logger.exception`` — a server whose SSE stream dies
gives ~60 lines of traceback at ERROR (``Error in sse_reader``), with no word of which server it was. While a server
actor's connection is open (:func:`sdk_errors_in_one_line`), such a record of ``mcp.client.sse`` or
``mcp.client.streamable_http`` at WARNING or above is replaced by one WARNING line of this module's logger, naming the
server (``server=`` field) and the exception in one line; the traceback goes to DEBUG. What the failure does to the
connection is the :class:`~yao_actors.transports.link.Link`'s to report, as for every transport. Records the SDK makes
for anyone else (an application using its clients directly) pass untouched.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

logger = logging.getLogger(__name__)

#: The SDK loggers whose error reports are about one connection of ours (its OAuth flow's included).
SDK_TRANSPORT_LOGGERS: Final = ("mcp.client.sse", "mcp.client.streamable_http", "mcp.client.auth.oauth2")

_server: contextvars.ContextVar[str | None] = contextvars.ContextVar("yao_actors_sdk_server", default=None)


@contextmanager
def sdk_errors_in_one_line(server: str) -> Iterator[None]:
    """For the block (and the tasks started in it), the SDK's error reports are ``server``'s, in one line."""
    token = _server.set(server)
    try:
        yield
    finally:
        _server.reset(token)


def one_line(error: BaseException) -> str:
    """An exception as ``Type: message``, on one line."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class _OneLine(logging.Filter):
    """Replaces an SDK error report made for one of our connections by one line of ours (see the module)."""

    def filter(self, record: logging.LogRecord) -> bool:
        server = _server.get()
        if server is None or record.levelno < logging.WARNING:
            return True
        error = record.exc_info[1] if record.exc_info else None
        said = " ".join(record.getMessage().split())
        summary = f"{said}: {one_line(error)}" if error is not None else said
        extra = {"server": server, "sdk_logger": record.name}
        logger.warning("server %r: the MCP SDK reports: %s", server, summary, extra=extra)
        if error is not None:
            logger.debug("server %r: the MCP SDK's report in full", server, exc_info=record.exc_info, extra=extra)
        return False


_ONE_LINE: Final = _OneLine()


def install() -> None:
    """Put the filter on the SDK's transport loggers (once; what it does is bounded by the context variable)."""
    for name in SDK_TRANSPORT_LOGGERS:
        sdk_logger = logging.getLogger(name)
        if _ONE_LINE not in sdk_logger.filters:
            sdk_logger.addFilter(_ONE_LINE)

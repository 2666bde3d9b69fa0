"""Turn a ``ServerSpec`` into a connected ``mcp.Client``, handling the SDK traps once (DESIGN §8).

``open_client(spec, link=...)`` is the one way a server actor connects. It yields
an entered ``mcp.Client`` and reports, through the :class:`Link` it was given,
when the connection is lost as a whole and why:

- **stdio** (:mod:`.stdio`): a Trio transport of our own that owns the child
  process, bounds its lines, keeps its stderr tail and stops it for sure.
- **streamable HTTP** (:mod:`.http`): the SDK's client over an ``httpx2``
  transport that fails one request, not the whole session, on a network error.
- **SSE** (:mod:`.sse`): the SDK's HTTP+SSE client over the same transport.
- **in-memory**: ``mcp.Client(server_object)``; a tool calling ``sys.exit()`` loses the session
  (:class:`InProcessServerExit`), never the process.

The client is pinned to ``mode="legacy"`` (the initialize handshake): no 10 s
``server/discover`` probe can stall a start, and cancellation
(``notifications/cancelled``), progress and ``notifications/tools/list_changed``
work the same way on every transport. The response cache is off: the actor keeps
the catalog itself.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

import attrs
import mcp
import mcp.types
from mcp.client.session import MessageHandlerFnT

from yao_actors.errors import exception_leaves
from yao_actors.specs import HttpTransport, InMemoryTransport, ServerSpec, SseTransport, StdioTransport, Transport
from yao_actors.transports.http import TRANSPORT_FAILURE, ResilientTransport, open_http_transport
from yao_actors.transports.link import Link
from yao_actors.transports.sdk_errors import install as install_sdk_filter
from yao_actors.transports.sdk_errors import sdk_errors_in_one_line
from yao_actors.transports.sse import open_sse_transport
from yao_actors.transports.stdio import DEFAULT_LINE_LIMITS, LineLimits, open_stdio_transport, stop_process


def _client_info() -> mcp.types.Implementation:
    try:
        version = importlib.metadata.version("yao-actors")
    except importlib.metadata.PackageNotFoundError:
        version = "0+unknown"
    return mcp.types.Implementation(name="yao-actors", version=version)


CLIENT_INFO = _client_info()


class Connector(Protocol):
    """How a server actor reaches its server: :func:`open_client`, or a test's own (like httpx's ``transport=``)."""

    def __call__(
        self, spec: ServerSpec, *, link: Link, message_handler: MessageHandlerFnT | None = None
    ) -> AbstractAsyncContextManager[mcp.Client]: ...


@asynccontextmanager
async def open_client(
    spec: ServerSpec,
    *,
    link: Link,
    message_handler: MessageHandlerFnT | None = None,
    line_limits: LineLimits = DEFAULT_LINE_LIMITS,
) -> AsyncIterator[mcp.Client]:
    """Connect to ``spec``'s server; yield the entered client. Enter and exit in one task.

    ``line_limits`` bound the lines of a stdio server (``functools.partial`` it into a connector to change them).
    The SDK's own error reports about the connection are said in one line with the server's id
    (:mod:`.sdk_errors`).
    """
    install_sdk_filter()
    with sdk_errors_in_one_line(spec.id):
        async with _open_transport(spec.transport, link, line_limits) as target:
            client = mcp.Client(
                target,
                mode="legacy",
                client_info=CLIENT_INFO,
                cache=None,
                message_handler=message_handler,
            )
            async with client:
                yield client


@asynccontextmanager
async def _open_transport(transport: Transport, link: Link, line_limits: LineLimits) -> AsyncIterator[Any]:
    """What ``mcp.Client`` connects to: transport streams, or the in-process server itself."""
    match transport:
        case StdioTransport():
            async with open_stdio_transport(transport, link, line_limits) as streams:
                yield _Streams(streams)
        case HttpTransport():
            async with open_http_transport(transport, link) as streams:
                yield _Streams(streams)
        case SseTransport():
            async with open_sse_transport(transport, link) as streams:
                yield _Streams(streams)
        case InMemoryTransport():
            try:
                yield transport.server
            except* SystemExit as group:
                # A tool of the in-process server called sys.exit(): its session is lost (the actor
                # restarts it, as it would a stdio server that exited), the service goes on.
                codes = ", ".join(repr(leaf.code) for leaf in exception_leaves(group))
                link.mark_lost(f"a tool of the in-process server called sys.exit({codes})")
                raise InProcessServerExit(link.reason) from None


class InProcessServerExit(Exception):
    """An in-process server's tool called ``sys.exit()``: its session ended; the process goes on."""


StreamPair = tuple[Any, Any]
"""A session's (read, write) streams, as ``mcp.Client`` takes them (the SDK names this type only privately)."""


@attrs.frozen
class _Streams(AbstractAsyncContextManager[StreamPair]):
    """An already open pair of streams, as the ``Transport`` context manager ``mcp.Client`` expects.

    The streams' owner (``_open_transport``) closes them; entering and leaving this is free.
    """

    streams: StreamPair

    async def __aenter__(self) -> StreamPair:
        return self.streams

    async def __aexit__(self, *exc_info: object) -> None:
        return None


__all__ = [
    "CLIENT_INFO",
    "TRANSPORT_FAILURE",
    "Connector",
    "LineLimits",
    "Link",
    "ResilientTransport",
    "open_client",
    "open_stdio_transport",
    "stop_process",
]

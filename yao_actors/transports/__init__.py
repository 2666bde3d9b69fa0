"""Turn a ``ServerSpec`` into a connected ``mcp.Client``, handling the SDK's traps once, here.

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

The protocol is the spec's ``protocol``: ``"legacy"`` (the initialize handshake),
a stateless version pinned (``"2026-07-28"``), or ``"auto"``: ``server/discover``
bounded by :data:`DISCOVER_TIMEOUT` (not the SDK's fixed 10 s, so no start stalls),
then the handshake (:mod:`.session`: the SDK's client and session, subclassed where a server actor needs
them to differ). A discover result the actor kept from an earlier connection
(``prior_discover``) is adopted without asking again. The response cache is off:
the actor keeps the catalog itself.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

import attrs
import mcp
import mcp.types
from mcp.client.extension import ClientExtension, advertise
from mcp.client.session import ElicitationFnT, MessageHandlerFnT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from yao_actors.errors import exception_leaves
from yao_actors.specs import HttpTransport, InMemoryTransport, ServerSpec, SseTransport, StdioTransport
from yao_actors.transports.child_process import stop_process
from yao_actors.transports.http import TRANSPORT_FAILURE, ResilientTransport, open_http_transport
from yao_actors.transports.link import Link
from yao_actors.transports.sdk_errors import install as install_sdk_filter
from yao_actors.transports.sdk_errors import sdk_errors_in_one_line
from yao_actors.transports.session import DISCOVER_TIMEOUT, UI_EXTENSION, UI_SETTINGS, GatedClient
from yao_actors.transports.sse import open_sse_transport
from yao_actors.transports.stdio import DEFAULT_LINE_LIMITS, LineLimits, open_stdio_transport


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
        self,
        spec: ServerSpec,
        *,
        link: Link,
        message_handler: MessageHandlerFnT | None = None,
        elicitation_callback: ElicitationFnT | None = None,
        prior_discover: mcp.types.DiscoverResult | None = None,
        extensions: Sequence[ClientExtension] = (),
    ) -> AbstractAsyncContextManager[mcp.Client]: ...


@asynccontextmanager
async def open_client(
    spec: ServerSpec,
    *,
    link: Link,
    message_handler: MessageHandlerFnT | None = None,
    elicitation_callback: ElicitationFnT | None = None,
    prior_discover: mcp.types.DiscoverResult | None = None,
    line_limits: LineLimits = DEFAULT_LINE_LIMITS,
    extensions: Sequence[ClientExtension] = (),
) -> AsyncIterator[mcp.Client]:
    """Connect to ``spec``'s server in its ``protocol``; yield the entered client. Enter and exit in one task.

    ``elicitation_callback`` answers a handshake-era server's ``elicitation/create`` (and the input requests
    the SDK's own driver would dispatch); with it the client declares the elicitation capability.
    ``prior_discover`` is a discover result of an earlier connection to the same server, adopted as it is.
    ``extensions`` are the client extensions the client declares (the tasks extension, when the server's calls
    may become tasks). ``line_limits`` bound the lines of a stdio server (``functools.partial`` it into a connector to change them).
    The SDK's own error reports about the connection are said in one line with the server's id
    (:mod:`.sdk_errors`).
    """
    install_sdk_filter()
    mode, prior = connect_mode(spec.protocol, prior_discover)
    with sdk_errors_in_one_line(spec.id):
        async with _open_transport(spec, link, line_limits) as target:
            client = GatedClient(
                target,
                mode=mode,
                prior_discover=prior,
                client_info=CLIENT_INFO,
                cache=None,
                message_handler=message_handler,
                elicitation_callback=elicitation_callback,
                extensions=[*extensions, *([advertise(UI_EXTENSION, UI_SETTINGS)] if spec.apps else [])] or None,
            )
            async with client:
                yield client


def connect_mode(
    protocol: str, prior_discover: mcp.types.DiscoverResult | None
) -> tuple[str, mcp.types.DiscoverResult | None]:
    """The SDK's ``mode=`` and ``prior_discover=`` for a spec's ``protocol`` and a kept discover result.

    ``auto`` with a discover result kept pins the newest version both sides speak (no probe on a reconnect).
    """
    if protocol == "legacy":
        return "legacy", None
    if protocol == "auto":
        if prior_discover is None:
            return "auto", None
        mutual = [v for v in MODERN_PROTOCOL_VERSIONS if v in prior_discover.supported_versions]
        return (mutual[-1], prior_discover) if mutual else ("auto", None)
    return protocol, prior_discover


def is_modern(version: str | None) -> bool:
    """Whether a negotiated protocol version is a stateless one (``server/discover``, input rounds)."""
    return version in MODERN_PROTOCOL_VERSIONS


@asynccontextmanager
async def _open_transport(spec: ServerSpec, link: Link, line_limits: LineLimits) -> AsyncIterator[Any]:
    """What ``mcp.Client`` connects to: transport streams, or the in-process server itself."""
    match transport := spec.transport:
        case StdioTransport():
            async with open_stdio_transport(transport, link, line_limits, name=spec.id) as streams:
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
    "DISCOVER_TIMEOUT",
    "TRANSPORT_FAILURE",
    "Connector",
    "LineLimits",
    "Link",
    "ResilientTransport",
    "connect_mode",
    "is_modern",
    "open_client",
    "open_stdio_transport",
    "stop_process",
]

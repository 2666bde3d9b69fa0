"""The streamable HTTP transport: ``streamable_http_client`` over an ``httpx2`` client that fails one request, not the session.

The MCP SDK lets a raised transport error escape and fail the whole session
(python-sdk #915); :class:`ResilientTransport` answers network errors with a
``503`` instead, so one failed request fails one call. The session failing as a
whole is still detected: a refused connection, or ``404`` for a session the
server no longer knows (it restarted), loses the link. Bodies left midway are unwound when closed
(:mod:`yao_actors.transports.http_bodies`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp.client.streamable_http import streamable_http_client

from yao_actors.specs import HttpTransport
from yao_actors.transports.http_bodies import UnwindingTransport
from yao_actors.transports.link import Link

#: JSON-RPC error code of the answer :class:`ResilientTransport` makes up for a request the network failed
#: (in the range JSON-RPC leaves to implementations, and used by neither MCP nor its SDK).
TRANSPORT_FAILURE = -32050
#: HTTP timeouts: a response stream may stay open while a tool runs; call deadlines are the actor's.
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


@asynccontextmanager
async def open_http_transport(transport: HttpTransport, link: Link) -> AsyncIterator[tuple[Any, Any]]:
    """The MCP streams of a streamable HTTP session with ``transport.url``."""
    async with (
        httpx2.AsyncClient(
            headers=dict(transport.headers),
            timeout=HTTP_TIMEOUT,
            auth=transport.http_auth,
            transport=resilient_transport(link),
        ) as http_client,
        streamable_http_client(transport.url, http_client=http_client) as streams,
    ):
        yield streams


def resilient_transport(link: Link) -> ResilientTransport:
    """The transport of an MCP session's HTTP client: a network error fails one request
    (:class:`ResilientTransport`), and a response body closed before its end is unwound at once
    (:mod:`yao_actors.transports.http_bodies`), not left to the garbage collector."""
    return ResilientTransport(UnwindingTransport(httpx2.AsyncHTTPTransport()), link)


class ResilientTransport(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport that answers network errors with ``503`` instead of raising.

    The MCP SDK lets a raised transport error escape and fail the whole session;
    a ``503`` fails only the request it answers. Its body is a JSON-RPC error with
    code :data:`TRANSPORT_FAILURE`, which the SDK hands to the caller as it is, so
    the caller can tell the network failing a request from the server answering
    one with an error. A refused connection, or ``404``
    for the session the client holds, still marks ``link`` lost: the server is
    gone or has forgotten the session, and only a new connection can help.
    """

    def __init__(self, inner: httpx2.AsyncBaseTransport, link: Link) -> None:
        self._inner = inner
        self._link = link

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            response = await self._inner.handle_async_request(request)
        except httpx2.TransportError as exc:
            if isinstance(exc, httpx2.ConnectError):
                self._link.mark_lost(f"cannot connect to {request.url}: {type(exc).__name__}")
            error = {"code": TRANSPORT_FAILURE, "message": f"{type(exc).__name__}: {exc}"}
            return httpx2.Response(503, request=request, json={"jsonrpc": "2.0", "id": None, "error": error})
        if response.status_code == 404 and "mcp-session-id" in request.headers:
            self._link.mark_lost("the server no longer knows this session (it restarted or expired it)")
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()

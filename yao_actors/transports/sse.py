"""The HTTP+SSE transport (the MCP protocol revision before streamable HTTP), through the MCP SDK's ``sse_client``.

Servers that Claude Desktop, Cursor or Cline files list with ``"type": "sse"``
still speak it. Requests are POSTed through the same :class:`ResilientTransport`
as streamable HTTP, so a network error fails one request, not the session; the
event stream ending (the server went away) loses the link, so the actor fails
what was in flight and reconnects.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
from mcp.client.sse import sse_client
from mcp.shared.message import SessionMessage

from yao_actors.specs import SseTransport
from yao_actors.transports.http import HTTP_TIMEOUT, resilient_transport
from yao_actors.transports.link import Link
from yao_actors.transports.sdk_errors import one_line


@asynccontextmanager
async def open_sse_transport(transport: SseTransport, link: Link) -> AsyncIterator[tuple[Any, Any]]:
    """The MCP streams of an SSE session with ``transport.url``."""

    def http_client(
        headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: httpx2.Auth | None = None
    ) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            headers=headers,
            timeout=timeout or HTTP_TIMEOUT,
            auth=auth,
            transport=resilient_transport(link),
        )

    async with sse_client(
        transport.url,
        headers=dict(transport.headers),
        timeout=HTTP_TIMEOUT.connect or 30.0,
        sse_read_timeout=HTTP_TIMEOUT.read or 300.0,
        httpx_client_factory=http_client,
        auth=transport.http_auth,
    ) as (events, requests):
        forward, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_watch_events, events, forward, link)
            try:
                yield read, requests
            finally:
                tasks.cancel_scope.cancel()
                await read.aclose()


async def _watch_events(events: Any, forward: anyio.abc.ObjectSendStream[Any], link: Link) -> None:
    """Pass the server's messages on; when its event stream ends, the server is gone (and the last error the SDK
    passed on, if any, says why)."""
    failure: BaseException | None = None
    async with forward:
        try:
            async for message in events:
                if isinstance(message, BaseException):
                    failure = message
                await forward.send(message)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return
    link.mark_lost("the server's event stream ended" + (f": {one_line(failure)}" if failure is not None else ""))

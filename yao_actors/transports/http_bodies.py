"""HTTP response bodies that leave nothing for the garbage collector when they are closed before their end.

``httpx2`` reads a body through a chain of async generators, and its innermost link
(``AsyncResponseStream.__aiter__`` iterating httpcore2's ``HTTP11ConnectionByteStream.__aiter__``) is not
closed when the chain above it is: a body left midway (an SSE response the MCP SDK stops reading once its
answer came, a request cancelled, a session ending) keeps httpcore2's generator suspended until the garbage
collector finds it, and Trio reports it then as a ``ResourceWarning`` — at a random later moment, in whatever
code runs then. :func:`unwind` finishes such a generator on the spot; :class:`UnwindingTransport` gives every
response of a client a body that does so when it is closed (``response.aclose()``, which every caller of a
streamed response makes).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import suppress

import httpx2
import trio


async def unwind(parts: AsyncIterator[bytes]) -> None:
    """Finish ``parts`` from the inside: read on under a cancelled scope, so ``Cancelled`` is raised at the pending
    socket read of the innermost generator and unwinds every layer (closing it at a ``yield`` would unwind only
    the outermost one); then close it."""
    with trio.CancelScope() as unwinding, suppress(httpx2.HTTPError):
        unwinding.cancel()
        while await anext(parts, None) is not None:
            pass
    if isinstance(parts, AsyncGenerator):
        await parts.aclose()


class UnwoundBody(httpx2.AsyncByteStream):
    """``inner``, a response body, whose generators are finished (:func:`unwind`) when it is closed or its
    iteration is closed, read to its end or not."""

    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner
        self._parts: AsyncIterator[bytes] | None = None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        parts = self._parts = self._inner.__aiter__()
        try:
            async for part in parts:
                yield part
        finally:
            await unwind(parts)

    async def aclose(self) -> None:
        if self._parts is not None:
            await unwind(self._parts)
        await self._inner.aclose()


class UnwindingTransport(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport whose responses' bodies are :class:`UnwoundBody` (module docstring)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if isinstance(response.stream, httpx2.AsyncByteStream):
            response.stream = UnwoundBody(response.stream)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()

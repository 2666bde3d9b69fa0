"""The OAuth discovery documents of each server, fetched once per :data:`DISCOVERY_TTL` and shared by its principals.

Sending a principal to authorize (:mod:`yao_actors.auth.asking`) runs the SDK's discovery: the protected resource
metadata, then the authorization server's metadata, each a ``GET`` of a well-known document (a few URLs tried in
turn). They are the same for every principal of a server, so :class:`DiscoveryCache` keeps the answers (``200``,
and the ``404`` of a URL tried before the one that answers) per server and URL for :data:`DISCOVERY_TTL` seconds,
and its transport answers from them: a principal's first authorization costs the probe of the MCP server (and a
registration, when it has none) rather than every document again. A discovery that fails forgets the server's
answers (:meth:`DiscoveryCache.forget`): the next one asks afresh. Nothing else is cached (the probe, a
registration and the token endpoint go to the network each time).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import attrs
import httpx2
import trio

#: Seconds a server's discovery documents are answered from the cache.
DISCOVERY_TTL: Final = 600.0
#: The statuses of a discovery ``GET`` worth keeping: the document, or that it is not at this URL.
CACHED_STATUSES: Final = frozenset({200, 404})


@attrs.frozen
class _Answer:
    status: int
    headers: list[tuple[str, str]]
    content: bytes
    until: float


@attrs.define(eq=False)
class DiscoveryCache:
    """The discovery answers of each server (module docstring); time by ``clock`` (Trio's, by default)."""

    ttl: float = DISCOVERY_TTL
    clock: Callable[[], float] = trio.current_time
    _answers: dict[tuple[str, str], _Answer] = attrs.field(factory=dict)

    def transport(self, server: str, inner: httpx2.AsyncBaseTransport | None = None) -> httpx2.AsyncBaseTransport:
        """An ``httpx2`` transport for ``server``'s discovery: its ``GET``\\ s answered from here when kept."""
        return _CachingTransport(self, server, inner or httpx2.AsyncHTTPTransport())

    def forget(self, server: str) -> None:
        """Drop ``server``'s answers (its discovery failed: the next one fetches every document again)."""
        for key in [key for key in self._answers if key[0] == server]:
            del self._answers[key]

    def answer(self, server: str, url: str) -> _Answer | None:
        kept = self._answers.get((server, url))
        if kept is not None and self.clock() >= kept.until:
            del self._answers[server, url]
            return None
        return kept

    def keep(self, server: str, url: str, response: httpx2.Response) -> None:
        self.forget_expired()
        headers = [(k, v) for k, v in response.headers.items() if k.lower() == "content-type"]
        self._answers[server, url] = _Answer(response.status_code, headers, response.content, self.clock() + self.ttl)

    def forget_expired(self) -> None:
        now = self.clock()
        for key in [key for key, kept in self._answers.items() if now >= kept.until]:
            del self._answers[key]


@attrs.frozen
class _CachingTransport(httpx2.AsyncBaseTransport):
    cache: DiscoveryCache
    server: str
    inner: httpx2.AsyncBaseTransport

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method != "GET":
            return await self.inner.handle_async_request(request)
        url = str(request.url)
        kept = self.cache.answer(self.server, url)
        if kept is not None:
            await trio.lowlevel.checkpoint()
            return httpx2.Response(kept.status, headers=kept.headers, content=kept.content, request=request)
        response = await self.inner.handle_async_request(request)
        if response.status_code in CACHED_STATUSES:
            await response.aread()
            self.cache.keep(self.server, url, response)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()

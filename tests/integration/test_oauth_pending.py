"""Sending principals to authorize a real authorization server (the SDK's, in a process on loopback): a principal's
next run is given its pending authorization again, with no request at all; another principal's discovery is
answered from the server's cached documents (only the probe and its registration go out); a discovery that fails
forgets them."""

from __future__ import annotations

import attrs
import httpx2
import pytest
import trio
import trio.testing

from tests.integration.oauth_support import open_oauth_server
from yao_actors.auth.asking import begin_authorization
from yao_actors.auth.discovery import DiscoveryCache
from yao_actors.auth.states import AuthorizationStates
from yao_actors.auth.vault import StoreTokenStorage, open_vault, principal_identity
from yao_actors.errors import AuthorizationUnavailable
from yao_actors.specs import OAuthSpec
from yao_actors.store import MemoryStore

GUARD = 30
REDIRECT = "http://127.0.0.1:1/oauth/callback"


@attrs.define
class Sent(httpx2.AsyncBaseTransport):
    """The network, counting what goes out to it, by method."""

    inner: httpx2.AsyncBaseTransport = attrs.field(factory=httpx2.AsyncHTTPTransport)
    methods: list[str] = attrs.field(factory=list)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.methods.append(request.method)
        return await self.inner.handle_async_request(request)


@attrs.define(eq=False)
class CountedCache(DiscoveryCache):
    """The discovery cache, over a network that counts what reaches it."""

    network: Sent = attrs.field(factory=Sent)

    def transport(self, server: str, inner: httpx2.AsyncBaseTransport | None = None) -> httpx2.AsyncBaseTransport:
        return super().transport(server, self.network)


async def test_pending_authorizations_are_given_again_and_discovery_is_shared() -> None:
    store = MemoryStore()
    vault = open_vault(store, None)
    states = AuthorizationStates(store.oauth_tokens(), vault.cipher)
    cache = CountedCache()

    async def ask(url: str, principal: str) -> tuple[str, list[str]]:
        cache.network.methods.clear()
        storage = StoreTokenStorage(vault, "hub", principal_identity(principal))
        given = await begin_authorization(
            url, OAuthSpec(identity="principal"), storage, states, principal=principal, redirect_uri=REDIRECT,
            discovery=cache,
        )  # fmt: skip
        return given, list(cache.network.methods)

    with trio.fail_after(GUARD):
        async with open_oauth_server() as server:
            alice, alice_sent = await ask(server.url, "alice")
            again, again_sent = await ask(server.url, "alice")
            bob, bob_sent = await ask(server.url, "bob")
        with pytest.raises(AuthorizationUnavailable):  # the server is gone: the discovery fails
            await ask(server.url, "carol")
    assert alice_sent.count("GET") >= 2  # the resource's metadata, the authorization server's
    assert (again, again_sent) == (alice, [])
    assert bob != alice
    assert bob_sent == ["POST", "POST"]  # the probe, and bob's registration: every document from the cache
    assert not [key for key in cache._answers if key[0] == "hub"]  # forgotten when carol's discovery failed


async def test_cached_discovery_documents_expire(autojump_clock: trio.testing.MockClock) -> None:
    cache = DiscoveryCache(ttl=600)
    cache.keep("hub", "http://as/.well-known/x", httpx2.Response(200, content=b"{}"))
    await trio.sleep(599)
    assert cache.answer("hub", "http://as/.well-known/x") is not None
    await trio.sleep(1)
    assert cache.answer("hub", "http://as/.well-known/x") is None

"""What a slow or noisy peer does to the OAuth flows' network steps (issue 32 review): an MCP or authorization
server that answers a byte at a time — each read well within the HTTP client's own timeout — cannot hold the run
asking for the URL, nor the browser's ``/oauth/callback`` request, past :data:`DISCOVERY_TIMEOUT` /
:data:`EXCHANGE_TIMEOUT` (``within``); the CLI login's loopback listener survives more redirects than it keeps.
Real socket servers and clients on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import httpx2
import pytest
import trio

from yao_actors.auth.asking import begin_authorization
from yao_actors.auth.callback import complete_authorization
from yao_actors.auth.login import open_callback
from yao_actors.auth.states import AuthorizationStates
from yao_actors.auth.vault import StoreTokenStorage, open_vault, principal_identity
from yao_actors.errors import AuthorizationUnavailable
from yao_actors.specs import OAuthSpec
from yao_actors.store import MemoryStore

#: The whole step's deadline in these tests (seconds); each byte comes well within it.
DEADLINE = 1.0
#: Seconds between the slow server's bytes.
DRIBBLE = 0.1
#: A test that hangs fails here instead (the bug this file guards against is a hang).
GUARD = 20


async def _dribble(stream: trio.SocketStream) -> None:
    """Read the request head, then answer a long body one byte at a time, forever."""
    received = b""
    with trio.move_on_after(5):
        while b"\r\n\r\n" not in received:
            data = await stream.receive_some(65536)
            if not data:
                return
            received += data
    try:
        await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n")
        while True:
            await stream.send_all(b" ")
            await trio.sleep(DRIBBLE)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


@asynccontextmanager
async def slow_server() -> AsyncIterator[str]:
    """The base URL of a loopback HTTP server that answers every request a byte at a time."""
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, _dribble, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        yield f"http://127.0.0.1:{port}"
        nursery.cancel_scope.cancel()


async def test_a_discovery_answered_a_byte_at_a_time_ends_at_its_deadline() -> None:
    store = MemoryStore()
    vault = open_vault(store, None)
    states = AuthorizationStates(store.oauth_tokens(), vault.cipher)
    storage = StoreTokenStorage(vault, "hub", principal_identity("alice"))
    with trio.fail_after(GUARD):
        async with slow_server() as base:
            with pytest.raises(AuthorizationUnavailable, match=r"server 'hub'.*within 1s"):
                await begin_authorization(
                    f"{base}/mcp",
                    OAuthSpec(identity="principal"),
                    storage,
                    states,
                    principal="alice",
                    redirect_uri="http://127.0.0.1:1/oauth/callback",
                    within=DEADLINE,
                )
    assert await store.oauth_tokens().keys() == []  # nothing kept: no state, no registration


async def test_a_token_exchange_answered_a_byte_at_a_time_ends_at_its_deadline() -> None:
    store = MemoryStore()
    vault = open_vault(store, None)
    states = AuthorizationStates(store.oauth_tokens(), vault.cipher)
    with trio.fail_after(GUARD):
        async with slow_server() as base:
            record = {
                "principal": "alice",
                "server": "hub",
                "code_verifier": "v" * 43,
                "redirect_uri": "http://127.0.0.1:1/oauth/callback",
                "token_endpoint": f"{base}/token",
                "resource": None,
                "client_info": {"client_id": "c", "redirect_uris": ["http://127.0.0.1:1/oauth/callback"]},
                "metadata": None,
            }
            await states.put("s" * 43, record, server="hub", principal="alice", url=f"{base}/authorize", asked="-")
            with pytest.raises(AuthorizationUnavailable, match=r"server 'hub'.*token exchange within 1s"):
                await complete_authorization({"state": "s" * 43, "code": "the-code"}, states, vault, within=DEADLINE)
    assert await vault.keys() == []  # nothing stored, and the state was used up


async def test_the_login_listener_takes_more_redirects_than_it_keeps_without_failing() -> None:
    """``yao-actors auth login``'s loopback listener: a browser that reloads the redirect (or anything local
    requesting it) many times gets ``409`` past the first few, and the login still receives the first code."""
    with trio.fail_after(GUARD):
        async with open_callback() as callback:
            statuses = []
            async with httpx2.AsyncClient() as http:
                for n in range(8):
                    response = await http.get(callback.redirect_uri, params={"code": f"code-{n}", "state": "s"})
                    statuses.append(response.status_code)
            first = await callback.receive()
    assert statuses[0] == 200
    assert 409 in statuses
    assert first.code == "code-0"

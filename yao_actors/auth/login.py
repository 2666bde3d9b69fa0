"""A person logs in to a server behind OAuth: ``yao-actors auth login SERVER``, and ``status`` / ``logout``.

:func:`login` prints the authorization URL, listens on a loopback redirect URI
(``http://127.0.0.1:<port>/callback``, RFC 8252) for the code the person's browser brings back, and lets the
SDK's flow exchange it; the tokens go to the store, sealed (:mod:`.vault`), for the service to use. Then it
lists the server's tools with them, to show the login works. A redirect with an ``error``, or none within
``timeout`` seconds, fails the login and stores nothing.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from urllib.parse import parse_qs, urlsplit

import attrs
import h11
import trio
from mcp.shared.auth import AuthorizationCodeResult

from yao_actors.auth.flow import StoreOAuthProvider, with_http_auth
from yao_actors.auth.keys import oauth_of
from yao_actors.auth.vault import SERVICE_IDENTITY, StoreTokenStorage, TokenVault
from yao_actors.errors import AuthorizationError, ConfigError, YaoActorsError, exception_leaves
from yao_actors.specs import Config, ServerSpec
from yao_actors.tasks import open_owned_nursery
from yao_actors.transports import Link, open_client

#: What the person's browser shows once the code has come back.
DONE_PAGE = b"<!doctype html><title>yao-actors</title><p>Logged in. You may close this window.</p>\n"
#: Bytes of one request the callback listener reads at most.
MAX_REQUEST = 16384


@attrs.frozen
class Callback:
    """A loopback listener's redirect URI and the results its requests bring (a code, or an error text)."""

    redirect_uri: str
    results: trio.MemoryReceiveChannel[AuthorizationCodeResult | str]

    async def receive(self) -> AuthorizationCodeResult:
        result = await self.results.receive()
        if isinstance(result, str):
            raise AuthorizationError(f"the authorization server did not authorize: {result}")
        return result


@asynccontextmanager
async def open_callback(port: int = 0) -> AsyncIterator[Callback]:
    """Listen on ``127.0.0.1:port`` (``0``: any free port) for the redirect at ``/callback``."""
    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    bound = listeners[0].socket.getsockname()[1]
    send, receive = trio.open_memory_channel[AuthorizationCodeResult | str](4)
    async with open_owned_nursery() as nursery:
        nursery.start_soon(partial(trio.serve_listeners, partial(_answer, send), listeners))
        yield Callback(f"http://127.0.0.1:{bound}/callback", receive)


async def _answer(results: trio.MemorySendChannel[AuthorizationCodeResult | str], stream: trio.SocketStream) -> None:
    """Read one request; ``/callback`` with a ``code`` or an ``error`` is a result, anything else a 404."""
    connection = h11.Connection(h11.SERVER)
    with trio.move_on_after(30):
        request = None
        while request is None:
            data = await stream.receive_some(MAX_REQUEST)
            connection.receive_data(data)
            event = connection.next_event()
            if isinstance(event, h11.Request):
                request = event
            elif event is h11.PAUSED or isinstance(event, h11.ConnectionClosed) or not data:
                return
        target = urlsplit(request.target.decode("ascii", "replace"))
        query = {key: values[0] for key, values in parse_qs(target.query).items()}
        status, body = 404, b"not found\n"
        if target.path == "/callback" and ("code" in query or "error" in query):
            if "code" in query:
                result: AuthorizationCodeResult | str = AuthorizationCodeResult(
                    code=query["code"], state=query.get("state"), iss=query.get("iss")
                )
            else:
                result = f"{query['error']}: {query.get('error_description', '')}".rstrip(": ")
            try:
                results.send_nowait(result)
                status, body = 200, DONE_PAGE
            except trio.WouldBlock:  # redirects beyond the first few (a reload, or anyone local): not taken
                status, body = 409, b"this login has had its answer\n"
        headers = [("content-type", "text/html; charset=utf-8"), ("content-length", str(len(body)))]
        headers.append(("connection", "close"))
        await stream.send_all(connection.send(h11.Response(status_code=status, headers=headers)) or b"")
        await stream.send_all(connection.send(h11.Data(data=body)) or b"")
        await stream.send_all(connection.send(h11.EndOfMessage()) or b"")
    await stream.aclose()


def oauth_server(config: Config, server_id: str, *, identity: str = "service") -> ServerSpec:
    """The server ``server_id`` of ``config``, which must have ``auth`` with ``identity`` (else a
    :class:`ConfigError`)."""
    spec = config.servers.get(server_id)
    if spec is None:
        known = ", ".join(repr(s) for s in config.servers) or "none"
        raise ConfigError([f"mcpServers: no server {server_id!r} (known: {known})"])
    auth = oauth_of(spec)
    if auth is None:
        raise ConfigError([f"mcpServers.{server_id}: has no 'auth' (it is not behind OAuth)"])
    if not auth.needs_login:
        raise ConfigError(
            [f"mcpServers.{server_id}.auth.type: {auth.type!r} gets its tokens itself, with no login to make"]
        )
    if auth.identity != identity and auth.identity == "principal":
        raise ConfigError(
            [f"mcpServers.{server_id}.auth.identity: 'principal' servers are logged in to by each principal, not here"]
        )
    if auth.identity != identity:
        raise ConfigError([f"mcpServers.{server_id}.auth.identity: 'service': it has no principals' logins"])
    return spec


async def login(
    spec: ServerSpec,
    vault: TokenVault,
    *,
    say: Callable[[str], None] = print,
    port: int = 0,
    timeout: float = 300.0,  # noqa: ASYNC109 - a person's pace, not a call's deadline
    clock: Callable[[], float] = time.time,
) -> int:
    """Log the service in to ``spec``'s server (module docstring); the number of tools it then lists."""
    auth = oauth_of(spec)
    assert auth is not None, "oauth_server() first"
    storage = StoreTokenStorage(vault, spec.id, SERVICE_IDENTITY, clock)
    async with open_callback(port) as callback:
        grant = await storage.load()
        registered = grant.client_info is not None and callback.redirect_uri in map(
            str, grant.client_info.redirect_uris or ()
        )
        # A login starts afresh: no old tokens, and a registration only if it took this redirect URI.
        await vault.save(spec.id, SERVICE_IDENTITY, attrs.evolve(grant, tokens=None, expires_at=None))
        if not registered:
            await storage.set_client_info_none()

        async def show(url: str) -> None:
            say(f"Open this URL in a browser to authorize {spec.id!r}:\n\n  {url}\n")

        provider = StoreOAuthProvider(
            spec.transport.url,  # type: ignore[union-attr]  # oauth_of: an HTTP or SSE server
            auth,
            storage,
            redirect_uri=callback.redirect_uri,
            redirect_handler=show,
            callback_handler=callback.receive,
        )
        with trio.fail_after(timeout):
            try:
                async with open_client(with_http_auth(spec, provider), link=Link()) as client:
                    tools = await client.list_tools()
            except BaseExceptionGroup as group:  # the SDK's task groups: say our own error as itself
                ours = [leaf for leaf in exception_leaves(group) if isinstance(leaf, YaoActorsError)]
                if ours:
                    raise ours[0] from None
                raise
    if (await storage.get_tokens()) is None:
        raise AuthorizationError(f"server {spec.id!r} did not ask for authorization; no tokens were stored")
    return len(tools.tools)

"""Sending a principal to authorize a server: the SDK's discovery and registration, then a URL to visit.

:func:`begin_authorization` is the first half of the authorization code flow for one principal, in the service:
a request to the MCP server without a usable token draws its ``401``, and the SDK's provider
(:class:`~yao_actors.auth.flow.StoreOAuthProvider`, the principal's identity) finds the protected resource
metadata, the authorization server's metadata and a client id (the Client ID Metadata Document when the
authorization server takes one and the service has a public URL, else dynamic registration) as it always does.
Where the SDK would then wait for the browser in the same process, :class:`AskingProvider` keeps what the
second half needs — the PKCE verifier, the client, the token endpoint, the issuer — under a fresh ``state``
(:class:`~yao_actors.auth.states.AuthorizationStates`) and stops with the authorization URL. The redirect may
reach any worker sharing the store (:mod:`yao_actors.auth.callback` finishes there).

An authorization server (or MCP server) that cannot be reached, or answers the discovery with an error, is
:class:`~yao_actors.errors.AuthorizationUnavailable` with a message naming the server; never a traceback.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import secrets
from typing import Any, Final
from urllib.parse import urlencode, urljoin

import attrs
import httpx2
import trio
from mcp.client.auth import OAuthFlowError, OAuthTokenError, PKCEParameters

from yao_actors.auth.discovery import DiscoveryCache
from yao_actors.auth.flow import StoreOAuthProvider
from yao_actors.auth.states import AuthorizationStates
from yao_actors.auth.vault import StoreTokenStorage
from yao_actors.errors import AuthorizationError, AuthorizationUnavailable
from yao_actors.specs import OAuthSpec

logger = logging.getLogger(__name__)

#: Seconds the whole discovery (the MCP server's ``401``, both metadata documents, a registration) may take: one
#: deadline over every request, so a server that answers a byte at a time cannot hold a run (and its principal's
#: other runs) for longer (the HTTP client's own timeouts bound each read, not the whole).
DISCOVERY_TIMEOUT: Final = 20.0
#: The MCP protocol version the probe names (the authorization request then carries ``resource``, RFC 8707).
PROBE_PROTOCOL: Final = "2025-11-25"
#: The SDK's logger that reports a failed OAuth flow (with its traceback) at ERROR.
SDK_OAUTH_LOGGER: Final = "mcp.client.auth.oauth2"


class _Redirect(Exception):
    """Raised by :class:`AskingProvider` in place of waiting for a browser: the URL to send the person to."""

    def __init__(self, url: str) -> None:
        super().__init__("authorization URL ready")
        self.url = url


_asking: contextvars.ContextVar[str | None] = contextvars.ContextVar("yao_actors_asking", default=None)


def _said_by_us(record: logging.LogRecord) -> bool:
    """While a server's discovery runs here, the SDK's ``OAuth flow error`` report (with its traceback) is dropped:
    a :class:`_Redirect` is where the flow was meant to stop, and any other failure comes out of
    :func:`begin_authorization` as one clear error (the traceback goes to DEBUG)."""
    server = _asking.get()
    if server is None or record.levelno < logging.WARNING:
        return True
    if record.exc_info and not isinstance(record.exc_info[1], _Redirect):
        logger.debug("server %r: the MCP SDK's report in full", server, exc_info=record.exc_info)
    return False


def _quiet_the_sdk_report() -> None:
    """Put :func:`_said_by_us` on the SDK's OAuth logger, once: where the first discovery begins, so every program
    that asks (the service, an embedding ``open_runtime``) gets it, and importing this module touches no logger."""
    sdk_logger = logging.getLogger(SDK_OAUTH_LOGGER)
    if _said_by_us not in sdk_logger.filters:
        sdk_logger.addFilter(_said_by_us)


class AskingProvider(StoreOAuthProvider):
    """The provider of one principal's first flow: stops at the authorization URL, its state kept (module doc)."""

    def __init__(
        self,
        server_url: str,
        auth: OAuthSpec,
        storage: StoreTokenStorage,
        states: AuthorizationStates,
        principal: str,
        *,
        redirect_uri: str,
        asked: str,
    ) -> None:
        super().__init__(
            server_url, auth, storage, redirect_uri=redirect_uri, redirect_handler=_never, callback_handler=_never
        )
        self.states = states
        self.principal = principal
        self.asked = asked

    async def _perform_authorization_code_grant(self) -> tuple[str, str]:
        context = self.context
        context.client_metadata.scope = self.scope_to_ask()
        if context.client_info is None or not context.client_metadata.redirect_uris:
            raise OAuthFlowError("no client registration to authorize with")
        metadata = context.oauth_metadata
        if metadata is not None and metadata.authorization_endpoint:
            endpoint = str(metadata.authorization_endpoint)
        else:
            endpoint = urljoin(context.get_authorization_base_url(context.server_url), "/authorize")
        pkce, state = PKCEParameters.generate(), secrets.token_urlsafe(32)
        redirect_uri = str(context.client_metadata.redirect_uris[0])
        params = {
            "response_type": "code",
            "client_id": context.client_info.client_id,
            "redirect_uri": redirect_uri,
            "state": state,
            "code_challenge": pkce.code_challenge,
            "code_challenge_method": "S256",
        }
        resource = context.get_resource_url() if context.should_include_resource_param(PROBE_PROTOCOL) else None
        if resource is not None:
            params["resource"] = resource
        if context.client_metadata.scope:
            params["scope"] = context.client_metadata.scope
        url = f"{endpoint}?{urlencode(params)}"
        server = self.storage.server
        await self.states.put(
            state,
            {
                "principal": self.principal,
                "server": server,
                "code_verifier": pkce.code_verifier,
                "redirect_uri": redirect_uri,
                "token_endpoint": self._get_token_endpoint(),
                "resource": resource,
                "client_info": context.client_info.model_dump(mode="json"),
                "metadata": None if metadata is None else metadata.model_dump(mode="json"),
            },
            server=server,
            principal=self.principal,
            url=url,
            asked=self.asked,
        )
        raise _Redirect(url)


async def begin_authorization(
    server_url: str,
    auth: OAuthSpec,
    storage: StoreTokenStorage,
    states: AuthorizationStates,
    *,
    principal: str,
    redirect_uri: str,
    client_metadata_url: str | None = None,
    within: float = DISCOVERY_TIMEOUT,
    discovery: DiscoveryCache | None = None,
) -> str:
    """The URL where ``principal`` authorizes the server at ``server_url`` (module docstring); its state kept. The
    principal's pending authorization, asked the same way and not about to expire, is given again (no discovery,
    no new state: :meth:`~yao_actors.auth.states.AuthorizationStates.pending`). Else the whole discovery takes at
    most ``within`` seconds (:data:`DISCOVERY_TIMEOUT`), its documents from ``discovery`` when it has them."""
    if client_metadata_url is not None and auth.client_metadata_url is None:
        auth = _with_metadata_url(auth, client_metadata_url)
    server = storage.server
    asked = _asked(server_url, auth, redirect_uri)
    pending = await states.pending(server, principal, asked)
    if pending is not None:
        return pending
    provider = AskingProvider(server_url, auth, storage, states, principal, redirect_uri=redirect_uri, asked=asked)
    transport = None if discovery is None else discovery.transport(server)
    _quiet_the_sdk_report()
    token = _asking.set(server)
    deadline = trio.CancelScope(deadline=trio.current_time() + within)
    try:
        with deadline:
            async with httpx2.AsyncClient(auth=provider, timeout=within, transport=transport) as client:
                response = await client.post(server_url, json=_PROBE, headers=_HEADERS)
    except _Redirect as redirect:
        return redirect.url
    except (httpx2.HTTPError, OAuthFlowError, OAuthTokenError, ValueError) as error:
        _forget(discovery, server)
        raise AuthorizationUnavailable(
            f"server {server!r}: its authorization server could not be reached or refused the discovery "
            f"({type(error).__name__}: {error})"
        ) from None
    finally:
        _asking.reset(token)
    _forget(discovery, server)
    if deadline.cancelled_caught:
        raise AuthorizationUnavailable(
            f"server {server!r}: its authorization server did not finish the discovery within {within:g}s"
        )
    raise AuthorizationError(
        f"server {server!r} answered {response.status_code} without asking for authorization; nothing to authorize"
    )


def _with_metadata_url(auth: OAuthSpec, url: str) -> OAuthSpec:
    return attrs.evolve(auth, client_metadata_url=url)


def _asked(server_url: str, auth: OAuthSpec, redirect_uri: str) -> str:
    """What an authorization URL is made from, short: a pending one made otherwise (another scope, redirect or
    client since) is not given again."""
    what = [server_url, redirect_uri, list(auth.scopes), auth.client_id, auth.client_metadata_url]
    return hashlib.sha256(json.dumps(what).encode()).hexdigest()


def _forget(discovery: DiscoveryCache | None, server: str) -> None:
    """A discovery that did not end at the authorization URL: its documents are fetched afresh next time."""
    if discovery is not None:
        discovery.forget(server)


async def _never(*args: Any) -> Any:
    raise AssertionError("unreachable: AskingProvider stops before the redirect")  # pragma: no cover


_PROBE: Final = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": PROBE_PROTOCOL, "capabilities": {}, "clientInfo": {"name": "yao-actors"}},
}
_HEADERS: Final = {"accept": "application/json, text/event-stream", "mcp-protocol-version": PROBE_PROTOCOL}

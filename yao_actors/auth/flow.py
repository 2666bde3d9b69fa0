"""The MCP authorization flow on a server's connection: the SDK's ``OAuthClientProvider`` with its tokens in the store.

:class:`StoreOAuthProvider` is the SDK's provider (PKCE, protected resource metadata found from the server's
``401``, authorization server metadata, a Client ID Metadata Document or dynamic registration, ``resource``,
the issuer check, refresh), with three changes: the tokens and their expiry come from the store
(:class:`~yao_actors.auth.vault.StoreTokenStorage`) and outlive the process; an access token is refreshed
:data:`REFRESH_MARGIN` seconds (or a tenth of its lifetime, if shorter) *before* it expires, by a clock the
caller gives; and the configured ``scopes`` are always asked for, with those the server names.

:func:`authorizing` wraps a server actor's connector: a server with ``auth`` (service identity) is connected
with the provider in its HTTP client, and only when the store holds usable tokens; otherwise the connection
fails at once with :class:`~yao_actors.errors.NeedsLogin` (the actor is ``needs_auth``). No person is asked
from there: when the tokens stop working (a revoked refresh token) they are dropped and the connection is lost
with the same error. :mod:`.login` is where a person logs in. A server with ``identity: "principal"`` is not connected here: each
principal's connection is (:mod:`.principals`), through :func:`open_authorized` on that principal's tokens.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import attrs
import httpx2
import mcp
import pydantic
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.oauth2 import OAuthContext
from mcp.client.auth.utils import create_oauth_metadata_request
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
)

from yao_actors.auth.keys import oauth_of
from yao_actors.auth.machine import machine_provider
from yao_actors.auth.vault import SERVICE_IDENTITY, StoreTokenStorage, TokenVault
from yao_actors.errors import AuthorizationError, NeedsLogin
from yao_actors.specs import OAuthSpec, ServerSpec
from yao_actors.transports import Connector, Link

#: Seconds before an access token expires that it is refreshed (a tenth of its lifetime when that is shorter).
REFRESH_MARGIN = 60.0
#: The redirect URI a connection that cannot ask a person registers with (it never receives a code).
NO_REDIRECT = "http://127.0.0.1/no-interactive-login"


#: Why a server with ``identity: "principal"`` is not connected here (only per principal, by its router).
PRINCIPAL_NOT_SERVED = (
    "server {server!r} has auth.identity 'principal': it is connected per principal, with that principal's own "
    "tokens (yao_actors.auth.principals); the service's tokens never serve a principal's call"
)


def needs_login(server: str) -> NeedsLogin:
    return NeedsLogin(f"server {server!r} needs authorization: run `yao-actors auth login {server}`")


@dataclasses.dataclass
class _ClockedContext(OAuthContext):
    """The SDK's flow context, with expiry by ``clock`` and refreshed :data:`REFRESH_MARGIN` early."""

    clock: Callable[[], float] = time.time
    lifetime: float | None = None

    def update_token_expiry(self, token: OAuthToken) -> None:
        self.lifetime = None if token.expires_in is None else float(token.expires_in)
        self.token_expiry_time = None if self.lifetime is None else self.clock() + self.lifetime

    def is_token_valid(self) -> bool:
        if not (self.current_tokens and self.current_tokens.access_token):
            return False
        if self.token_expiry_time is None:
            return True
        margin = REFRESH_MARGIN if self.lifetime is None else min(REFRESH_MARGIN, self.lifetime / 10)
        return self.clock() < self.token_expiry_time - margin


class StoreOAuthProvider(OAuthClientProvider):
    """The SDK's ``OAuthClientProvider`` for one server and identity, its tokens in the store (module docstring)."""

    def __init__(
        self,
        server_url: str,
        auth: OAuthSpec,
        storage: StoreTokenStorage,
        *,
        redirect_uri: str,
        redirect_handler: Callable[[str], Awaitable[None]] | None = None,
        callback_handler: Callable[[], Awaitable[AuthorizationCodeResult]] | None = None,
    ) -> None:
        confidential = auth.client_secret is not None
        metadata = OAuthClientMetadata(
            client_name="yao-actors",
            redirect_uris=[redirect_uri],  # type: ignore[list-item]  # pydantic parses the string
            scope=" ".join(auth.scopes) or None,
            grant_types=["authorization_code", "refresh_token"],
            token_endpoint_auth_method="client_secret_post" if confidential else "none",
        )
        super().__init__(server_url, metadata, storage, redirect_handler, callback_handler, auth.client_metadata_url)
        shared = {f.name: getattr(self.context, f.name) for f in dataclasses.fields(OAuthContext)}
        self.context = _ClockedContext(**shared, clock=storage.clock)
        self.auth = auth
        self.storage = storage
        self.wanted_scope: str | None = None
        self.legacy_issuer: str | None = None

    def configured_client(self) -> OAuthClientInformationFull | None:
        """The client ``auth.client_id`` / ``client_secret`` name, registered beforehand; ``None`` without one."""
        if self.auth.client_id is None:
            return None
        method = (self.auth.token_endpoint_auth_method or "client_secret_post") if self.auth.client_secret else "none"
        return OAuthClientInformationFull(
            client_id=self.auth.client_id,
            client_secret=self.auth.client_secret,
            redirect_uris=self.context.client_metadata.redirect_uris,
            token_endpoint_auth_method=method,
        )

    async def _exchange_token_authorization_code(self, auth_code: str, code_verifier: str) -> httpx2.Request:
        """The SDK's token request; a configured client's secret goes the way the authorization server takes it
        when ``token_endpoint_auth_method`` does not say: ``client_secret_post`` unless its metadata offers only
        ``client_secret_basic``."""
        client, metadata = self.context.client_info, self.context.oauth_metadata
        offered = (metadata.token_endpoint_auth_methods_supported or []) if metadata is not None else []
        unsaid = self.auth.client_secret and self.auth.token_endpoint_auth_method is None and client is not None
        if unsaid and "client_secret_post" not in offered and "client_secret_basic" in offered:
            client.token_endpoint_auth_method = "client_secret_basic"  # type: ignore[union-attr]
        return await super()._exchange_token_authorization_code(auth_code, code_verifier)

    async def _initialize(self) -> None:
        grant = await self.storage.load()
        self.wanted_scope = grant.wanted_scope
        self.storage.held = grant.tokens
        self.context.current_tokens = grant.tokens
        self.context.client_info = self.configured_client() or grant.client_info
        self.context.token_expiry_time = grant.expires_at
        self._initialized = True

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """The SDK's flow, except that a ``401`` on a token held with a refresh token is answered by a refresh first.

        The SDK answers every ``401`` with a new authorization (a person's login); but a server may end a token
        before its ``expires_in`` said (a revocation, a clock apart, a restart of its own), and a service cannot
        ask anyone to log in. Only when that refresh fails, or the request is refused again, does the SDK's flow
        go on (and, with no one to ask, the server becomes ``needs_auth``). Where the server has no protected
        resource metadata, the 2025-03-26 fallback's issuer is learnt first (:meth:`_learn_legacy_issuer`).
        """
        inner = super()._auth_flow(request)
        refreshed = False
        try:
            outgoing = await inner.__anext__()
            while True:
                incoming = yield outgoing
                if outgoing is request and incoming.status_code == 401 and not refreshed:
                    refreshed = True
                    if self.context.can_refresh_token():  # the SDK's flow holds its lock, suspended here
                        answer = yield await self._refresh_token()
                        if await self._handle_refresh_response(answer):
                            self._add_auth_header(request)
                            incoming = yield request
                            if incoming.status_code != 401:
                                return
                if self._no_resource_metadata(outgoing, incoming):
                    answer = yield create_oauth_metadata_request(self._legacy_metadata_url())
                    await self._learn_legacy_issuer(answer)
                outgoing = await inner.asend(incoming)
        except StopAsyncIteration:
            return
        finally:
            await inner.aclose()

    def _no_resource_metadata(self, outgoing: httpx2.Request, incoming: httpx2.Response) -> bool:
        """Whether ``incoming`` answers the last protected resource metadata URL the SDK tries (the origin's)
        without it (and not a server error, which ends the SDK's flow): the SDK goes on to the 2025-03-26 path."""
        root = f"{_origin(self.context.server_url)}/.well-known/oauth-protected-resource"
        failed = incoming.status_code != 200 and incoming.status_code < 500 and incoming.status_code != 429
        return outgoing.method == "GET" and str(outgoing.url) == root and failed

    def _legacy_metadata_url(self) -> str:
        return f"{_origin(self.context.server_url)}/.well-known/oauth-authorization-server"

    async def _learn_legacy_issuer(self, answer: httpx2.Response) -> None:
        """The 2025-03-26 fallback (no protected resource metadata): the authorization server's metadata at the MCP
        server's root may name an issuer with a path on that same origin (``https://host/oauth``). The SDK expects
        the bare origin there (RFC 8414 §3.3) and stops; the same origin is the same party, so that issuer is
        taken as the one expected (:meth:`_expected_issuer`). Another origin, or no metadata: the SDK's rule."""
        if answer.status_code != 200:
            return
        try:
            issuer = str(OAuthMetadata.model_validate_json(await answer.aread()).issuer)
        except (pydantic.ValidationError, httpx2.HTTPError):
            return
        if _origin(issuer) == _origin(self.context.server_url):
            self.legacy_issuer = issuer

    def _expected_issuer(self) -> str:
        if self.context.auth_server_url is None and self.legacy_issuer is not None:
            return self.legacy_issuer
        return super()._expected_issuer()

    async def _perform_authorization_code_grant(self) -> tuple[str, str]:
        self.context.client_metadata.scope = self.scope_to_ask()
        return await super()._perform_authorization_code_grant()

    def scope_to_ask(self) -> str | None:
        """The scopes an authorization asks for: those the SDK chose (the server's challenge, a step-up's union
        with what was granted), the configured ``scopes``, and those a step-up asked for since the last login."""
        scopes = (self.context.client_metadata.scope or "").split()
        for extra in (self.auth.scopes, (self.wanted_scope or "").split()):
            scopes += [s for s in extra if s not in scopes]
        return " ".join(scopes) or None


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def with_http_auth(spec: ServerSpec, http_auth: Any) -> ServerSpec:
    """``spec`` whose HTTP or SSE requests go through ``http_auth``."""
    return attrs.evolve(spec, transport=attrs.evolve(spec.transport, http_auth=http_auth))


def authorizing(connect: Connector, vault: TokenVault, *, clock: Callable[[], float] = time.time) -> Connector:
    """``connect``, with the servers that have ``auth`` connected through the OAuth flow (module docstring)."""

    def connector(spec: ServerSpec, *, link: Link, **options: Any) -> AbstractAsyncContextManager[mcp.Client]:
        # options: the connector's keywords (message_handler, elicitation_callback, prior_discover), passed on.
        auth = oauth_of(spec)
        if auth is None:
            return connect(spec, link=link, **options)
        if auth.identity != "service":
            return _refuse(AuthorizationError(PRINCIPAL_NOT_SERVED.format(server=spec.id)))
        storage = StoreTokenStorage(vault, spec.id, SERVICE_IDENTITY, clock)
        if not auth.needs_login:  # the client gets its tokens itself (yao_actors.auth.machine)
            provider = machine_provider(spec.transport.url, auth, storage)  # type: ignore[union-attr]
            return connect(with_http_auth(spec, provider), link=link, **options)
        return open_authorized(connect, spec, auth, storage, link, options)

    return connector


@asynccontextmanager
async def open_authorized(
    connect: Connector,
    spec: ServerSpec,
    auth: OAuthSpec,
    storage: StoreTokenStorage,
    link: Link,
    options: Mapping[str, Any],
    needs: Callable[[str], NeedsLogin] = needs_login,
) -> AsyncIterator[mcp.Client]:
    """``connect`` with ``storage``'s tokens in the provider; ``needs(server)`` is the error when they do not serve."""
    grant = await storage.load()
    if not grant.usable(storage.clock(), configured_client=auth.client_id is not None):
        error = needs(spec.id)
        raise error if grant.unreadable is None else NeedsLogin(f"{error} ({grant.unreadable})")

    async def cannot_ask_a_person(authorization_url: str) -> None:
        # The tokens no longer serve (a refresh was refused, or the server wants more scope: a step-up): forget
        # them, so the actor waits for a login, which asks for the scopes this authorization would have.
        await storage.want_scope(provider.context.client_metadata.scope)
        await storage.drop_tokens()
        error = needs(spec.id)
        link.unauthorized = True
        link.mark_lost(str(error))
        raise error

    provider = StoreOAuthProvider(
        spec.transport.url,  # type: ignore[union-attr]  # oauth_of: an HTTP or SSE server
        auth,
        storage,
        redirect_uri=_redirect_uri(grant.client_info),
        redirect_handler=cannot_ask_a_person,
        callback_handler=_no_callback,
    )
    async with connect(with_http_auth(spec, provider), link=link, **options) as client:
        yield client


@asynccontextmanager
async def _refuse(error: AuthorizationError) -> AsyncIterator[mcp.Client]:
    raise error
    yield  # pragma: no cover  # an async generator, for asynccontextmanager


def _redirect_uri(client_info: OAuthClientInformationFull | None) -> str:
    """The redirect URI the login registered (the client's record must match it), else :data:`NO_REDIRECT`."""
    if client_info is not None and client_info.redirect_uris:
        return str(client_info.redirect_uris[0])
    return NO_REDIRECT


async def _no_callback() -> AuthorizationCodeResult:
    raise AssertionError("unreachable: the redirect handler raised first")  # pragma: no cover

"""Tokens without a person: ``auth.type`` ``"client_credentials"`` and ``"cross_app_access"`` (the MCP SDK's
``mcp.client.auth.extensions``).

- ``client_credentials`` (RFC 6749 §4.4): the client's own credentials at the token endpoint — its
  ``client_secret`` (``client_secret_basic`` unless ``token_endpoint_auth_method`` says ``client_secret_post``), or
  a JWT it signs with its ``private_key`` (``private_key_jwt``, RFC 7523 §2.2: issuer and subject the client id,
  audience the authorization server's issuer, five minutes' life).
- ``cross_app_access`` (SEP-990, Enterprise-Managed Authorization): the service's ID token at its enterprise
  identity provider is exchanged there (RFC 8693) for an identity assertion grant (ID-JAG) naming the MCP
  server's authorization server and resource, which that authorization server's token endpoint takes (RFC 7523
  jwt-bearer grant) for an access token.

Both send credentials only to the authorization server the configuration names (``auth.issuer``), never to one
the MCP server points at. Tokens are got again when the server refuses them (a ``401``); nothing is asked of
anyone, so such a server is never ``needs_auth``: a refusal is the server being down, with why.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

import httpx2
from mcp.client.auth import OAuthTokenError, TokenStorage
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider

from yao_actors.specs import IdentityProviderSpec, OAuthSpec

#: RFC 8693's grant, and the token types SEP-990's exchange names.
TOKEN_EXCHANGE: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TYPE: Final = "urn:ietf:params:oauth:token-type:id-jag"
#: Seconds the identity provider may take to answer the exchange.
EXCHANGE_TIMEOUT: Final = 20.0


def machine_provider(server_url: str, auth: OAuthSpec, storage: TokenStorage) -> httpx2.Auth:
    """The SDK's provider for ``auth`` (``type`` ``client_credentials`` or ``cross_app_access``), its tokens in
    ``storage``."""
    assert auth.issuer is not None, "the config reader requires it"
    assert auth.client_id is not None, "the config reader requires it"
    scope = " ".join(auth.scopes) or None
    method = auth.token_endpoint_auth_method or "client_secret_basic"
    if auth.type == "cross_app_access":
        assert auth.identity_provider is not None
        assert auth.client_secret is not None
        return IdentityAssertionOAuthProvider(
            server_url,
            storage,
            auth.client_id,
            auth.client_secret,
            auth.issuer,
            identity_assertion(auth.identity_provider),
            scope=scope,
            token_endpoint_auth_method=method,
        )
    if auth.private_key is not None:
        signed = SignedJWTParameters(
            issuer=auth.client_id,
            subject=auth.client_id,
            signing_key=auth.private_key,
            signing_algorithm=auth.signing_algorithm,
        )
        return PrivateKeyJWTOAuthProvider(
            server_url, storage, auth.client_id, signed.create_assertion_provider(), scope=scope, issuer=auth.issuer
        )
    assert auth.client_secret is not None
    return ClientCredentialsOAuthProvider(
        server_url, storage, auth.client_id, auth.client_secret, method, scope=scope, issuer=auth.issuer
    )


def identity_assertion(provider: IdentityProviderSpec) -> Callable[[str, str], Awaitable[str]]:
    """The ID-JAG for ``(audience, resource)``: the ID token exchanged at the identity provider (RFC 8693)."""

    async def exchange(audience: str, resource: str) -> str:
        data = {
            "grant_type": TOKEN_EXCHANGE,
            "subject_token": provider.id_token,
            "subject_token_type": ID_TOKEN_TYPE,
            "requested_token_type": ID_JAG_TYPE,
            "audience": audience,
            "resource": resource,
            "client_id": provider.client_id,
        }
        if provider.client_secret is not None:
            data["client_secret"] = provider.client_secret
        async with httpx2.AsyncClient(timeout=EXCHANGE_TIMEOUT) as http:
            response = await http.post(provider.token_endpoint, data=data)
        if response.status_code != 200:
            raise OAuthTokenError(
                f"the identity provider refused the token exchange ({response.status_code}): {response.text[:200]}"
            )
        answer = response.json()
        if answer.get("issued_token_type") != ID_JAG_TYPE or not isinstance(answer.get("access_token"), str):
            raise OAuthTokenError("the identity provider's answer is not an identity assertion grant (ID-JAG)")
        token: str = answer["access_token"]
        return token

    return exchange

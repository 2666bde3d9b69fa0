"""The redirect back from the authorization server: a principal's code exchanged for its tokens, once.

:func:`complete_authorization` is the second half of the flow :mod:`yao_actors.auth.asking` began, on whichever
worker the browser reaches (``GET /oauth/callback``, :mod:`yao_actors.service.oauth_routes`). The ``state``
names the pending authorization (:class:`~yao_actors.auth.states.AuthorizationStates`: single use, ten minutes);
a missing, wrong, replayed or late one, an ``error`` from the authorization server, or an ``iss`` that is not
its issuer (RFC 9207, the SDK's own check) is :class:`CallbackRefused` and nothing is stored. Otherwise the
code is exchanged at the token endpoint with the PKCE verifier (``resource`` as in the authorization request)
and the tokens are sealed in the vault under the server and that principal's identity only.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import quote

import attrs
import httpx2
import pydantic
import trio
from mcp.client.auth import OAuthFlowError
from mcp.client.auth.utils import validate_authorization_response_iss
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken

from yao_actors.auth.states import AuthorizationStates
from yao_actors.auth.vault import Grant, TokenVault, principal_identity
from yao_actors.errors import AuthorizationError, AuthorizationUnavailable

#: Seconds the token endpoint may take to answer, the whole answer (not each read): the browser's request waits.
EXCHANGE_TIMEOUT: Final = 20.0


class CallbackRefused(AuthorizationError):
    """The redirect does not finish a pending authorization (a ``400`` page; nothing was stored)."""


@attrs.frozen
class Authorized:
    """Whose authorization of which server the callback finished."""

    principal: str
    server: str


async def complete_authorization(
    query: Mapping[str, str],
    states: AuthorizationStates,
    vault: TokenVault,
    *,
    clock: Callable[[], float] = time.time,
    within: float = EXCHANGE_TIMEOUT,
) -> Authorized:
    """Finish the authorization the redirect's ``query`` (``state``, ``code``, ``iss`` or ``error``) answers; the
    token exchange takes at most ``within`` seconds (:data:`EXCHANGE_TIMEOUT`)."""
    state = query.get("state", "")
    record = await states.take(state) if state else None
    if record is None:
        raise CallbackRefused("unknown, already used or expired authorization state: start again from your app")
    server, principal = str(record["server"]), str(record["principal"])
    if "error" in query:
        # The browser's words, as the log and the page will show them: one line (no forged log lines), short.
        said = (query.get("error_description") or query["error"])[:200].encode("unicode_escape").decode("ascii")
        raise CallbackRefused(f"the authorization server refused access to server {server!r}: {said}")
    metadata = None if record.get("metadata") is None else OAuthMetadata.model_validate(record["metadata"])
    try:
        validate_authorization_response_iss(query.get("iss"), metadata)
    except OAuthFlowError as error:
        raise CallbackRefused(f"server {server!r}: {error}") from None
    code = query.get("code")
    if not code:
        raise CallbackRefused(f"server {server!r}: the redirect carries no authorization code")
    client = OAuthClientInformationFull.model_validate(record["client_info"])
    tokens = await _exchange(record, client, code, server, within)
    expires_at = None if tokens.expires_in is None else clock() + int(tokens.expires_in)
    await vault.save(server, principal_identity(principal), Grant(tokens, expires_at, client))
    return Authorized(principal, server)


async def _exchange(
    record: Mapping[str, Any], client: OAuthClientInformationFull, code: str, server: str, within: float
) -> OAuthToken:
    """The token endpoint's answer to the code (RFC 6749 §4.1.3 with PKCE and RFC 8707's ``resource``)."""
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": str(record["redirect_uri"]),
        "client_id": client.client_id or "",
        "code_verifier": str(record["code_verifier"]),
    }
    if record.get("resource"):
        data["resource"] = str(record["resource"])
    headers = {"content-type": "application/x-www-form-urlencoded"}
    if client.client_secret and client.token_endpoint_auth_method == "client_secret_basic":
        pair = f"{quote(client.client_id or '', safe='')}:{quote(client.client_secret, safe='')}"
        headers["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    elif client.client_secret:
        data["client_secret"] = client.client_secret
    response = None
    try:
        with trio.move_on_after(within):
            async with httpx2.AsyncClient(timeout=within) as http:
                response = await http.post(str(record["token_endpoint"]), data=data, headers=headers)
    except httpx2.HTTPError as error:
        raise AuthorizationUnavailable(
            f"server {server!r}: its authorization server could not be reached ({type(error).__name__})"
        ) from None
    if response is None:
        raise AuthorizationUnavailable(
            f"server {server!r}: its authorization server did not answer the token exchange within {within:g}s"
        )
    if response.status_code != 200:
        raise CallbackRefused(f"server {server!r}: the token exchange was refused ({response.status_code})")
    try:
        return OAuthToken.model_validate_json(response.content)
    except pydantic.ValidationError:
        raise CallbackRefused(f"server {server!r}: the token endpoint's answer is not a token response") from None

"""An MCP server behind OAuth 2.1, its own authorization server included, for tests: ``python -m`` it on loopback.

Built with the MCP SDK's server-side auth: ``MCPServer(auth_server_provider=..., auth=AuthSettings(...))`` serves
the authorization server's routes (metadata, dynamic registration, ``/authorize``, ``/token``, ``/revoke``),
the protected resource metadata and the bearer-token check on ``/mcp``. :class:`MemoryAuthorizationServer` is
the provider, in memory: ``/authorize`` sends the browser to a consent page (``GET /consent``), and the person
approving it (``POST /consent``, ``approve=yes``, and ``user=<name>`` to be someone else than :data:`SUBJECT`)
is redirected with a code whose tokens name that subject. The test hooks: ``POST
/test/expire`` makes every access token expire now, ``POST /test/revoke`` revokes every refresh token, ``GET
/test/log`` lists the token requests (grant types) it answered and, for each ``whoami`` call, the subject and a
fingerprint of the token it came with. Tool ``whoami`` says the subject of the token that called it.

``python -m yao_actors.testing.oauth_server [--port 0] [--lifetime S] [--sse]`` prints ``LISTENING <url>`` (of
``/mcp``, or of ``/sse`` with ``--sse``).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import secrets
import socket
import time
from typing import Any

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

#: The subject every token this server issues names (the person who approved).
SUBJECT = "test-user"
#: The scope ``/mcp`` requires.
SCOPE = "tools"


class MemoryAuthorizationServer:
    """The SDK's ``OAuthAuthorizationServerProvider``, in memory (module docstring)."""

    def __init__(self, issuer: str, lifetime: int) -> None:
        self.issuer = issuer
        self.lifetime = lifetime
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.pending: dict[str, tuple[str, AuthorizationParams]] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.log: list[str] = []
        self.calls: list[dict[str, str]] = []

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        transaction = secrets.token_urlsafe(16)
        assert client.client_id is not None
        self.pending[transaction] = (client.client_id, params)
        return f"{self.issuer}/consent?transaction={transaction}"

    def approve(self, transaction: str, subject: str = SUBJECT) -> str:
        """The redirect (with a code for ``subject``) of an approved transaction."""
        client_id, params = self.pending.pop(transaction)
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [SCOPE],
            expires_at=time.time() + 300,
            client_id=client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject=subject,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state, iss=self.issuer)

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> AuthorizationCode | None:
        found = self.codes.get(code)
        return found if found is not None and found.client_id == client.client_id else None

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        self.log.append("authorization_code")
        code = authorization_code
        return self._issue(code.client_id, code.scopes, code.resource, code.subject or SUBJECT)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        found = self.refresh.get(refresh_token)
        return found if found is not None and found.client_id == client.client_id else None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        if self.refresh.pop(refresh_token.token, None) is None:
            raise TokenError("invalid_grant", "refresh token revoked")
        self.log.append("refresh_token")
        token = refresh_token
        return self._issue(token.client_id, scopes or token.scopes, token.resource, token.subject or SUBJECT)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None, subject: str) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        expires_at = math.ceil(time.time()) + self.lifetime  # whole seconds, rounded up: it lasts its lifetime
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires_at, resource=resource, subject=subject
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource, subject=subject
        )
        return OAuthToken(access_token=access, expires_in=self.lifetime, refresh_token=refresh, scope=" ".join(scopes))

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at <= time.time()):
            return None
        return found

    async def exchange_identity_assertion(self, client: OAuthClientInformationFull, params: Any) -> OAuthToken:
        raise TokenError("unsupported_grant_type", "no identity assertions here")

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


def build_oauth_server(base: str, *, lifetime: int = 3600, endpoint: str = "/mcp") -> MCPServer:
    """The protected server at ``base`` + ``endpoint`` (``http://127.0.0.1:PORT/mcp``, or ``/sse``), its
    authorization server at the same origin."""
    provider = MemoryAuthorizationServer(base, lifetime)
    server = MCPServer(
        "oauth-test",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=base,  # type: ignore[arg-type]  # pydantic parses the string
            resource_server_url=f"{base}{endpoint}",  # type: ignore[arg-type]
            validate_token_resource=True,
            required_scopes=[SCOPE],
            client_registration_options=ClientRegistrationOptions(enabled=True, valid_scopes=[SCOPE]),
            revocation_options=RevocationOptions(enabled=True),
        ),
    )

    @server.tool()
    def whoami() -> str:
        """The subject of the token that called."""
        token = get_access_token()
        if token is None:
            return "anonymous"
        fingerprint = hashlib.sha256(token.token.encode()).hexdigest()[:16]
        provider.calls.append({"subject": token.subject or "", "token": fingerprint})
        return token.subject or ""

    @server.custom_route("/consent", methods=["GET", "POST"])  # type: ignore[untyped-decorator]
    async def consent(request: Request) -> Response:
        if request.method == "GET":
            transaction = request.query_params.get("transaction", "")
            form = f'<form method="post"><input name="transaction" value="{transaction}"><button name="approve" value="yes">'
            return HTMLResponse(form + "Approve</button></form>")
        form_data = await request.form()
        transaction = str(form_data.get("transaction", ""))
        if form_data.get("approve") != "yes" or transaction not in provider.pending:
            return HTMLResponse("refused", status_code=400)
        subject = str(form_data.get("user") or SUBJECT)
        return RedirectResponse(provider.approve(transaction, subject), status_code=302)

    @server.custom_route("/test/expire", methods=["POST"])  # type: ignore[untyped-decorator]
    async def expire(request: Request) -> Response:
        for token in provider.access.values():
            token.expires_at = 0
        return JSONResponse({"expired": len(provider.access)})

    @server.custom_route("/test/revoke", methods=["POST"])  # type: ignore[untyped-decorator]
    async def revoke(request: Request) -> Response:
        count = len(provider.refresh)
        provider.refresh.clear()
        return JSONResponse({"revoked": count})

    @server.custom_route("/test/log", methods=["GET"])  # type: ignore[untyped-decorator]
    async def log(request: Request) -> Response:
        return JSONResponse({"token_requests": provider.log, "calls": provider.calls})

    return server


async def _serve(host: str, port: int, lifetime: int, sse: bool) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    base = f"http://{host}:{sock.getsockname()[1]}"
    endpoint = "/sse" if sse else "/mcp"
    mcp_server = build_oauth_server(base, lifetime=lifetime, endpoint=endpoint)
    app: Any = mcp_server.sse_app(host=host) if sse else mcp_server.streamable_http_app(host=host)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    print(f"LISTENING {base}{endpoint}", flush=True)
    await server.serve(sockets=[sock])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--lifetime", type=int, default=3600, help="seconds an access token lasts")
    parser.add_argument("--sse", action="store_true", help="serve HTTP+SSE (at /sse) instead of streamable HTTP")
    args = parser.parse_args(argv)
    anyio.run(_serve, args.host, args.port, args.lifetime, args.sse)


if __name__ == "__main__":
    main()

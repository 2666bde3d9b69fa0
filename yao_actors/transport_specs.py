"""How the runtime reaches an MCP server: the transport records of a :class:`~yao_actors.specs.ServerSpec`.

A server is a subprocess speaking stdio (:class:`StdioTransport`), a URL speaking streamable HTTP
(:class:`HttpTransport`) or the older HTTP+SSE transport (:class:`SseTransport`), optionally behind OAuth
(:class:`OAuthSpec`), or a server object in this process (:class:`InMemoryTransport`). Like
:mod:`yao_actors.specs`, this module depends on nothing else of the package but its errors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

import attrs


def as_strings(value: str | Iterable[str]) -> tuple[str, ...]:
    """A string is one item, not one item per character (``prompt="Be brief"``, ``args="--verbose"``)."""
    return (value,) if isinstance(value, str) else tuple(value)


@attrs.frozen
class StdioTransport:
    """Run the server as a subprocess and speak MCP over its stdin/stdout.

    ``env`` is laid over the MCP SDK's minimal default environment (``HOME``,
    ``PATH``, ``USER``, ... — not the parent's whole environment, which may hold
    secrets); ``inherit_env=True`` lays it over the parent's environment instead.
    """

    command: str
    args: tuple[str, ...] = attrs.field(default=(), converter=as_strings)
    env: Mapping[str, str] = attrs.field(factory=dict)
    cwd: str | None = None
    inherit_env: bool = False


OAuthIdentity = Literal["service", "principal"]
#: How the tokens are got: a login (``"oauth"``, the authorization code flow), the client's own credentials
#: (``"client_credentials"``), or an identity provider's ID token exchanged for them (``"cross_app_access"``).
OAuthGrant = Literal["oauth", "client_credentials", "cross_app_access"]
#: How a client with a secret authenticates at the token endpoint.
SecretMethod = Literal["client_secret_basic", "client_secret_post"]


@attrs.frozen
class IdentityProviderSpec:
    """The enterprise identity provider of ``auth.type: "cross_app_access"`` (SEP-990): its token endpoint exchanges
    ``id_token`` (the service's ID token there, RFC 8693) for an identity assertion grant for the MCP server."""

    token_endpoint: str
    client_id: str
    id_token: str = attrs.field(repr=False)
    client_secret: str | None = attrs.field(default=None, repr=False)


@attrs.frozen
class OAuthSpec:
    """An HTTP or SSE server behind the MCP authorization flow (OAuth 2.1), ``mcpServers.<id>.auth``.

    ``type`` ``"oauth"`` (PKCE): ``scopes`` are asked for; without ``client_id`` the client registers itself (a
    Client ID Metadata Document at ``client_metadata_url`` where the authorization server takes one, else dynamic
    registration). ``identity`` ``"service"``: one login for the whole service (``yao-actors auth login``);
    ``"principal"``: each principal its own. ``type`` ``"client_credentials"``: no person; the client's
    ``client_secret``, or a JWT signed with its ``private_key`` (``private_key_jwt``), at the token endpoint of
    ``issuer``. ``type`` ``"cross_app_access"``: no person; the ``identity_provider``'s ID token exchanged for an
    identity assertion that ``issuer``'s token endpoint takes (SEP-990).
    """

    scopes: tuple[str, ...] = attrs.field(default=(), converter=as_strings)
    client_id: str | None = None
    client_secret: str | None = attrs.field(default=None, repr=False)
    client_metadata_url: str | None = None
    identity: OAuthIdentity = "service"
    type: OAuthGrant = "oauth"
    token_endpoint_auth_method: SecretMethod | None = None
    private_key: str | None = attrs.field(default=None, repr=False)
    signing_algorithm: str = "RS256"
    issuer: str | None = None
    identity_provider: IdentityProviderSpec | None = None

    @property
    def needs_login(self) -> bool:
        """Whether a person logs in (the authorization code flow), rather than the client getting tokens itself."""
        return self.type == "oauth"


@attrs.frozen
class _HttpEndpoint:
    """What both HTTP transports name: the server's ``url``, extra request headers, ``auth`` when behind OAuth."""

    url: str
    headers: Mapping[str, str] = attrs.field(factory=dict)
    auth: OAuthSpec | None = None
    #: The ``httpx2.Auth`` its requests go through: the OAuth flow's, put here by the connection (never in a file).
    http_auth: Any = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen
class HttpTransport(_HttpEndpoint):
    """Speak streamable HTTP to a server at ``url``; ``auth`` when it is behind OAuth."""


@attrs.frozen
class SseTransport(_HttpEndpoint):
    """Speak the older HTTP+SSE MCP transport to a server at ``url`` (the MCP SDK's SSE client)."""


@attrs.frozen
class InMemoryTransport:
    """Connect in-process to an ``mcp.server.mcpserver.MCPServer`` (or low-level ``Server``).

    ``reference`` is the ``"package.module:attribute"`` the server came from
    when a config file named it (``mcpServers.<id>.module``).
    """

    server: Any = attrs.field(eq=False)
    reference: str | None = None


Transport = StdioTransport | HttpTransport | SseTransport | InMemoryTransport

"""Which configured servers use OAuth, and the rule that a durable store keeps their tokens only under a key."""

from __future__ import annotations

from yao_actors.specs import Config, HttpTransport, OAuthSpec, ServerSpec, SseTransport, StoreSpec


def oauth_of(spec: ServerSpec) -> OAuthSpec | None:
    """The server's ``auth``, or ``None`` when it has none (or is not an HTTP or SSE server)."""
    transport = spec.transport
    return transport.auth if isinstance(transport, HttpTransport | SseTransport) else None


def oauth_servers(config: Config) -> list[str]:
    """The ids of the enabled servers that use OAuth, in the file's order."""
    return [server_id for server_id, spec in config.servers.items() if not spec.disabled and oauth_of(spec)]


def per_principal(spec: ServerSpec) -> bool:
    """Whether each principal has a connection of its own to the server: its ``identity`` (or, with OAuth, its
    ``auth.identity``) is ``"principal"``."""
    auth = oauth_of(spec)
    return (auth.identity if auth is not None else spec.identity) == "principal"


def principal_servers(config: Config) -> list[str]:
    """The ids of the enabled servers each principal has a connection of its own to, in the file's order."""
    return [server_id for server_id, spec in config.servers.items() if not spec.disabled and per_principal(spec)]


def secret_key_problem(config: Config, store: StoreSpec) -> str | None:
    """Why ``config``'s OAuth servers cannot keep their tokens in ``store`` (a durable one with no
    ``store.secret_key``), or ``None``."""
    servers = oauth_servers(config)
    if not servers or store.type == "memory" or store.secret_key:
        return None
    names = ", ".join(repr(s) for s in servers)
    return (
        f"store.secret_key: required with a {store.type} store when a server uses OAuth ({names} has 'auth'): "
        'the key its tokens are encrypted with, e.g. "secret_key": "${YAO_SECRET_KEY}"'
    )

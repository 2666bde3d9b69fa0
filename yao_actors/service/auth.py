"""Who may connect: bearer tokens and principals, the Origin check, and the rules for serving beyond loopback.

Tokens come from the config — ``server.token`` (one principal, :data:`SINGLE_PRINCIPAL`) and ``server.tokens``
(principal names to tokens) — or the ``YAO_ACTORS_TOKEN`` environment variable when the config has no
``token``. A client presents one at the websocket handshake, either as ``Authorization: Bearer <token>`` or —
for browsers, which cannot set headers on a websocket — as a proposed subprotocol ``bearer.<token>`` (then the
page also proposes :data:`SUBPROTOCOL`, which the service selects). The token says who the client is: its
principal, which owns the threads it creates. Without tokens every local client is one principal.

Beyond loopback a token is mandatory and must be a real secret: at least :data:`MIN_TOKEN_LENGTH`
characters, not whitespace.

Origins: a browser sends ``Origin``; clients without one (terminals, scripts) pass. With no allow-list
configured a browser is accepted from loopback origins (which include the page the service serves on
loopback), so a web site the user happens to visit cannot drive a local service. A ``null`` origin (a
sandboxed iframe of any site, or a page opened from disk) passes only when a token is required or the
allow-list names ``"null"``; ``"*"`` in the allow-list accepts any origin. See :func:`origin_allowed` for why
the service's own origin counts only when a token is required.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Mapping, Sequence
from typing import Final
from urllib.parse import urlsplit

import attrs

from yao_actors.errors import ConfigError
from yao_actors.specs import ServiceSpec

#: The environment variable holding the token when the config has none.
TOKEN_ENV: Final = "YAO_ACTORS_TOKEN"
#: The subprotocol of this service, selected when a client proposes it.
SUBPROTOCOL: Final = "yao-actors"
#: Prefix of the subprotocol value carrying a browser's token.
BEARER_PREFIX: Final = "bearer."


#: The principal of the single ``server.token`` (or ``YAO_ACTORS_TOKEN``).
SINGLE_PRINCIPAL: Final = "default"
#: The shortest token accepted beyond loopback.
MIN_TOKEN_LENGTH: Final = 16


@attrs.frozen
class Credential:
    """A token, the principal it identifies, and where it was configured (for error messages)."""

    principal: str
    token: str
    source: str


def resolve_token(spec: ServiceSpec, environ: Mapping[str, str] = os.environ) -> str | None:
    """The single token in force: the config's, else ``YAO_ACTORS_TOKEN``, else none."""
    return spec.token or environ.get(TOKEN_ENV) or None


def resolve_credentials(spec: ServiceSpec, environ: Mapping[str, str] = os.environ) -> tuple[Credential, ...]:
    """Every token in force: the single one (see :func:`resolve_token`) and those of ``server.tokens``."""
    single = resolve_token(spec, environ)
    credentials = [Credential(name, token, f"server.tokens.{name}") for name, token in spec.tokens.items()]
    if single is not None:
        source = "server.token" if spec.token else TOKEN_ENV
        credentials.insert(0, Credential(SINGLE_PRINCIPAL, single, source))
    return tuple(credentials)


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


#: The highest TCP port number.
MAX_PORT = 65535


def check_port(port: int) -> None:
    """Refuse a port outside 0-65535: ``bind`` would take it modulo 65536 and listen elsewhere without a word."""
    if not 0 <= port <= MAX_PORT:
        raise ConfigError([f"server.port: expected a port number from 0 to {MAX_PORT} (0: any free port), got {port}"])


def check_listen(host: str, credentials: Sequence[Credential]) -> None:
    """Refuse to serve beyond loopback without a token, or with a token that is easy to guess: a websocket beyond
    this machine is anyone's to open."""
    if is_loopback(host):
        return
    if not credentials:
        raise ConfigError(
            [
                f"server.host: refusing to listen on {host!r} (reachable from other machines) without a "
                f"token; set server.token in the config or {TOKEN_ENV} in the environment, "
                "or listen on 127.0.0.1"
            ]
        )
    weak = [c.source for c in credentials if len(c.token) < MIN_TOKEN_LENGTH or not c.token.strip()]
    if weak:
        raise ConfigError(
            [
                f"{source}: refusing to listen on {host!r} with a token shorter than {MIN_TOKEN_LENGTH} "
                "characters or made of whitespace; use a long random token (e.g. python -c "
                "'import secrets; print(secrets.token_urlsafe())')"
                for source in weak
            ]
        )


@attrs.frozen
class Handshake:
    """What the service needs from a websocket handshake request."""

    headers: Mapping[str, str]
    subprotocols: tuple[str, ...] = ()


def principal_of(handshake: Handshake, credentials: Sequence[Credential]) -> str | None:
    """The principal whose token the handshake presents, or ``None`` if it presents none of them.

    Every credential is compared (in constant time each), so the time taken does not say which one is close.
    """
    scheme, _, presented = handshake.headers.get("authorization", "").partition(" ")
    candidates = [presented.strip()] if scheme.lower() == "bearer" else []
    candidates += [p[len(BEARER_PREFIX) :] for p in handshake.subprotocols if p.startswith(BEARER_PREFIX)]
    found = None
    for credential in credentials:
        for candidate in candidates:
            if hmac.compare_digest(candidate.encode(), credential.token.encode()) and found is None:
                found = credential.principal
    return found


def selected_subprotocol(handshake: Handshake) -> str | None:
    """The subprotocol to accept: ours if proposed, else the bearer one (a browser needs one of its own back)."""
    if SUBPROTOCOL in handshake.subprotocols:
        return SUBPROTOCOL
    return next((p for p in handshake.subprotocols if p.startswith(BEARER_PREFIX)), None)


def origin_allowed(handshake: Handshake, allowed: Sequence[str], *, token_required: bool = False) -> bool:
    """Whether the handshake's ``Origin`` (if any) may connect.

    An allow-list, when configured, decides alone (``"*"`` accepts any origin). Without one, no ``Origin`` and
    loopback origins (``localhost``, ``127.0.0.0/8``, ``[::1]``) pass, and ``null`` passes only when
    ``token_required``: any web site can make its page's origin ``null`` with a sandboxed iframe, so without a
    token it proves nothing about who drives the connection. The service's own origin
    (``Origin`` host:port equal to ``Host``) passes only when ``token_required``: both headers come from the
    browser, so under DNS rebinding a hostile page at ``http://evil.example:8765`` whose name now resolves to
    127.0.0.1 sends a matching pair, and only a token it cannot know stops it. On loopback the own origin is a
    loopback origin anyway; beyond loopback a token is mandatory (:func:`check_listen`), so a caller passing
    ``token_required`` accepts the page the service serves wherever it listens.
    """
    origin = handshake.headers.get("origin")
    if origin is None or "*" in allowed or origin in allowed:
        return True
    if allowed:
        return False
    if origin == "null":
        return token_required
    parts = urlsplit(origin)
    same_origin = parts.netloc == handshake.headers.get("host")
    return is_loopback(parts.hostname or "") or (token_required and same_origin)

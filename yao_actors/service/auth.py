"""Who may connect: the bearer token, the Origin check, and the rule against serving beyond loopback unprotected.

The token comes from the config (``server.token``) or the ``YAO_ACTORS_TOKEN`` environment variable. A client
presents it at the websocket handshake, either as ``Authorization: Bearer <token>`` or — for browsers, which
cannot set headers on a websocket — as a proposed subprotocol ``bearer.<token>`` (then the page also proposes
:data:`SUBPROTOCOL`, which the service selects).

Origins: a browser sends ``Origin``; clients without one (terminals, scripts) pass. With no allow-list
configured a browser is accepted from loopback origins (which include the page the service serves on
loopback) and from a page opened from disk (``null``), so a web site the user happens to visit cannot drive
a local service; ``"*"`` in the allow-list accepts any origin. See :func:`origin_allowed` for why the
service's own origin counts only when a token is required.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Mapping, Sequence
from typing import Final
from urllib.parse import urlsplit

import attrs

from yao_actors.config import ServiceSpec
from yao_actors.errors import ConfigError

#: The environment variable holding the token when the config has none.
TOKEN_ENV: Final = "YAO_ACTORS_TOKEN"
#: The subprotocol of this service, selected when a client proposes it.
SUBPROTOCOL: Final = "yao-actors"
#: Prefix of the subprotocol value carrying a browser's token.
BEARER_PREFIX: Final = "bearer."


def resolve_token(spec: ServiceSpec, environ: Mapping[str, str] = os.environ) -> str | None:
    """The token in force: the config's, else ``YAO_ACTORS_TOKEN``, else none."""
    return spec.token or environ.get(TOKEN_ENV) or None


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_listen(host: str, token: str | None) -> None:
    """Refuse to serve beyond loopback without a token (DESIGN §5.2)."""
    if token is None and not is_loopback(host):
        raise ConfigError(
            [
                f"server.host: refusing to listen on {host!r} (reachable from other machines) without a "
                f"token; set server.token in the config or {TOKEN_ENV} in the environment, "
                "or listen on 127.0.0.1"
            ]
        )


@attrs.frozen
class Handshake:
    """What the service needs from a websocket handshake request."""

    headers: Mapping[str, str]
    subprotocols: tuple[str, ...] = ()

    @classmethod
    def from_raw(cls, headers: Sequence[tuple[bytes, bytes]], subprotocols: Sequence[str]) -> Handshake:
        """Build from trio-websocket's raw header pairs (names lower-cased, the first value of each kept)."""
        decoded: dict[str, str] = {}
        for name, value in headers:
            decoded.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
        return cls(headers=decoded, subprotocols=tuple(subprotocols))


def authorized(handshake: Handshake, token: str | None) -> bool:
    """Whether the handshake presents ``token`` (always true when no token is configured)."""
    if token is None:
        return True
    scheme, _, presented = handshake.headers.get("authorization", "").partition(" ")
    candidates = [presented.strip()] if scheme.lower() == "bearer" else []
    candidates += [p[len(BEARER_PREFIX) :] for p in handshake.subprotocols if p.startswith(BEARER_PREFIX)]
    return any(hmac.compare_digest(c.encode(), token.encode()) for c in candidates)


def selected_subprotocol(handshake: Handshake) -> str | None:
    """The subprotocol to accept: ours if proposed, else the bearer one (a browser needs one of its own back)."""
    if SUBPROTOCOL in handshake.subprotocols:
        return SUBPROTOCOL
    return next((p for p in handshake.subprotocols if p.startswith(BEARER_PREFIX)), None)


def origin_allowed(handshake: Handshake, allowed: Sequence[str], *, token_required: bool = False) -> bool:
    """Whether the handshake's ``Origin`` (if any) may connect.

    An allow-list, when configured, decides alone (``"*"`` accepts any origin). Without one, no ``Origin``,
    ``null`` and loopback origins (``localhost``, ``127.0.0.0/8``, ``[::1]``) pass. The service's own origin
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
        return True
    parts = urlsplit(origin)
    same_origin = parts.netloc == handshake.headers.get("host")
    return is_loopback(parts.hostname or "") or (token_required and same_origin)

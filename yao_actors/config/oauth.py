"""The ``mcpServers.<id>.auth`` key: an HTTP or SSE server behind the MCP authorization flow (OAuth 2.1).

::

    "auth": {"type": "oauth", "scopes": ["read"], "client_id": "${ID}", "client_secret": "${SECRET}",
             "client_metadata_url": "https://agent.example/client.json", "identity": "service"}
    "auth": {"type": "client_credentials", "issuer": "https://auth.example", "client_id": "${ID}",
             "client_secret": "${SECRET}"}                      (or "private_key": "${PEM}": private_key_jwt)
    "auth": {"type": "cross_app_access", "issuer": "https://auth.example", "client_id": "${ID}",
             "client_secret": "${SECRET}", "identity_provider": {"token_endpoint": "https://idp.example/token",
             "client_id": "${IDP_ID}", "id_token": "${ID_TOKEN}"}}

Every string takes ``${VAR}``. ``type`` is required; the others are optional, except what a type without a person
needs: its ``issuer`` (the only authorization server its credentials are sent to), ``client_id`` and a secret or key.
"""

from __future__ import annotations

from typing import Any, Final, cast

from yao_actors.config.values import ValueReader, join_path
from yao_actors.transport_specs import IdentityProviderSpec, OAuthIdentity, OAuthSpec

#: The keys of ``mcpServers.<id>.auth``.
AUTH_KEYS: Final = (
    "type",
    "scopes",
    "client_id",
    "client_secret",
    "client_metadata_url",
    "identity",
    "token_endpoint_auth_method",
    "private_key",
    "signing_algorithm",
    "issuer",
    "identity_provider",
)
#: What ``auth.type`` may say.
AUTH_TYPES: Final = ("oauth", "client_credentials", "cross_app_access")
#: The keys of ``auth.identity_provider``.
PROVIDER_KEYS: Final = ("token_endpoint", "client_id", "client_secret", "id_token")
#: What ``auth.token_endpoint_auth_method`` may say.
SECRET_METHODS: Final = ("client_secret_basic", "client_secret_post")
#: What ``auth.signing_algorithm`` may say (the JWT algorithms of ``private_key_jwt``).
SIGNING_ALGORITHMS: Final = ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512")
#: What ``auth.identity`` may say.
IDENTITIES: Final = ("service", "principal")


def read_oauth(reader: ValueReader, value: Any, path: str) -> OAuthSpec | None:
    """``mcpServers.<id>.auth`` of an HTTP or SSE server; ``None`` (and a problem in ``reader``) when it is wrong."""
    item = reader.obj(value, path, AUTH_KEYS)
    if item is None:
        return None
    ok = True
    if "type" not in item:
        reader.fail(
            join_path(path, "type"), 'required: "oauth" (the MCP authorization flow), or one of ' + str(AUTH_TYPES)
        )
        ok = False
    elif reader.choice(item["type"], join_path(path, "type"), AUTH_TYPES) is None:
        ok = False
    options: dict[str, Any] = {}
    if ok:
        options["type"] = item["type"]
    if "scopes" in item:
        scopes_path = join_path(path, "scopes")
        scopes = reader.strings(item["scopes"], scopes_path)
        if not isinstance(item["scopes"], list) or len(scopes) != len(item["scopes"]):
            ok = False
        options["scopes"] = tuple(reader.expand(s, join_path(scopes_path, i)) for i, s in enumerate(scopes))
    for key in ("client_id", "client_secret", "client_metadata_url", "private_key", "issuer"):
        if key in item:
            text = reader.expanded_string(item[key], join_path(path, key))
            ok = ok and bool(text)
            options[key] = text
    metadata_url = options.get("client_metadata_url")
    if metadata_url and not _is_metadata_url(metadata_url):
        reader.fail(
            join_path(path, "client_metadata_url"),
            f"must be an https:// URL with a path (a Client ID Metadata Document), got {metadata_url!r}",
        )
        ok = False
    if "client_secret" in item and "client_id" not in item:
        reader.fail(join_path(path, "client_secret"), "needs a 'client_id' (the secret is that client's)")
        ok = False
    if "identity" in item:
        identity = reader.choice(item["identity"], join_path(path, "identity"), IDENTITIES)
        ok = ok and identity is not None
        options["identity"] = cast(OAuthIdentity, identity)
    for key, choices in (("token_endpoint_auth_method", SECRET_METHODS), ("signing_algorithm", SIGNING_ALGORITHMS)):
        if key in item:
            chosen = reader.choice(item[key], join_path(path, key), choices)
            ok = ok and chosen is not None
            options[key] = chosen
    if "identity_provider" in item:
        provider = _read_provider(reader, item["identity_provider"], join_path(path, "identity_provider"))
        ok = ok and provider is not None
        options["identity_provider"] = provider
    if ok:
        ok = _kind_fits(reader, options, path)
    return OAuthSpec(**options) if ok else None


def _read_provider(reader: ValueReader, value: Any, path: str) -> IdentityProviderSpec | None:
    """``auth.identity_provider``: where the ID token is exchanged for an identity assertion grant."""
    item = reader.obj(value, path, PROVIDER_KEYS)
    if item is None:
        return None
    options: dict[str, str | None] = {}
    ok = True
    for key in PROVIDER_KEYS:
        if key in item:
            options[key] = reader.expanded_string(item[key], join_path(path, key))
            ok = ok and bool(options[key])
        elif key != "client_secret":
            reader.fail(join_path(path, key), "required")
            ok = False
    return IdentityProviderSpec(**options) if ok else None  # type: ignore[arg-type]


#: The keys only some kinds of ``auth`` take.
_ONLY_FOR: Final = {
    "client_metadata_url": ("oauth",),
    "private_key": ("client_credentials",),
    "signing_algorithm": ("client_credentials",),
    "identity_provider": ("cross_app_access",),
}


def _kind_fits(reader: ValueReader, options: dict[str, Any], path: str) -> bool:
    """Whether the keys fit ``auth.type``: a kind without a person needs its issuer, client and credential, and
    serves the service's identity only (no principal logs in to it)."""
    kind = options.get("type", "oauth")
    ok = True
    for key, kinds in _ONLY_FOR.items():
        if key in options and kind not in kinds:
            reader.fail(join_path(path, key), f"only with type {' or '.join(repr(k) for k in kinds)}")
            ok = False
    if kind == "oauth":
        return ok
    needed = ["issuer", "client_id"]
    if kind == "cross_app_access":
        needed += ["client_secret", "identity_provider"]
    elif "client_secret" not in options and "private_key" not in options:
        reader.fail(path, "type 'client_credentials' needs a 'client_secret' or a 'private_key' (private_key_jwt)")
        ok = False
    for key in needed:
        if key not in options:
            reader.fail(join_path(path, key), f"required with type {kind!r}")
            ok = False
    if options.get("client_secret") and options.get("private_key"):
        reader.fail(join_path(path, "private_key"), "give a 'client_secret' or a 'private_key', not both")
        ok = False
    if options.get("identity", "service") != "service":
        reader.fail(join_path(path, "identity"), f"type {kind!r} has no person to log in: only 'service'")
        ok = False
    return ok


def _is_metadata_url(url: str) -> bool:
    """What the SDK takes as a client id URL: https, with a path beyond ``/``."""
    if not url.startswith("https://"):
        return False
    rest = url.removeprefix("https://")
    return "/" in rest and rest.split("/", 1)[1] != ""

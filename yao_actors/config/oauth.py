"""The ``mcpServers.<id>.auth`` key: an HTTP or SSE server behind the MCP authorization flow (OAuth 2.1).

::

    "auth": {"type": "oauth", "scopes": ["read"], "client_id": "${ID}", "client_secret": "${SECRET}",
             "client_metadata_url": "https://agent.example/client.json", "identity": "service"}

Every string takes ``${VAR}``. ``type`` is ``"oauth"``, the one kind there is; the others are optional.
"""

from __future__ import annotations

from typing import Any, Final, cast

from yao_actors.config.values import ValueReader, join_path
from yao_actors.specs import OAuthIdentity, OAuthSpec

#: The keys of ``mcpServers.<id>.auth``.
AUTH_KEYS: Final = ("type", "scopes", "client_id", "client_secret", "client_metadata_url", "identity")
#: What ``auth.type`` may say.
AUTH_TYPES: Final = ("oauth",)
#: What ``auth.identity`` may say.
IDENTITIES: Final = ("service", "principal")


def read_oauth(reader: ValueReader, value: Any, path: str) -> OAuthSpec | None:
    """``mcpServers.<id>.auth`` of an HTTP or SSE server; ``None`` (and a problem in ``reader``) when it is wrong."""
    item = reader.obj(value, path, AUTH_KEYS)
    if item is None:
        return None
    ok = True
    if "type" not in item:
        reader.fail(join_path(path, "type"), 'required: "oauth" (the MCP authorization flow)')
        ok = False
    elif reader.choice(item["type"], join_path(path, "type"), AUTH_TYPES) is None:
        ok = False
    options: dict[str, Any] = {}
    if "scopes" in item:
        scopes_path = join_path(path, "scopes")
        scopes = reader.strings(item["scopes"], scopes_path)
        if not isinstance(item["scopes"], list) or len(scopes) != len(item["scopes"]):
            ok = False
        options["scopes"] = tuple(reader.expand(s, join_path(scopes_path, i)) for i, s in enumerate(scopes))
    for key in ("client_id", "client_secret", "client_metadata_url"):
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
    return OAuthSpec(**options) if ok else None


def _is_metadata_url(url: str) -> bool:
    """What the SDK takes as a client id URL: https, with a path beyond ``/``."""
    if not url.startswith("https://"):
        return False
    rest = url.removeprefix("https://")
    return "/" in rest and rest.split("/", 1)[1] != ""

"""The authorization desk: what a runtime's per-principal OAuth servers and the service's callback share.

The desk holds the token vault, the pending authorization states, and where the authorization server sends the
user back (the service's callback); it also serves the service's Client ID Metadata Document when the service has
an https public URL.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from yao_actors.auth.callback import Authorized, complete_authorization
from yao_actors.auth.discovery import DiscoveryCache
from yao_actors.auth.states import AuthorizationStates
from yao_actors.auth.vault import TokenVault
from yao_actors.store.protocol import ConversationStore

#: Where the service takes the authorization server's redirect, and serves its Client ID Metadata Document.
CALLBACK_PATH: Final = "/oauth/callback"
METADATA_PATH: Final = "/oauth/client-metadata.json"


@attrs.define(eq=False)
class AuthorizationDesk:
    """What the routers and the service's callback share: the vault, the pending states, where the redirect goes.

    ``public_url`` is ``server.public_url``; without it the service names its own address (:attr:`base_url`,
    set when it listens). With neither (an embedded runtime), no principal can be sent to authorize.
    """

    vault: TokenVault
    states: AuthorizationStates
    public_url: str | None = None
    base_url: str | None = None
    discovery: DiscoveryCache = attrs.field(factory=DiscoveryCache)
    """Each server's discovery documents, shared by its principals' authorizations."""

    @property
    def redirect_uri(self) -> str | None:
        base = self.public_url or self.base_url
        return None if base is None else base.rstrip("/") + CALLBACK_PATH

    @property
    def client_metadata_url(self) -> str | None:
        """The service's client id where an authorization server takes a metadata document (https only)."""
        if self.public_url is None or not self.public_url.startswith("https://"):
            return None
        return self.public_url.rstrip("/") + METADATA_PATH

    def client_metadata(self) -> dict[str, Any] | None:
        """The Client ID Metadata Document served at :data:`METADATA_PATH` (``None`` without a public URL)."""
        if self.public_url is None:
            return None
        base = self.public_url.rstrip("/")
        return {
            "client_id": base + METADATA_PATH,
            "client_name": "yao-actors",
            "client_uri": base + "/",
            "redirect_uris": [base + CALLBACK_PATH],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }

    async def complete(self, query: Mapping[str, str]) -> Authorized:
        """Finish the authorization a redirect answers (:func:`~yao_actors.auth.callback.complete_authorization`)."""
        return await complete_authorization(query, self.states, self.vault, clock=self.states.clock)


def open_desk(store: ConversationStore, vault: TokenVault, public_url: str | None) -> AuthorizationDesk:
    """The desk of a runtime whose store is ``store`` (its pending states beside the vault's tokens)."""
    return AuthorizationDesk(vault, AuthorizationStates(store.oauth_tokens(), vault.cipher), public_url)

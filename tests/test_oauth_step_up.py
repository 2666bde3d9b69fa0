"""Scope step-up for the service identity: the scopes a server's ``403 insufficient_scope`` asked for are kept with
the login, and the next login asks for them with the granted and configured ones."""

from __future__ import annotations

from yao_actors.auth.flow import StoreOAuthProvider
from yao_actors.auth.vault import SERVICE_IDENTITY, Grant, StoreTokenStorage, open_vault
from yao_actors.specs import OAuthSpec
from yao_actors.store import MemoryStore


async def test_the_scopes_a_step_up_asked_for_are_kept_and_asked_for_by_the_next_login() -> None:
    vault = open_vault(MemoryStore(), None)
    storage = StoreTokenStorage(vault, "hub", SERVICE_IDENTITY)
    await storage.want_scope("mcp:basic mcp:write")
    kept = await vault.load("hub", SERVICE_IDENTITY)
    assert kept.wanted_scope == "mcp:basic mcp:write"
    assert Grant.from_json(kept.to_json()) == kept
    await storage.drop_tokens()  # a step-up drops the tokens too: the scopes stay for the login
    assert (await vault.load("hub", SERVICE_IDENTITY)).wanted_scope == "mcp:basic mcp:write"

    auth = OAuthSpec(scopes=("audit",))
    provider = StoreOAuthProvider("http://127.0.0.1:1/mcp", auth, storage, redirect_uri="http://127.0.0.1:2/callback")
    await provider._initialize()
    provider.context.client_metadata.scope = "mcp:basic"  # what the server's 401 names
    assert provider.scope_to_ask() == "mcp:basic audit mcp:write"


def test_a_record_kept_before_step_ups_reads_without_wanted_scopes() -> None:
    assert Grant.from_json(b'{"tokens": null, "expires_at": null, "client_info": null}') == Grant()

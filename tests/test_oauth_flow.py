"""The OAuth flow's additions to the SDK's: scope step-up for the service identity (the scopes a server's ``403
insufficient_scope`` asked for are kept with the login, and the next login asks for them with the granted and
configured ones), and the 2025-03-26 fallback's issuer on the MCP server's own origin."""

from __future__ import annotations

import httpx2

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


def provider_of(server_url: str) -> StoreOAuthProvider:
    storage = StoreTokenStorage(open_vault(MemoryStore(), None), "hub", SERVICE_IDENTITY)
    return StoreOAuthProvider(server_url, OAuthSpec(), storage, redirect_uri="http://127.0.0.1:2/callback")


def metadata(issuer: str) -> httpx2.Response:
    endpoints = {"authorization_endpoint": f"{issuer}/authorize", "token_endpoint": f"{issuer}/token"}
    return httpx2.Response(200, json={"issuer": issuer, "response_types_supported": ["code"], **endpoints})


async def test_a_legacy_servers_issuer_with_a_path_on_its_own_origin_is_the_one_expected() -> None:
    provider = provider_of("http://mcp.example:8080/mcp")
    assert provider._expected_issuer() == "http://mcp.example:8080"
    root = httpx2.Request("GET", "http://mcp.example:8080/.well-known/oauth-protected-resource")
    assert provider._no_resource_metadata(root, httpx2.Response(404))
    assert not provider._no_resource_metadata(root, httpx2.Response(503))  # the SDK's flow ends there
    assert provider._legacy_metadata_url() == "http://mcp.example:8080/.well-known/oauth-authorization-server"
    await provider._learn_legacy_issuer(metadata("http://mcp.example:8080/oauth"))
    assert provider._expected_issuer() == "http://mcp.example:8080/oauth"


async def test_a_legacy_servers_metadata_naming_another_origin_keeps_the_sdks_rule() -> None:
    provider = provider_of("http://mcp.example:8080/mcp")
    await provider._learn_legacy_issuer(metadata("http://elsewhere.example/oauth"))
    await provider._learn_legacy_issuer(httpx2.Response(404))
    await provider._learn_legacy_issuer(httpx2.Response(200, text="not metadata"))
    assert provider._expected_issuer() == "http://mcp.example:8080"

"""OAuth tokens in each store (issue 32, token storage): sealed with AES-GCM under ``store.secret_key``, by server
and identity, never readable as plaintext in the SQLite file or in Redis, refused under a wrong key, kept across
a reopen, and a durable store without a key refused, naming the setting."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import coredis
import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from tests.store.conftest import Clock
from tests.store.sqlite_files import write_file_of_version
from yao_actors.auth.cipher import TokenCipher
from yao_actors.auth.vault import SERVICE_IDENTITY, Grant, StoreTokenStorage, open_vault, principal_identity
from yao_actors.errors import ConfigError, TokenKeyError
from yao_actors.store import ConversationStore, StoreSpec, open_store
from yao_actors.store.sqlite.schema import MIGRATIONS

KEY = "correct horse battery staple"
ACCESS = "at-PLAINTEXT-access-token-0123456789"
REFRESH = "rt-PLAINTEXT-refresh-token-0123456789"
CLIENT = OAuthClientInformationFull(client_id="client-7", redirect_uris=["http://127.0.0.1:5000/callback"])


async def stored_text(spec: StoreSpec, store: ConversationStore) -> str:
    """Everything the backend holds for the token records, as raw text."""
    if spec.type == "sqlite":
        assert spec.path is not None
        with sqlite3.connect(spec.path) as db:
            return repr(db.execute("SELECT * FROM oauth_tokens").fetchall())
    if spec.type == "redis":
        assert spec.url is not None
        client = coredis.Redis.from_url(spec.url, decode_responses=True)
        async with client:
            keys = await client.keys(f"{spec.prefix}*")
            values = [await client.hgetall(key) for key in keys if key.endswith("oauth:tokens")]
        assert [key for key in keys if "oauth" in key] == [f"{spec.prefix}oauth:tokens"]
        return repr(values)
    return repr(await store.oauth_tokens().load("hub", SERVICE_IDENTITY))


async def test_tokens_round_trip_sealed_by_server_and_identity(
    spec: StoreSpec, store: ConversationStore, clock: Clock
) -> None:
    vault = open_vault(store, KEY)
    storage = StoreTokenStorage(vault, "hub", SERVICE_IDENTITY, clock)
    assert await storage.get_tokens() is None
    await storage.set_client_info(CLIENT)
    await storage.set_tokens(OAuthToken(access_token=ACCESS, refresh_token=REFRESH, expires_in=3600))
    grant = await storage.load()
    assert grant.tokens is not None
    assert grant.tokens.access_token == ACCESS
    assert grant.client_info == CLIENT
    assert grant.expires_at == pytest.approx(clock.now + 3600, abs=1)
    assert ACCESS not in repr(grant)
    # other identities and servers are other records
    await vault.save("hub", principal_identity("a:b%c"), Grant(OAuthToken(access_token="alice-token")))
    assert (await StoreTokenStorage(vault, "hub", SERVICE_IDENTITY).get_tokens()) == grant.tokens
    assert await vault.keys() == [("hub", "principal:a:b%c"), ("hub", SERVICE_IDENTITY)]
    text = await stored_text(spec, store)
    assert ACCESS not in text
    assert REFRESH not in text
    assert "client-7" not in text
    await storage.drop_tokens()
    assert (await storage.load()).client_info == CLIENT
    assert await storage.get_tokens() is None
    assert await vault.forget("hub", SERVICE_IDENTITY)
    assert not await vault.forget("hub", SERVICE_IDENTITY)
    assert await vault.keys() == [("hub", "principal:a:b%c")]


async def test_a_wrong_key_is_a_clear_error_and_the_key_is_never_shown(store: ConversationStore) -> None:
    await open_vault(store, KEY).save("hub", SERVICE_IDENTITY, Grant(OAuthToken(access_token=ACCESS)))
    with pytest.raises(TokenKeyError) as caught:
        await open_vault(store, "another key of some length").load("hub", SERVICE_IDENTITY)
    message = str(caught.value)
    assert "do not open with store.secret_key" in message
    assert "'hub'" in message
    assert ACCESS not in message
    assert KEY not in repr(TokenCipher(KEY))


async def test_a_sealed_record_moved_to_another_record_does_not_open(store: ConversationStore) -> None:
    vault = open_vault(store, KEY)
    await vault.save("hub", SERVICE_IDENTITY, Grant(OAuthToken(access_token=ACCESS)))
    records = store.oauth_tokens()
    sealed = await records.load("hub", SERVICE_IDENTITY)
    assert sealed is not None
    await records.save("other", SERVICE_IDENTITY, sealed)
    with pytest.raises(TokenKeyError):
        await vault.load("other", SERVICE_IDENTITY)


async def test_a_durable_store_without_a_key_is_refused_naming_the_setting(store: ConversationStore) -> None:
    if not store.durable:
        vault = open_vault(store, None)  # a process key: the tokens die with the process anyway
        await vault.save("hub", SERVICE_IDENTITY, Grant(OAuthToken(access_token=ACCESS)))
        assert (await vault.load("hub", SERVICE_IDENTITY)).tokens == OAuthToken(access_token=ACCESS)
        return
    with pytest.raises(ConfigError, match=r"store\.secret_key: required"):
        open_vault(store, None)


async def test_sqlite_tokens_survive_a_reopen(tmp_path: Path) -> None:
    spec = StoreSpec.sqlite(tmp_path / "s.sqlite3")
    async with open_store(spec) as store:
        await open_vault(store, KEY).save("hub", SERVICE_IDENTITY, Grant(OAuthToken(access_token=ACCESS)))
    async with open_store(spec) as store:
        grant = await open_vault(store, KEY).load("hub", SERVICE_IDENTITY)
    assert grant.tokens == OAuthToken(access_token=ACCESS)


def test_grant_usable_needs_a_fresh_access_token_or_a_way_to_refresh() -> None:
    assert not Grant().usable(0)
    assert Grant(OAuthToken(access_token="a"), expires_at=10).usable(5)
    assert not Grant(OAuthToken(access_token="a"), expires_at=10).usable(11)
    assert not Grant(OAuthToken(access_token="a", refresh_token="r"), expires_at=10).usable(11)
    assert Grant(OAuthToken(access_token="a", refresh_token="r"), expires_at=10, client_info=CLIENT).usable(11)
    assert Grant(OAuthToken(access_token="a", refresh_token="r"), expires_at=10).usable(11, configured_client=True)


async def test_an_sqlite_file_of_schema_version_3_gets_the_token_table_and_the_later_versions(tmp_path: Path) -> None:
    path = tmp_path / "conversations.sqlite3"
    write_file_of_version(path, 3, "INSERT INTO threads VALUES ('t1', NULL, 1.0, 1.0)")
    async with open_store(StoreSpec.sqlite(path)) as store:
        assert await store.get_thread("t1") is not None
        await open_vault(store, KEY).save("hub", SERVICE_IDENTITY, Grant(OAuthToken(access_token=ACCESS)))
    db = sqlite3.connect(path)
    assert db.execute("SELECT version FROM schema_version").fetchall() == [(len(MIGRATIONS),)]
    assert db.execute("SELECT server, identity FROM oauth_tokens").fetchall() == [("hub", "service")]
    assert db.execute("SELECT count(*) FROM parked_calls").fetchall() == [(0,)]  # version 5
    db.close()


async def test_a_refused_refresh_drops_only_the_tokens_its_connection_held(store: ConversationStore) -> None:
    """Two connections (two workers, say) hold the same login; one refreshes (the refresh token rotates) and stores
    the new tokens; the other's refresh, with the old refresh token, is refused: it must not drop the new tokens
    (everyone would be asked to log in again), only tokens that are still the ones it held."""
    vault = open_vault(store, KEY)
    old = OAuthToken(access_token="at-1", refresh_token="rt-1", expires_in=60)
    await vault.save("hub", SERVICE_IDENTITY, Grant(old, None, CLIENT))
    first, second = (StoreTokenStorage(vault, "hub", SERVICE_IDENTITY) for _ in range(2))
    for storage in (first, second):
        storage.held = (await storage.load()).tokens  # as each connection's provider starts
    new = OAuthToken(access_token="at-2", refresh_token="rt-2", expires_in=60)
    await first.set_tokens(new)  # the first refreshed
    await second.drop_tokens()  # the second's refresh with rt-1 was refused
    assert (await vault.load("hub", SERVICE_IDENTITY)).tokens == new
    await first.drop_tokens()  # the first's own tokens refused later: dropped, the registration kept
    grant = await vault.load("hub", SERVICE_IDENTITY)
    assert grant.tokens is None
    assert grant.client_info == CLIENT


async def test_pending_states_an_sqlite_file_of_version_5_kept_expire_by_the_index_after_the_upgrade(
    tmp_path: Path,
) -> None:
    """Version 6 gives each token record an expiry column: the pending authorizations kept before (no expiry of
    their own then) get theirs, ten minutes from when they were written, so they too go by the index; tokens none."""
    path = tmp_path / "conversations.sqlite3"
    write_file_of_version(
        path,
        5,
        "INSERT INTO oauth_tokens VALUES ('(oauth-state)', 'old-state', 'v1.sealed', 1000.0)",
        "INSERT INTO oauth_tokens VALUES ('hub', 'service', 'v1.sealed', 1000.0)",
    )
    async with open_store(StoreSpec.sqlite(path)) as store:
        records = store.oauth_tokens()
        assert await records.expire("(oauth-state)", 1599.0) == 0
        assert await records.expire("(oauth-state)", 1600.0) == 1
        assert await records.expire("hub", 10.0**12) == 0
        assert await records.keys() == [("hub", "service")]

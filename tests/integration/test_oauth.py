"""Servers behind OAuth 2.1, with real parts (issue 32): the SDK's own authorization server and bearer check in a
process on loopback, a scripted browser approving, the SDK's client flow with its tokens sealed in the store."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import httpx2
import pytest
import trio

from tests.integration.oauth_support import (
    KEY,
    approve_in_browser,
    authorization_url,
    hub_behind_oauth,
    hub_config,
    oauth_hub,
    open_oauth_server,
    whoami_model,
)
from tests.service.support import http_request, running_service
from yao_actors.auth.flow import authorizing
from yao_actors.auth.login import login
from yao_actors.auth.vault import SERVICE_IDENTITY, TokenVault, open_vault
from yao_actors.errors import ConfigError
from yao_actors.runtime import open_runtime
from yao_actors.specs import (
    Config,
    HttpTransport,
    OAuthSpec,
    ServerSpec,
    SseTransport,
    StoreSpec,
)
from yao_actors.store import open_store
from yao_actors.testing.processes import read_line
from yao_actors.tools.server_actor import serve_mcp_server
from yao_actors.tools.tool_server import ServerState
from yao_actors.transports import open_client

#: The SDK's streamable HTTP client leaves its GET stream's async generators to the garbage collector when a
#: client is closed right after a call (as ``login`` does, and as a bare ``open_client`` does with no OAuth):
#: reported as unraisable ResourceWarnings, not failures of the flow.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
GUARD = 60


def hub(url: str) -> ServerSpec:
    return oauth_hub(url)


async def log_in(spec: ServerSpec, vault: TokenVault) -> int:
    """``login`` with the scripted browser approving what it prints."""
    said: list[str] = []
    async with trio.open_nursery() as nursery:

        def say(text: str) -> None:
            said.append(text)
            nursery.start_soon(approve_in_browser, authorization_url(text))

        tools = await login(spec, vault, say=say, timeout=GUARD)
    assert len(said) == 1
    return tools


async def test_login_stores_sealed_tokens_that_list_the_tools(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with open_oauth_server() as server, open_store(StoreSpec.sqlite(tmp_path / "s.sqlite3")) as store:
        vault = open_vault(store, KEY)
        with trio.fail_after(GUARD):
            assert await log_in(hub(server.url), vault) == 1
        grant = await vault.load("hub", SERVICE_IDENTITY)
        assert grant.tokens is not None
        assert grant.tokens.refresh_token is not None
        assert grant.client_info is not None
        assert (await server.hook("log"))["token_requests"] == ["authorization_code"]
        assert grant.tokens.access_token not in caplog.text
        assert grant.tokens.refresh_token not in caplog.text


def config_of(server_url: str, tmp_path: Path, **store: Any) -> Config:
    return hub_config(hub(server_url), tmp_path, **store)


async def test_a_server_needs_auth_until_the_service_logs_in_then_calls_carry_the_token(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with hub_behind_oauth(tmp_path) as (server, config):
        with trio.fail_after(GUARD):
            async with (
                open_runtime(config, models={"m": whoami_model()}) as runtime,
                running_service(runtime) as service,
            ):
                handle = runtime.servers["hub"]
                assert handle.state is ServerState.NEEDS_AUTH
                stats = handle.statistics()
                assert stats.state is ServerState.NEEDS_AUTH
                assert "run `yao-actors auth login hub`" in (stats.last_error or "")
                ready = await http_request(service.port, "/readyz")
                assert (ready.status, ready.json()["servers_not_ready"]) == (200, ["hub"])  # hub is not required
                assert ready.json()["servers"]["hub"] == {
                    "state": "needs_auth",
                    "error": "unauthorized",
                    "protocol": None,
                }
                before = await runtime.run("a", "who am I?")
                status = [e for e in before.events if e.get("name") == "server_status"]
                assert [e["value"] for e in status] == [
                    {"server": "hub", "state": "needs_auth", "detail": "its tools are not offered"}
                ]
                assert before.text == "tools: []"
                # The login, from this process here (the CLI's, from another, is tested below), into the same store.
                assert await log_in(hub(server.url), open_vault(runtime.store, KEY)) == 1
                await handle.wait_for_state(ServerState.READY)
                after = await runtime.run("a", "who am I?")
                assert after.text == json.dumps("test-user")  # the tool's structured result
                ready = await http_request(service.port, "/readyz")
                assert ready.status == 200
                assert "servers_not_ready" not in ready.json()
                metrics = await http_request(service.port, "/metrics")
                grant = await open_vault(runtime.store, KEY).load("hub", SERVICE_IDENTITY)
    assert grant.tokens is not None
    for secret in (grant.tokens.access_token, grant.tokens.refresh_token or "?"):
        assert secret not in caplog.text
        assert secret not in ready.body.decode()
        assert secret not in metrics.body.decode()
        assert secret not in repr(after.events)


@attrs.define
class Clock:
    """POSIX time that moves when the test says."""

    now: float = attrs.field(factory=time.time)

    def __call__(self) -> float:
        return self.now


async def test_tokens_are_refreshed_before_they_expire_and_a_revoked_login_asks_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with open_oauth_server() as server, open_store(StoreSpec.sqlite(tmp_path / "s.sqlite3")) as store:
        vault = open_vault(store, KEY)
        with trio.fail_after(GUARD):
            await log_in(hub(server.url), vault)
            clock = Clock()
            connect = authorizing(open_client, vault, clock=clock)
            async with trio.open_nursery() as nursery:
                handle = await nursery.start(partial(serve_mcp_server, hub(server.url), connect=connect))
                assert handle.state is ServerState.READY
                first = await vault.load("hub", SERVICE_IDENTITY)
                assert (await handle.call_tool("whoami", {})).ok
                # The server lets every access token expire; the client's clock is 59 minutes on (the token lasts
                # an hour: less than the margin is left), so it refreshes before it sends the call.
                await server.hook("expire")
                clock.now += 3600 - 59
                outcome = await handle.call_tool("whoami", {})
                assert outcome.ok, outcome.error
                assert (await server.hook("log"))["token_requests"] == ["authorization_code", "refresh_token"]
                second = await vault.load("hub", SERVICE_IDENTITY)
                assert second.tokens is not None
                assert first.tokens is not None
                assert second.tokens.access_token != first.tokens.access_token
                assert second.expires_at == pytest.approx(clock.now + 3600)
                # Revoked: the refresh is refused, the tokens are dropped, the server waits for a login.
                await server.hook("revoke")
                await server.hook("expire")
                clock.now += 3600
                refused = await handle.call_tool("whoami", {})
                assert not refused.ok
                await handle.wait_for_state(ServerState.NEEDS_AUTH)
                assert "yao-actors auth login hub" in (handle.statistics().last_error or "")
                assert (await vault.load("hub", SERVICE_IDENTITY)).tokens is None
                later = await handle.call_tool("whoami", {})
                assert not later.ok
                assert "needs authorization" in (later.error or "")
                # A new login (the client registration is kept) and the server is back.
                await log_in(hub(server.url), vault)
                await handle.wait_for_state(ServerState.READY)
                assert (await handle.call_tool("whoami", {})).ok
                nursery.cancel_scope.cancel()
    # No traceback at WARNING or above: the SDK's report of the flow it could not finish is one line.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.exc_info] == []
    assert any("needs authorization" in r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


async def test_a_token_the_server_ends_early_is_refreshed_on_its_401_without_a_login(tmp_path: Path) -> None:
    async with open_oauth_server() as server, open_store(StoreSpec.sqlite(tmp_path / "s.sqlite3")) as store:
        vault = open_vault(store, KEY)
        with trio.fail_after(GUARD):
            await log_in(hub(server.url), vault)
            connect = authorizing(open_client, vault, clock=Clock())
            async with trio.open_nursery() as nursery:
                handle = await nursery.start(partial(serve_mcp_server, hub(server.url), connect=connect))
                assert (await handle.call_tool("whoami", {})).ok
                # The server ends every access token now; by the client's clock they have an hour left, so the
                # first it hears of it is a 401: a refresh answers it (the SDK alone would ask for a new login).
                await server.hook("expire")
                outcome = await handle.call_tool("whoami", {})
                assert outcome.ok, outcome.error
                assert (await server.hook("log"))["token_requests"] == ["authorization_code", "refresh_token"]
                assert handle.state is ServerState.READY
                nursery.cancel_scope.cancel()


async def test_a_runtime_with_a_durable_store_and_no_key_refuses_to_start(tmp_path: Path) -> None:
    config = attrs.evolve(config_of("http://127.0.0.1:1/mcp", tmp_path), store=StoreSpec.sqlite(tmp_path / "s.db"))
    with pytest.raises(ConfigError, match=r"store\.secret_key: required"):
        async with open_runtime(config, models={"m": whoami_model()}):
            pass  # pragma: no cover


async def test_a_wrong_key_leaves_the_server_needing_auth_with_a_clear_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with hub_behind_oauth(tmp_path) as (server, config):
        async with open_store(config.store) as store:  # type: ignore[arg-type]
            await log_in(hub(server.url), open_vault(store, KEY))
        wrong = attrs.evolve(config, store=attrs.evolve(config.store, secret_key="not the key it was stored with"))
        with trio.fail_after(GUARD):
            async with open_runtime(wrong, models={"m": whoami_model()}) as runtime:
                stats = runtime.servers["hub"].statistics()
    assert stats.state is ServerState.NEEDS_AUTH
    assert "do not open with store.secret_key" in (stats.last_error or "")
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and "store.secret_key" in r.getMessage()]
    assert [r.name for r in warned].count("yao_actors.auth.vault") == 1  # said to the operator as such, once


CLI = [sys.executable, "-m", "yao_actors.cli"]


async def cli(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    done = await trio.run_process([*CLI, *args], capture_stdout=True, capture_stderr=True, check=False, env=env)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_the_cli_logs_in_shows_the_status_and_logs_out(tmp_path: Path) -> None:
    async with open_oauth_server() as server:
        config = {
            "mcpServers": {"hub": {"url": server.url, "auth": {"type": "oauth", "scopes": ["tools"]}}},
            "store": {"type": "sqlite", "path": str(tmp_path / "s.sqlite3"), "secret_key": "${YAO_TEST_KEY}"},
        }
        path = tmp_path / "config.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        env = {**os.environ, "YAO_TEST_KEY": KEY}
        with trio.fail_after(GUARD):
            assert (await cli("auth", "status", "--config", str(path), env=env))[1] == (
                "hub: not logged in (yao-actors auth login hub)\n"
            )
            process = await trio.lowlevel.open_process(
                [*CLI, "auth", "login", "hub", "--config", str(path)], stdout=subprocess.PIPE, env=env
            )
            assert process.stdout is not None
            said = [await read_line(process.stdout) for _ in range(3)]
            assert said[0] == "Open this URL in a browser to authorize 'hub':"
            home = await approve_in_browser(authorization_url(said[2]))
            assert home.status_code == 200
            assert "Logged in" in home.text
            rest = await read_line(process.stdout) + await read_line(process.stdout)
            assert await process.wait() == 0
            assert "logged in to 'hub': 1 tool(s)" in rest
            code, out, _ = await cli("auth", "status", "--config", str(path), env=env)
            assert code == 0
            assert out.startswith("hub: logged in, access token expires in ")
            assert out.endswith("s, refreshable\n")
            code, out, _ = await cli("auth", "status", "--config", str(path), env={**env, "YAO_TEST_KEY": "x" * 20})
            assert "hub: the stored tokens of server 'hub' (service) do not open with store.secret_key" in out
            assert (await cli("auth", "logout", "hub", "--config", str(path), env=env))[1] == "logged out of 'hub'\n"
            assert (await cli("auth", "logout", "hub", "--config", str(path), env=env))[
                1
            ] == "'hub' was not logged in\n"
            code, _, err = await cli("auth", "login", "nope", "--config", str(path), env=env)
            assert code == 2
            assert "mcpServers: no server 'nope' (known: 'hub')" in err


async def test_a_principal_identity_server_is_never_served_the_services_tokens(tmp_path: Path) -> None:
    async with hub_behind_oauth(tmp_path) as (server, config):
        async with open_store(config.store) as store:  # type: ignore[arg-type]
            await log_in(hub(server.url), open_vault(store, KEY))  # the service is logged in
        spec = config.servers["hub"]
        transport = attrs.evolve(spec.transport, auth=OAuthSpec(scopes=("tools",), identity="principal"))
        principal = attrs.evolve(config, servers={"hub": attrs.evolve(spec, transport=transport)})
        with trio.fail_after(GUARD):
            async with open_runtime(principal, models={"m": whoami_model()}) as runtime:
                stats = runtime.routers["hub"].statistics()
                result = await runtime.run("a", "who am I?")
        assert (await server.hook("log"))["token_requests"] == ["authorization_code"]  # the login's only
    assert stats.state is ServerState.READY  # the router of the principals' own connections
    status = [e["value"] for e in result.events if e.get("name") == "server_status"]
    assert status[0]["state"] == "down"  # an embedded run without server.public_url cannot ask anyone
    assert "no address for the redirect" in status[0]["detail"]
    assert result.text == "tools: []"


async def test_a_client_registered_beforehand_logs_in_with_its_configured_id(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a free port for the redirect URI the client is registered with
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    redirect = f"http://127.0.0.1:{port}/callback"
    async with open_oauth_server() as server, open_store(StoreSpec.sqlite(tmp_path / "s.sqlite3")) as store:
        async with httpx2.AsyncClient() as http:
            registered = await http.post(
                f"{server.base}/register",
                json={
                    "redirect_uris": [redirect],
                    "token_endpoint_auth_method": "client_secret_post",
                    "scope": "tools",
                },
            )
        assert registered.status_code == 201, registered.text
        client = registered.json()
        auth = OAuthSpec(scopes=("tools",), client_id=client["client_id"], client_secret=client["client_secret"])
        spec = ServerSpec("hub", HttpTransport(server.url, auth=auth))
        vault = open_vault(store, KEY)
        said: list[str] = []
        with trio.fail_after(GUARD):
            async with trio.open_nursery() as nursery:

                def say(text: str) -> None:
                    said.append(authorization_url(text))
                    nursery.start_soon(approve_in_browser, said[-1])

                assert await login(spec, vault, say=say, port=port, timeout=GUARD) == 1
        assert f"client_id={client['client_id']}" in said[0]
        assert (await vault.load("hub", SERVICE_IDENTITY)).tokens is not None
        # The service refreshes as the configured client too (no registration of its own is stored).
        clock = Clock()
        with trio.fail_after(GUARD):
            async with trio.open_nursery() as nursery:
                connect = authorizing(open_client, vault, clock=clock)
                handle = await nursery.start(partial(serve_mcp_server, spec, connect=connect))
                await server.hook("expire")
                clock.now += 3600
                outcome = await handle.call_tool("whoami", {})
                assert outcome.ok, outcome.error
                nursery.cancel_scope.cancel()
        assert (await server.hook("log"))["token_requests"] == ["authorization_code", "refresh_token"]


async def test_an_sse_server_behind_oauth_is_logged_in_to_and_called(tmp_path: Path) -> None:
    async with open_oauth_server("--sse") as server, open_store(StoreSpec.sqlite(tmp_path / "s.sqlite3")) as store:
        spec = ServerSpec("hub", SseTransport(server.url, auth=OAuthSpec(scopes=("tools",))))
        vault = open_vault(store, KEY)
        with trio.fail_after(GUARD):
            assert await log_in(spec, vault) == 1
            async with trio.open_nursery() as nursery:
                connect = authorizing(open_client, vault)
                handle = await nursery.start(partial(serve_mcp_server, spec, connect=connect))
                assert handle.state is ServerState.READY
                outcome = await handle.call_tool("whoami", {})
                assert outcome.ok, outcome.error
                nursery.cancel_scope.cancel()


async def test_tools_after_a_cli_login_lists_the_servers_tools_and_without_one_says_so(tmp_path: Path) -> None:
    """``yao-actors tools`` (as ``check --connect`` and ``call``) looks for the login where ``auth login`` kept it,
    and a server that needs one is reported, not waited for: it used to probe with a store of its own (no login in
    it) and wait for the server to be ``ready`` or ``down`` while it was ``needs_auth`` — forever."""
    async with open_oauth_server() as server:
        config = {
            "mcpServers": {"hub": {"url": server.url, "auth": {"type": "oauth", "scopes": ["tools"]}}},
            "store": {"type": "sqlite", "path": str(tmp_path / "s.sqlite3"), "secret_key": KEY},
        }
        path = tmp_path / "config.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        env = dict(os.environ)
        with trio.fail_after(GUARD):
            code, out, err = await cli("tools", "--config", str(path), env=env)
            assert code == 1, (out, err)
            assert (
                "server hub: server 'hub' unavailable: server 'hub' needs authorization: run `yao-actors auth login hub`"
                in err
            )
            process = await trio.lowlevel.open_process(
                [*CLI, "auth", "login", "hub", "--config", str(path)], stdout=subprocess.PIPE, env=env
            )
            assert process.stdout is not None
            said = [await read_line(process.stdout) for _ in range(3)]
            await approve_in_browser(authorization_url(said[2]))
            assert await process.wait() == 0
            code, out, err = await cli("tools", "--config", str(path), "--json", env=env)
            assert code == 0, err
            listed = json.loads(out)
            assert listed["servers"] == {"hub": {"ok": True, "detail": "ready, 1 tool(s)"}}
            assert [tool["tool"] for tool in listed["tools"]] == ["whoami"]

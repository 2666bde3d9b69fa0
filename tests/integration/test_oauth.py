"""Servers behind OAuth 2.1, with real parts (issue 32): the SDK's own authorization server and bearer check in a
process on loopback, a scripted browser approving, the SDK's client flow with its tokens sealed in the store."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.integration.oauth_support import approve_in_browser, authorization_url, open_oauth_server
from tests.service.support import http_request, running_service
from yao_actors.auth.login import login
from yao_actors.auth.vault import SERVICE_IDENTITY, TokenVault, open_vault
from yao_actors.models import Completion, FunctionModel, ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.specs import (
    AssistantSpec,
    Config,
    HttpTransport,
    OAuthSpec,
    RestartPolicy,
    ServerRef,
    ServerSpec,
    StoreSpec,
)
from yao_actors.store import open_store
from yao_actors.tools.server_handle import ServerState

KEY = "a test key of enough length"

#: The SDK's streamable HTTP client leaves its GET stream's async generators to the garbage collector when a
#: client is closed right after a call (as ``login`` does, and as a bare ``open_client`` does with no OAuth):
#: reported as unraisable ResourceWarnings, not failures of the flow.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
GUARD = 60


def hub(url: str) -> ServerSpec:
    transport = HttpTransport(url, auth=OAuthSpec(scopes=("tools",)))
    return ServerSpec("hub", transport, connect_timeout=20, restart=RestartPolicy(backoff_initial=0.05))


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
    return Config(
        servers={"hub": hub(server_url)},
        assistants={"a": AssistantSpec("a", "m", servers=(ServerRef("hub"),))},
        store=StoreSpec("sqlite", path=str(tmp_path / "s.sqlite3"), secret_key=KEY, **store),
    )


def whoami_model() -> FunctionModel:
    """Calls ``hub__whoami`` when it is offered, then answers with what it said (or with the tools it had)."""

    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        names = [tool["function"]["name"] for tool in tools]
        if messages[-1]["role"] == "user" and "hub__whoami" in names:
            return Completion(tool_calls=(ToolCall("c1", "hub__whoami", "{}"),))
        return " | ".join(str(m["content"]) for m in messages if m["role"] == "tool") or f"tools: {names}"

    return FunctionModel(answer)


async def test_a_server_needs_auth_until_the_service_logs_in_then_calls_carry_the_token(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with open_oauth_server() as server:
        config = config_of(server.url, tmp_path)
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
                assert ready.status == 503
                assert ready.json()["servers"]["hub"]["state"] == "needs_auth"
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
                grant = await open_vault(runtime.store, KEY).load("hub", SERVICE_IDENTITY)
    assert grant.tokens is not None
    for secret in (grant.tokens.access_token, grant.tokens.refresh_token or "?"):
        assert secret not in caplog.text
        assert secret not in ready.body.decode()
        assert secret not in repr(after.events)

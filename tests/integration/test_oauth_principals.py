"""``auth.identity: "principal"`` with real parts (issue 32): the SDK's authorization server and bearer check in a
process on loopback, the real service over real websockets with two principals, a scripted browser that follows
each ``authorization_required`` interrupt's URL and approves as its own person, the redirect reaching the service's
``/oauth/callback``, and the resumed runs going on with each principal's own connection and tokens."""

from __future__ import annotations

import json
import logging
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from tests.integration.oauth_support import (
    KEY,
    OAuthTestServer,
    approve_in_browser,
    hub_behind_oauth,
    hub_config,
    oauth_hub,
    whoami_model,
)
from tests.integration.test_agui_node import run_http_agent
from tests.integration.test_oauth import Clock
from tests.service.agui_support import post_agui, run_input
from tests.service.support import http_request, run_frame, running_service, send, until_terminal
from tests.support import require_tool
from yao_actors.auth.principals import PrincipalServers
from yao_actors.auth.vault import principal_identity
from yao_actors.cli.chat import open_service_connection
from yao_actors.models import Completion, FunctionModel, ToolCall
from yao_actors.runtime import Runtime, open_runtime
from yao_actors.service import Service
from yao_actors.specs import (
    Config,
)
from yao_actors.tools.tool_server import ServerState

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
GUARD = 60
CLI = [sys.executable, "-m", "yao_actors.cli"]
ALICE, BOB = "alice-token-0123456789", "bob-token-0123456789ab"
TOKENS = {"alice": ALICE, "bob": BOB}


async def cli(*args: str) -> tuple[int, str, str]:
    done = await trio.run_process([*CLI, *args], capture_stdout=True, capture_stderr=True, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def config_of(url: str, tmp_path: Path) -> Config:
    return hub_config(oauth_hub(url, identity="principal"), tmp_path, assistant="default")


def principal_hub(tmp_path: Path, *options: str) -> AbstractAsyncContextManager[tuple[OAuthTestServer, Config]]:
    """The OAuth test server and a config of its ``hub`` with ``identity: "principal"``."""
    return hub_behind_oauth(tmp_path, *options, assistant="default", identity="principal")


async def ask_all(service: Service, token: str, frame: dict[str, Any]) -> list[dict[str, Any]]:
    """One run over a websocket of the principal of ``token``; its events."""
    async with open_service_connection(service.url, token=token) as ws:
        await send(ws, frame)
        return await until_terminal(ws, frame["runId"])


async def ask(service: Service, token: str, frame: dict[str, Any]) -> dict[str, Any]:
    """One run over a websocket of the principal of ``token``; its terminal event."""
    return (await ask_all(service, token, frame))[-1]


def resume_frame(run_id: str, thread_id: str, *interrupt_ids: str) -> dict[str, Any]:
    resume = [{"interruptId": i, "status": "resolved"} for i in interrupt_ids]
    return {"type": "run", "runId": run_id, "threadId": thread_id, "messages": [], "resume": resume}


@asynccontextmanager
async def serving(config: Config) -> AsyncIterator[tuple[Runtime, Service]]:
    """The runtime of ``config`` with :func:`whoami_model`, served with the principals' :data:`TOKENS`."""
    async with (
        open_runtime(config, models={"m": whoami_model(last_only=True)}) as runtime,
        running_service(runtime, tokens=TOKENS) as service,
    ):
        yield runtime, service


def the_interrupt(terminal: dict[str, Any]) -> dict[str, Any]:
    assert terminal["type"] == "RUN_FINISHED", terminal
    assert terminal["outcome"]["type"] == "interrupt", terminal
    (interrupt,) = terminal["outcome"]["interrupts"]
    assert interrupt["reason"] == "authorization_required"
    assert interrupt["id"] == "authorization-hub"
    assert interrupt["metadata"] == {"server": "hub", "url": interrupt["url"]}
    return dict(interrupt)


async def authorize(server: OAuthTestServer, interrupt: dict[str, Any], user: str) -> Any:
    """The person follows the interrupt's URL and approves as ``user``; the redirect reaches the service."""
    assert interrupt["url"].startswith(f"{server.base}/authorize?")
    return await approve_in_browser(interrupt["url"], user=user)


async def alice_logs_in(server: OAuthTestServer, service: Service) -> dict[str, Any]:
    """Alice's first run (``a1`` in thread ``ta``) is asked to authorize, she approves as ``alice-person``, and the
    run resumed as ``a2``: its terminal event."""
    asked = the_interrupt(await ask(service, ALICE, run_frame("who?", run_id="a1", thread_id="ta")))
    await authorize(server, asked, "alice-person")
    return await ask(service, ALICE, resume_frame("a2", "ta", "authorization-hub"))


async def test_two_principals_authorize_through_the_service_and_never_share_tokens(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with principal_hub(tmp_path) as (server, config):
        with trio.fail_after(GUARD):
            async with serving(config) as (runtime, service):
                assert runtime.routers["hub"].state is ServerState.READY  # the router; no principal connected
                assert "hub" not in runtime.servers  # a router takes no calls
                events_a = await ask_all(service, ALICE, run_frame("who am I?", run_id="a1", thread_id="ta"))
                first_a = the_interrupt(events_a[-1])
                told = [e["value"] for e in events_a if e.get("name") == "server_status"]
                assert told == [{"server": "hub", "state": "needs_auth", "detail": "its tools are not offered"}]
                assert not [e for e in events_a if e["type"].startswith("TEXT_MESSAGE")]  # no model call was made
                first_b = the_interrupt(await ask(service, BOB, run_frame("who am I?", run_id="b1", thread_id="tb")))
                assert first_a["url"] != first_b["url"]
                # A resume before authorizing: the interrupt stays open (the same id, the same pending authorization).
                early = the_interrupt(await ask(service, ALICE, resume_frame("a2", "ta", "authorization-hub")))
                landed_a = await authorize(server, early, "alice-person")
                landed_b = await authorize(server, first_b, "bob-person")
                assert landed_a.status_code == 200, landed_a.text
                assert landed_b.status_code == 200, landed_b.text
                assert "authorized" in landed_a.text
                # The first URL's state was never used: still good once; the second redirect of it is refused.
                replayed = await http_request(service.port, "/oauth/callback?" + landed_a.url.query.decode())
                after_a = await ask(service, ALICE, resume_frame("a3", "ta", "authorization-hub"))
                after_b = await ask(service, BOB, resume_frame("b2", "tb", "authorization-hub"))
                again_a = await ask(service, ALICE, run_frame("and now?", run_id="a4", thread_id="ta"))
                vault_keys = await runtime.authorizations.vault.keys()  # type: ignore[union-attr]
                log = await server.hook("log")
            # The CLI, from another process, on the same store: who has authorized, and one principal's logout.
            path = tmp_path / "config.json"
            auth = {"type": "oauth", "scopes": ["tools"], "identity": "principal"}
            store = {"type": "sqlite", "path": str(tmp_path / "s.sqlite3"), "secret_key": KEY}
            path.write_text(json.dumps({"mcpServers": {"hub": {"url": server.url, "auth": auth}}, "store": store}))
            status = await cli("auth", "status", "--config", str(path))
            logout = await cli("auth", "logout", "hub", "--principal", "bob", "--config", str(path))
            after = await cli("auth", "status", "--config", str(path))
    assert status == (0, "hub: identity 'principal': 'alice' authorized, 'bob' authorized\n", "")
    assert logout == (0, "principal 'bob' logged out of 'hub'\n", "")
    assert after[1] == "hub: identity 'principal': 'alice' authorized\n"
    assert replayed.status == 400
    assert "already used or expired" in replayed.body.decode()
    assert after_a["result"]["text"] == '"alice-person"'
    assert after_b["result"]["text"] == '"bob-person"'
    assert again_a["result"]["text"] == '"alice-person"'
    assert ("hub", principal_identity("alice")) in vault_keys
    assert ("hub", principal_identity("bob")) in vault_keys
    assert ("hub", "service") not in vault_keys
    # The server saw each principal's calls with that principal's tokens only, and no token on both sides.
    subjects = [call["subject"] for call in log["calls"]]
    assert sorted(subjects) == ["alice-person", "alice-person", "bob-person"]
    alice_tokens = {c["token"] for c in log["calls"] if c["subject"] == "alice-person"}
    bob_tokens = {c["token"] for c in log["calls"] if c["subject"] == "bob-person"}
    assert alice_tokens.isdisjoint(bob_tokens)
    assert log["token_requests"] == ["authorization_code", "authorization_code"]
    assert [r for r in caplog.records if r.exc_info and r.levelno >= logging.WARNING] == []


async def test_a_principal_authorizes_and_resumes_through_post_agui(tmp_path: Path) -> None:
    async with principal_hub(tmp_path) as (server, config):
        bearer = {"authorization": f"Bearer {ALICE}"}
        asked_for = {"id": "u1", "role": "user", "content": "who am I?"}
        with trio.fail_after(GUARD):
            async with serving(config) as (_runtime, service):
                first = await post_agui(
                    service.port, run_input(thread_id="tp", run_id="p1", messages=[asked_for]), headers=bearer
                )
                await authorize(server, the_interrupt(first.events[-1]), "alice-person")
                resume = [{"interruptId": "authorization-hub", "status": "resolved"}]
                body = run_input(thread_id="tp", run_id="p2", messages=[asked_for], resume=resume)
                second = await post_agui(service.port, body, headers=bearer)
    assert first.status == 200
    assert second.status == 200
    assert second.events[-1]["type"] == "RUN_FINISHED"
    assert second.events[-1]["result"]["text"] == '"alice-person"'


async def test_the_official_http_agent_authorizes_a_principal_and_resumes(tmp_path: Path) -> None:
    require_tool(shutil.which("node"), "node")
    async with principal_hub(tmp_path) as (server, config):
        with trio.fail_after(GUARD):
            async with serving(config) as (_runtime, service):
                seen = await run_http_agent(
                    {
                        "url": f"http://127.0.0.1:{service.port}/agui",
                        "headers": {"authorization": f"Bearer {ALICE}"},
                        "question": "who am I?",
                        "authorize": {"user": "alice-person"},
                    }
                )
            log = await server.hook("log")
    assert seen.get("error") is None, seen
    first, second = seen["runs"][:2]
    (interrupt,) = first[-1]["outcome"]["interrupts"]  # as the client parsed it: what it knows, and metadata
    assert (interrupt["id"], interrupt["reason"]) == ("authorization-hub", "authorization_required")
    assert interrupt["metadata"]["url"].startswith(f"{server.base}/authorize?")
    assert second[-1]["type"] == "RUN_FINISHED"
    (result,) = [e for e in second if e["type"] == "TOOL_CALL_RESULT"]
    assert json.loads(result["content"]) == "alice-person"
    assert [call["subject"] for call in log["calls"]] == ["alice-person"]


async def test_a_wrong_or_missing_state_is_a_400_page_and_nothing_is_stored(tmp_path: Path) -> None:
    async with principal_hub(tmp_path) as (_server, config):
        with trio.fail_after(GUARD):
            async with serving(config) as (runtime, service):
                wrong = await http_request(service.port, "/oauth/callback?state=made-up&code=abc")
                missing = await http_request(service.port, "/oauth/callback?code=abc")
                no_metadata = await http_request(service.port, "/oauth/client-metadata.json")
                keys = await runtime.authorizations.vault.keys()  # type: ignore[union-attr]
    assert wrong.status == 400
    assert missing.status == 400
    assert "<h1>Authorization not completed</h1>" in wrong.body.decode()
    assert no_metadata.status == 404  # no server.public_url
    assert keys == []


async def test_with_a_public_url_the_service_serves_its_client_metadata_and_redirects_there(tmp_path: Path) -> None:
    async with principal_hub(tmp_path) as (_server, config):
        public = "http://127.0.0.1:9/agent"  # where a proxy would publish the service (here: nobody listens)
        config = attrs.evolve(config, service=attrs.evolve(config.service, public_url=public))
        with trio.fail_after(GUARD):
            async with serving(config) as (_runtime, service):
                document = await http_request(service.port, "/oauth/client-metadata.json")
                asked = the_interrupt(await ask(service, ALICE, run_frame("hi", run_id="a1", thread_id="ta")))
    assert document.status == 200
    assert document.json() == {
        "client_id": f"{public}/oauth/client-metadata.json",
        "client_name": "yao-actors",
        "client_uri": f"{public}/",
        "redirect_uris": [f"{public}/oauth/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    assert "redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fagent%2Foauth%2Fcallback" in asked["url"]


def stubborn_model() -> FunctionModel:
    """Calls ``hub__whoami`` whether it is offered or not (a model that remembers it from before)."""

    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user":
            return Completion(tool_calls=(ToolCall("c1", "hub__whoami", "{}"),))
        return str(messages[-1]["content"])

    return FunctionModel(answer)


async def test_an_authorization_server_out_of_reach_makes_the_server_unavailable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = config_of("http://127.0.0.1:9/mcp", tmp_path)  # nobody listens on port 9
    with trio.fail_after(GUARD):
        async with (
            open_runtime(config, models={"m": stubborn_model()}) as runtime,
            running_service(runtime, tokens=TOKENS) as service,
            open_service_connection(service.url, token=ALICE) as ws,
        ):
            await send(ws, run_frame("who am I?", run_id="a1", thread_id="ta"))
            events = await until_terminal(ws, "a1")
    status = [e["value"] for e in events if e.get("name") == "server_status"]
    assert status[0]["server"] == "hub"
    assert status[0]["state"] == "down"
    assert "its authorization server could not be reached" in status[0]["detail"]
    assert "Traceback" not in repr(events)
    (result,) = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result["content"] == "Error: server 'hub' is down; its tools are not available now"
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["result"]["toolCalls"][0]["kind"] == "server_unavailable"
    assert [r.getMessage() for r in caplog.records if r.exc_info and r.levelno >= logging.WARNING] == []


async def test_a_revoked_principal_is_asked_again_and_goes_on_once_it_authorizes(tmp_path: Path) -> None:
    async with principal_hub(tmp_path) as (server, config):
        with trio.fail_after(GUARD):
            async with serving(config) as (_runtime, service):
                first = await alice_logs_in(server, service)
                await server.hook("revoke")
                await server.hook("expire")
                refused = await ask(service, ALICE, run_frame("who now?", run_id="a3", thread_id="ta"))
                again = the_interrupt(await ask(service, ALICE, run_frame("and now?", run_id="a4", thread_id="ta")))
                await authorize(server, again, "alice-person")
                back = await ask(service, ALICE, resume_frame("a5", "ta", "authorization-hub"))
                log = await server.hook("log")
    assert first["result"]["text"] == '"alice-person"'
    # The call that met the revoked login failed (the refresh was refused); the next run asked again.
    assert "needs the user's authorization again" in refused["result"]["text"]
    assert back["result"]["text"] == '"alice-person"'
    assert log["token_requests"] == ["authorization_code", "authorization_code"]  # the refused refresh is not one


async def test_after_a_restart_with_another_secret_key_a_principal_is_asked_again_and_the_log_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Tokens that do not open with ``store.secret_key`` count as absent: the principal authorizes again (and goes
    on), and the operator reads a WARNING naming ``store.secret_key``, once."""
    async with principal_hub(tmp_path) as (server, config):
        other = attrs.evolve(config, store=attrs.evolve(config.store, secret_key="another key, not the first one"))
        with trio.fail_after(GUARD):
            async with serving(config) as (_runtime, service):
                first = await alice_logs_in(server, service)
            async with serving(other) as (_runtime, service):
                again = the_interrupt(await ask(service, ALICE, run_frame("who now?", run_id="a3", thread_id="ta")))
                still = the_interrupt(await ask(service, ALICE, run_frame("and now?", run_id="a4", thread_id="ta")))
                await authorize(server, still, "alice-person")
                back = await ask(service, ALICE, resume_frame("a5", "ta", "authorization-hub"))
    assert first["result"]["text"] == back["result"]["text"] == '"alice-person"'
    assert again["url"] == still["url"]  # the pending authorization is given again until it is answered
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "secret_key" in r.getMessage()]
    assert warned == [
        "the stored tokens of server 'hub' (principal:alice) do not open with store.secret_key: the key is wrong or "
        "changed since they were stored (set the key they were stored with, or log in again); until then they count "
        "as absent and must be authorized again"
    ]


def moved_clock(runtime: Runtime) -> Clock:
    """The POSIX time by which ``runtime`` reckons when the principals' tokens of ``hub`` expire (its router's, and
    its authorizations' as the callback stores a login's), from now on moved by the test."""
    clock = Clock()
    desk, router = runtime.authorizations, runtime.routers["hub"]
    assert desk is not None
    assert isinstance(router, PrincipalServers)
    desk.states = attrs.evolve(desk.states, clock=clock)
    router.clock = clock
    return clock


async def test_a_token_due_for_its_refresh_is_refreshed_between_runs_and_a_refused_refresh_asks_in_that_run(
    tmp_path: Path,
) -> None:
    """The access tokens last an hour; the service's clock moves on instead of the test waiting (a token that
    lasted two real seconds was due, or already refused by the server, whenever a loaded machine was slow)."""
    async with principal_hub(tmp_path) as (server, config):
        with trio.fail_after(GUARD):
            async with serving(config) as (runtime, service):
                clock = moved_clock(runtime)
                first = await alice_logs_in(server, service)
                # The service's clock is 59 minutes on (less than the margin is left): the token, which the server
                # still accepts, is due for its refresh and refreshed as the run starts (ended at the server, the
                # SDK would refresh it on the refusal by itself, and this would prove nothing).
                clock.now += 3600 - 59
                refreshed = await ask(service, ALICE, run_frame("still me?", run_id="a3", thread_id="ta"))
                await server.hook("revoke")
                await server.hook("expire")
                clock.now += 3600 - 59  # due again, and this refresh is refused: asked in this run
                again = the_interrupt(await ask(service, ALICE, run_frame("and now?", run_id="a4", thread_id="ta")))
                await authorize(server, again, "alice-person")
                back = await ask(service, ALICE, resume_frame("a5", "ta", "authorization-hub"))
                log = await server.hook("log")
    assert first["result"]["text"] == '"alice-person"'
    assert refreshed["result"]["text"] == '"alice-person"'
    assert back["result"]["text"] == '"alice-person"'
    assert log["token_requests"][:2] == ["authorization_code", "refresh_token"]
    assert log["token_requests"].count("authorization_code") == 2  # the first login, and the one asked again


async def test_an_embedded_run_is_told_why_the_server_is_down(tmp_path: Path) -> None:
    config = config_of("http://127.0.0.1:9/mcp", tmp_path)
    with trio.fail_after(GUARD):
        async with open_runtime(config, models={"m": whoami_model(last_only=True)}) as runtime:
            assert isinstance(runtime, Runtime)
            result = await runtime.run("default", "who am I?", principal="alice")
    status = [e["value"] for e in result.events if e.get("name") == "server_status"]
    assert status[0]["server"] == "hub"
    assert status[0]["state"] == "down"
    assert "no address for the redirect: set server.public_url" in status[0]["detail"]
    assert result.text == "tools: []"

"""Plain HTTP on the service's port: the page, /healthz, /readyz, /metrics, and the shutdown grace.

Real loopback sockets; the runtime is the fake one (``tests/integration/test_service_health.py`` has a real
runtime with a server that cannot start, ``test_service_process.py`` a real process scraped after a run).
"""

from __future__ import annotations

import attrs
import trio
from prometheus_client.parser import text_string_to_metric_families

from tests.service.fake_runtime import FakeRuntime
from tests.service.support import (
    handshake_status,
    http_request,
    receive,
    run_frame,
    running_service,
    send,
    until_terminal,
    wait_until,
)
from yao_actors.cli.chat import open_service_connection
from yao_actors.tools.tool_server import ServerState, ServerStatistics

TOKEN = "s3cret-token-of-16+"


@attrs.define
class FakeServer:
    """A server whose statistics ``/readyz`` reads."""

    state: ServerState
    last_error: str | None = None
    kind: str | None = None

    def statistics(self) -> ServerStatistics:
        return ServerStatistics(self.state, 0, 0, 0, 0, 0, self.last_error, 1, None, self.kind)


async def test_health_readiness_and_the_page_answer_on_the_service_port() -> None:
    servers = {"weather": FakeServer(ServerState.READY), "clothing": FakeServer(ServerState.READY)}
    with trio.fail_after(10):
        async with running_service(FakeRuntime(), servers=servers) as service:
            health = await http_request(service.port, "/healthz")
            ready = await http_request(service.port, "/readyz")
            servers["clothing"] = FakeServer(
                ServerState.RESTARTING, "server 'clothing' is unavailable: exit code 1", "exited"
            )
            not_ready = await http_request(service.port, "/readyz?verbose=1")
            page = await http_request(service.port, "/")
            icon = await http_request(service.port, "/favicon.ico")
            missing = await http_request(service.port, "/nope")
            posted = await http_request(service.port, "/healthz", method="POST")
            head = await http_request(service.port, "/healthz", method="HEAD")
    assert (health.status, health.json()) == (200, {"status": "serving"})
    assert health.headers["content-type"] == "application/json"
    assert ready.status == 200
    assert ready.json() == {
        "status": "ready",
        "servers": {
            "weather": {"state": "ready", "error": None, "protocol": None},
            "clothing": {"state": "ready", "error": None, "protocol": None},
        },
    }
    assert not_ready.status == 200  # a server down is not a reason to pull this worker: it can take runs
    assert not_ready.json()["status"] == "ready"
    assert not_ready.json()["servers_not_ready"] == ["clothing"]
    assert not_ready.json()["servers"]["clothing"] == {"state": "restarting", "error": "exited", "protocol": None}
    assert page.status == 200
    assert b"<html" in page.body.lower()
    assert b'<link rel="icon" href="/favicon.ico"' in page.body
    assert (icon.status, icon.headers["content-type"]) == (200, "image/png")  # not a 404 in the browser's console
    assert icon.body.startswith(b"\x89PNG\r\n\x1a\n")
    assert missing.status == 404
    assert (posted.status, posted.headers["allow"]) == (405, "GET, HEAD")
    assert (head.status, head.body, head.headers["content-length"]) == (200, b"", str(len(health.body)))


async def test_readiness_is_503_for_a_required_server_down_a_first_start_or_the_store_unavailable() -> None:
    """The worker cannot take runs: a server ``server.required_servers`` names is not ready, a server has not finished
    its first start, or the conversation store cannot take calls; a server down that is not required keeps it ready."""
    servers = {"weather": FakeServer(ServerState.READY), "clothing": FakeServer(ServerState.DOWN, "gone", "exited")}
    runtime = FakeRuntime()
    with trio.fail_after(10):
        async with running_service(runtime, servers=servers, required_servers=("weather",)) as service:
            ready = await http_request(service.port, "/readyz")
            servers["weather"] = FakeServer(ServerState.RESTARTING, "gone", "unreachable")
            required_down = await http_request(service.port, "/readyz")
            servers["weather"] = FakeServer(ServerState.READY)
            servers["clothing"] = FakeServer(ServerState.STARTING)
            first_start = await http_request(service.port, "/readyz")
            servers["clothing"] = FakeServer(ServerState.STARTING, "it was lost", "unreachable")
            reconnecting = await http_request(service.port, "/readyz")
            runtime.store_down = "the SQLite file was deleted"
            store_gone = await http_request(service.port, "/readyz")
    assert (ready.status, ready.json()["status"], ready.json()["servers_not_ready"]) == (200, "ready", ["clothing"])
    assert (required_down.status, required_down.json()["servers_not_ready"]) == (503, ["weather", "clothing"])
    assert (first_start.status, first_start.json()["servers_not_ready"]) == (503, ["clothing"])
    assert (reconnecting.status, reconnecting.json()["status"]) == (200, "ready")
    assert (store_gone.status, store_gone.json()["status"], store_gone.json()["store"]) == (
        503,
        "not_ready",
        "unavailable",
    )


async def test_readiness_shows_a_servers_error_itself_only_to_a_request_with_a_token() -> None:
    secret = "server 'vault' unavailable: exited (exit code 1); stderr tail:\nDB_PASSWORD=hunter2"
    servers = {"vault": FakeServer(ServerState.RESTARTING, secret, "exited")}
    with trio.fail_after(10):
        async with running_service(FakeRuntime(), servers=servers, token=TOKEN) as service:
            anonymous = await http_request(service.port, "/readyz")
            wrong = await http_request(service.port, "/readyz", headers={"Authorization": "Bearer wrong-token-of-16+"})
            authorized = await http_request(service.port, "/readyz", headers={"Authorization": f"Bearer {TOKEN}"})
        async with running_service(FakeRuntime(), servers=servers) as tokenless:
            local = await http_request(tokenless.port, "/readyz")
    for answer in (anonymous, wrong, local):
        assert answer.status == 200  # the worker can take runs (without the vault's tools)
        assert answer.json()["servers"] == {"vault": {"state": "restarting", "error": "exited", "protocol": None}}
        assert b"hunter2" not in answer.body
    assert authorized.json()["servers"] == {
        "vault": {"state": "restarting", "error": "exited", "protocol": None, "last_error": secret}
    }


async def test_metrics_need_the_token_when_the_service_has_one_and_health_does_not() -> None:
    with trio.fail_after(10):
        async with running_service(FakeRuntime(), token=TOKEN) as service:
            refused = await http_request(service.port, "/metrics")
            wrong = await http_request(service.port, "/metrics", headers={"Authorization": "Bearer wrong-token-of-16+"})
            scraped = await http_request(service.port, "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
            health = await http_request(service.port, "/healthz")
            ready = await http_request(service.port, "/readyz")
    assert (refused.status, refused.headers["www-authenticate"]) == (401, "Bearer")
    assert wrong.status == 401
    assert scraped.status == 200
    assert scraped.headers["content-type"].startswith("text/plain; version=")
    names = {family.name for family in text_string_to_metric_families(scraped.body.decode())}
    assert {"yao_runs", "yao_active_runs", "yao_websocket_connections", "yao_mcp_server_up"} <= names
    assert health.status == 200
    assert (ready.status, ready.json()) == (200, {"status": "ready", "servers": {}})


async def test_the_shutdown_grace_answers_503_to_health_and_upgrades_while_runs_finish() -> None:
    runtime = FakeRuntime()
    with trio.fail_after(20):
        async with running_service(runtime, shutdown_grace=30) as service, trio.open_nursery() as nursery:
            async with open_service_connection(service.url) as ws:
                await send(ws, run_frame("hold:a", run_id="r1"))
                assert (await receive(ws))["type"] == "RUN_STARTED"
                assert (await http_request(service.port, "/healthz")).status == 200
                nursery.start_soon(service.shutdown)
                await wait_until(lambda: service.statistics().closing)
                health = await http_request(service.port, "/healthz")
                ready = await http_request(service.port, "/readyz")
                upgrade = await handshake_status(service.port)
                runtime.release("a")
                events = await until_terminal(ws, "r1")
                await service.wait_stopped()
            refused = False
            try:
                await http_request(service.port, "/healthz")
            except OSError:
                refused = True
    assert (health.status, health.json()) == (503, {"status": "shutting_down"})
    assert ready.status == 503
    assert upgrade == 503
    assert events[-1]["type"] == "RUN_FINISHED"  # the run in flight finished within the grace
    assert refused  # and the listener closed once it had

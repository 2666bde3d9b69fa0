"""``/readyz`` and ``/metrics`` of a service over a real runtime: one server cannot start, one is ready. A server that
is down keeps the worker ready (it can take runs, without that server's tools) unless ``server.required_servers``
names it (issue 44, item 1)."""

from __future__ import annotations

import sys

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from tests.service.support import http_request, running_service
from yao_actors.config import Config, InMemoryTransport, ServerSpec, StdioTransport
from yao_actors.demo import weather
from yao_actors.runtime import open_runtime
from yao_actors.specs import RestartPolicy


def _samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


def _ghost_config() -> Config:
    """A ready server, and one whose command does not exist (restarting, its next attempt 30 s away)."""
    return Config(
        servers={
            "weather": ServerSpec("weather", InMemoryTransport(weather.build_server())),
            "ghost": ServerSpec(
                "ghost",
                StdioTransport("/nonexistent/yao-ghost-server", ()),
                restart=RestartPolicy(max_restarts=1, backoff_initial=30.0, backoff_max=30.0),
            ),
        },
        assistants={},
    )


async def test_readyz_is_200_with_a_server_down_and_names_it() -> None:
    with trio.fail_after(30):
        async with open_runtime(_ghost_config()) as runtime, running_service(runtime) as service:
            ready = await http_request(service.port, "/readyz")
            health = await http_request(service.port, "/healthz")
            metrics = await http_request(service.port, "/metrics")
    assert health.status == 200
    assert ready.status == 200  # this worker can take runs: the other workers have the same server down
    body = ready.json()
    assert body["status"] == "ready"
    assert body["servers_not_ready"] == ["ghost"]
    assert 0 < body["servers"]["ghost"].pop("next_attempt_in") <= 30.0  # restarting: when it tries again
    assert body["servers"] == {
        "weather": {"state": "ready", "error": None, "protocol": "2026-07-28"},
        "ghost": {"state": "restarting", "error": "unreachable", "protocol": None},
    }
    up = _samples(metrics.body.decode(), "yao_mcp_server_up")
    assert up[(("server", "weather"),)] == 1.0
    assert up[(("server", "ghost"),)] == 0.0
    protocol = _samples(metrics.body.decode(), "yao_mcp_server_protocol")
    assert protocol[(("protocol", "2026-07-28"), ("server", "weather"))] == 1.0
    assert not any(("server", "ghost") in labels for labels in protocol)


async def test_readyz_is_503_while_a_required_server_is_down() -> None:
    with trio.fail_after(30):
        async with (
            open_runtime(_ghost_config()) as runtime,
            running_service(runtime, required_servers=("ghost",)) as service,
        ):
            ready = await http_request(service.port, "/readyz")
    assert ready.status == 503
    body = ready.json()
    assert (body["status"], body["servers_not_ready"]) == ("not_ready", ["ghost"])
    assert body["servers"]["ghost"]["state"] == "restarting"


async def test_readyz_keeps_a_dead_servers_stderr_for_the_log_and_requests_with_a_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A real stdio server that writes a secret to stderr and exits; ``expose_stderr`` is off (the default)."""
    dying = StdioTransport(
        sys.executable, ("-c", "import sys; sys.stderr.write('DB_PASSWORD=hunter2\\n'); sys.exit(3)")
    )
    config = Config(
        servers={
            "vault": ServerSpec(
                "vault", dying, restart=RestartPolicy(max_restarts=1, backoff_initial=30.0, backoff_max=30.0)
            )
        },
        assistants={},
    )
    token = "readyz-token-of-16+"
    with trio.fail_after(30):
        async with open_runtime(config) as runtime, running_service(runtime, token=token) as service:
            anonymous = await http_request(service.port, "/readyz")
            authorized = await http_request(service.port, "/readyz", headers={"Authorization": f"Bearer {token}"})
    seen = anonymous.json()["servers"]
    assert 0 < seen["vault"].pop("next_attempt_in") <= 30.0  # restarting: when it tries again
    assert seen == {"vault": {"state": "restarting", "error": "exited", "protocol": None}}
    assert b"hunter2" not in anonymous.body
    vault = authorized.json()["servers"]["vault"]
    assert (vault["state"], vault["error"]) == ("restarting", "exited")
    assert "exit code 3" in vault["last_error"]
    assert "DB_PASSWORD=hunter2" in vault["last_error"]
    assert any("DB_PASSWORD=hunter2" in getattr(r, "stderr_tail", "") for r in caplog.records)

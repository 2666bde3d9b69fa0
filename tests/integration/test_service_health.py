"""``/readyz`` and ``/metrics`` of a service over a real runtime: one server cannot start, one is ready."""

from __future__ import annotations

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


async def test_readyz_names_the_server_whose_command_does_not_exist() -> None:
    config = Config(
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
    with trio.fail_after(30):
        async with open_runtime(config) as runtime, running_service(runtime) as service:
            ready = await http_request(service.port, "/readyz")
            health = await http_request(service.port, "/healthz")
            metrics = await http_request(service.port, "/metrics")
    assert health.status == 200
    assert ready.status == 503
    body = ready.json()
    assert body["status"] == "not_ready"
    assert body["servers"]["weather"] == {"state": "ready", "last_error": None}
    ghost = body["servers"]["ghost"]
    assert ghost["state"] == "restarting"
    assert "ghost" in ghost["last_error"]
    assert "/nonexistent/yao-ghost-server" in ghost["last_error"] or "No such file" in ghost["last_error"]
    up = _samples(metrics.body.decode(), "yao_mcp_server_up")
    assert up[(("server", "weather"),)] == 1.0
    assert up[(("server", "ghost"),)] == 0.0

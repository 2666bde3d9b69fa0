"""``python server.py`` as an operator runs it: JSON logs, health and Prometheus metrics on its port, and traces
sent over OTLP/HTTP to a collector (a fake one here, on a loopback port, decoding what it receives)."""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import h11
import pytest
import trio
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client.parser import text_string_to_metric_families

from tests.service.support import http_request, read_message, run_frame, send, until_terminal
from yao_actors.cli.chat import open_service_connection
from yao_actors.testing import read_line

REPO = Path(__file__).resolve().parents[2]
SEED_QUESTION = "北京今天适合穿什么?"


@asynccontextmanager
async def fake_collector() -> AsyncIterator[tuple[int, list[ExportTraceServiceRequest]]]:
    """An OTLP/HTTP trace receiver on 127.0.0.1: its port, and every export request it decoded."""
    received: list[ExportTraceServiceRequest] = []

    async def handle(stream: trio.SocketStream) -> None:
        connection = h11.Connection(h11.SERVER)
        head, body = await read_message(connection, stream)
        if isinstance(head, h11.Request) and head.target == b"/v1/traces":
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            received.append(request)
        headers = [("Content-Type", "application/x-protobuf"), ("Content-Length", "0"), ("Connection", "close")]
        await stream.send_all(connection.send(h11.Response(status_code=200, headers=headers)) or b"")
        await stream.send_all(connection.send(h11.EndOfMessage()) or b"")
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(functools.partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        yield listeners[0].socket.getsockname()[1], received
        nursery.cancel_scope.cancel()


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.mark.filterwarnings("ignore::ResourceWarning")  # the collector's sockets, closed by the nursery
async def test_a_served_run_is_logged_as_json_counted_in_metrics_and_traced_to_a_collector() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "YAO_ACTORS_", "OTEL_"))}
    with trio.fail_after(90):
        async with fake_collector() as (collector_port, exports):
            env |= {
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector_port}",
                "OTEL_SERVICE_NAME": "yao-test",
            }
            process = await trio.lowlevel.open_process(
                [sys.executable, "server.py", "--port", "0", "--log-format", "json", "--log-level", "info"],
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            try:
                assert process.stdout is not None
                assert process.stderr is not None
                banner = await read_line(process.stdout)
                url = re.search(r"ws://127\.0\.0\.1:\d+/", banner)
                assert url, banner
                port = int(url.group().rsplit(":", 1)[1].strip("/"))
                async with open_service_connection(url.group()) as ws:
                    await send(ws, run_frame(SEED_QUESTION, run_id="r-1", thread_id="t-1"))
                    events = await until_terminal(ws, "r-1")
                    metrics = await http_request(port, "/metrics")
                health = await http_request(port, "/healthz")
                ready = await http_request(port, "/readyz")
                process.send_signal(signal.SIGTERM)
                stderr = b""
                while chunk := await process.stderr.receive_some(65536):
                    stderr += chunk
                code = await process.wait()
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
    assert code == 0
    assert events[-1]["type"] == "RUN_FINISHED"

    # Health and readiness.
    assert (health.status, health.json()) == (200, {"status": "serving"})
    assert ready.status == 200
    assert {name: server["state"] for name, server in ready.json()["servers"].items()} == {
        "weather": "ready",
        "clothing": "ready",
    }

    # Metrics: exactly this one run of a fresh process.
    samples = _samples(metrics.body.decode())
    assert samples[("yao_runs_total", (("assistant", "default"), ("outcome", "answered")))] == 1
    assert samples[("yao_run_duration_seconds_count", ())] == 1
    assert samples[("yao_active_runs", ())] == 0
    assert samples[("yao_websocket_connections", ())] == 1  # scraped while the websocket was open
    for server, tool in (("weather", "get"), ("clothing", "advise")):
        assert samples[("yao_tool_calls_total", (("kind", "ok"), ("server", server), ("tool", tool)))] == 1
        assert samples[("yao_tool_call_duration_seconds_count", (("server", server),))] == 1
        assert samples[("yao_mcp_server_up", (("server", server),))] == 1
        assert samples[("yao_mcp_server_restarts_total", (("server", server),))] == 0
    model_calls = {labels: value for (name, labels), value in samples.items() if name == "yao_model_calls_total"}
    assert list(model_calls.values()) == [3]
    assert dict(next(iter(model_calls)))["outcome"] == "ok"

    # Logs: every line one JSON object; the run's records carry its ids.
    records = [json.loads(line) for line in stderr.decode().splitlines() if line.strip()]
    assert all({"time", "level", "logger", "message"} <= record.keys() for record in records)
    of_run = [record for record in records if record.get("run_id") == "r-1"]
    assert all(record["thread_id"] == "t-1" for record in of_run)
    started = [record for record in of_run if record["message"] == "run started"]
    ended = [record for record in of_run if record["message"].startswith("run ended")]
    assert len(started) == 1
    assert len(ended) == 1
    assert ended[0]["outcome"] == "answered"
    assert ended[0]["assistant"] == "default"
    assert ended[0]["duration"] > 0
    assert {"input_tokens", "output_tokens"} <= ended[0].keys()
    servers = {record["server"] for record in records if "server" in record and record.get("state") == "ready"}
    assert servers == {"weather", "clothing"}
    # The service froze its start-up out of the garbage collector's passes (service/heap.py).
    (froze,) = [record for record in records if record["logger"] == "yao_actors.service.heap"]
    assert froze["frozen"] > 10_000
    assert froze["period"] == 300

    # Traces: the collector got the run's tree under the service name from OTEL_SERVICE_NAME.
    spans: dict[str, Any] = {}
    names: set[str] = set()
    for export in exports:
        for resource_spans in export.resource_spans:
            attributes = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            assert attributes["service.name"] == "yao-test"
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    names.add(span.name)
                    spans[span.name] = span
    assert {"invoke_agent default", "execute_tool weather__get", "execute_tool clothing__advise"} <= names
    run = spans["invoke_agent default"]
    tool = spans["execute_tool weather__get"]
    assert tool.trace_id == run.trace_id
    assert tool.parent_span_id == run.span_id
    conversation = {a.key: a.value.string_value for a in run.attributes}["gen_ai.conversation.id"]
    assert conversation == "t-1"

"""``yao-actors serve``'s OpenTelemetry setup from ``OTEL_*``: when it installs nothing.

The case that installs a provider and exports over OTLP runs in a real service process
(``tests/integration/test_observability_process.py``): a process sets its tracer provider once.
"""

from __future__ import annotations

import logging

import pytest

from yao_actors.observability.otel_setup import configure_tracing


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"OTEL_SERVICE_NAME": "svc"},
        {"OTEL_TRACES_EXPORTER": "none"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"},
    ],
)
def test_no_exporter_asked_for_installs_nothing(environ: dict[str, str]) -> None:
    assert configure_tracing(environ) is None


def test_an_unknown_exporter_or_protocol_is_a_warning_and_tracing_stays_off(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="yao_actors.observability.otel_setup"):
        assert configure_tracing({"OTEL_TRACES_EXPORTER": "zipkin"}) is None
        assert configure_tracing({"OTEL_EXPORTER_OTLP_ENDPOINT": "x", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) is None
    messages = [record.getMessage() for record in caplog.records]
    assert "OTEL_TRACES_EXPORTER: unknown exporter 'zipkin' (otlp, console or none)" in messages
    assert "OTLP protocol 'grpc' is not supported here; use http/protobuf" in messages

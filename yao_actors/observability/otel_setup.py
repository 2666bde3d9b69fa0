"""Install the OpenTelemetry SDK for ``yao-actors serve`` from the standard ``OTEL_*`` environment variables.

Needs the ``otel`` extra (``pip install 'yao-actors[otel]'``: the SDK and the OTLP/HTTP exporter). Tracing is
set up when ``OTEL_TRACES_EXPORTER`` or an OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set, and not when ``OTEL_SDK_DISABLED=true``. ``OTEL_TRACES_EXPORTER``
takes ``otlp`` (the default; ``http/protobuf``), ``console`` and ``none``, comma-separated. Everything else —
endpoint, headers, timeouts, ``OTEL_SERVICE_NAME`` (default ``yao-actors``), ``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*`` — the SDK reads itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

logger = logging.getLogger(__name__)

SERVICE_NAME = "yao-actors"
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def configure_tracing(environ: Mapping[str, str]) -> Callable[[], None] | None:
    """Install a tracer provider as ``environ`` asks; returns what flushes and stops it, or ``None`` if none was.

    A missing SDK or an unknown exporter name is logged as a warning and tracing stays off: the service runs.
    """
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    names = environ.get("OTEL_TRACES_EXPORTER")
    if names is None and not any(environ.get(variable) for variable in ENDPOINT_VARIABLES):
        return None
    wanted = [name.strip().lower() for name in (names or "otlp").split(",") if name.strip()]
    wanted = [name for name in wanted if name != "none"]
    if not wanted:
        return None
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        logger.warning(
            "OTEL_* variables ask for traces but the OpenTelemetry SDK is missing: pip install 'yao-actors[otel]'"
        )
        return None
    exporters = [exporter for exporter in (_exporter(name, environ) for name in wanted) if exporter is not None]
    if not exporters:
        return None
    named = "OTEL_SERVICE_NAME" in environ or "service.name=" in environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    provider = TracerProvider(resource=Resource.create({} if named else {"service.name": SERVICE_NAME}))
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    logger.info("tracing on: exporting spans to %s", ", ".join(wanted), extra={"exporters": wanted})
    return provider.shutdown


def _exporter(name: str, environ: Mapping[str, str]) -> Any:
    """The span exporter called ``name``, or ``None`` (with a warning) if it is unknown or not installed."""
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        logger.warning("OTEL_TRACES_EXPORTER: unknown exporter %r (otlp, console or none)", name)
        return None
    protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    if protocol not in (None, "", "http/protobuf"):
        logger.warning("OTLP protocol %r is not supported here; use http/protobuf", protocol)
        return None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        logger.warning("the OTLP exporter is missing: pip install 'yao-actors[otel]'")
        return None
    return OTLPSpanExporter()

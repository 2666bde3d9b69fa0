"""Seeing inside a runtime: OpenTelemetry spans (:mod:`.tracing`), Prometheus metrics (:mod:`.metrics`),
log records with run and server ids (:mod:`.logs`), and setting up the OpenTelemetry SDK from ``OTEL_*``
variables (:mod:`.otel_setup`)."""

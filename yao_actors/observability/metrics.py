"""The Prometheus metrics of a process: runs, tool calls, model calls, connections and MCP servers.

The metrics live in ``prometheus_client``'s default registry (next to its process and platform collectors),
so ``GET /metrics`` on the service (:mod:`yao_actors.service.http_endpoints`) and an embedding application's
own exporter see them alike. Labels take only configured names (assistants, models, servers and their tools):
a tool name a model made up is counted under ``server=""``, ``tool=""``, never under its own name, so a model
cannot grow the label sets.
"""

from __future__ import annotations

from typing import Final, TypeVar

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

#: Buckets of run durations (seconds): runs last from a fraction of a second to minutes.
RUN_BUCKETS: Final = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
#: Buckets of tool call durations (seconds).
TOOL_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

RUNS = Counter("yao_runs", "Runs ended, by assistant and outcome.", ["assistant", "outcome"])
RUN_DURATION = Histogram(
    "yao_run_duration_seconds", "How long runs took, start to terminal event.", buckets=RUN_BUCKETS
)
ACTIVE_RUNS = Gauge("yao_active_runs", "Runs in progress.")
RUN_SLOTS = Gauge(
    "yao_run_slots_held",
    "Slots of the service's run budget (server.max_runs) taken: runs admitted and not yet given back, detached ones "
    "included.",
)
TOOL_CALLS = Counter(
    "yao_tool_calls", "Tool calls of runs, by server, tool and result kind (ok on success).", ["server", "tool", "kind"]
)
TOOL_DURATION = Histogram(
    "yao_tool_call_duration_seconds", "How long tool calls took, by server.", ["server"], buckets=TOOL_BUCKETS
)
MODEL_CALLS = Counter(
    "yao_model_calls", "Model calls, by model and outcome (ok, error, timeout).", ["model", "outcome"]
)
MODEL_TOKENS = Counter(
    "yao_model_tokens", "Tokens of model calls, by model and type (input, output).", ["model", "type"]
)
WEBSOCKET_CONNECTIONS = Gauge("yao_websocket_connections", "Open websocket connections.")
SERVER_UP = Gauge("yao_mcp_server_up", "1 while the MCP server is ready, else 0.", ["server"])
SERVER_PROTOCOL = Gauge(
    "yao_mcp_server_protocol", "1 for the MCP protocol version a server's connection speaks.", ["server", "protocol"]
)
APP_REQUESTS = Counter(
    "yao_app_requests",
    "MCP App requests through the proxy, by server, method and outcome (ok, refused, error).",
    ["server", "method", "outcome"],
)
SERVER_RESTARTS = Counter("yao_mcp_server_restarts", "Reconnections of an MCP server's actor.", ["server"])
TASKS = Counter(
    "yao_mcp_tasks",
    "MCP tasks of tool calls, by server and state: created, then how the wait ended (completed, failed, timeout, "
    "abandoned, input_required).",
    ["server", "state"],
)
OPEN_TASKS = Gauge("yao_mcp_open_tasks", "MCP tasks a run is waiting on now, by server.", ["server"])


M = TypeVar("M", Counter, Gauge, Histogram)
_children: dict[tuple[object, tuple[str, ...]], object] = {}


def labelled(metric: M, *values: str) -> M:
    """``metric.labels(*values)``, kept once made: ``labels`` itself costs more than the update."""
    key = (metric, values)
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(*values)
    return child  # type: ignore[return-value]


def exposition(registry: CollectorRegistry = REGISTRY) -> bytes:
    """The metrics in the Prometheus text format."""
    return generate_latest(registry)


__all__ = [
    "ACTIVE_RUNS",
    "MODEL_CALLS",
    "MODEL_TOKENS",
    "RUNS",
    "RUN_DURATION",
    "RUN_SLOTS",
    "SERVER_PROTOCOL",
    "SERVER_RESTARTS",
    "SERVER_UP",
    "TOOL_CALLS",
    "TOOL_DURATION",
    "WEBSOCKET_CONNECTIONS",
    "exposition",
    "labelled",
]

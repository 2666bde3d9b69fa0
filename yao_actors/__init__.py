"""yao_actors: an actor-based Trio runtime that executes language-model tool calls against MCP servers.

The public API (DESIGN §5.3)::

    config = load_config("config.json")            # or default_config(), or Config(...) built in code
    async with open_runtime(config) as runtime:
        outcome = await runtime.servers["weather"].call_tool("get", {"city": "北京"})
        result = await runtime.run("default", "北京今天适合穿什么?")
        async with runtime.open_run("default", "...") as events:
            async for event in events: ...

``FunctionModel``, ``Completion`` and ``ToolCall`` script a model for your own code and tests; more offline models
and fakes live in :mod:`yao_actors.testing`.
"""

import importlib.metadata

try:
    __version__ = importlib.metadata.version("yao-actors")
except importlib.metadata.PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0+unknown"

from yao_actors.config import (
    AssistantSpec,
    Config,
    HttpTransport,
    InMemoryTransport,
    ModelSpec,
    ServerRef,
    ServerSpec,
    SseTransport,
    StdioTransport,
    check_config,
    default_config,
    load_config,
    parse_config,
)
from yao_actors.conversation import RunResult, RunStream
from yao_actors.errors import (
    ConfigError,
    ErrorKind,
    ModelError,
    NotReady,
    RunError,
    RunErrorCode,
    YaoActorsError,
)
from yao_actors.events import Outcome, parse_event
from yao_actors.models import Completion, FunctionModel, Model, ToolCall, Usage
from yao_actors.results import ToolCallResult, ToolOutcome
from yao_actors.runtime import Runtime, open_runtime
from yao_actors.server_handle import ServerHandle, ServerState, ServerStatistics

__all__ = [
    "AssistantSpec",
    "Completion",
    "Config",
    "ConfigError",
    "ErrorKind",
    "FunctionModel",
    "HttpTransport",
    "InMemoryTransport",
    "Model",
    "ModelError",
    "ModelSpec",
    "NotReady",
    "Outcome",
    "RunError",
    "RunErrorCode",
    "RunResult",
    "RunStream",
    "Runtime",
    "ServerHandle",
    "ServerRef",
    "ServerSpec",
    "ServerState",
    "ServerStatistics",
    "SseTransport",
    "StdioTransport",
    "ToolCall",
    "ToolCallResult",
    "ToolOutcome",
    "Usage",
    "YaoActorsError",
    "check_config",
    "default_config",
    "load_config",
    "open_runtime",
    "parse_config",
    "parse_event",
]

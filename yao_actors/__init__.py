"""yao_actors: an actor-based Trio runtime that executes language-model tool calls against MCP servers.

The public API (DESIGN §5.3)::

    config = load_config("config.json")            # or default_config(), or Config(...) built in code
    async with open_runtime(config) as runtime:
        outcome = await runtime.servers["weather"].call_tool("get", {"city": "北京"})
        result = await runtime.run("default", "北京今天适合穿什么?")
        async with runtime.open_run("default", "...") as events:
            async for event in events: ...

Offline models and fakes for your own tests live in :mod:`yao_actors.testing`.
"""

from yao_actors.config import (
    AssistantSpec,
    Config,
    HttpTransport,
    InMemoryTransport,
    ModelSpec,
    ServerRef,
    ServerSpec,
    StdioTransport,
    default_config,
    load_config,
)
from yao_actors.conversation import RunResult, RunStream
from yao_actors.errors import (
    ConfigError,
    ErrorKind,
    ModelError,
    RunError,
    RunErrorCode,
    YaoActorsError,
)
from yao_actors.events import Outcome, parse_event
from yao_actors.models import Completion, Model, ToolCall, Usage
from yao_actors.results import ToolCallResult, ToolOutcome
from yao_actors.runtime import Runtime, open_runtime

__all__ = [
    "AssistantSpec",
    "Completion",
    "Config",
    "ConfigError",
    "ErrorKind",
    "HttpTransport",
    "InMemoryTransport",
    "Model",
    "ModelError",
    "ModelSpec",
    "Outcome",
    "RunError",
    "RunErrorCode",
    "RunResult",
    "RunStream",
    "Runtime",
    "ServerRef",
    "ServerSpec",
    "StdioTransport",
    "ToolCall",
    "ToolCallResult",
    "ToolOutcome",
    "Usage",
    "YaoActorsError",
    "default_config",
    "load_config",
    "open_runtime",
    "parse_event",
]

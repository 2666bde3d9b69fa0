"""yao_actors: an actor-based Trio runtime that executes language-model tool calls against MCP servers.

The public API::

    config = load_config("config.json")            # or default_config(), or Config(...) built in code
    async with open_runtime(config) as runtime:
        outcome = await runtime.servers["weather"].call_tool("get", {"city": "北京"})
        result = await runtime.run("default", "北京今天适合穿什么?")
        async with runtime.open_run("default", "...") as events:
            async for event in events: ...

``FunctionModel``, ``Completion`` and ``ToolCall`` script a model for your own code and tests; more offline models
and fakes live in :mod:`yao_actors.testing`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    __version__: str
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
    from yao_actors.conversation import RunRequest, RunResult, RunStream
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
    from yao_actors.runtime import Runtime, open_runtime
    from yao_actors.tools.catalog import Catalog, CatalogEntry
    from yao_actors.tools.input_requests import InputAnswer, InputRequest
    from yao_actors.tools.results import ToolCallResult, ToolOutcome
    from yao_actors.tools.server_handle import ServerHandle
    from yao_actors.tools.tool_server import ServerState, ServerStatistics

#: Where each exported name lives: imported on first use (PEP 562), so ``import yao_actors`` costs nothing and the
#: ``yao-actors`` command handles interrupts before the second its modules take to import.
_EXPORTS: dict[str, str] = {
    "AssistantSpec": "yao_actors.config",
    "Config": "yao_actors.config",
    "HttpTransport": "yao_actors.config",
    "InMemoryTransport": "yao_actors.config",
    "ModelSpec": "yao_actors.config",
    "ServerRef": "yao_actors.config",
    "ServerSpec": "yao_actors.config",
    "SseTransport": "yao_actors.config",
    "StdioTransport": "yao_actors.config",
    "check_config": "yao_actors.config",
    "default_config": "yao_actors.config",
    "load_config": "yao_actors.config",
    "parse_config": "yao_actors.config",
    "RunRequest": "yao_actors.conversation",
    "RunResult": "yao_actors.conversation",
    "RunStream": "yao_actors.conversation",
    "ConfigError": "yao_actors.errors",
    "ErrorKind": "yao_actors.errors",
    "ModelError": "yao_actors.errors",
    "NotReady": "yao_actors.errors",
    "RunError": "yao_actors.errors",
    "RunErrorCode": "yao_actors.errors",
    "YaoActorsError": "yao_actors.errors",
    "Outcome": "yao_actors.events",
    "parse_event": "yao_actors.events",
    "Completion": "yao_actors.models",
    "FunctionModel": "yao_actors.models",
    "Model": "yao_actors.models",
    "ToolCall": "yao_actors.models",
    "Usage": "yao_actors.models",
    "Catalog": "yao_actors.tools.catalog",
    "CatalogEntry": "yao_actors.tools.catalog",
    "InputAnswer": "yao_actors.tools.input_requests",
    "InputRequest": "yao_actors.tools.input_requests",
    "ToolCallResult": "yao_actors.tools.results",
    "ToolOutcome": "yao_actors.tools.results",
    "Runtime": "yao_actors.runtime",
    "open_runtime": "yao_actors.runtime",
    "ServerHandle": "yao_actors.tools.server_handle",
    "ServerState": "yao_actors.tools.server_handle",
    "ServerStatistics": "yao_actors.tools.server_handle",
}


__all__ = [
    "AssistantSpec",
    "Catalog",
    "CatalogEntry",
    "Completion",
    "Config",
    "ConfigError",
    "ErrorKind",
    "FunctionModel",
    "HttpTransport",
    "InMemoryTransport",
    "InputAnswer",
    "InputRequest",
    "Model",
    "ModelError",
    "ModelSpec",
    "NotReady",
    "Outcome",
    "RunError",
    "RunErrorCode",
    "RunRequest",
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


def __getattr__(name: str) -> Any:
    """An exported name, the version, or a submodule (as ``yao_actors.errors`` after ``import yao_actors``),
    imported the first time it is asked for."""
    if name == "__version__":
        value: Any = _version()
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif not name.startswith("_"):
        try:
            value = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, "__version__"})


def _version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("yao-actors")
    except importlib.metadata.PackageNotFoundError:  # running from a checkout that was never installed
        return "0+unknown"

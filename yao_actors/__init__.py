"""yao_actors: an actor-based Trio runtime for language-model tool calls against MCP servers."""

from yao_actors.config import Config
from yao_actors.errors import ConfigError, ErrorKind, ServerUnavailable, YaoActorsError
from yao_actors.results import ToolCallResult, ToolOutcome

__all__ = [
    "Config",
    "ConfigError",
    "ErrorKind",
    "ServerUnavailable",
    "ToolCallResult",
    "ToolOutcome",
    "YaoActorsError",
]

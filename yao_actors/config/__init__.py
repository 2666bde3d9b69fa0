"""Configuration: the records (:mod:`yao_actors.specs`) and reading them from JSON.

One JSON file with four sections::

    {
      "mcpServers": {"weather": {"command": "python", "args": ["-m", "yao_actors.demo.weather"]},
                     "remote":  {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
                     "mine":    {"module": "my_tools:server", "samples": "samples/mine"}},
      "models":     {"demo": {"provider": "demo"}},
      "assistants": {"default": {"model": "demo", "prompt": "...", "mcp": {"servers": ["weather"]}}},
      "server":     {"host": "127.0.0.1", "port": 8765}
    }

The records are attrs values; build them in code for an embedded runtime, or load
them from a file. ``load_config`` refuses a bad file with one message per
problem, each naming its key path, and treats an unknown key as an error.

The arrows point one way: :mod:`yao_actors.specs` (records) ← :mod:`yao_actors.models`
← :mod:`.values` ← :mod:`.assistants` ← :mod:`.sections` (the reader) ← :mod:`.load`, which
also checks the data against :mod:`.schema` (``config.schema.json``); :mod:`.check` checks the
references between records, wherever they came from.
The reader takes ``module`` servers from :mod:`.module_servers` and samples from :mod:`.sample_files`.
"""

from yao_actors.config.assistants import max_turns, tool_loop_enabled
from yao_actors.config.check import check_config, config_problems
from yao_actors.config.load import default_config, load_config, parse_config
from yao_actors.config.schema import config_schema, schema_problems
from yao_actors.specs import (
    BUILTIN_MODEL_IDS,
    DEFAULT_PROMPT,
    AssistantSpec,
    Config,
    Hooks,
    HttpTransport,
    InMemoryTransport,
    ModelSpec,
    OAuthSpec,
    RestartPolicy,
    ResultBudget,
    RunTimeouts,
    Sample,
    ServerRef,
    ServerSpec,
    ServiceSpec,
    SseTransport,
    StdioTransport,
    Transport,
)

__all__ = [
    "BUILTIN_MODEL_IDS",
    "DEFAULT_PROMPT",
    "AssistantSpec",
    "Config",
    "Hooks",
    "HttpTransport",
    "InMemoryTransport",
    "ModelSpec",
    "OAuthSpec",
    "RestartPolicy",
    "ResultBudget",
    "RunTimeouts",
    "Sample",
    "ServerRef",
    "ServerSpec",
    "ServiceSpec",
    "SseTransport",
    "StdioTransport",
    "Transport",
    "check_config",
    "config_problems",
    "config_schema",
    "default_config",
    "load_config",
    "max_turns",
    "parse_config",
    "schema_problems",
    "tool_loop_enabled",
]

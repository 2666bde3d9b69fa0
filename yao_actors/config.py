"""Configuration: the records every part agrees on, and ``load_config``.

One JSON file (DESIGN §5.1) with four sections::

    {
      "mcpServers": {"weather": {"command": "python", "args": ["-m", "yao_actors.demo.weather"]},
                     "remote":  {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}},
      "models":     {"demo": {"provider": "demo"}},
      "assistants": {"default": {"model": "demo", "prompt": "...", "mcp": {"servers": ["weather"]}}},
      "server":     {"host": "127.0.0.1", "port": 8765}
    }

The records are attrs values; build them in code for an embedded runtime, or load
them from a file. ``load_config`` refuses a bad file with one message per
problem, each naming its key path, and treats an unknown key as an error.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from yao_actors.errors import ConfigError

# --------------------------------------------------------------------------- MCP servers


@attrs.frozen
class StdioTransport:
    """Run the server as a subprocess and speak MCP over its stdin/stdout."""

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict)
    cwd: str | None = None


@attrs.frozen
class HttpTransport:
    """Speak streamable HTTP to a server at ``url``."""

    url: str
    headers: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen
class InMemoryTransport:
    """Connect in-process to an ``mcp.server.mcpserver.MCPServer`` (or low-level ``Server``)."""

    server: Any = attrs.field(eq=False)


Transport = StdioTransport | HttpTransport | InMemoryTransport


@attrs.frozen
class RestartPolicy:
    """How a server actor restarts its server after it died.

    Delays grow from ``backoff_initial`` doubling up to ``backoff_max`` seconds;
    after ``max_restarts`` consecutive failed lives the actor stays down and
    fails calls fast.
    """

    max_restarts: int = 5
    backoff_initial: float = 0.5
    backoff_max: float = 30.0


@attrs.frozen
class Sample:
    """A usage example of one tool, rendered into the samples system message."""

    input: Any = None
    output: Any = None
    name: str = ""
    description: str = ""


@attrs.frozen
class ServerSpec:
    """One configured MCP server.

    ``timeout`` is the per-call deadline in seconds; ``max_concurrency`` the
    number of calls served at once, ``queue_size`` how many more may wait;
    ``dispatch`` ``"sequential"`` makes dispatch run this server's calls one by
    one. ``samples`` maps tool names to their examples.
    """

    id: str
    transport: Transport
    timeout: float = 60.0
    max_concurrency: int = 16
    queue_size: int = 256
    dispatch: Literal["parallel", "sequential"] = "parallel"
    restart: RestartPolicy = RestartPolicy()
    samples: Mapping[str, tuple[Sample, ...]] = attrs.field(factory=dict)
    connect_timeout: float = 30.0


# --------------------------------------------------------------------------- models


@attrs.frozen
class ModelSpec:
    """One configured model.

    ``provider`` ``"openai"`` is any OpenAI-compatible Chat Completions endpoint;
    ``"demo"`` and ``"test"`` are the offline stand-ins of :mod:`yao_actors.testing`.
    ``params`` are extra request fields (``temperature``, ``parallel_tool_calls``, ...).
    """

    id: str
    provider: Literal["openai", "demo", "test"]
    base_url: str = "https://api.openai.com/v1"
    model: str = ""
    api_key_env: str | None = "OPENAI_API_KEY"
    headers: Mapping[str, str] = attrs.field(factory=dict)
    params: Mapping[str, Any] = attrs.field(factory=dict)
    stream: bool = True
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    max_retries: int = 3
    retry_budget: float = 60.0


# --------------------------------------------------------------------------- assistants


@attrs.frozen
class ServerRef:
    """An entry of an assistant's ``mcp.servers``: a server and an optional tool filter."""

    server_id: str
    tools: tuple[str, ...] = ()


@attrs.frozen
class RunTimeouts:
    """Deadlines of a run, in seconds: the whole run, one model call, one tool batch (turn)."""

    run: float = 300.0
    model: float = 120.0
    turn: float = 120.0


@attrs.frozen
class Hooks:
    """Python hooks as ``"module:function"`` references (resolved when a run starts)."""

    create: str | None = None
    next: str | None = None


@attrs.frozen
class AssistantSpec:
    """One assistant: its model, prompts, MCP servers and loop options.

    ``tool_loop`` and ``max_turn`` follow the seed's rules (DESIGN §4.4 step 5):
    only a real ``false`` disables the loop; ``max_turn`` is a number > 0
    (fractional truncated), anything else means 5.
    """

    id: str
    model: str
    prompt: tuple[str, ...] = ()
    servers: tuple[ServerRef, ...] = ()
    tool_loop: bool = True
    max_turn: int = 5
    max_tools: int = 20
    timeouts: RunTimeouts = RunTimeouts()
    hooks: Hooks = Hooks()
    fallback_model: str | None = None


# --------------------------------------------------------------------------- service


@attrs.frozen
class ServiceSpec:
    """The websocket service: where it listens, who may connect, and its limits."""

    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    #: Principals and their tokens (``{"alice": "${ALICE_TOKEN}"}``); a thread belongs to its creator's principal.
    tokens: Mapping[str, str] = attrs.field(factory=dict)
    allowed_origins: tuple[str, ...] = ()
    #: Roles besides ``user`` a client may send in a run's input (``system``, ``developer``, ``assistant``).
    allow_client_roles: tuple[str, ...] = ()
    max_frame_bytes: int = 1 << 20
    max_connections: int = 1000
    max_runs_per_connection: int = 8
    max_runs: int = 2000
    idle_timeout: float = 120.0
    shutdown_grace: float = 5.0


# --------------------------------------------------------------------------- the whole


@attrs.frozen
class Config:
    """A whole configuration: servers, models, assistants and the service."""

    servers: Mapping[str, ServerSpec] = attrs.field(factory=dict)
    models: Mapping[str, ModelSpec] = attrs.field(factory=dict)
    assistants: Mapping[str, AssistantSpec] = attrs.field(factory=dict)
    service: ServiceSpec = ServiceSpec()


# --------------------------------------------------------------------------- loading

DEFAULT_PROMPT = (
    "You are a helpful assistant. Use the available tools when they help answer the question, "
    "and answer in the same language as the user."
)
BUILTIN_MODEL_IDS = ("demo", "test")
_SERVER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_HOOK_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
#: Roles an operator may allow clients to send besides ``user`` (``server.allow_client_roles``).
CLIENT_ROLES = ("system", "developer", "assistant")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def load_config(path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None) -> Config:
    """Read and validate a JSON configuration file.

    Raises :class:`~yao_actors.errors.ConfigError` listing every problem found,
    each with its key path. ``environ`` (default ``os.environ``) supplies
    ``${VAR}`` references in ``env``, ``headers`` and ``server.token``.
    """
    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8") as file:
            text = file.read()
    except OSError as error:
        raise ConfigError([f"cannot read the file: {error.strerror or error}"], source=source) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(
            [f"line {error.lineno} column {error.colno}: not valid JSON: {error.msg}"], source=source
        ) from None
    except RecursionError:
        raise ConfigError(["not usable JSON: nested too deeply"], source=source) from None
    except ValueError as error:  # e.g. an integer of more digits than Python converts
        raise ConfigError([f"not usable JSON: {error}"], source=source) from None
    return parse_config(data, environ=environ, source=source)


def parse_config(data: Any, *, environ: Mapping[str, str] | None = None, source: str | None = None) -> Config:
    """Validate an already-decoded configuration (see :func:`load_config`)."""
    reader = _Reader(os.environ if environ is None else environ)
    config = reader.config(data)
    if reader.problems:
        raise ConfigError(reader.problems, source=source)
    assert config is not None
    return config


def default_config(*, environ: Mapping[str, str] | None = None) -> Config:
    """The embedded default (DESIGN §1): the bundled demo servers over stdio and one assistant.

    The assistant's model is a real OpenAI-compatible endpoint when
    ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` are set, the offline ``demo`` model otherwise.
    """
    from yao_actors.models import default_model_spec  # the models package builds on these records

    servers = {
        name: ServerSpec(id=name, transport=StdioTransport(sys.executable, ("-m", f"yao_actors.demo.{name}")))
        for name in ("weather", "clothing")
    }
    model = default_model_spec(environ=os.environ if environ is None else environ)
    assistant = AssistantSpec(
        id="default",
        model=model.id,
        prompt=(DEFAULT_PROMPT,),
        servers=tuple(ServerRef(name) for name in servers),
    )
    return Config(servers=servers, models={model.id: model}, assistants={"default": assistant})


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


class _Reader:
    """Walks a decoded configuration, collecting one message per problem."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.problems: list[str] = []

    def fail(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}" if path else message)

    # -- generic shapes

    def obj(self, value: Any, path: str, allowed: tuple[str, ...]) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.fail(path, f"expected an object, got {_type_name(value)}")
            return None
        for key in value:
            if key not in allowed:
                self.fail(_join(path, key), f"unknown key (allowed: {', '.join(allowed)})")
        return value

    def string(self, value: Any, path: str, *, empty: bool = False) -> str | None:
        if not isinstance(value, str) or (not empty and value == ""):
            self.fail(path, f"expected a {'' if empty else 'non-empty '}string, got {_type_name(value)}")
            return None
        return value

    def strings(self, value: Any, path: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            self.fail(path, f"expected a list of strings, got {_type_name(value)}")
            return ()
        return tuple(s for i, item in enumerate(value) if (s := self.string(item, _join(path, i))) is not None)

    def number(self, value: Any, path: str, *, minimum: float = 0.0, strict: bool = True) -> float | None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(path, f"expected a number, got {_type_name(value)}")
            return None
        if value < minimum or (strict and value == minimum):
            self.fail(path, f"must be {'>' if strict else '>='} {minimum:g}, got {value}")
            return None
        return float(value)

    def integer(self, value: Any, path: str, *, minimum: int = 0, maximum: int | None = None) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(path, f"expected an integer, got {_type_name(value)}")
            return None
        if value < minimum or (maximum is not None and value > maximum):
            bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
            self.fail(path, f"must be {bound}, got {value}")
            return None
        return value

    def boolean(self, value: Any, path: str) -> bool | None:
        if not isinstance(value, bool):
            self.fail(path, f"expected true or false, got {_type_name(value)}")
            return None
        return value

    def choice(self, value: Any, path: str, choices: tuple[str, ...]) -> str | None:
        if value not in choices:
            self.fail(path, f"must be one of {', '.join(repr(c) for c in choices)}, got {value!r}")
            return None
        return str(value)

    def expand(self, value: str, path: str) -> str:
        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in self.environ:
                return self.environ[name]
            if default is not None:
                return default
            self.fail(path, f"environment variable {name} is not set")
            return ""

        return _ENV_REF.sub(substitute, value)

    def string_map(self, value: Any, path: str) -> dict[str, str]:
        if not isinstance(value, dict):
            self.fail(path, f"expected an object of strings, got {_type_name(value)}")
            return {}
        result = {}
        for key, item in value.items():
            text = self.string(item, _join(path, key), empty=True)
            if text is not None:
                result[key] = self.expand(text, _join(path, key))
        return result

    # -- sections

    def config(self, data: Any) -> Config | None:
        root = self.obj(data, "", ("mcpServers", "models", "assistants", "server"))
        if root is None:
            return None
        servers = self.servers(root.get("mcpServers", {}), "mcpServers")
        if "models" in root:
            models = self.models(root["models"], "models")
        else:
            from yao_actors.models import default_model_spec

            default = default_model_spec(environ=self.environ)
            models = {default.id: default}
        if "assistants" in root:
            assistants = self.assistants(root["assistants"], "assistants", servers, models)
        else:
            model_id = "default" if "default" in models else next(iter(models), "demo")
            refs = tuple(ServerRef(server_id) for server_id in servers)
            assistants = {"default": AssistantSpec("default", model_id, (DEFAULT_PROMPT,), refs)}
        service = self.service(root.get("server", {}), "server")
        return Config(servers=servers, models=models, assistants=assistants, service=service)

    def servers(self, value: Any, path: str) -> dict[str, ServerSpec]:
        if not isinstance(value, dict):
            self.fail(path, f"expected an object of servers, got {_type_name(value)}")
            return {}
        servers = {}
        for server_id, item in value.items():
            spec = self.server(server_id, item, _join(path, server_id))
            if spec is not None:
                servers[server_id] = spec
        return servers

    def server(self, server_id: str, value: Any, path: str) -> ServerSpec | None:
        allowed = (
            "type", "command", "args", "env", "cwd", "url", "headers", "timeout", "connect_timeout",
            "max_concurrency", "queue_size", "dispatch", "restart", "samples",
        )  # fmt: skip
        item = self.obj(value, path, allowed)
        if item is None:
            return None
        if not _SERVER_ID.match(server_id):
            self.fail(
                path,
                "a server id must start with a letter or digit and use only letters, digits, '.', '_', '-'",
            )
        transport = self.transport(item, path)
        options: dict[str, Any] = {}
        for key in ("timeout", "connect_timeout"):
            if key in item and (number := self.number(item[key], _join(path, key))) is not None:
                options[key] = number
        if "max_concurrency" in item:
            options["max_concurrency"] = self.integer(
                item["max_concurrency"], _join(path, "max_concurrency"), minimum=1
            )
        if "queue_size" in item:
            options["queue_size"] = self.integer(item["queue_size"], _join(path, "queue_size"))
        if "dispatch" in item:
            options["dispatch"] = self.choice(item["dispatch"], _join(path, "dispatch"), ("parallel", "sequential"))
        if "restart" in item:
            options["restart"] = self.restart(item["restart"], _join(path, "restart"))
        if "samples" in item:
            options["samples"] = self.samples(item["samples"], _join(path, "samples"))
        if transport is None or None in options.values():
            return None
        return ServerSpec(id=server_id, transport=transport, **options)

    def transport(self, item: dict[str, Any], path: str) -> Transport | None:
        kind = item.get("type")
        if kind is not None and kind not in ("stdio", "http", "streamable-http", "streamableHttp"):
            self.fail(_join(path, "type"), f"must be 'stdio' or 'http', got {kind!r}")
            return None
        if "command" in item and "url" in item:
            self.fail(path, "give either 'command' (stdio) or 'url' (streamable HTTP), not both")
            return None
        if "url" in item:
            for key in ("args", "env", "cwd"):
                if key in item:
                    self.fail(_join(path, key), "only for stdio servers (this server has a 'url')")
            if kind == "stdio":
                self.fail(_join(path, "type"), "'stdio' needs a 'command', not a 'url'")
            url = self.string(item["url"], _join(path, "url"))
            if url is not None and not url.startswith(("http://", "https://")):
                self.fail(_join(path, "url"), f"must be an http:// or https:// URL, got {url!r}")
                return None
            headers = self.string_map(item.get("headers", {}), _join(path, "headers"))
            return HttpTransport(url, headers) if url else None
        if "command" in item:
            if "headers" in item:
                self.fail(_join(path, "headers"), "only for HTTP servers (this server has a 'command')")
            if kind not in (None, "stdio"):
                self.fail(_join(path, "type"), f"{kind!r} needs a 'url', not a 'command'")
            command = self.string(item["command"], _join(path, "command"))
            args = self.strings(item.get("args", []), _join(path, "args"))
            env = self.string_map(item.get("env", {}), _join(path, "env"))
            cwd = self.string(item["cwd"], _join(path, "cwd")) if "cwd" in item else None
            return StdioTransport(command, args, env, cwd) if command else None
        self.fail(path, "needs 'command' (a stdio server) or 'url' (a streamable HTTP server)")
        return None

    def restart(self, value: Any, path: str) -> RestartPolicy | None:
        item = self.obj(value, path, ("max_restarts", "backoff"))
        if item is None:
            return None
        policy = RestartPolicy()
        if "max_restarts" in item:
            count = self.integer(item["max_restarts"], _join(path, "max_restarts"))
            policy = attrs.evolve(policy, max_restarts=count if count is not None else policy.max_restarts)
        if "backoff" in item:
            backoff = self.obj(item["backoff"], _join(path, "backoff"), ("initial", "max"))
            if backoff is not None:
                initial = self.number(backoff.get("initial", policy.backoff_initial), _join(path, "backoff.initial"))
                top = self.number(backoff.get("max", policy.backoff_max), _join(path, "backoff.max"))
                if initial is not None and top is not None:
                    if top < initial:
                        self.fail(_join(path, "backoff.max"), f"must be >= backoff.initial ({initial:g})")
                    policy = attrs.evolve(policy, backoff_initial=initial, backoff_max=top)
        return policy

    def samples(self, value: Any, path: str) -> dict[str, tuple[Sample, ...]]:
        if not isinstance(value, dict):
            self.fail(path, f"expected an object mapping tool names to lists of examples, got {_type_name(value)}")
            return {}
        result = {}
        for tool, examples in value.items():
            tool_path = _join(path, tool)
            if not isinstance(examples, list):
                self.fail(tool_path, f"expected a list of examples, got {_type_name(examples)}")
                continue
            parsed = []
            for i, example in enumerate(examples):
                item = self.obj(example, _join(tool_path, i), ("name", "input", "output", "description", "metadata"))
                if item is None:
                    continue
                description = item.get("description", "")
                metadata = item.get("metadata", {})
                if isinstance(metadata, dict) and isinstance(metadata.get("description"), str):
                    description = description or metadata["description"]
                parsed.append(
                    Sample(
                        input=item.get("input"),
                        output=item.get("output"),
                        name=self.string(item.get("name", ""), _join(_join(tool_path, i), "name"), empty=True) or "",
                        description=self.string(description, _join(_join(tool_path, i), "description"), empty=True)
                        or "",
                    )
                )
            result[tool] = tuple(parsed)
        return result

    def models(self, value: Any, path: str) -> dict[str, ModelSpec]:
        if not isinstance(value, dict):
            self.fail(path, f"expected an object of models, got {_type_name(value)}")
            return {}
        models = {}
        for model_id, item in value.items():
            spec = self.model(model_id, item, _join(path, model_id))
            if spec is not None:
                models[model_id] = spec
        return models

    def model(self, model_id: str, value: Any, path: str) -> ModelSpec | None:
        allowed = (
            "provider", "base_url", "model", "api_key_env", "headers", "params", "stream",
            "connect_timeout", "read_timeout", "max_retries", "retry_budget",
        )  # fmt: skip
        item = self.obj(value, path, allowed)
        if item is None:
            return None
        provider = self.choice(item.get("provider"), _join(path, "provider"), ("openai", "demo", "test"))
        options: dict[str, Any] = {}
        if "base_url" in item:
            options["base_url"] = self.string(item["base_url"], _join(path, "base_url"))
        if "model" in item:
            options["model"] = self.string(item["model"], _join(path, "model"))
        elif provider == "openai":
            self.fail(_join(path, "model"), "required for provider 'openai' (the endpoint's model name)")
            return None
        if "api_key_env" in item:
            key_env = item["api_key_env"]
            options["api_key_env"] = None if key_env is None else self.string(key_env, _join(path, "api_key_env"))
        if "headers" in item:
            options["headers"] = self.string_map(item["headers"], _join(path, "headers"))
        if "params" in item:
            params = item["params"]
            if not isinstance(params, dict):
                self.fail(_join(path, "params"), f"expected an object of request fields, got {_type_name(params)}")
                return None
            options["params"] = params
        if "stream" in item:
            options["stream"] = self.boolean(item["stream"], _join(path, "stream"))
        for key in ("connect_timeout", "read_timeout", "retry_budget"):
            if key in item:
                options[key] = self.number(item[key], _join(path, key))
        if "max_retries" in item:
            options["max_retries"] = self.integer(item["max_retries"], _join(path, "max_retries"))
        if provider is None or any(v is None for k, v in options.items() if k != "api_key_env"):
            return None
        return ModelSpec(id=model_id, provider=provider, **options)  # type: ignore[arg-type]

    def assistants(
        self, value: Any, path: str, servers: Mapping[str, ServerSpec], models: Mapping[str, ModelSpec]
    ) -> dict[str, AssistantSpec]:
        if not isinstance(value, dict):
            self.fail(path, f"expected an object of assistants, got {_type_name(value)}")
            return {}
        assistants = {}
        for assistant_id, item in value.items():
            spec = self.assistant(assistant_id, item, _join(path, assistant_id), servers, models)
            if spec is not None:
                assistants[assistant_id] = spec
        return assistants

    def model_ref(self, value: Any, path: str, models: Mapping[str, ModelSpec]) -> str | None:
        model_id = self.string(value, path)
        if model_id is not None and model_id not in models and model_id not in BUILTIN_MODEL_IDS:
            known = ", ".join(sorted({*models, *BUILTIN_MODEL_IDS}))
            self.fail(path, f"unknown model {model_id!r} (known: {known})")
            return None
        return model_id

    def assistant(
        self,
        assistant_id: str,
        value: Any,
        path: str,
        servers: Mapping[str, ServerSpec],
        models: Mapping[str, ModelSpec],
    ) -> AssistantSpec | None:
        allowed = ("model", "prompt", "mcp", "timeouts", "hooks", "fallback_model", "max_tools")
        item = self.obj(value, path, allowed)
        if item is None:
            return None
        if assistant_id.startswith("__yao."):
            self.fail(path, "ids starting with '__yao.' are reserved for built-in assistants")
        ok = True
        model = self.model_ref(item.get("model"), _join(path, "model"), models)
        prompt = self.prompt(item.get("prompt", []), _join(path, "prompt"))
        options: dict[str, Any] = {}
        if "mcp" in item:
            options.update(self.mcp(item["mcp"], _join(path, "mcp"), servers))
        if "timeouts" in item:
            options["timeouts"] = self.timeouts(item["timeouts"], _join(path, "timeouts"))
        if "hooks" in item:
            options["hooks"] = self.hooks(item["hooks"], _join(path, "hooks"))
        if "fallback_model" in item:
            options["fallback_model"] = self.model_ref(item["fallback_model"], _join(path, "fallback_model"), models)
            ok = ok and options["fallback_model"] is not None
        if "max_tools" in item:
            options["max_tools"] = self.integer(item["max_tools"], _join(path, "max_tools"), minimum=1)
        if model is None or prompt is None or not ok or None in options.values():
            return None
        return AssistantSpec(id=assistant_id, model=model, prompt=prompt, **options)

    def prompt(self, value: Any, path: str) -> tuple[str, ...] | None:
        if isinstance(value, str):
            return (value,) if value else ()
        if isinstance(value, list):
            before = len(self.problems)
            prompts = self.strings(value, path)
            return prompts if len(self.problems) == before else None
        self.fail(path, f"expected a string or a list of strings, got {_type_name(value)}")
        return None

    def mcp(self, value: Any, path: str, servers: Mapping[str, ServerSpec]) -> dict[str, Any]:
        item = self.obj(value, path, ("servers", "options"))
        if item is None:
            return {"servers": None}
        result: dict[str, Any] = {}
        if "servers" in item:
            entries = item["servers"]
            if not isinstance(entries, list):
                self.fail(_join(path, "servers"), f"expected a list, got {_type_name(entries)}")
                result["servers"] = None
            else:
                refs = [
                    self.server_ref(entry, _join(_join(path, "servers"), i), servers) for i, entry in enumerate(entries)
                ]
                result["servers"] = None if None in refs else tuple(r for r in refs if r is not None)
        if "options" in item:
            options = self.obj(item["options"], _join(path, "options"), ("tool_loop", "max_turn"))
            if options is None:
                result["tool_loop"] = None
            else:
                result["tool_loop"] = tool_loop_enabled(options.get("tool_loop"))
                result["max_turn"] = max_turns(options.get("max_turn"))
        return result

    def server_ref(self, entry: Any, path: str, servers: Mapping[str, ServerSpec]) -> ServerRef | None:
        """Every seed form: ``"id"``, ``{"server_id", "tools"}``, ``{"id": [...]}``, ``{"id": {"tools"}}``."""
        server_id: Any
        tools: Any = []
        if isinstance(entry, str):
            server_id = entry
        elif isinstance(entry, dict) and "server_id" in entry:
            item = self.obj(entry, path, ("server_id", "tools"))
            if item is None:
                return None
            server_id, tools = item["server_id"], item.get("tools", [])
        elif isinstance(entry, dict) and len(entry) == 1:
            server_id, spec = next(iter(entry.items()))
            path = _join(path, server_id)
            if isinstance(spec, list):
                tools = spec
            else:
                item = self.obj(spec, path, ("tools",))
                if item is None:
                    return None
                tools = item.get("tools", [])
        else:
            self.fail(
                path,
                'expected "id", {"server_id": "id", "tools": [...]}, {"id": ["tool", ...]} or {"id": {"tools": [...]}}',
            )
            return None
        if not isinstance(server_id, str) or server_id not in servers:
            known = ", ".join(f'"{s}"' for s in servers) or "none configured"
            self.fail(path, f"unknown server {json.dumps(server_id, ensure_ascii=False)} (known: {known})")
            return None
        before = len(self.problems)
        names = self.strings(tools, _join(path, "tools"))
        return ServerRef(server_id, names) if len(self.problems) == before else None

    def timeouts(self, value: Any, path: str) -> RunTimeouts | None:
        item = self.obj(value, path, ("run", "model", "turn"))
        if item is None:
            return None
        numbers = {key: self.number(item[key], _join(path, key)) for key in item if key in ("run", "model", "turn")}
        if None in numbers.values():
            return None
        return RunTimeouts(**numbers)  # type: ignore[arg-type]

    def hooks(self, value: Any, path: str) -> Hooks | None:
        item = self.obj(value, path, ("create", "next"))
        if item is None:
            return None
        refs: dict[str, str] = {}
        for key, ref in item.items():
            if key not in ("create", "next"):
                continue
            if not isinstance(ref, str) or not _HOOK_REF.match(ref):
                self.fail(_join(path, key), f'expected "module:function", got {json.dumps(ref, ensure_ascii=False)}')
                return None
            refs[key] = ref
        return Hooks(**refs)

    def tokens(self, value: Any, path: str) -> dict[str, str]:
        """Principal names to tokens, ``${VAR}`` expanded; an empty name or token would let anyone in."""
        tokens = self.string_map(value, path)
        for name, token in tokens.items():
            if not name or not token:
                self.fail(_join(path, name), "a principal needs a non-empty name and a non-empty token")
        return tokens

    def service(self, value: Any, path: str) -> ServiceSpec:
        allowed = tuple(a.name for a in attrs.fields(ServiceSpec))
        item = self.obj(value, path, allowed)
        if item is None:
            return ServiceSpec()
        options: dict[str, Any] = {}
        for key, raw in item.items():
            key_path = _join(path, key)
            if key == "host":
                options[key] = self.string(raw, key_path)
            elif key == "port":
                options[key] = self.integer(raw, key_path, maximum=65535)
            elif key == "token":
                options[key] = None if raw is None else self.expand(self.string(raw, key_path) or "", key_path)
            elif key == "tokens":
                options[key] = self.tokens(raw, key_path)
            elif key == "allowed_origins":
                options[key] = self.strings(raw, key_path)
            elif key == "allow_client_roles":
                roles = self.strings(raw, key_path)
                options[key] = tuple(r for i, r in enumerate(roles) if self.choice(r, _join(key_path, i), CLIENT_ROLES))
            elif key in ("idle_timeout", "shutdown_grace"):
                options[key] = self.number(raw, key_path)
            elif key in allowed:
                options[key] = self.integer(raw, key_path, minimum=1)
        clean = {k: v for k, v in options.items() if v is not None or k == "token"}
        return ServiceSpec(**clean)


def tool_loop_enabled(value: Any) -> bool:
    """The seed's rule: only a real boolean ``false`` disables the tool loop."""
    return value is not False


def max_turns(value: Any) -> int:
    """The seed's rule for ``max_turn``: a number > 0, fractional part truncated; anything else → 5."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        return 5
    return int(value)


def _type_name(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"the number {value}"
    return names.get(type(value), type(value).__name__)

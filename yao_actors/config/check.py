"""Checking a whole :class:`~yao_actors.specs.Config`: its values against the schema, the references between records.

A file is checked as it is read; records built in Python are checked here, with
the same JSON Schema (the records are written back into the file's form,
:func:`config_data`), as is what only a runtime knows: the models given to
``open_runtime(models=...)``. :func:`check_config` is the one place model
references are resolved, with both sets known.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from yao_actors.config.schema import schema_problems
from yao_actors.errors import ConfigError
from yao_actors.specs import (
    BUILTIN_MODEL_IDS,
    AssistantSpec,
    Config,
    HttpTransport,
    InMemoryTransport,
    ModelSpec,
    ServerSpec,
    SseTransport,
    StdioTransport,
)


def config_problems(config: Config, *, models: Iterable[str] = ()) -> list[str]:
    """What is wrong between the records of ``config``, one message per problem with its key path.

    ``models`` are the ids of models given besides ``config.models`` (``open_runtime(models=...)``).
    """
    known_models = sorted({*config.models, *BUILTIN_MODEL_IDS, *models})
    problems = [f"{path}: {message}" if path else message for path, message in schema_problems(config_data(config))]
    for assistant in config.assistants.values():
        path = f"assistants.{assistant.id}"
        for key, model_id in (("model", assistant.model), ("fallback_model", assistant.fallback_model)):
            if model_id is not None and model_id not in known_models:
                problems.append(f"{path}.{key}: unknown model {model_id!r} (known: {', '.join(known_models)})")
        for i, ref in enumerate(assistant.servers):
            if ref.server_id not in config.servers:
                known = ", ".join(f'"{s}"' for s in config.servers) or "none configured"
                problems.append(f'{path}.mcp.servers[{i}]: unknown server "{ref.server_id}" (known: {known})')
        if isinstance(assistant.fallback, str) and assistant.fallback not in config.assistants:
            known = ", ".join(sorted(config.assistants))
            problems.append(f"{path}.fallback.assistant: unknown assistant {assistant.fallback!r} (known: {known})")
    problems.extend(_public_url_problems(config))
    problems.extend(_apps_origin_problems(config))
    problems.extend(_required_server_problems(config))
    return problems


def _required_server_problems(config: Config) -> list[str]:
    """``server.required_servers`` names servers that are configured and not disabled (a disabled one never starts:
    the worker would never be ready)."""
    problems = []
    for i, server_id in enumerate(config.service.required_servers):
        spec = config.servers.get(server_id)
        if spec is None:
            known = ", ".join(f'"{s}"' for s in config.servers) or "none configured"
            problems.append(f'server.required_servers[{i}]: unknown server "{server_id}" (known: {known})')
        elif spec.disabled:
            problems.append(
                f'server.required_servers[{i}]: server "{server_id}" is disabled: it never starts, so the service '
                "would never be ready"
            )
    return problems


#: Hosts a browser on the same machine reaches the service at under the name it listens on.
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _public_url_problems(config: Config) -> list[str]:
    """``server.public_url`` is needed when principals authorize servers and the service listens beyond loopback
    (the authorization server sends their browsers back to it: the address it listens on is not theirs)."""
    asking = [
        server_id
        for server_id, spec in config.servers.items()
        if not spec.disabled
        and isinstance(spec.transport, HttpTransport | SseTransport)
        and spec.transport.auth is not None
        and spec.transport.auth.identity == "principal"
    ]
    if not asking or config.service.public_url or config.service.host in _LOOPBACK:
        return []
    names = ", ".join(repr(s) for s in asking)
    return [
        f"server.public_url: required when the service listens on {config.service.host!r} and servers have "
        f"auth.identity 'principal' ({names}): the address users' browsers are sent back to "
        "(<public_url>/oauth/callback)"
    ]


def _apps_origin_problems(config: Config) -> list[str]:
    """``server.apps_origin`` needs the page's origin (``public_url``, or ``allowed_origins``): the sandbox may be
    embedded only by the page, and must not be the page's own origin (an app would share it)."""
    service = config.service
    if not service.apps_origin:
        return []
    pages = [o for o in service.allowed_origins if o not in ("*", "null")]
    if service.public_url:
        parts = urllib.parse.urlsplit(service.public_url)
        pages.append(f"{parts.scheme}://{parts.netloc}".lower())
    if not pages:
        return [
            "server.apps_origin: also set server.public_url (the page's address), or allowed_origins: only the page "
            "may embed an app's sandbox"
        ]
    if service.apps_origin in (page.lower() for page in pages):
        return [f"server.apps_origin: {service.apps_origin} is the page's own origin; apps need another one"]
    return []


def check_config(config: Config, *, models: Iterable[str] = ()) -> None:
    """Raise :class:`ConfigError` listing every problem :func:`config_problems` finds."""
    problems = config_problems(config, models=models)
    if problems:
        raise ConfigError(problems)


def config_data(config: Config) -> dict[str, Any]:
    """``config`` in the file's form (for the schema); an in-memory server's transport, which a file cannot
    hold, stands as a ``command``."""
    return {
        "mcpServers": {key: _server_data(spec) for key, spec in config.servers.items()},
        "models": {key: _model_data(spec) for key, spec in config.models.items()},
        "assistants": {key: _assistant_data(spec) for key, spec in config.assistants.items()},
        "server": {key: _plain(value) for key, value in attrs.asdict(config.service, recurse=False).items()},
        "prompts": _plain(config.prompts),
    }


def _plain(value: Any) -> Any:
    """Tuples as lists and mappings as dicts, as JSON has them; anything else as it is (wrong types stay wrong)."""
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _server_data(spec: ServerSpec) -> dict[str, Any]:
    transport = spec.transport
    data: dict[str, Any]
    match transport:
        case StdioTransport():
            data = {"command": transport.command, "args": _plain(transport.args), "env": _plain(transport.env)}
            data["inherit_env"] = transport.inherit_env
            if transport.cwd is not None:
                data["cwd"] = transport.cwd
        case HttpTransport() | SseTransport():
            data = {"url": transport.url, "headers": _plain(transport.headers)}
            if isinstance(transport, SseTransport):
                data["type"] = "sse"
            if transport.auth is not None:
                said = attrs.asdict(transport.auth, filter=lambda field, value: value not in (None, field.default))
                data["auth"] = {"type": transport.auth.type} | {key: _plain(value) for key, value in said.items()}
        case InMemoryTransport(reference=str(reference)):
            data = {"module": reference}
        case _:
            data = {"command": "in-memory"}  # a server object given in Python: no file could name it
    restart = spec.restart
    backoff = {"initial": restart.backoff_initial, "max": restart.backoff_max}
    return data | {
        "timeout": spec.timeout,
        "connect_timeout": spec.connect_timeout,
        "max_concurrency": spec.max_concurrency,
        "queue_size": spec.queue_size,
        "dispatch": spec.dispatch,
        "restart": {"max_restarts": restart.max_restarts, "backoff": backoff},
        "expose_stderr": spec.expose_stderr,
        "read_links": spec.read_links,
        "apps": spec.apps,
        "disabled": spec.disabled,
        "approval": spec.approval if isinstance(spec.approval, bool) else sorted(spec.approval),
        "protocol": spec.protocol,
        "input_timeout": spec.input_timeout,
        "tasks": spec.tasks,
    }


def _model_data(spec: ModelSpec) -> dict[str, Any]:
    data = {key: _plain(value) for key, value in attrs.asdict(spec, recurse=False).items() if key != "id"}
    if not data["model"]:
        del data["model"]  # the offline models have none
    return data


def _assistant_data(spec: AssistantSpec) -> dict[str, Any]:
    servers = [{"server_id": ref.server_id, "tools": _plain(ref.tools)} for ref in spec.servers]
    hooks = {key: value for key, value in attrs.asdict(spec.hooks).items() if value is not None}
    data: dict[str, Any] = {
        "model": spec.model,
        "prompt": _plain(spec.prompt),
        "mcp": {"servers": servers, "options": {"tool_loop": spec.tool_loop, "max_turn": spec.max_turn}},
        "timeouts": attrs.asdict(spec.timeouts),
        "hooks": hooks,
        "max_tools": spec.max_tools,
        "history": {"max_messages": spec.history_max_messages},
        "options": _plain(spec.options),
        "fallback": {"assistant": spec.fallback} if isinstance(spec.fallback, str) else spec.fallback,
        "approval": _plain(spec.approval),
        "approval_timeout": spec.approval_timeout,
        "task_timeout": spec.task_timeout,
        "result_budget": attrs.asdict(spec.result_budget),
    }
    if spec.fallback_model is not None:
        data["fallback_model"] = spec.fallback_model
    return data

"""The configuration reader's sections: servers, models, assistants and the service, with the seed's rules.

Every section is checked even after a problem, so one load lists them all.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from yao_actors.config.approval import assistant_approval, server_approval
from yao_actors.config.module_servers import read_module_transport
from yao_actors.config.sample_files import read_samples
from yao_actors.config.service import ServiceReader
from yao_actors.config.values import join_path, type_name
from yao_actors.models.build import default_model_spec
from yao_actors.specs import (
    BUILTIN_MODEL_IDS,
    DEFAULT_PROMPT,
    AssistantSpec,
    Config,
    Hooks,
    HttpTransport,
    ModelSpec,
    RestartPolicy,
    RunTimeouts,
    ServerRef,
    ServerSpec,
    StdioTransport,
    Transport,
)

logger = logging.getLogger(__name__)

_SERVER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_HOOK_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class ConfigReader(ServiceReader):
    """Walks a decoded configuration into a :class:`~yao_actors.specs.Config`, one message per problem."""

    def __init__(self, environ: Mapping[str, str], *, base_dir: Path | None = None) -> None:
        super().__init__(environ)
        #: Where relative paths of the file point from (its directory; the current directory for data).
        self.base_dir = base_dir or Path()
        self.unused_resources: list[str] = []

    def config(self, data: Any) -> Config | None:
        root = self.obj(data, "", ("mcpServers", "models", "assistants", "server", "prompts", "store"))
        if root is None:
            return None
        servers = self.servers(root.get("mcpServers", {}), "mcpServers")
        if "models" in root:
            models = self.models(root["models"], "models")
        else:
            default = default_model_spec(environ=self.environ)
            models = {default.id: default}
        if "assistants" in root:
            assistants = self.assistants(root["assistants"], "assistants", servers, models)
        else:
            model_id = "default" if "default" in models else next(iter(models), "demo")
            refs = tuple(ServerRef(server_id) for server_id in servers)
            assistants = {"default": AssistantSpec("default", model_id, (DEFAULT_PROMPT,), refs)}
        service = self.service(root.get("server", {}), "server")
        prompts = self.prompt(root.get("prompts", []), "prompts") or ()
        store = self.store(root["store"], "store") if "store" in root else None
        if self.unused_resources:
            logger.warning(
                "MCP resources are accepted in mcp.servers but not offered to the model (as in the seed): %s",
                ", ".join(self.unused_resources),
            )
        return Config(
            servers=servers, models=models, assistants=assistants, service=service, prompts=prompts, store=store
        )

    def servers(self, value: Any, path: str) -> dict[str, ServerSpec]:
        return self.entries(value, path, "servers", self.server)

    def server(self, server_id: str, value: Any, path: str) -> ServerSpec | None:
        allowed = (
            "type", "command", "args", "env", "cwd", "url", "headers", "module", "timeout", "connect_timeout",
            "max_concurrency", "queue_size", "dispatch", "restart", "samples", "expose_stderr", "approval",
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
            if key in item and (number := self.number(item[key], join_path(path, key))) is not None:
                options[key] = number
        if "max_concurrency" in item:
            options["max_concurrency"] = self.integer(
                item["max_concurrency"], join_path(path, "max_concurrency"), minimum=1
            )
        if "queue_size" in item:
            options["queue_size"] = self.integer(item["queue_size"], join_path(path, "queue_size"))
        if "dispatch" in item:
            options["dispatch"] = self.choice(item["dispatch"], join_path(path, "dispatch"), ("parallel", "sequential"))
        if "restart" in item:
            options["restart"] = self.restart(item["restart"], join_path(path, "restart"))
        if "samples" in item:
            options["samples"] = read_samples(self, item["samples"], join_path(path, "samples"), self.base_dir)
        if "expose_stderr" in item:
            options["expose_stderr"] = self.boolean(item["expose_stderr"], join_path(path, "expose_stderr"))
        if "approval" in item:
            options["approval"] = server_approval(self, item["approval"], join_path(path, "approval"))
        if transport is None or None in options.values():
            return None
        return ServerSpec(id=server_id, transport=transport, **options)

    def transport(self, item: dict[str, Any], path: str) -> Transport | None:
        kind = item.get("type")
        if kind is not None and kind not in ("stdio", "http", "streamable-http", "streamableHttp", "module"):
            self.fail(join_path(path, "type"), f"must be 'stdio', 'http' or 'module', got {kind!r}")
            return None
        if len({"command", "url", "module"} & item.keys()) > 1:
            self.fail(path, "give one of 'command' (stdio), 'url' (streamable HTTP) or 'module' (in-process), not more")
            return None
        if "module" in item:
            return read_module_transport(self, item, path)
        if kind == "module":
            self.fail(join_path(path, "type"), "'module' needs a 'module' (\"package.module:attribute\")")
            return None
        if "url" in item:
            for key in ("args", "env", "cwd"):
                if key in item:
                    self.fail(join_path(path, key), "only for stdio servers (this server has a 'url')")
            if kind == "stdio":
                self.fail(join_path(path, "type"), "'stdio' needs a 'command', not a 'url'")
            url = self.string(item["url"], join_path(path, "url"))
            if url is not None and not url.startswith(("http://", "https://")):
                self.fail(join_path(path, "url"), f"must be an http:// or https:// URL, got {url!r}")
                return None
            headers = self.string_map(item.get("headers", {}), join_path(path, "headers"))
            return HttpTransport(url, headers) if url else None
        if "command" in item:
            if "headers" in item:
                self.fail(join_path(path, "headers"), "only for HTTP servers (this server has a 'command')")
            if kind not in (None, "stdio"):
                self.fail(join_path(path, "type"), f"{kind!r} needs a 'url', not a 'command'")
            command = self.string(item["command"], join_path(path, "command"))
            args = self.strings(item.get("args", []), join_path(path, "args"))
            env = self.string_map(item.get("env", {}), join_path(path, "env"))
            cwd = self.string(item["cwd"], join_path(path, "cwd")) if "cwd" in item else None
            return StdioTransport(command, args, env, cwd) if command else None
        self.fail(
            path,
            "needs 'command' (a stdio server), 'url' (a streamable HTTP server) or 'module' (a Python server in-process)",
        )
        return None

    def restart(self, value: Any, path: str) -> RestartPolicy | None:
        item = self.obj(value, path, ("max_restarts", "backoff"))
        if item is None:
            return None
        policy = RestartPolicy()
        if "max_restarts" in item:
            count = self.integer(item["max_restarts"], join_path(path, "max_restarts"))
            policy = attrs.evolve(policy, max_restarts=count if count is not None else policy.max_restarts)
        if "backoff" in item:
            backoff = self.obj(item["backoff"], join_path(path, "backoff"), ("initial", "max"))
            if backoff is not None:
                initial = self.number(
                    backoff.get("initial", policy.backoff_initial), join_path(path, "backoff.initial")
                )
                top = self.number(backoff.get("max", policy.backoff_max), join_path(path, "backoff.max"))
                if initial is not None and top is not None:
                    if top < initial:
                        self.fail(join_path(path, "backoff.max"), f"must be >= backoff.initial ({initial:g})")
                    policy = attrs.evolve(policy, backoff_initial=initial, backoff_max=top)
        return policy

    def models(self, value: Any, path: str) -> dict[str, ModelSpec]:
        return self.entries(value, path, "models", self.model)

    def model(self, model_id: str, value: Any, path: str) -> ModelSpec | None:
        allowed = (
            "provider", "base_url", "model", "api_key_env", "headers", "params", "stream",
            "connect_timeout", "read_timeout", "max_retries", "retry_budget",
        )  # fmt: skip
        item = self.obj(value, path, allowed)
        if item is None:
            return None
        provider = self.choice(item.get("provider"), join_path(path, "provider"), ("openai", "demo", "test"))
        options: dict[str, Any] = {}
        if "base_url" in item:
            options["base_url"] = self.string(item["base_url"], join_path(path, "base_url"))
        if "model" in item:
            options["model"] = self.string(item["model"], join_path(path, "model"))
        elif provider == "openai":
            self.fail(join_path(path, "model"), "required for provider 'openai' (the endpoint's model name)")
            return None
        if "api_key_env" in item:
            key_env = item["api_key_env"]
            options["api_key_env"] = None if key_env is None else self.string(key_env, join_path(path, "api_key_env"))
        if "headers" in item:
            options["headers"] = self.string_map(item["headers"], join_path(path, "headers"))
        if "params" in item:
            params = item["params"]
            if not isinstance(params, dict):
                self.fail(join_path(path, "params"), f"expected an object of request fields, got {type_name(params)}")
                return None
            options["params"] = params
        if "stream" in item:
            options["stream"] = self.boolean(item["stream"], join_path(path, "stream"))
        for key in ("connect_timeout", "read_timeout", "retry_budget"):
            if key in item:
                options[key] = self.number(item[key], join_path(path, key))
        if "max_retries" in item:
            options["max_retries"] = self.integer(item["max_retries"], join_path(path, "max_retries"))
        if provider is None or any(v is None for k, v in options.items() if k != "api_key_env"):
            return None
        return ModelSpec(id=model_id, provider=provider, **options)  # type: ignore[arg-type]

    def assistants(
        self, value: Any, path: str, servers: Mapping[str, ServerSpec], models: Mapping[str, ModelSpec]
    ) -> dict[str, AssistantSpec]:
        assistants = self.entries(
            value, path, "assistants", functools.partial(self.assistant, servers=servers, models=models)
        )
        for spec in assistants.values():
            if isinstance(spec.fallback, str) and spec.fallback not in assistants:
                known = ", ".join(sorted(assistants))
                self.fail(
                    join_path(path, f"{spec.id}.fallback.assistant"),
                    f"unknown assistant {spec.fallback!r} (known: {known})",
                )
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
        allowed = (
            "model", "prompt", "mcp", "timeouts", "hooks", "fallback_model", "max_tools", "history", "options", "fallback",
            "approval", "approval_timeout",
        )  # fmt: skip
        item = self.obj(value, path, allowed)
        if item is None:
            return None
        if assistant_id.startswith("__yao."):
            self.fail(path, "ids starting with '__yao.' are reserved for built-in assistants")
        ok = True
        model = self.model_ref(item.get("model"), join_path(path, "model"), models)
        prompt = self.prompt(item.get("prompt", []), join_path(path, "prompt"))
        options: dict[str, Any] = {}
        if "mcp" in item:
            options.update(self.mcp(item["mcp"], join_path(path, "mcp"), servers))
        if "timeouts" in item:
            options["timeouts"] = self.timeouts(item["timeouts"], join_path(path, "timeouts"))
        if "hooks" in item:
            options["hooks"] = self.hooks(item["hooks"], join_path(path, "hooks"))
        if "fallback_model" in item:
            options["fallback_model"] = self.model_ref(
                item["fallback_model"], join_path(path, "fallback_model"), models
            )
            ok = ok and options["fallback_model"] is not None
        if "max_tools" in item:
            options["max_tools"] = self.integer(item["max_tools"], join_path(path, "max_tools"), minimum=1)
        if "options" in item:
            options["options"] = self.request_options(item["options"], join_path(path, "options"))
        if "fallback" in item:
            options["fallback"] = self.fallback(item["fallback"], join_path(path, "fallback"))
        if "approval" in item:
            options["approval"] = assistant_approval(self, item["approval"], join_path(path, "approval"))
        if "approval_timeout" in item:
            options["approval_timeout"] = self.number(item["approval_timeout"], join_path(path, "approval_timeout"))
        history_ok, history_max = self.history(item.get("history", {}), join_path(path, "history"))
        if model is None or prompt is None or not ok or not history_ok or None in options.values():
            return None
        return AssistantSpec(id=assistant_id, model=model, prompt=prompt, history_max_messages=history_max, **options)

    def history(self, value: Any, path: str) -> tuple[bool, int | None]:
        """``history.max_messages``: an integer >= 0 (default 20), or ``null`` for the whole history."""
        item = self.obj(value, path, ("max_messages",))
        if item is None:
            return False, None
        limit = item.get("max_messages", 20)
        if limit is None:
            return True, None
        limit = self.integer(limit, join_path(path, "max_messages"))
        return limit is not None, limit

    def request_options(self, value: Any, path: str) -> dict[str, Any] | None:
        """``options``: request fields (``temperature``, ``tool_choice``, ...) merged over the model's ``params``."""
        if not isinstance(value, dict):
            self.fail(path, f"expected an object of request fields, got {type_name(value)}")
            return None
        return value

    def fallback(self, value: Any, path: str) -> bool | str | None:
        """``true`` (the built-in fallback), ``false`` (none), or ``{"assistant": "<id>"}``."""
        if isinstance(value, bool):
            return value
        item = self.obj(value, path, ("assistant",)) if isinstance(value, dict) else None
        if item is None:
            if not isinstance(value, dict):
                self.fail(path, f'expected true, false or {{"assistant": "<id>"}}, got {type_name(value)}')
            return None
        return self.string(item.get("assistant"), join_path(path, "assistant"))

    def prompt(self, value: Any, path: str) -> tuple[str, ...] | None:
        if isinstance(value, str):
            return (value,) if value else ()
        if isinstance(value, list):
            before = len(self.problems)
            prompts = self.strings(value, path)
            return prompts if len(self.problems) == before else None
        self.fail(path, f"expected a string or a list of strings, got {type_name(value)}")
        return None

    def mcp(self, value: Any, path: str, servers: Mapping[str, ServerSpec]) -> dict[str, Any]:
        item = self.obj(value, path, ("servers", "options"))
        if item is None:
            return {"servers": None}
        result: dict[str, Any] = {}
        if "servers" in item:
            entries = item["servers"]
            if not isinstance(entries, list):
                self.fail(join_path(path, "servers"), f"expected a list, got {type_name(entries)}")
                result["servers"] = None
            else:
                refs = [
                    self.server_ref(entry, join_path(join_path(path, "servers"), i), servers)
                    for i, entry in enumerate(entries)
                ]
                result["servers"] = None if None in refs else tuple(r for r in refs if r is not None)
        if "options" in item:
            options = self.obj(item["options"], join_path(path, "options"), ("tool_loop", "max_turn"))
            if options is None:
                result["tool_loop"] = None
            else:
                result["tool_loop"] = tool_loop_enabled(options.get("tool_loop"))
                result["max_turn"] = self.max_turn(options.get("max_turn"), join_path(path, "options.max_turn"))
        return result

    def max_turn(self, value: Any, path: str) -> int | None:
        """The seed's rule (:func:`max_turns`), except for the two values it got wrong: refused here."""
        if isinstance(value, float) and not math.isfinite(value):
            self.fail(path, f"must be a finite number of turns, got {value}")
            return None
        if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 1:
            self.fail(path, f"must be at least 1 (a fraction below 1 would mean no turn at all), got {value}")
            return None
        return max_turns(value)

    def server_ref(self, entry: Any, path: str, servers: Mapping[str, ServerSpec]) -> ServerRef | None:
        """Every seed form: ``"id"``, ``{"server_id", "tools", "resources"}``, ``{"id": [...]}``,
        ``{"id": {"tools", "resources"}}``.

        ``resources`` is accepted and not used (the seed kept it and never offered
        resources to the model): one warning per load names where it was given.
        """
        before = len(self.problems)
        server_id: Any
        item: dict[str, Any] = {}
        if isinstance(entry, str):
            server_id = entry
        elif isinstance(entry, dict) and "server_id" in entry:
            item = self.obj(entry, path, ("server_id", "tools", "resources")) or {}
            server_id = entry["server_id"]
        elif isinstance(entry, dict) and len(entry) == 1:
            server_id, spec = next(iter(entry.items()))
            path = join_path(path, server_id)
            item = {"tools": spec} if isinstance(spec, list) else self.obj(spec, path, ("tools", "resources")) or {}
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
        names = self.strings(item.get("tools", []), join_path(path, "tools"))
        if "resources" in item:
            self.strings(item["resources"], join_path(path, "resources"))
            self.unused_resources.append(join_path(path, "resources"))
        return ServerRef(server_id, names) if len(self.problems) == before else None

    def timeouts(self, value: Any, path: str) -> RunTimeouts | None:
        item = self.obj(value, path, ("run", "model", "turn"))
        if item is None:
            return None
        numbers = {key: self.number(item[key], join_path(path, key)) for key in item if key in ("run", "model", "turn")}
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
                self.fail(
                    join_path(path, key), f'expected "module:function", got {json.dumps(ref, ensure_ascii=False)}'
                )
                return None
            refs[key] = ref
        return Hooks(**refs)


def tool_loop_enabled(value: Any) -> bool:
    """The seed's rule: only a real boolean ``false`` disables the tool loop."""
    return value is not False


def max_turns(value: Any) -> int:
    """The seed's rule for ``max_turn``: a number > 0, fractional part truncated; anything else → 5."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        return 5
    return int(value)

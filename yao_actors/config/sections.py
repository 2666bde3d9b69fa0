"""The configuration reader's sections: servers, models and the service; the root of a file.

Every section is checked even after a problem, so one load lists them all.
Assistants are read by :mod:`yao_actors.config.assistants`. ``mcpServers``
entries written for Claude Desktop, Cursor, VS Code, Cline or Windsurf are
accepted as they are: ``type`` is checked against ``command`` / ``url``,
``disabled: true`` is honoured (the entry's references need not be set), a stdio server's ``envFile`` is read
(:mod:`yao_actors.config.env_files`), and the other keys only those clients use (:data:`OTHER_CLIENT_KEYS`) are
accepted with one note each. A client's whole file (its servers and none of this runtime's own sections) has its
other top-level keys ignored with one note (:func:`other_clients_settings`). VS Code's file names the section ``servers`` and
may declare ``inputs`` (values it prompts for): ``servers`` is read as ``mcpServers``, and a ``${input:ID}`` in an
entry that is used is an error saying to set the value in the environment.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from yao_actors.config.approval import server_approval
from yao_actors.config.assistants import AssistantReader
from yao_actors.config.env_files import EnvFileError, read_env_file
from yao_actors.config.module_servers import read_module_transport
from yao_actors.config.oauth import read_oauth
from yao_actors.config.providers import default_model_spec
from yao_actors.config.sample_files import read_samples
from yao_actors.config.service import ServiceReader
from yao_actors.config.values import join_path, type_name
from yao_actors.specs import (
    BUILTIN_MODEL_IDS,
    DEFAULT_PROMPT,
    AssistantSpec,
    Config,
    HttpTransport,
    ModelSpec,
    RestartPolicy,
    ServerRef,
    ServerSpec,
    ServiceSpec,
    SseTransport,
    StdioTransport,
    Transport,
    protocol_choices,
)

_SERVER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

#: The sections of a configuration file.
ROOT_KEYS = ("mcpServers", "servers", "inputs", "models", "assistants", "server", "prompts", "store")
#: The sections only this runtime's files have: a file with none of them, and with ``mcpServers`` (or VS Code's
#: ``servers``), is another MCP client's whole file.
OWN_SECTIONS = ("models", "assistants", "server", "prompts", "store")


def other_clients_settings(data: Any) -> list[str]:
    """The top-level keys to ignore in ``data``: another client's settings (Claude Desktop's ``globalShortcut``,
    ``preferences``, ...) when ``data`` is that client's whole file — its servers and none of this runtime's own
    sections. In a file of this runtime's, an unknown key stays an error (a typo should not pass silently)."""
    if not isinstance(data, dict) or not ({"mcpServers", "servers"} & data.keys()):
        return []
    if any(section in data for section in OWN_SECTIONS):
        return []
    return [key for key in data if key not in ROOT_KEYS]


#: The keys of ``mcpServers.<id>`` this runtime reads.
SERVER_KEYS = (
    "type", "command", "args", "env", "cwd", "inherit_env", "url", "headers", "module", "timeout", "connect_timeout",
    "max_concurrency", "queue_size", "dispatch", "restart", "samples", "expose_stderr", "disabled", "approval",
    "protocol", "input_timeout", "read_links", "auth", "identity", "tasks", "apps",
)  # fmt: skip
#: Keys of ``mcpServers.<id>`` that other MCP clients define and this runtime does not use (but a stdio server's
#: ``envFile``, which is read): accepted, one note each. Claude Desktop / Cursor / Cline / Roo Code (``autoApprove``, ``alwaysAllow``, ``disabledTools``,
#: ``transportType``, ``watchPaths``), VS Code (``envFile``, ``dev``), Gemini CLI (``trust``, ``includeTools``,
#: ``excludeTools``), GitHub Copilot (``tools``), VS Code's MCP gallery (``gallery``, ``version``), and
#: ``description`` everywhere.
OTHER_CLIENT_KEYS = (
    "autoApprove", "alwaysAllow", "description", "transportType", "envFile", "disabledTools", "watchPaths", "dev",
    "trust", "includeTools", "excludeTools", "tools", "gallery", "version",
)  # fmt: skip
#: What ``type`` may say, and which transport each one means.
SERVER_TYPES = {
    "stdio": "stdio",
    "local": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamableHttp": "http",
    "sse": "sse",
    "module": "module",
}
MODEL_KEYS = (
    "provider", "base_url", "model", "api_key_env", "headers", "params", "stream",
    "connect_timeout", "read_timeout", "max_retries", "retry_budget", "vision", "max_images",
)  # fmt: skip
SERVICE_KEYS = tuple(a.name for a in attrs.fields(ServiceSpec))


class ConfigReader(AssistantReader, ServiceReader):
    """Walks a decoded configuration into a :class:`~yao_actors.specs.Config`, one message per problem."""

    def __init__(self, environ: Mapping[str, str], *, base_dir: Path | None = None) -> None:
        super().__init__(environ)
        #: Where relative paths of the file point from (its directory; the current directory for data).
        self.base_dir = base_dir or Path()
        #: Where other clients' keys were given, each with what is done with it (one note each).
        self.other_client_keys: list[tuple[str, str]] = []

    def config(self, data: Any) -> Config | None:
        root = self.obj(data, "", ROOT_KEYS)
        if root is None:
            return None
        self.read_inputs(root.get("inputs", []), "inputs")
        section = "servers" if "servers" in root and "mcpServers" not in root else "mcpServers"
        if "servers" in root and "mcpServers" in root:
            self.fail("servers", "give 'mcpServers' or VS Code's 'servers' (read the same), not both")
        servers = self.servers(root.get(section, {}), section)
        if "models" in root:
            models = self.models(root["models"], "models")
        else:
            default = default_model_spec(environ=self.environ)
            models = {default.id: default}
        if "assistants" in root:
            assistants = self.assistants(root["assistants"], "assistants", servers)
        else:
            model_id = "default" if "default" in models else next(iter(models), "demo")
            refs = tuple(ServerRef(server_id) for server_id, spec in servers.items() if not spec.disabled)
            assistants = {"default": AssistantSpec("default", model_id, (DEFAULT_PROMPT,), refs)}
        service = self.service(root.get("server", {}), "server")
        prompts = self.prompt(root.get("prompts", []), "prompts") or ()
        store = self.store(root["store"], "store") if "store" in root else None
        if self.unused_resources:
            self.notes.append(
                "MCP resources are accepted in mcp.servers but not offered to the model (as in the seed): "
                + ", ".join(self.unused_resources)
            )
        for key_path, treatment in self.other_client_keys:
            self.notes.append(f"{key_path}: a key of other MCP clients' files, {treatment}")
        return Config(
            servers=servers,
            models=models,
            assistants=assistants,
            service=service,
            prompts=prompts,
            store=store,
            notes=tuple(self.notes),
        )

    def servers(self, value: Any, path: str) -> dict[str, ServerSpec]:
        return self.entries(value, path, "servers", self.server)

    def read_inputs(self, value: Any, path: str) -> None:
        """VS Code's ``inputs``: kept by id with their descriptions, for the problem a ``${input:ID}`` is."""
        if not isinstance(value, list):
            self.fail(path, f"expected a list (VS Code's inputs), got {type_name(value)}")
            return
        for item in value:
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                description = item.get("description")
                self.inputs[item["id"]] = description if isinstance(description, str) else ""
        if value:
            self.notes.append(
                f"{path}: VS Code's prompted inputs are not supported (a service has no one to ask); an entry in use "
                "that names one (${input:ID}) is an error: set the value in the environment and write ${env:NAME}"
            )

    def server(self, server_id: str, value: Any, path: str) -> ServerSpec | None:
        item = self.obj(value, path, SERVER_KEYS + OTHER_CLIENT_KEYS)
        if item is None:
            return None
        if not _SERVER_ID.fullmatch(server_id):
            suggestion = re.sub(r"[^A-Za-z0-9._-]+", "-", server_id).strip("-._") or "server"
            self.fail(
                path,
                "a server id must start with a letter or digit and use only letters, digits, '.', '_', '-' "
                f"(it names the server's tools, server__tool): rename it, e.g. {suggestion!r}",
            )
        for key in OTHER_CLIENT_KEYS:
            if key in item and not (key == "envFile" and "command" in item):  # a stdio server's envFile is read
                read = key == "transportType" and "type" not in item
                treatment = "read as 'type'" if read else "accepted and not used here"
                self.other_client_keys.append((join_path(path, key), treatment))
        with self.leniently(item.get("disabled") is True):  # a disabled entry's references need not be set
            transport = self.transport(item, path)
        options: dict[str, Any] = {}
        for key in ("timeout", "connect_timeout", "input_timeout"):
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
        if "identity" in item and "auth" in item:
            self.fail(
                join_path(path, "identity"), "a server with auth says whose connection serves a call in auth.identity"
            )
            options["identity"] = None
        elif "identity" in item:
            options["identity"] = self.choice(item["identity"], join_path(path, "identity"), ("service", "principal"))
        if "restart" in item:
            options["restart"] = self.restart(item["restart"], join_path(path, "restart"))
        if "samples" in item:
            options["samples"] = read_samples(self, item["samples"], join_path(path, "samples"), self.base_dir)
        for key in ("expose_stderr", "disabled", "read_links", "apps"):
            if key in item:
                options[key] = self.boolean(item[key], join_path(path, key))
        if "protocol" in item:
            options["protocol"] = self.choice(item["protocol"], join_path(path, "protocol"), protocol_choices())
        if "tasks" in item:
            options["tasks"] = self.choice(item["tasks"], join_path(path, "tasks"), ("auto", "never"))
        if "approval" in item:
            options["approval"] = server_approval(self, item["approval"], join_path(path, "approval"))
        if transport is None or None in options.values():
            return None
        return ServerSpec(id=server_id, transport=transport, **options)

    def transport(self, item: dict[str, Any], path: str) -> Transport | None:
        """``command`` (stdio), ``url`` (streamable HTTP, or SSE with ``type: "sse"``) or ``module`` (in-process),
        checked against ``type``.

        ``type`` may be missing; Cline's ``transportType`` stands in for it when it is.
        """
        type_key = "type" if "type" in item or "transportType" not in item else "transportType"
        type_path = join_path(path, type_key)
        kind: str | None = None
        if type_key in item:
            declared = item[type_key]
            if not isinstance(declared, str) or declared not in SERVER_TYPES:
                choices = ", ".join(repr(t) for t in SERVER_TYPES)
                self.fail(type_path, f"must be one of {choices}, got {declared!r}")
                return None
            kind = SERVER_TYPES[declared]
        if len({"command", "url", "module"} & item.keys()) > 1:
            self.fail(path, "give one of 'command' (stdio), 'url' (an HTTP or SSE server) or 'module' (in-process)")
            return None
        if "auth" in item and "url" not in item:
            self.fail(join_path(path, "auth"), "only for HTTP and SSE servers (this server has no 'url')")
        if "module" in item:
            if "inherit_env" in item:
                self.fail(join_path(path, "inherit_env"), "only for stdio servers (this server has a 'module')")
            if type_key == "transportType" and kind != "module":
                self.fail(type_path, f"{item[type_key]!r} does not take a 'module'")
            return read_module_transport(self, item, path)
        if kind == "module":
            self.fail(type_path, "'module' needs a 'module' (\"package.module:attribute\")")
            return None
        if "url" in item:
            if kind == "stdio":
                self.fail(type_path, "'stdio' needs a 'command', not a 'url'")
            return self.url_transport(item, path, sse=kind == "sse")
        if "command" in item:
            if "headers" in item:
                self.fail(join_path(path, "headers"), "only for HTTP servers (this server has a 'command')")
            if kind not in (None, "stdio"):
                self.fail(type_path, f"{item[type_key]!r} needs a 'url', not a 'command'")
            command = self.expanded_string(item["command"], join_path(path, "command"))
            args_path = join_path(path, "args")
            args = self.strings(item.get("args", []), args_path)
            args = tuple(self.expand(arg, join_path(args_path, i)) for i, arg in enumerate(args))
            env = self.env_file(item, path) | self.string_map(item.get("env", {}), join_path(path, "env"))
            cwd = self.expanded_string(item["cwd"], join_path(path, "cwd")) if "cwd" in item else None
            inherit = (
                self.boolean(item["inherit_env"], join_path(path, "inherit_env")) if "inherit_env" in item else False
            )
            if not command or inherit is None:
                return None
            return StdioTransport(command, args, env, cwd, inherit_env=inherit)
        self.fail(
            path,
            "needs 'command' (a stdio server), 'url' (an HTTP or SSE server) or 'module' (a Python server in-process)",
        )
        return None

    def env_file(self, item: dict[str, Any], path: str) -> dict[str, str]:
        """The variables of a stdio entry's ``envFile`` (Cursor's and VS Code's key; a relative path is from the
        directory yao-actors runs in, as the entry's other paths are), read now so a missing file is said at start;
        none for a disabled entry or without the key."""
        key_path = join_path(path, "envFile")
        if "envFile" not in item or self.lenient:
            return {}
        name = self.expanded_string(item["envFile"], key_path)
        if name is None:
            return {}
        try:
            return read_env_file(Path(name).expanduser())
        except EnvFileError as error:
            self.fail(key_path, str(error))
            return {}

    def url_transport(self, item: dict[str, Any], path: str, *, sse: bool) -> Transport | None:
        """A server at a ``url``: streamable HTTP, or SSE; its ``headers`` and ``auth``."""
        for key in ("args", "env", "cwd", "inherit_env"):
            if key in item:
                self.fail(join_path(path, key), "only for stdio servers (this server has a 'url')")
        url = self.expanded_string(item["url"], join_path(path, "url"))
        if url is not None and not url.startswith(("http://", "https://")):
            self.fail(join_path(path, "url"), f"must be an http:// or https:// URL, got {url!r}")
            return None
        headers = self.string_map(item.get("headers", {}), join_path(path, "headers"))
        auth = read_oauth(self, item["auth"], join_path(path, "auth")) if "auth" in item else None
        if auth is not None and any(name.lower() == "authorization" for name in headers):
            self.fail(join_path(path, "headers"), "no 'Authorization' header with 'auth' (the flow sends its own)")
        if not url or ("auth" in item and auth is None):
            return None
        return SseTransport(url, headers, auth) if sse else HttpTransport(url, headers, auth)

    def restart(self, value: Any, path: str) -> RestartPolicy | None:
        item = self.obj(value, path, ("max_restarts", "backoff"))
        if item is None:
            return None
        policy = RestartPolicy()
        if item.get("max_restarts") is not None:  # null (the default): never give up
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
        item = self.obj(value, path, MODEL_KEYS)
        if item is None:
            return None
        provider = self.choice(item.get("provider"), join_path(path, "provider"), ("openai", *BUILTIN_MODEL_IDS))
        options: dict[str, Any] = {}
        if "base_url" in item:
            options["base_url"] = self.expanded_string(item["base_url"], join_path(path, "base_url"))
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
        for key in ("stream", "vision"):
            if key in item:
                options[key] = self.boolean(item[key], join_path(path, key))
        if "max_images" in item:
            options["max_images"] = self.integer(item["max_images"], join_path(path, "max_images"))
        for key in ("connect_timeout", "read_timeout", "retry_budget"):
            if key in item:
                options[key] = self.number(item[key], join_path(path, key))
        if "max_retries" in item:
            options["max_retries"] = self.integer(item["max_retries"], join_path(path, "max_retries"))
        if provider is None or any(v is None for k, v in options.items() if k != "api_key_env"):
            return None
        return ModelSpec(id=model_id, provider=provider, **options)  # type: ignore[arg-type]

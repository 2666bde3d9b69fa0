"""The configuration's one JSON Schema, strict reading, configs written for other MCP clients, ``${VAR}`` everywhere,
and the checks of records built in Python (issue 12, items 1-6)."""

from __future__ import annotations

import copy
import json
import logging
import re
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yao_actors import parse_config as exported_parse_config
from yao_actors.config import (
    AssistantSpec,
    Config,
    HttpTransport,
    InMemoryTransport,
    ModelSpec,
    RestartPolicy,
    ServerRef,
    ServerSpec,
    ServiceSpec,
    SseTransport,
    StdioTransport,
    check_config,
    config_schema,
    load_config,
    parse_config,
    schema_problems,
    sections,
)
from yao_actors.config import assistants as assistant_keys
from yao_actors.errors import ConfigError

CONFIGURATION_PAGE = Path(__file__).parent.parent / "docs" / "configuration.md"
ENV = {"TOKEN": "s3cret", "BIN": "/opt/bin", "PORT": "8000"}

#: One file that uses every key the schema defines (and so every key the reader reads).
EVERY_KEY: dict[str, Any] = {
    "mcpServers": {
        "local": {
            "type": "stdio", "command": "python", "args": ["-m", "x"], "env": {"A": "1"}, "cwd": "/tmp",
            "inherit_env": True, "timeout": 5, "connect_timeout": 5, "max_concurrency": 2, "queue_size": 4,
            "dispatch": "sequential", "restart": {"max_restarts": 1, "backoff": {"initial": 0.1, "max": 1}},
            "samples": {"get": [{"name": "n", "input": {}, "output": {}, "description": "d", "metadata": {}}]},
            "expose_stderr": True, "disabled": False, "autoApprove": [], "alwaysAllow": [], "description": "d",
            "envFile": "/dev/null", "disabledTools": [], "watchPaths": [], "dev": {}, "trust": True,
            "includeTools": [], "excludeTools": [], "tools": ["*"], "approval": ["get"], "gallery": True, "read_links": True, "apps": False,
            "version": "1.0.0", "protocol": "2026-07-28", "input_timeout": 60, "identity": "principal", "tasks": "never",
        },
        "remote": {"url": "http://127.0.0.1:1/sse", "headers": {"A": "b"}, "transportType": "sse",
                   "auth": {"type": "oauth", "scopes": ["read"], "client_id": "c", "client_secret": "${TOKEN}",
                            "client_metadata_url": "https://agent.example/client.json", "identity": "service"}},
        "machine": {"url": "http://127.0.0.1:1/mcp",
                    "auth": {"type": "client_credentials", "issuer": "https://auth.example", "client_id": "c",
                             "private_key": "${TOKEN}", "signing_algorithm": "ES256"}},
        "enterprise": {"url": "http://127.0.0.1:1/mcp",
                       "auth": {"type": "cross_app_access", "issuer": "https://auth.example", "client_id": "c",
                                "client_secret": "s", "token_endpoint_auth_method": "client_secret_basic",
                                "identity_provider": {"token_endpoint": "https://idp.example/token", "client_id": "i",
                                                      "client_secret": "t", "id_token": "${TOKEN}"}}},
        "inproc": {"type": "module", "module": "yao_actors.testing.servers:build_test_server"},
    },
    "models": {
        "gpt": {
            "provider": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "m", "api_key_env": None,
            "headers": {}, "params": {}, "stream": False, "connect_timeout": 1, "read_timeout": 1, "max_retries": 0,
            "retry_budget": 1, "vision": True, "max_images": 2,
        },
    },
    "assistants": {
        "a": {
            "model": "gpt", "prompt": "p", "fallback_model": "gpt", "max_tools": 3, "options": {}, "fallback": True,
            "mcp": {"servers": ["local", {"server_id": "remote", "tools": ["t"], "resources": []}],
                    "options": {"tool_loop": True, "max_turn": 2}},
            "timeouts": {"run": 1, "model": 1, "turn": 1}, "hooks": {"create": "m:f", "next": "m:g"},
            "history": {"max_messages": 3}, "approval": ["local__*"], "approval_timeout": 60, "task_timeout": 600,
            "result_budget": {"per_result": 1000, "per_turn": 4000},
        },
        "b": {"model": "demo", "fallback": {"assistant": "a"}},
    },
    "server": {
        "host": "127.0.0.1", "port": 1, "token": "t" * 16, "tokens": {"alice": "a" * 16},
        "allowed_origins": ["null"], "allow_client_roles": ["system"], "max_frame_bytes": 1, "max_connections": 1,
        "max_runs_per_connection": 1, "max_runs": 1, "max_runs_per_principal": 1, "idle_timeout": 1, "shutdown_grace": 1,
        "max_thread_bytes": 1, "max_threads_bytes": 1, "detach_grace": 0,
        "public_url": "https://agent.example", "apps_origin": "https://apps.agent.example", "required_servers": ["local"],
    },
    "prompts": ["g"],
    "inputs": [],
    "store": {"type": "redis", "url": "redis://127.0.0.1:6379/0", "prefix": "p:", "event_ttl": 60, "lease_ttl": 5, "lease_wait": 12.5,
              "secret_key": "k" * 16},
}  # fmt: skip
#: The key a redis store cannot have (a file has one store): checked as a second file.
SQLITE_STORE: dict[str, Any] = {
    "store": {"type": "sqlite", "path": "/tmp/t.sqlite3", "event_ttl": 60, "exclusive": False}
}
#: VS Code's name of the servers' section (one of the two in a file): checked as a third file.
VSCODE_SECTION: dict[str, Any] = {"servers": {}}


def problems_of(data: Any, environ: dict[str, str] = ENV) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, environ=environ)
    return list(caught.value.problems)


def schema_keys(node: dict[str, Any], path: str = "") -> set[str]:
    """Every key path the schema defines (``*`` for an entry of the id maps)."""
    if "$ref" in node:
        node = {**config_schema()["$defs"][node["$ref"].rsplit("/", 1)[1]], **node}
    keys: set[str] = set()
    for key, sub in node.get("properties", {}).items():
        keys |= {join(path, key)} | schema_keys(sub, join(path, key))
    for alternative in node.get("anyOf", ()):
        keys |= schema_keys(alternative, path)
    if path in ID_MAPS:
        keys |= schema_keys(node["additionalProperties"], f"{path}.*")
    return keys


ID_MAPS = ("mcpServers", "models", "assistants")
#: Objects whose keys are the user's (names, request fields), not the schema's.
FREE_FORM = ("samples", "headers", "env", "tokens", "params", "options", "metadata", "dev")


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def data_keys(value: Any, path: str = "") -> set[str]:
    """Every key path ``value`` uses, with the entries of the id maps as ``*``."""
    keys: set[str] = set()
    if not isinstance(value, dict) or (path.endswith(FREE_FORM) and not path.endswith("mcp.options")):
        return keys
    for key, sub in value.items():
        here = join(path, "*" if path in ID_MAPS else key)
        if path not in ID_MAPS:
            keys.add(here)
        keys |= data_keys(sub, here)
    return keys


# --------------------------------------------------------------------------- the schema itself


def test_the_schema_is_draft_2020_12_and_shipped_with_the_package() -> None:
    schema = config_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    shipped = Path(sections.__file__).parent.parent / "config.schema.json"
    assert json.loads(shipped.read_text(encoding="utf-8")) == schema


def every_property(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = []
    if isinstance(node, dict):
        for key, sub in node.get("properties", {}).items():
            found.append((f"{path}.{key}", sub))
        for key, sub in node.items():
            if isinstance(sub, dict | list):
                found += every_property(sub, f"{path}/{key}")
            if isinstance(sub, list):
                for i, item in enumerate(sub):
                    found += every_property(item, f"{path}/{key}[{i}]")
    return found


def test_every_key_has_a_description_and_a_type() -> None:
    any_value = ("input", "output", *sections.OTHER_CLIENT_KEYS)
    for path, prop in every_property(config_schema()):
        assert prop.get("description"), path
        if path.rsplit(".", 1)[1] not in any_value:
            assert "type" in prop or "anyOf" in prop or "$ref" in prop, path


@pytest.mark.parametrize(
    ("definition", "record"),
    [
        ("server", ServerSpec("x", StdioTransport("x"))),
        ("model", ModelSpec("m", "openai")),
        ("service", ServiceSpec()),
        ("assistant", AssistantSpec("a", "m")),
    ],
)
def test_schema_defaults_are_the_records_defaults(definition: str, record: Any) -> None:
    properties = config_schema()["$defs"][definition]["properties"]
    fields = attrs.asdict(record, recurse=False)
    checked = 0
    for key, prop in properties.items():
        if "default" in prop and key in fields and not attrs.has(type(fields[key])):
            expected = fields[key]
            expected = list(expected) if isinstance(expected, tuple) else expected
            expected = dict(expected) if hasattr(expected, "items") else expected
            assert prop["default"] == expected, (definition, key)
            checked += 1
    assert checked >= 3
    restart = config_schema()["$defs"]["server"]["properties"]["restart"]["properties"]
    assert restart["max_restarts"]["default"] == RestartPolicy().max_restarts
    assert restart["backoff"]["properties"]["initial"]["default"] == RestartPolicy().backoff_initial
    assert restart["backoff"]["properties"]["max"]["default"] == RestartPolicy().backoff_max
    options = config_schema()["$defs"]["assistant"]["properties"]["mcp"]["properties"]["options"]["properties"]
    assert options["max_turn"]["default"] == AssistantSpec("a", "m").max_turn


def test_the_readers_keys_are_the_schemas_keys() -> None:
    """Every key a reader accepts is in the schema, and the schema has no key the readers do not accept."""
    schema = config_schema()
    defs = schema["$defs"]
    assert tuple(schema["properties"]) == sections.ROOT_KEYS
    assert set(defs["server"]["properties"]) == {*sections.SERVER_KEYS, *sections.OTHER_CLIENT_KEYS}
    assert set(defs["model"]["properties"]) == set(sections.MODEL_KEYS)
    assert set(defs["service"]["properties"]) == set(sections.SERVICE_KEYS)
    assistant = defs["assistant"]["properties"]
    assert set(assistant) == set(assistant_keys.ASSISTANT_KEYS)
    assert set(assistant["mcp"]["properties"]) == set(assistant_keys.MCP_KEYS)
    assert set(assistant["mcp"]["properties"]["options"]["properties"]) == set(assistant_keys.LOOP_KEYS)
    assert set(defs["server"]["properties"]["type"]["enum"]) == set(sections.SERVER_TYPES)


def test_a_file_with_every_key_is_valid_for_the_schema_and_the_reader() -> None:
    assert data_keys(EVERY_KEY) | data_keys(SQLITE_STORE) | data_keys(VSCODE_SECTION) == schema_keys(config_schema())
    assert schema_problems(EVERY_KEY) == []
    assert schema_problems(SQLITE_STORE) == []
    assert schema_problems(VSCODE_SECTION) == []
    assert parse_config(SQLITE_STORE, environ=ENV).store.path == "/tmp/t.sqlite3"  # type: ignore[union-attr]
    assert parse_config(SQLITE_STORE, environ=ENV).store.exclusive is False  # type: ignore[union-attr]
    config = parse_config(EVERY_KEY, environ=ENV)
    assert isinstance(config.servers["remote"].transport, SseTransport)
    inproc = config.servers["inproc"].transport
    assert isinstance(inproc, InMemoryTransport)
    assert inproc.reference == "yao_actors.testing.servers:build_test_server"
    assert config.servers["local"].transport == StdioTransport("python", ("-m", "x"), {"A": "1"}, "/tmp", True)


def test_the_configuration_pages_example_is_valid() -> None:
    text = CONFIGURATION_PAGE.read_text(encoding="utf-8")
    section = text[text.index("# Configuration reference") :]
    example = json.loads(re.search(r"```json\n(.*?)```", section, re.S).group(1))  # type: ignore[union-attr]
    assert schema_problems(example) == []
    parse_config(example, environ={"REMOTE_TOKEN": "x"})


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"assistants": {"a": {"model": "demo", "mcp": {"options": {"max_turn": "25"}}}}}, "assistants.a.mcp.options.max_turn"),
        ({"assistants": {"a": {"model": "demo", "mcp": {"options": {"tool_loop": "false"}}}}}, "assistants.a.mcp.options.tool_loop"),
        ({"mcpServers": {"w": {"command": "x", "timout": 5}}}, "mcpServers.w.timout"),
        ({"mcpServers": {"w": {"command": "x", "timeout": "5"}}}, "mcpServers.w.timeout"),
        ({"mcpServers": {"w": {"command": "x", "url": "http://h"}}}, "mcpServers.w"),
        ({"mcpServers": {"w": {"command": "x", "module": "m:s"}}}, "mcpServers.w"),
        ({"mcpServers": {"w": {"module": "no_attribute"}}}, "mcpServers.w.module"),
        ({"mcpServers": {"w": {"command": "x", "samples": ["get.jsonl"]}}}, "mcpServers.w.samples"),
        ({"mcpServers": {"w": {"args": []}}}, "mcpServers.w"),
        ({"mcpServers": {"w": {"command": "x", "type": "websocket"}}}, "mcpServers.w.type"),
        ({"models": {"m": {"provider": "demo", "stream": "yes"}}}, "models.m.stream"),
        ({"server": {"port": "80"}}, "server.port"),
        ({"server": {"port": 70000}}, "server.port"),
        ({"prompts": 3}, "prompts"),
        ({"assistants": {"a": {"model": "demo", "prompt": ["a", 1]}}}, "assistants.a.prompt[1]"),
        ({"assistants": {"a": {"model": "demo", "fallback": "b"}}}, "assistants.a.fallback"),
        ({"assistants": {"a": {"model": "demo", "mcp": {"servers": [3]}}}}, "assistants.a.mcp.servers[0]"),
        ({"assistants": {"a": {"model": "demo", "history": {"max_messages": -1}}}}, "assistants.a.history.max_messages"),
        ({"mcpservers": {}}, "mcpservers"),
    ],
)  # fmt: skip
def test_the_schema_alone_finds_each_wrong_type(data: dict[str, Any], path: str) -> None:
    """The published schema is a real check (editors use it): it refuses what the reader refuses, at that path."""
    paths = [p for p, _ in schema_problems(data)]
    assert path in paths, schema_problems(data)
    assert any(problem.startswith(f"{path}: ") for problem in problems_of(data))


def test_schema_messages_say_what_was_expected() -> None:
    problems = dict(schema_problems({"mcpServers": {"w": {"command": "x", "timeout": "5", "timout": 1}}}))
    assert problems["mcpServers.w.timeout"] == "expected a number, got a string"
    assert problems["mcpServers.w.timout"].startswith("unknown key (allowed: type, command,")


def test_parse_config_is_exported_and_load_config_checks_the_same(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    data = {"assistants": {"a": {"model": "demo", "mcp": {"options": {"max_turn": "25"}}}}}
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigError) as from_file:
        load_config(path, environ=ENV)
    with pytest.raises(ConfigError) as from_dict:
        exported_parse_config(data, environ=ENV)
    assert from_file.value.problems == from_dict.value.problems
    assert from_file.value.problems[0].startswith("assistants.a.mcp.options.max_turn: expected a whole number")


# --------------------------------------------------------------------------- configs people already have


def test_claude_desktop_cursor_vscode_and_cline_entries_are_accepted(caplog: pytest.LogCaptureFixture) -> None:
    data = {
        "mcpServers": {
            "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
            "cline": {"command": "uvx", "args": ["mcp-server-time"], "autoApprove": ["get_current_time"],
                      "disabled": False, "timeout": 60, "transportType": "stdio"},
            "roo": {"command": "node", "args": ["s.js"], "alwaysAllow": ["x"], "description": "Roo Code's"},
            "vscode": {"type": "stdio", "command": "python", "args": ["-m", "s"], "dev": {"watch": "src/**"}},
            "cursor": {"type": "http", "url": "http://127.0.0.1:${PORT}/mcp", "headers": {"X": "${TOKEN}"},
                       "envFile": "${BIN}/.env"},
            "legacy": {"type": "sse", "url": "http://127.0.0.1:8001/sse"},
            "copilot": {"type": "local", "command": "x", "tools": ["*"]},
            "streamable": {"type": "streamable-http", "url": "https://example.test/mcp"},
        }
    }  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="yao_actors.config.load"):
        config = parse_config(data, environ=ENV)
    servers = config.servers
    assert isinstance(servers["cursor"].transport, HttpTransport)
    assert servers["cursor"].transport.url == "http://127.0.0.1:8000/mcp"
    assert servers["cursor"].transport.headers == {"X": "s3cret"}
    assert servers["legacy"].transport == SseTransport("http://127.0.0.1:8001/sse")
    assert isinstance(servers["streamable"].transport, HttpTransport)
    assert isinstance(servers["copilot"].transport, StdioTransport)
    messages = {r.getMessage().split(":")[0]: r.getMessage() for r in caplog.records}
    assert messages["mcpServers.cline.transportType"].endswith("read as 'type'")
    assert messages["mcpServers.cline.autoApprove"].endswith("accepted and not used here")
    warned = sorted(r.getMessage().split(":")[0] for r in caplog.records)
    assert warned == [
        "mcpServers.cline.autoApprove",
        "mcpServers.cline.transportType",
        "mcpServers.copilot.tools",
        "mcpServers.cursor.envFile",  # a stdio server's is read; an HTTP server has no environment to give it
        "mcpServers.roo.alwaysAllow",
        "mcpServers.roo.description",
        "mcpServers.vscode.dev",
    ]


def test_disabled_servers_are_kept_marked_and_left_out_of_the_default_assistant() -> None:
    config = parse_config({"mcpServers": {"on": {"command": "x"}, "off": {"command": "y", "disabled": True}}})
    assert config.servers["off"].disabled
    assert not config.servers["on"].disabled
    assert config.assistants["default"].servers == (ServerRef("on"),)


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"type": "stdio", "url": "http://h"}, "mcpServers.s.type: 'stdio' needs a 'command', not a 'url'"),
        ({"type": "sse", "command": "x"}, "mcpServers.s.type: 'sse' needs a 'url', not a 'command'"),
        ({"type": "http", "command": "x"}, "mcpServers.s.type: 'http' needs a 'url', not a 'command'"),
        ({"transportType": "sse", "command": "x"}, "mcpServers.s.transportType: 'sse' needs a 'url'"),
        ({"type": "websocket", "url": "ws://h"}, "mcpServers.s.type: must be one of 'stdio', 'local', 'http'"),
        ({"command": "x", "timout": 5}, "mcpServers.s.timout: unknown key"),
        ({"command": "x", "disabled": "yes"}, "mcpServers.s.disabled: expected true or false, got a string"),
        ({"command": "x", "inherit_env": 1}, "mcpServers.s.inherit_env: expected true or false"),
        ({"url": "http://h", "inherit_env": True}, "mcpServers.s.inherit_env: only for stdio servers"),
    ],
)
def test_transport_types_are_checked_and_typos_stay_errors(entry: dict[str, Any], expected: str) -> None:
    problems = problems_of({"mcpServers": {"s": entry}})
    assert any(p.startswith(expected) for p in problems), problems


def test_unknown_keys_outside_mcp_servers_stay_errors() -> None:
    for data, path in [
        ({"assistants": {"a": {"model": "demo", "autoApprove": []}}}, "assistants.a.autoApprove"),
        ({"models": {"m": {"provider": "demo", "description": "x"}}}, "models.m.description"),
        ({"mcp": {}}, "mcp"),
    ]:
        assert any(p.startswith(f"{path}: unknown key") for p in problems_of(data)), data


# --------------------------------------------------------------------------- ${VAR} everywhere


def test_variables_are_expanded_wherever_a_secret_or_a_path_goes() -> None:
    env = {"BIN": "/opt/bin", "TOKEN": "s3cret", "HOST": "127.0.0.1", "DIR": "/srv", "KEY": "k" * 16}
    data = {
        "mcpServers": {
            "s": {"command": "${BIN}/server", "args": ["--token=${TOKEN}", "${MISSING:-dflt}"], "cwd": "${DIR}",
                  "env": {"T": "${TOKEN}"}},
            "h": {"url": "http://${HOST}:9/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        },
        "models": {"m": {"provider": "openai", "model": "x", "base_url": "http://${HOST}:1/v1",
                         "headers": {"X-Key": "${TOKEN}"}}},
        "server": {"token": "${KEY}", "tokens": {"alice": "${KEY}"}},
    }  # fmt: skip
    config = parse_config(data, environ=env)
    stdio = config.servers["s"].transport
    assert stdio == StdioTransport("/opt/bin/server", ("--token=s3cret", "dflt"), {"T": "s3cret"}, "/srv")
    assert config.servers["h"].transport == HttpTransport("http://127.0.0.1:9/mcp", {"Authorization": "Bearer s3cret"})
    assert config.models["m"].base_url == "http://127.0.0.1:1/v1"
    assert config.models["m"].headers == {"X-Key": "s3cret"}
    assert config.service.token == "k" * 16
    assert config.service.tokens == {"alice": "k" * 16}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"mcpServers": {"s": {"command": "${NOPE}/x"}}}, "mcpServers.s.command: environment variable NOPE is not set"),
        ({"mcpServers": {"s": {"command": "x", "args": ["a", "${NOPE}"]}}}, "mcpServers.s.args[1]: environment variable NOPE"),
        ({"mcpServers": {"s": {"command": "x", "cwd": "${NOPE}"}}}, "mcpServers.s.cwd: environment variable NOPE"),
        ({"mcpServers": {"s": {"url": "http://${NOPE}/mcp"}}}, "mcpServers.s.url: environment variable NOPE"),
        ({"models": {"m": {"provider": "openai", "model": "x", "base_url": "${NOPE}"}}}, "models.m.base_url: environment variable NOPE"),
        ({"models": {"m": {"provider": "demo", "headers": {"H": "${NOPE}"}}}}, "models.m.headers.H: environment variable NOPE"),
        ({"server": {"token": "${NOPE}"}}, "server.token: environment variable NOPE"),
    ],
)  # fmt: skip
def test_a_missing_variable_names_itself_and_the_key_path(data: dict[str, Any], expected: str) -> None:
    assert any(p.startswith(expected) for p in problems_of(data, {})), problems_of(data, {})


# --------------------------------------------------------------------------- records built in Python


def test_a_server_whose_id_differs_from_its_key_is_an_error() -> None:
    with pytest.raises(ConfigError) as caught:
        Config(servers={"time": ServerSpec("clock", StdioTransport("x"))})
    assert caught.value.problems == (
        "mcpServers.time: the key of an entry must be its id, but this one has id 'clock'",
    )
    with pytest.raises(ConfigError, match=r"assistants\.a: the key"):
        Config(assistants={"a": AssistantSpec("b", "demo")})
    with pytest.raises(ConfigError, match=r"models\.m: the key"):
        Config(models={"m": ModelSpec("n", "demo")})


def test_a_string_prompt_is_one_prompt() -> None:
    assert AssistantSpec("a", "demo", prompt="Be brief").prompt == ("Be brief",)
    assert AssistantSpec("a", "demo", prompt=["One", "Two"]).prompt == ("One", "Two")
    assert Config(prompts="Global").prompts == ("Global",)
    assert StdioTransport("x", args="--verbose").args == ("--verbose",)


def test_check_config_resolves_references_with_the_models_given_at_start() -> None:
    config = Config(
        servers={"s": ServerSpec("s", StdioTransport("x"))},
        assistants={
            "a": AssistantSpec("a", "mine", servers=(ServerRef("s"), ServerRef("gone"))),
            "b": AssistantSpec("b", "demo", fallback="nobody", fallback_model="other"),
        },
    )
    with pytest.raises(ConfigError) as caught:
        check_config(config)
    assert caught.value.problems == (
        "assistants.a.model: unknown model 'mine' (known: demo, direct, test)",
        'assistants.a.mcp.servers[1]: unknown server "gone" (known: "s")',
        "assistants.b.fallback_model: unknown model 'other' (known: demo, direct, test)",
        "assistants.b.fallback.assistant: unknown assistant 'nobody' (known: a, b)",
    )
    fixed = attrs.evolve(config, assistants={"a": AssistantSpec("a", "mine", servers=(ServerRef("s"),))})
    check_config(fixed, models=["mine"])
    with pytest.raises(ConfigError, match="unknown model 'mine'"):
        check_config(fixed)


def test_a_file_may_name_a_model_it_does_not_declare() -> None:
    """Only ``open_runtime(models=...)`` may provide it: the file is not refused for it."""
    config = parse_config({"assistants": {"a": {"model": "scripted"}}})
    assert config.assistants["a"].model == "scripted"


def test_records_built_in_python_are_checked_against_the_same_schema() -> None:
    """No file, no dict: the records themselves, with values of the wrong type (attrs does not check types)."""
    bad_assistant = AssistantSpec("a", "demo", tool_loop="false", max_turn="25")  # type: ignore[arg-type]
    bad_server = ServerSpec("s", StdioTransport("x"), timeout="5", dispatch="fast")  # type: ignore[arg-type]
    config = Config(servers={"s": bad_server}, assistants={"a": bad_assistant})
    with pytest.raises(ConfigError) as caught:
        check_config(config)
    assert sorted(caught.value.problems) == [
        "assistants.a.mcp.options.max_turn: expected an integer, got a string",
        "assistants.a.mcp.options.tool_loop: expected true or false, got a string",
        "mcpServers.s.dispatch: must be one of 'parallel', 'sequential', got 'fast'",
        "mcpServers.s.timeout: expected a number, got a string",
    ]


def test_every_config_read_from_a_file_passes_the_record_check() -> None:
    check_config(parse_config(EVERY_KEY, environ=ENV))
    check_config(parse_config({}, environ=ENV))


def value_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every value in ``value`` (objects and lists too, not the root)."""
    here = [path] if path else []
    if isinstance(value, dict):
        return here + [p for key, sub in value.items() for p in value_paths(sub, (*path, key))]
    if isinstance(value, list):
        return here + [p for i, sub in enumerate(value) for p in value_paths(sub, (*path, i))]
    return here


LEAVES = value_paths(EVERY_KEY)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
    max_leaves=4,
)


@settings(max_examples=150, deadline=None)
@given(where=st.sampled_from(LEAVES), value=JSON_VALUES)
def test_any_value_anywhere_is_accepted_or_refused_with_its_key_path(where: tuple[Any, ...], value: Any) -> None:
    """A wrong value never crashes the reader, and whatever the schema refuses, parse_config refuses."""
    data = copy.deepcopy(EVERY_KEY)
    target = data
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    problems: tuple[str, ...] = ()
    try:
        parse_config(data, environ=ENV)
    except ConfigError as error:
        problems = error.problems
    assert all(": " in problem for problem in problems)  # each names its key path
    if schema_problems(data):
        assert problems

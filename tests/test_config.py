"""load_config: every accepted form, and one message with its key path per problem."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from yao_actors.config import (
    AssistantSpec,
    Config,
    Hooks,
    HttpTransport,
    RestartPolicy,
    RunTimeouts,
    Sample,
    ServerRef,
    StdioTransport,
    config_problems,
    default_config,
    load_config,
    max_turns,
    parse_config,
    tool_loop_enabled,
)
from yao_actors.errors import ConfigError

ENV = {"TOKEN": "s3cret", "HOME": "/home/u"}


def base(**sections: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "mcpServers": {
            "weather": {"command": "python", "args": ["-m", "yao_actors.demo.weather"]},
            "clothing": {"command": "python", "args": ["-m", "yao_actors.demo.clothing"]},
        },
        "models": {"demo": {"provider": "demo"}},
        "assistants": {"default": {"model": "demo", "mcp": {"servers": ["weather", "clothing"]}}},
    }
    data.update(sections)
    return data


def problems_of(data: Any) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, environ=ENV)
    return list(caught.value.problems)


def test_full_file_round_trip(tmp_path: Path) -> None:
    data = {
        "mcpServers": {
            "weather": {
                "command": "python",
                "args": ["-m", "yao_actors.demo.weather"],
                "env": {"API_TOKEN": "${TOKEN}", "PLAIN": "x", "DEFAULTED": "${MISSING:-fallback}"},
                "cwd": "/tmp",
                "timeout": 5,
                "max_concurrency": 4,
                "dispatch": "sequential",
                "identity": "principal",
                "restart": {"max_restarts": 2, "backoff": {"initial": 0.1, "max": 2}},
                "samples": {"get": [{"name": "bj", "input": {"city": "Beijing"}, "output": {"temp": 3}}]},
            },
            "github.enterprise": {"url": "https://example.test/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        },
        "models": {
            "gpt": {
                "provider": "openai",
                "base_url": "http://127.0.0.1:11434/v1",
                "model": "qwen2.5",
                "api_key_env": None,
                "params": {"temperature": 0.2, "parallel_tool_calls": True},
            },
            "demo": {"provider": "demo"},
        },
        "assistants": {
            "default": {
                "model": "gpt",
                "prompt": ["You are helpful.", "Be brief."],
                "mcp": {
                    "servers": ["weather", {"server_id": "github.enterprise", "tools": ["search"]}],
                    "options": {"tool_loop": True, "max_turn": 3},
                },
                "timeouts": {"run": 60, "model": 20, "turn": 30},
                "hooks": {"create": "my.hooks:create", "next": "my.hooks:next"},
                "fallback_model": "demo",
                "max_tools": 10,
            }
        },
        "server": {"host": "0.0.0.0", "port": 9000, "token": "${TOKEN}", "allowed_origins": ["http://localhost"]},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    config = load_config(path, environ=ENV)

    weather = config.servers["weather"]
    assert weather.transport == StdioTransport(
        "python",
        ("-m", "yao_actors.demo.weather"),
        {"API_TOKEN": "s3cret", "PLAIN": "x", "DEFAULTED": "fallback"},
        "/tmp",
    )
    assert (weather.timeout, weather.max_concurrency, weather.dispatch) == (5.0, 4, "sequential")
    assert (weather.identity, config.servers["github.enterprise"].identity) == ("principal", "service")
    assert weather.restart == RestartPolicy(max_restarts=2, backoff_initial=0.1, backoff_max=2.0)
    assert weather.samples == {"get": (Sample(input={"city": "Beijing"}, output={"temp": 3}, name="bj"),)}
    remote = config.servers["github.enterprise"]
    assert remote.transport == HttpTransport("https://example.test/mcp", {"Authorization": "Bearer s3cret"})
    assert (remote.timeout, remote.max_concurrency, remote.dispatch) == (60.0, 16, "parallel")

    gpt = config.models["gpt"]
    assert (gpt.provider, gpt.base_url, gpt.model, gpt.api_key_env) == (
        "openai",
        "http://127.0.0.1:11434/v1",
        "qwen2.5",
        None,
    )
    assert gpt.params == {"temperature": 0.2, "parallel_tool_calls": True}

    assistant = config.assistants["default"]
    assert assistant == AssistantSpec(
        id="default",
        model="gpt",
        prompt=("You are helpful.", "Be brief."),
        servers=(ServerRef("weather"), ServerRef("github.enterprise", ("search",))),
        tool_loop=True,
        max_turn=3,
        max_tools=10,
        timeouts=RunTimeouts(run=60, model=20, turn=30),
        hooks=Hooks(create="my.hooks:create", next="my.hooks:next"),
        fallback_model="demo",
    )
    assert config.service.host == "0.0.0.0"
    assert config.service.port == 9000
    assert config.service.token == "s3cret"
    assert config.service.allowed_origins == ("http://localhost",)


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("weather", ServerRef("weather")),
        ({"server_id": "weather", "tools": ["get"]}, ServerRef("weather", ("get",))),
        ({"server_id": "weather"}, ServerRef("weather")),
        ({"weather": ["get"]}, ServerRef("weather", ("get",))),
        ({"weather": {"tools": ["get"]}}, ServerRef("weather", ("get",))),
        ({"weather": {}}, ServerRef("weather")),
    ],
)
def test_every_seed_form_of_mcp_servers(entry: Any, expected: ServerRef) -> None:
    data = base(assistants={"a": {"model": "demo", "mcp": {"servers": [entry]}}})
    assert parse_config(data).assistants["a"].servers == (expected,)


@pytest.mark.parametrize(("value", "enabled"), [(None, True), (True, True), (False, False)])
def test_tool_loop_only_real_false_disables(value: Any, enabled: bool) -> None:
    assert tool_loop_enabled(value) is enabled
    options = {} if value is None else {"tool_loop": value}
    data = base(assistants={"a": {"model": "demo", "mcp": {"servers": [], "options": options}}})
    assert parse_config(data).assistants["a"].tool_loop is enabled


@pytest.mark.parametrize("value", ["false", "no", 0, None, []])
def test_tool_loop_that_is_not_a_boolean_is_refused(value: Any) -> None:
    """The seed left the loop on for ``"false"``; a string is now an error, not "on"."""
    data = base(assistants={"a": {"model": "demo", "mcp": {"options": {"tool_loop": value}}}})
    (problem,) = problems_of(data)
    assert problem.startswith("assistants.a.mcp.options.tool_loop: expected true or false, got ")


@pytest.mark.parametrize(("value", "turns"), [(None, 5), (3, 3), (3.0, 3), (0, 5), (-1, 5), (10, 10)])
def test_max_turn_follows_the_seed(value: Any, turns: int) -> None:
    options = {} if value is None else {"max_turn": value}
    data = base(assistants={"a": {"model": "demo", "mcp": {"options": options}}})
    assert parse_config(data).assistants["a"].max_turn == turns


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("25", "expected a whole number of turns, got a string"),
        ("3", "expected a whole number of turns, got a string"),
        (True, "expected a whole number of turns, got a boolean"),
        ([3], "expected a whole number of turns, got a list"),
        (None, "expected a whole number of turns, got null"),
        (2.7, "must be a whole number of turns, got 2.7"),
        (float("inf"), "must be a finite number of turns, got inf"),
        (float("-inf"), "must be a finite number of turns, got -inf"),
        (0.5, "must be at least 1"),
    ],
)
def test_max_turn_of_the_wrong_kind_is_refused(value: Any, message: str) -> None:
    """``"max_turn": "25"`` silently became 5: every value the seed coerced is now refused with its key path."""
    data = base(assistants={"a": {"model": "demo", "mcp": {"options": {"max_turn": value}}}})
    (problem,) = problems_of(data)
    assert problem.startswith(f"assistants.a.mcp.options.max_turn: {message}"), problem


def test_the_seed_helpers_keep_the_seed_rules() -> None:
    assert [max_turns(v) for v in (None, 3, 2.7, "3", 0, -1, True, [3])] == [5, 3, 2, 5, 5, 5, 5, 5]
    assert [tool_loop_enabled(v) for v in (None, True, False, "false", 0)] == [True, True, False, True, True]


def test_minimal_file_gets_a_default_assistant_over_all_servers() -> None:
    data = {
        "mcpServers": {"a": {"command": "x"}, "b": {"url": "http://127.0.0.1:1/mcp"}},
        "models": {"demo": {"provider": "demo"}},
    }
    config = parse_config(data)
    assistant = config.assistants["default"]
    assert assistant.model == "demo"
    assert assistant.servers == (ServerRef("a"), ServerRef("b"))
    assert assistant.prompt


def test_prompt_as_string() -> None:
    data = base(assistants={"a": {"model": "demo", "prompt": "Be nice."}})
    assert parse_config(data).assistants["a"].prompt == ("Be nice.",)


def test_builtin_offline_models_need_no_declaration() -> None:
    data = base(models={}, assistants={"a": {"model": "test"}})
    assert parse_config(data).assistants["a"].model == "test"


def test_default_config_is_the_embedded_demo() -> None:
    config = default_config(environ={})
    assert set(config.servers) == {"weather", "clothing"}
    weather = config.servers["weather"].transport
    assert isinstance(weather, StdioTransport)
    assert weather.command == sys.executable
    assert weather.args == ("-m", "yao_actors.demo.weather")
    assistant = config.assistants["default"]
    assert config.models[assistant.model].provider == "demo"
    assert [ref.server_id for ref in assistant.servers] == ["weather", "clothing"]


def test_default_config_uses_a_real_model_when_openai_variables_are_set() -> None:
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1", "OPENAI_API_KEY": "k", "OPENAI_MODEL": "qwen2.5"}
    config = default_config(environ=env)
    model = config.models[config.assistants["default"].model]
    assert (model.provider, model.base_url, model.model) == ("openai", "http://127.0.0.1:11434/v1", "qwen2.5")


def test_an_openai_api_key_alone_keeps_the_offline_demo_model() -> None:
    """Many shells export ``OPENAI_API_KEY`` for other tools: only a named model (``OPENAI_MODEL``) leaves the demo."""
    for env in ({"OPENAI_API_KEY": "sk-x"}, {"OPENAI_API_KEY": "sk-x", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}):
        config = default_config(environ=env)
        assert config.models[config.assistants["default"].model].provider == "demo"
        assert parse_config({"mcpServers": {}}, environ=env).models["default"].provider == "demo"
    model = default_config(environ={"OPENAI_MODEL": "gpt-4.1-mini"}).models["default"]
    assert (model.provider, model.base_url, model.model) == ("openai", "https://api.openai.com/v1", "gpt-4.1-mini")


def test_a_declared_assistant_without_mcp_servers_gets_none_and_the_file_says_so() -> None:
    """As an agent of PydanticAI or the OpenAI Agents SDK has only the tools it is given: no ``mcp.servers``, no
    servers (a note says so, since it may be an oversight); ``"servers": []`` says it on purpose, without a note."""
    config = parse_config(base(assistants={"a": {"model": "demo"}, "b": {"model": "demo", "mcp": {"servers": []}}}))
    assert config.assistants["a"].servers == config.assistants["b"].servers == ()
    assert config.notes == (
        'assistants.a: no mcp.servers, so its model gets no tools; list those it may use ("mcp": {"servers": '
        '["weather", "clothing"]}), or write "servers": [] to say it needs none',
    )
    assert parse_config(base(mcpServers={}, assistants={"a": {"model": "demo"}})).notes == ()  # nothing to list


def test_required_servers_name_configured_servers_that_can_start() -> None:
    """``server.required_servers`` (the servers ``/readyz`` waits for) is read, and each must name a configured,
    enabled server: a typo or a disabled one would keep the service unready forever."""
    config = parse_config(base(server={"required_servers": ["weather"]}), environ=ENV)
    assert config.service.required_servers == ("weather",)
    assert config_problems(config) == []
    data = base(server={"required_servers": ["wether", "clothing"]})
    data["mcpServers"]["clothing"]["disabled"] = True
    data["assistants"]["default"]["mcp"]["servers"] = ["weather"]
    assert config_problems(parse_config(data, environ=ENV)) == [
        'server.required_servers[0]: unknown server "wether" (known: "weather", "clothing")',
        'server.required_servers[1]: server "clothing" is disabled: it never starts, so the service would never be '
        "ready",
    ]
    assert problems_of(base(server={"required_servers": "weather"})) == [
        "server.required_servers: expected a list of strings, got a string"
    ]


def test_prompts_history_options_and_fallback_are_read() -> None:
    data = base(
        prompts=["G1", "G2"],
        assistants={
            "a": {
                "model": "demo",
                "history": {"max_messages": 6},
                "options": {"temperature": 0.1, "tool_choice": "auto"},
                "fallback": {"assistant": "b"},
            },
            "b": {"model": "demo", "history": {"max_messages": None}, "fallback": False},
            "c": {"model": "demo", "history": {"max_messages": 0}, "fallback": True},
        },
    )
    config = parse_config(data)
    assert config.prompts == ("G1", "G2")
    a, b, c = (config.assistants[x] for x in "abc")
    assert (a.history_max_messages, a.options, a.fallback) == (6, {"temperature": 0.1, "tool_choice": "auto"}, "b")
    assert (b.history_max_messages, b.fallback) == (None, False)
    assert (c.history_max_messages, c.fallback) == (0, True)
    default = parse_config(base()).assistants["default"]
    assert (default.history_max_messages, default.options, default.fallback) == (20, {}, True)


def test_seed_server_entries_with_resources_are_accepted_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    servers = [
        {"server_id": "weather", "tools": ["get"], "resources": ["weather://cities"]},
        {"clothing": {"tools": ["advise"], "resources": []}},
    ]
    data = base(assistants={"a": {"model": "demo", "mcp": {"servers": servers}}})
    with caplog.at_level("WARNING"):
        config = parse_config(data)
    assert config.assistants["a"].servers == (ServerRef("weather", ("get",)), ServerRef("clothing", ("advise",)))
    (record,) = [r for r in caplog.records if "resources" in r.getMessage()]
    assert "assistants.a.mcp.servers[0].resources" in record.getMessage()
    assert "assistants.a.mcp.servers[1].clothing.resources" in record.getMessage()


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ([], "expected an object, got a list"),
        ({"mcpservers": {}}, "mcpservers: unknown key"),
        (base(mcpServers={"w": {}}), "mcpServers.w: needs 'command' (a stdio server), 'url' (an HTTP or SSE server)"),
        (base(mcpServers={"w": {"command": "x", "url": "http://h"}}), "mcpServers.w: give one of 'command'"),
        (base(mcpServers={"w": {"command": "x", "argz": []}}), "mcpServers.w.argz: unknown key"),
        (base(mcpServers={"w": {"command": ""}}), "mcpServers.w.command: expected a non-empty string"),
        (base(mcpServers={"w": {"command": "x", "args": "a b"}}), "mcpServers.w.args: expected a list of strings"),
        (
            base(mcpServers={"w": {"command": "x", "args": ["a", 1]}}),
            "mcpServers.w.args[1]: expected a non-empty string",
        ),
        (
            base(mcpServers={"w": {"command": "x", "env": {"A": "${NOPE}"}}}),
            "mcpServers.w.env.A: environment variable NOPE",
        ),
        (base(mcpServers={"w": {"url": "ftp://h"}}), "mcpServers.w.url: must be an http:// or https:// URL"),
        (base(mcpServers={"w": {"url": "http://h", "headers": {"X": 1}}}), "mcpServers.w.headers.X: expected a string"),
        (base(mcpServers={"w": {"url": "http://h", "env": {}}}), "mcpServers.w.env: only for stdio servers"),
        (base(mcpServers={"w": {"command": "x", "timeout": 0}}), "mcpServers.w.timeout: must be > 0"),
        (base(mcpServers={"w": {"command": "x", "timeout": "5s"}}), "mcpServers.w.timeout: expected a number"),
        (base(mcpServers={"w": {"command": "x", "max_concurrency": 0}}), "mcpServers.w.max_concurrency: must be >= 1"),
        (base(mcpServers={"w": {"command": "x", "dispatch": "fast"}}), "mcpServers.w.dispatch: must be one of"),
        (base(mcpServers={"w": {"command": "x", "identity": "user"}}), "mcpServers.w.identity: must be one of"),
        (
            base(mcpServers={"w": {"url": "http://h", "auth": {"identity": "service"}, "identity": "principal"}}),
            "mcpServers.w.identity: a server with auth says whose connection serves a call in auth.identity",
        ),
        (
            base(mcpServers={"w": {"command": "x", "protocol": "2025-11-25"}}),
            "mcpServers.w.protocol: must be one of 'auto', 'legacy', '2026-07-28', got '2025-11-25'",
        ),
        (base(mcpServers={"w": {"command": "x", "input_timeout": 0}}), "mcpServers.w.input_timeout: must be > 0"),
        (
            base(mcpServers={"w": {"command": "x", "tasks": "always"}}),
            "mcpServers.w.tasks: must be one of 'auto', 'never', got 'always'",
        ),
        (
            base(mcpServers={"w": {"command": "x", "restart": {"backoff": {"initial": 2, "max": 1}}}}),
            "mcpServers.w.restart.backoff.max: must be >= backoff.initial",
        ),
        (
            base(mcpServers={"w": {"command": "x", "restart": {"max_restarts": -1}}}),
            "mcpServers.w.restart.max_restarts: must be >= 0",
        ),
        (base(mcpServers={"w": {"command": "x", "samples": {"get": {}}}}), "mcpServers.w.samples.get: expected a list"),
        (base(mcpServers={"bad id": {"command": "x"}}), "mcpServers.bad id: a server id must start"),
        (base(mcpServers={"id\n": {"command": "x"}}), "mcpServers.id\n: a server id must start"),
        (base(models={"m": {"provider": "anthropic"}}), "models.m.provider: must be one of"),
        (base(models={"m": {"provider": "openai"}}), "models.m.model: required for provider 'openai'"),
        (base(models={"m": {"provider": "demo", "api_key": "x"}}), "models.m.api_key: unknown key"),
        (base(models={"m": {"provider": "demo", "stream": "yes"}}), "models.m.stream: expected true or false"),
        (base(assistants={"a": {}}), "assistants.a.model: expected a non-empty string"),
        (
            base(assistants={"default": {"model": "demo", "mcp": {"servers": ["weather", "wether"]}}}),
            'assistants.default.mcp.servers[1]: unknown server "wether"',
        ),
        (
            base(assistants={"a": {"model": "demo", "mcp": {"servers": [{"wether": ["get"]}]}}}),
            'assistants.a.mcp.servers[0].wether: unknown server "wether"',
        ),
        (
            base(assistants={"a": {"model": "demo", "mcp": {"servers": [{"weather": ["get", 2]}]}}}),
            "assistants.a.mcp.servers[0].weather.tools[1]: expected a non-empty string",
        ),
        (base(assistants={"a": {"model": "demo", "mcp": {"servers": [3]}}}), "assistants.a.mcp.servers[0]: expected"),
        (
            base(assistants={"a": {"model": "demo", "mcp": {"options": {"max_turns": 3}}}}),
            "assistants.a.mcp.options.max_turns: unknown key",
        ),
        (
            base(assistants={"a": {"model": "demo", "hooks": {"next": "nocolon"}}}),
            'assistants.a.hooks.next: expected "module:function"',
        ),
        (base(assistants={"a": {"model": "demo", "timeouts": {"run": -1}}}), "assistants.a.timeouts.run: must be > 0"),
        (
            base(assistants={"__yao.x": {"model": "demo"}}),
            "assistants.__yao.x: ids starting with '__yao.' are reserved",
        ),
        (
            base(assistants={"a": {"model": "demo", "history": {"max_messages": -1}}}),
            "assistants.a.history.max_messages: must be >= 0",
        ),
        (
            base(assistants={"a": {"model": "demo", "history": {"max": 3}}}),
            "assistants.a.history.max: unknown key",
        ),
        (base(assistants={"a": {"model": "demo", "options": []}}), "assistants.a.options: expected an object"),
        (
            base(assistants={"a": {"model": "demo", "fallback": {"assistant": "nobody"}}}),
            "assistants.a.fallback.assistant: unknown assistant 'nobody'",
        ),
        (base(assistants={"a": {"model": "demo", "fallback": "b"}}), "assistants.a.fallback: expected true, false"),
        (
            base(assistants={"a": {"model": "demo", "mcp": {"servers": [{"server_id": "weather", "resource": []}]}}}),
            "assistants.a.mcp.servers[0].resource: unknown key",
        ),
        (base(prompts=3), "prompts: expected a string or a list of strings"),
        (base(server={"port": 70000}), "server.port: must be between 0 and 65535"),
        (base(server={"hots": "x"}), "server.hots: unknown key"),
        (base(server={"public_url": "agent.example"}), "server.public_url: must be the service's http:// or https://"),
        (base(server={"public_url": "https://a.example/?x=1"}), "server.public_url: must be the service's http://"),
        (base(server={"public_url": 7}), "server.public_url: expected a non-empty string"),
    ],
)
def test_bad_files_name_the_key_path(data: Any, expected: str) -> None:
    problems = problems_of(data)
    assert any(p.startswith(expected) for p in problems), problems


def test_every_problem_is_reported_at_once() -> None:
    data = base(
        mcpServers={"w": {"command": "x", "timeout": -1, "dispatch": "fast"}},
        assistants={"a": {"model": "nope", "mcp": {"servers": ["zzz"]}}},
        server={"port": "80"},
    )
    problems = problems_of(data)
    assert len(problems) == 4, problems
    for path in (
        "mcpServers.w.timeout",
        "mcpServers.w.dispatch",
        "assistants.a.mcp.servers[0]",
        "server.port",
    ):
        assert any(p.startswith(path + ":") for p in problems), (path, problems)


def test_not_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('{\n  "mcpServers": {,}\n}', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert "line 2 column" in caught.value.problems[0]
    assert str(path) in str(caught.value)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the file"):
        load_config(tmp_path / "absent.json")


def test_config_records_can_be_built_in_code() -> None:
    config = Config(servers={}, assistants={"a": AssistantSpec(id="a", model="demo")})
    assert config.service.port == 8765


def test_expose_stderr_is_off_unless_set_to_true() -> None:
    servers = {"quiet": {"command": "x"}, "loud": {"command": "x", "expose_stderr": True}}
    config = parse_config({"mcpServers": servers}, environ=ENV)
    assert not config.servers["quiet"].expose_stderr
    assert config.servers["loud"].expose_stderr
    assert problems_of({"mcpServers": {"s": {"command": "x", "expose_stderr": "yes"}}}) == [
        "mcpServers.s.expose_stderr: expected true or false, got a string"
    ]


def test_memory_budgets_of_the_conversations() -> None:
    config = parse_config({"server": {"max_thread_bytes": 1000, "max_threads_bytes": 5000}}, environ=ENV)
    assert (config.service.max_thread_bytes, config.service.max_threads_bytes) == (1000, 5000)
    defaults = parse_config({}, environ=ENV).service
    assert (defaults.max_thread_bytes, defaults.max_threads_bytes) == (4 << 20, 256 << 20)
    assert problems_of({"server": {"max_thread_bytes": 0}}) == ["server.max_thread_bytes: must be >= 1, got 0"]


@pytest.mark.parametrize("text", ["[" * 5000 + "]" * 5000, '{"a": ' + "9" * 5000 + "}"], ids=["deep", "digits"])
def test_unusable_json_is_a_config_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "c.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="not usable JSON"):
        load_config(path)


def test_tasks_settings_are_read_with_their_defaults() -> None:
    data = base()
    data["mcpServers"]["weather"]["tasks"] = "never"
    data["assistants"]["default"]["task_timeout"] = 600
    config = parse_config(data, environ=ENV)
    assert config.servers["weather"].tasks == "never"
    assert config.servers["clothing"].tasks == "auto"
    assert config.assistants["default"].task_timeout == 600.0
    assert parse_config(base(), environ=ENV).assistants["default"].task_timeout == 3600.0
    data["assistants"]["default"]["task_timeout"] = 0
    assert problems_of(data) == ["assistants.default.task_timeout: must be > 0, got 0"]

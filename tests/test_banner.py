"""The line ``serve`` prints at start (issue 44, items 2 and 4): which model and endpoint the assistants use, and a
question that the configured assistant can answer."""

from __future__ import annotations

import sys

import pytest

from yao_actors.cli.serving import (
    GENERIC_QUESTION,
    SAMPLE_QUESTION,
    models_said,
    suggested_question,
    unused_variables_said,
)
from yao_actors.config import AssistantSpec, Config, ModelSpec, ServerRef, ServerSpec, default_config, parse_config
from yao_actors.specs import StdioTransport


def test_the_embedded_demo_suggests_the_weather_question_and_says_its_model_is_offline() -> None:
    config = default_config(environ={})
    assert suggested_question(config) == SAMPLE_QUESTION
    assert models_said(config) == "model demo (offline)"


def test_the_in_process_demo_servers_suggest_the_weather_question_too() -> None:
    config = parse_config({"mcpServers": {"w": {"module": "yao_actors.demo.weather:build_server"}}}, environ={})
    assert suggested_question(config) == SAMPLE_QUESTION


def test_a_config_without_the_weather_server_suggests_a_question_about_its_tools() -> None:
    time = ServerSpec("time", StdioTransport(sys.executable, ("-m", "mcp_server_time")))
    config = Config(
        servers={"time": time},
        models={"m": ModelSpec("m", "openai", base_url="http://127.0.0.1:11434/v1", model="qwen2.5")},
        assistants={"default": AssistantSpec("default", "m", servers=(ServerRef("time"),))},
    )
    assert suggested_question(config) == GENERIC_QUESTION
    assert models_said(config) == "model qwen2.5 at http://127.0.0.1:11434/v1"


def test_an_exported_key_the_demo_model_does_not_use_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    note = unused_variables_said(default_config(environ={}))
    assert (
        note == " (OPENAI_API_KEY set but not used: set OPENAI_MODEL or pass --model to use an OpenAI-compatible model)"
    )
    assert unused_variables_said(default_config(environ={"OPENAI_MODEL": "m"})) == ""
    monkeypatch.delenv("OPENAI_API_KEY")
    assert unused_variables_said(default_config(environ={})) == ""

"""The ``server`` keys of issue 9 (``tokens``, ``allow_client_roles``) and config files that are hostile JSON."""

from __future__ import annotations

from pathlib import Path

import pytest

from yao_actors.config import load_config, parse_config
from yao_actors.errors import ConfigError


def test_tokens_map_principals_to_tokens_with_variables_expanded() -> None:
    data = {"server": {"tokens": {"alice": "${ALICE_TOKEN}", "bob": "literal-token-of-bob"}}}
    spec = parse_config(data, environ={"ALICE_TOKEN": "from-the-environment"}).service
    assert dict(spec.tokens) == {"alice": "from-the-environment", "bob": "literal-token-of-bob"}


@pytest.mark.parametrize(
    ("tokens", "problem"),
    [
        ({"alice": 7}, "server.tokens.alice: expected a string, got the number 7"),
        ({"alice": ""}, "server.tokens.alice: a principal needs a non-empty name and a non-empty token"),
        ({"": "some-token"}, "server.tokens.: a principal needs a non-empty name and a non-empty token"),
        ({"alice": "${UNSET_TOKEN}"}, "server.tokens.alice: environment variable UNSET_TOKEN is not set"),
        (["a"], "server.tokens: expected an object of strings, got a list"),
    ],
)
def test_bad_tokens_are_refused_with_their_key_path(tokens: object, problem: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config({"server": {"tokens": tokens}}, environ={})
    assert problem in refused.value.problems


def test_allow_client_roles() -> None:
    assert parse_config({"server": {"allow_client_roles": ["system", "assistant"]}}).service.allow_client_roles == (
        "system",
        "assistant",
    )
    assert parse_config({}).service.allow_client_roles == ()
    with pytest.raises(ConfigError) as refused:
        parse_config({"server": {"allow_client_roles": ["system", "tool"]}})
    assert list(refused.value.problems) == [
        "server.allow_client_roles[1]: must be one of 'system', 'developer', 'assistant', got 'tool'"
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param("[" * 100_000 + "]" * 100_000, "not usable JSON: JSON nested deeper than 128 levels", id="deep"),
        pytest.param('{"server": {"port": ' + "9" * 5000 + "}}", "not usable JSON: Exceeds the limit", id="huge int"),
    ],
)
def test_a_hostile_config_file_is_a_config_error_not_a_traceback(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert refused.value.problems[0].startswith(problem)

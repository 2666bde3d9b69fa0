"""``mcpServers.<id>.auth`` (OAuth) and ``store.secret_key``: read with ``${VAR}``, refused with clear errors, in the
schema, and ``yao-actors check`` / ``serve`` refusing a durable store without the key (issue 32, configuration)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from yao_actors.cli import main
from yao_actors.config import HttpTransport, SseTransport, config_problems, parse_config, schema_problems
from yao_actors.errors import ConfigError
from yao_actors.specs import OAuthSpec

ENV = {"CID": "client-1", "CSECRET": "s3cret", "KEY": "k" * 32, "SCOPE": "write"}


def problems_of(data: Any) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, environ=ENV)
    return list(caught.value.problems)


def remote(**auth: Any) -> dict[str, Any]:
    return {"mcpServers": {"hub": {"url": "https://mcp.example/mcp", "auth": {"type": "oauth", **auth}}}}


def test_auth_is_read_with_its_variables_for_http_and_sse() -> None:
    data = remote(scopes=["read", "${SCOPE}"], client_id="${CID}", client_secret="${CSECRET}", identity="principal")
    config = parse_config(data, environ=ENV)
    transport = config.servers["hub"].transport
    assert isinstance(transport, HttpTransport)
    assert transport.auth == OAuthSpec(("read", "write"), "client-1", "s3cret", None, "principal")
    assert "s3cret" not in repr(transport.auth)
    sse = parse_config(
        {"mcpServers": {"old": {"type": "sse", "url": "http://127.0.0.1:1/sse", "auth": {"type": "oauth"}}}},
        environ=ENV,
    )
    assert sse.servers["old"].transport == SseTransport("http://127.0.0.1:1/sse", {}, OAuthSpec())
    assert schema_problems(data) == []
    assert config_problems(config) == []


@pytest.mark.parametrize(
    ("server", "path", "words"),
    [
        ({"command": "x", "auth": {"type": "oauth"}}, "mcpServers.s.auth", "only for HTTP and SSE servers"),
        ({"module": "yao_actors.testing.servers:build_test_server", "auth": {"type": "oauth"}}, "mcpServers.s.auth",
         "only for HTTP and SSE servers"),
        ({"url": "http://h/mcp", "auth": {"type": "basic"}}, "mcpServers.s.auth.type", "must be one of 'oauth'"),
        ({"url": "http://h/mcp", "auth": {}}, "mcpServers.s.auth.type", "required"),
        ({"url": "http://h/mcp", "auth": {"type": "oauth", "identity": "user"}}, "mcpServers.s.auth.identity",
         "'service', 'principal'"),
        ({"url": "http://h/mcp", "auth": {"type": "oauth", "scope": "x"}}, "mcpServers.s.auth.scope", "unknown key"),
        ({"url": "http://h/mcp", "auth": {"type": "oauth", "scopes": "read"}}, "mcpServers.s.auth.scopes",
         "list of strings"),
        ({"url": "http://h/mcp", "auth": {"type": "oauth", "client_secret": "x"}}, "mcpServers.s.auth.client_secret",
         "needs a 'client_id'"),
        ({"url": "http://h/mcp", "auth": {"type": "oauth", "client_metadata_url": "http://a.example/c.json"}},
         "mcpServers.s.auth.client_metadata_url", "https:// URL with a path"),
        ({"url": "http://h/mcp", "auth": {"type": "oauth", "client_id": "${UNSET_VARIABLE_X}"}},
         "mcpServers.s.auth.client_id", "UNSET_VARIABLE_X is not set"),
        ({"url": "http://h/mcp", "headers": {"authorization": "Bearer x"}, "auth": {"type": "oauth"}},
         "mcpServers.s.headers", "no 'Authorization' header"),
    ],
)  # fmt: skip
def test_a_wrong_auth_is_refused_at_its_path(server: dict[str, Any], path: str, words: str) -> None:
    problems = problems_of({"mcpServers": {"s": server}})
    assert any(p.startswith(f"{path}: ") and words in p for p in problems), problems


def test_the_schema_knows_auth_and_secret_key() -> None:
    assert [p for p, _ in schema_problems(remote(type="basic"))] == ["mcpServers.hub.auth.type"]
    assert [p for p, _ in schema_problems(remote(identity="x"))] == ["mcpServers.hub.auth.identity"]
    assert [p for p, _ in schema_problems({"store": {"type": "memory", "secret_key": 16}})] == ["store.secret_key"]


def test_secret_key_is_expanded_hidden_and_checked() -> None:
    config = parse_config({"store": {"type": "sqlite", "path": "/tmp/x.db", "secret_key": "${KEY}"}}, environ=ENV)
    assert config.store is not None
    assert config.store.secret_key == "k" * 32
    assert "k" * 32 not in repr(config.store)
    problems = problems_of({"store": {"type": "memory", "secret_key": "short"}})
    assert problems[0].startswith("store.secret_key: expected a string of at least 16 characters")


def write(tmp_path: Path, data: Any) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def test_check_and_serve_refuse_a_durable_store_without_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = remote() | {"store": {"type": "sqlite", "path": str(tmp_path / "s.db")}}
    path = write(tmp_path, data)
    assert main(["check", "--config", path]) == 2
    out = capsys.readouterr().out
    assert "store.secret_key: required with a sqlite store when a server uses OAuth ('hub' has 'auth')" in out
    assert main(["serve", "--config", path, "--port", "0"]) == 2
    assert "store.secret_key: required" in capsys.readouterr().err
    assert not (tmp_path / "s.db").exists()  # refused before anything was opened


def test_check_accepts_the_key_or_a_memory_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with_key = remote() | {"store": {"type": "sqlite", "path": str(tmp_path / "s.db"), "secret_key": "k" * 20}}
    assert main(["check", "--config", write(tmp_path, with_key)]) == 0
    memory = remote() | {"store": {"type": "memory"}}
    assert main(["check", "--config", write(tmp_path, memory)]) == 0
    assert capsys.readouterr().out.count(": ok (1 server(s)") == 2


def test_the_docs_oauth_examples_are_valid() -> None:
    section = (Path(__file__).parent.parent / "docs" / "oauth.md").read_text(encoding="utf-8")
    blocks = [block.split("```", 1)[0] for block in section.split("```json\n")[1:]]
    assert len(blocks) >= 2  # one complete config per identity mode
    environ = {"TRACKER_CLIENT_ID": "c", "YAO_SECRET_KEY": "k" * 32, "ALICE_TOKEN": "a" * 16, "BOB_TOKEN": "b" * 16}
    identities = []
    for block in blocks:
        example = json.loads(block)
        assert schema_problems(example) == []
        config = parse_config(example, environ=environ)
        assert config.store is not None
        assert config.store.secret_key == "k" * 32
        identities += [s.transport.auth.identity for s in config.servers.values()]  # type: ignore[union-attr]
    assert set(identities) == {"service", "principal"}


def test_public_url_is_read_with_its_variable_and_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = remote(identity="principal") | {"server": {"public_url": "${PUBLIC}/"}}
    config = parse_config(data, environ={"PUBLIC": "https://agent.example"})
    assert config.service.public_url == "https://agent.example"
    assert problems_of(remote() | {"server": {"public_url": "ftp://agent.example"}}) == [
        "server.public_url: must be the service's http:// or https:// address (no query), got 'ftp://agent.example'"
    ]
    good = data | {"server": {"public_url": "https://agent.example"}, "store": {"type": "memory"}}
    assert main(["check", "--config", write(tmp_path, good)]) == 0
    beyond = remote(identity="principal") | {"server": {"host": "0.0.0.0", "token": "t" * 32}}
    assert any(
        p.startswith("server.public_url: required when the service listens on '0.0.0.0'")
        for p in config_problems(parse_config(beyond))
    )
    assert config_problems(parse_config(remote() | {"server": {"host": "0.0.0.0", "token": "t" * 32}})) == []
    bad = good | {"server": {"public_url": "agent.example"}}
    assert main(["check", "--config", write(tmp_path, bad)]) == 2
    assert "server.public_url" in capsys.readouterr().out

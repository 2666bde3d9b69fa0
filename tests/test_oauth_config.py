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
    names = ("REPORTS_CLIENT_ID", "REPORTS_CLIENT_SECRET", "LEDGER_PRIVATE_KEY_PEM", "WIKI_CLIENT_ID")
    environ |= dict.fromkeys((*names, "WIKI_CLIENT_SECRET", "IDP_CLIENT_ID", "IDP_ID_TOKEN"), "x")
    identities, kinds = [], []
    for block in blocks:
        example = json.loads(block)
        assert schema_problems(example) == []
        config = parse_config(example, environ=environ)
        assert config.store is not None
        assert config.store.secret_key == "k" * 32
        identities += [s.transport.auth.identity for s in config.servers.values()]  # type: ignore[union-attr]
        kinds += [s.transport.auth.type for s in config.servers.values()]  # type: ignore[union-attr]
    assert set(identities) == {"service", "principal"}
    assert set(kinds) == {"oauth", "client_credentials", "cross_app_access"}


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


def test_client_credentials_and_cross_app_access_are_read_with_what_they_need() -> None:
    secret = remote(
        type="client_credentials", issuer="https://auth.example", client_id="${CID}", client_secret="${CSECRET}"
    )
    auth = parse_config(secret, environ=ENV).servers["hub"].transport.auth  # type: ignore[union-attr]
    assert (auth.type, auth.issuer, auth.client_id, auth.client_secret) == (
        "client_credentials",
        "https://auth.example",
        "client-1",
        "s3cret",
    )
    assert not auth.needs_login
    keyed = remote(type="client_credentials", issuer="https://auth.example", client_id="c", private_key="${KEY}",
                   signing_algorithm="ES256")  # fmt: skip
    auth = parse_config(keyed, environ=ENV).servers["hub"].transport.auth  # type: ignore[union-attr]
    assert (auth.private_key, auth.signing_algorithm) == ("k" * 32, "ES256")
    assert "k" * 32 not in repr(auth)
    provider = {"token_endpoint": "https://idp.example/token", "client_id": "i", "id_token": "${KEY}"}
    enterprise = remote(type="cross_app_access", issuer="https://auth.example", client_id="c", client_secret="s",
                        identity_provider=provider)  # fmt: skip
    auth = parse_config(enterprise, environ=ENV).servers["hub"].transport.auth  # type: ignore[union-attr]
    assert auth.identity_provider.id_token == "k" * 32  # type: ignore[union-attr]
    for data in (secret, keyed, enterprise):
        assert schema_problems(data) == []


@pytest.mark.parametrize(
    ("auth", "path", "words"),
    [
        ({"type": "client_credentials", "client_id": "c", "client_secret": "s"}, "mcpServers.hub.auth.issuer",
         "required with type 'client_credentials'"),
        ({"type": "client_credentials", "issuer": "https://a", "client_id": "c"}, "mcpServers.hub.auth",
         "needs a 'client_secret' or a 'private_key'"),
        ({"type": "client_credentials", "issuer": "https://a", "client_id": "c", "client_secret": "s",
          "private_key": "k"}, "mcpServers.hub.auth.private_key", "not both"),
        ({"type": "client_credentials", "issuer": "https://a", "client_id": "c", "client_secret": "s",
          "identity": "principal"}, "mcpServers.hub.auth.identity", "only 'service'"),
        ({"type": "oauth", "private_key": "k"}, "mcpServers.hub.auth.private_key", "only with type 'client_credentials'"),
        ({"type": "cross_app_access", "issuer": "https://a", "client_id": "c", "client_secret": "s"},
         "mcpServers.hub.auth.identity_provider", "required with type 'cross_app_access'"),
        ({"type": "cross_app_access", "issuer": "https://a", "client_id": "c", "client_secret": "s",
          "identity_provider": {"client_id": "i", "id_token": "t"}},
         "mcpServers.hub.auth.identity_provider.token_endpoint", "required"),
        ({"type": "oauth", "token_endpoint_auth_method": "private_key_jwt"},
         "mcpServers.hub.auth.token_endpoint_auth_method", "must be one of"),
    ],
)  # fmt: skip
def test_a_kind_without_a_person_is_refused_without_what_it_needs(auth: dict[str, Any], path: str, words: str) -> None:
    data = {"mcpServers": {"hub": {"url": "https://mcp.example/mcp", "auth": auth}}}
    said = [p for p in problems_of(data) if p.startswith(f"{path}:")]
    assert said, problems_of(data)
    assert words in said[0]


def test_auth_login_refuses_a_server_that_gets_its_tokens_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    auth = {"type": "client_credentials", "issuer": "https://a", "client_id": "c", "client_secret": "s"}
    path = tmp_path / "c.json"
    store = {"type": "memory"}
    path.write_text(
        json.dumps({"mcpServers": {"hub": {"url": "https://mcp.example/mcp", "auth": auth}}, "store": store})
    )
    assert main(["auth", "login", "hub", "--config", str(path)]) == 2
    assert "mcpServers.hub.auth.type: 'client_credentials' gets its tokens itself, with no login to make" in (
        capsys.readouterr().err
    )

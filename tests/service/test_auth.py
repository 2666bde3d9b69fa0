"""Bearer token, Origin checks and the refusal to serve beyond loopback without a token."""

from __future__ import annotations

import pytest
import trio
from trio_websocket import ConnectionRejected

from tests.service.fake_runtime import FakeRuntime
from tests.service.support import handshake_status, receive, running_service, send
from yao_actors.cli.chat import open_service_connection
from yao_actors.config import ServiceSpec
from yao_actors.errors import ConfigError
from yao_actors.service import open_service
from yao_actors.service.auth import (
    Credential,
    Handshake,
    check_listen,
    is_loopback,
    origin_allowed,
    principal_of,
    resolve_credentials,
    resolve_token,
    selected_subprotocol,
)

TOKEN = "s3cret-token-of-16+"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.4", False),
        ("example.org", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_the_token_comes_from_the_config_then_the_environment() -> None:
    assert resolve_token(ServiceSpec(token="a"), {"YAO_ACTORS_TOKEN": "b"}) == "a"
    assert resolve_token(ServiceSpec(), {"YAO_ACTORS_TOKEN": "b"}) == "b"
    assert resolve_token(ServiceSpec(), {}) is None


@pytest.mark.parametrize(
    ("headers", "subprotocols", "ok"),
    [
        ({}, (), False),
        ({"authorization": f"Bearer {TOKEN}"}, (), True),
        ({"authorization": f"bearer {TOKEN}"}, (), True),
        ({"authorization": "Bearer wrong"}, (), False),
        ({"authorization": f"Basic {TOKEN}"}, (), False),
        ({}, ("yao-actors", f"bearer.{TOKEN}"), True),
        ({}, ("yao-actors", "bearer.wrong"), False),
        ({}, (TOKEN,), False),
    ],
)
def test_the_handshake_presents_a_token(headers: dict[str, str], subprotocols: tuple[str, ...], ok: bool) -> None:
    credentials = [Credential("default", TOKEN, "server.token")]
    assert principal_of(Handshake(headers, subprotocols), credentials) == ("default" if ok else None)


def test_the_token_presented_names_the_principal() -> None:
    credentials = resolve_credentials(ServiceSpec(tokens={"alice": "a" * 16, "bob": "b" * 16}), {})
    assert [(c.principal, c.source) for c in credentials] == [
        ("alice", "server.tokens.alice"),
        ("bob", "server.tokens.bob"),
    ]
    assert principal_of(Handshake({"authorization": "Bearer " + "b" * 16}), credentials) == "bob"
    assert principal_of(Handshake({}, ("bearer." + "a" * 16,)), credentials) == "alice"
    assert principal_of(Handshake({"authorization": "Bearer "}), credentials) is None
    single = resolve_credentials(ServiceSpec(tokens={"alice": "a" * 16}), {"YAO_ACTORS_TOKEN": TOKEN})
    assert [(c.principal, c.source) for c in single] == [
        ("default", "YAO_ACTORS_TOKEN"),
        ("alice", "server.tokens.alice"),
    ]


@pytest.mark.parametrize(
    ("spec", "environ", "source"),
    [
        pytest.param(ServiceSpec(token=" " * 20), {}, "server.token", id="whitespace"),
        pytest.param(ServiceSpec(token="short"), {}, "server.token", id="short"),
        pytest.param(ServiceSpec(), {"YAO_ACTORS_TOKEN": "x" * 15}, "YAO_ACTORS_TOKEN", id="short, environment"),
        pytest.param(ServiceSpec(tokens={"alice": "a" * 16, "bob": "b"}), {}, "server.tokens.bob", id="one of many"),
    ],
)
def test_a_weak_token_is_refused_beyond_loopback(spec: ServiceSpec, environ: dict[str, str], source: str) -> None:
    credentials = resolve_credentials(spec, environ)
    check_listen("127.0.0.1", credentials)  # on loopback a token is the user's own business
    with pytest.raises(ConfigError) as refused:
        check_listen("0.0.0.0", credentials)
    assert len(refused.value.problems) == 1
    assert refused.value.problems[0].startswith(f"{source}: refusing to listen on '0.0.0.0'")
    assert "16 characters" in refused.value.problems[0]


async def test_the_service_refuses_a_whitespace_token_beyond_loopback() -> None:
    with pytest.raises(ConfigError, match=r"server\.token"):
        async with open_service(FakeRuntime(), ServiceSpec(host="0.0.0.0", port=0, token=" ")):
            pass


@pytest.mark.parametrize(
    ("origin", "allowed", "ok"),
    [
        (None, (), True),
        ("http://127.0.0.1:8765", (), True),
        ("http://localhost:3000", (), True),
        ("null", (), False),
        ("null", ("null",), True),
        ("https://evil.example", (), False),
        ("https://app.example", ("https://app.example",), True),
        ("http://127.0.0.1:8765", ("https://app.example",), False),
        ("https://evil.example", ("*",), True),
    ],
)
def test_origin_allowed(origin: str | None, allowed: tuple[str, ...], ok: bool) -> None:
    headers = {"host": "127.0.0.1:8765"} | ({"origin": origin} if origin else {})
    assert origin_allowed(Handshake(headers), allowed) is ok


@pytest.mark.parametrize(
    ("origin", "host", "allowed", "token_required", "ok"),
    [
        pytest.param("http://evil.example:8765", "evil.example:8765", (), False, False, id="DNS rebinding"),
        pytest.param("http://evil.example:8765", "evil.example:8765", (), True, True, id="rebinding, token stops it"),
        pytest.param("http://192.168.1.4:8765", "192.168.1.4:8765", (), False, False, id="own origin, LAN, no token"),
        pytest.param("http://192.168.1.4:8765", "192.168.1.4:8765", (), True, True, id="own origin, LAN, token"),
        pytest.param("http://127.0.0.1:8765", "127.0.0.1:8765", (), False, True, id="own origin, loopback"),
        pytest.param("http://localhost:8765", "localhost:8765", (), False, True, id="own origin, localhost"),
        pytest.param("http://[::1]:8765", "[::1]:8765", (), False, True, id="own origin, ::1"),
        pytest.param("http://evil.example:8765", "127.0.0.1:8765", (), True, False, id="foreign, token"),
        pytest.param("http://evil.example:80", "evil.example:8765", (), True, False, id="other port, token"),
        pytest.param("http://app.example:1", "app.example:1", ("https://b.example",), True, False, id="allow-list"),
    ],
)
def test_own_origin_counts_only_on_loopback_or_with_a_token(
    origin: str, host: str, allowed: tuple[str, ...], token_required: bool, ok: bool
) -> None:
    handshake = Handshake({"origin": origin, "host": host})
    assert origin_allowed(handshake, allowed, token_required=token_required) is ok


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="no token"),
        pytest.param({"Authorization": "Bearer wrong"}, id="wrong header token"),
        pytest.param({"Sec-WebSocket-Protocol": "yao-actors, bearer.wrong"}, id="wrong subprotocol token"),
    ],
)
async def test_a_missing_or_wrong_token_is_rejected_with_401(headers: dict[str, str]) -> None:
    with trio.fail_after(10):
        async with running_service(FakeRuntime(), token=TOKEN) as service:
            assert await handshake_status(service.port, headers) == 401
            assert service.statistics().connections == 0


@pytest.mark.parametrize("browser_style", [False, True], ids=["header", "subprotocol"])
async def test_the_right_token_is_accepted(browser_style: bool) -> None:
    with trio.fail_after(10):
        async with (
            running_service(FakeRuntime(), token=TOKEN) as service,
            open_service_connection(service.url, token=TOKEN, browser_style=browser_style) as ws,
        ):
            await send(ws, {"type": "ping"})
            assert await receive(ws) == {"type": "pong"}
            assert ws.subprotocol == "yao-actors"


async def test_the_client_reports_a_rejection() -> None:
    with trio.fail_after(10):
        async with running_service(FakeRuntime(), token=TOKEN) as service:
            with pytest.raises(ConnectionRejected) as rejected:
                async with open_service_connection(service.url, token="wrong"):
                    pass
    assert rejected.value.status_code == 401


async def test_the_token_from_the_environment_is_enforced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YAO_ACTORS_TOKEN", TOKEN)
    with trio.fail_after(10):
        async with running_service(FakeRuntime()) as service:
            assert await handshake_status(service.port) == 401
            async with open_service_connection(service.url, token=TOKEN) as ws:
                await send(ws, {"type": "ping"})
                assert await receive(ws) == {"type": "pong"}


async def test_a_foreign_origin_is_rejected_with_403() -> None:
    with trio.fail_after(10):
        async with running_service(FakeRuntime()) as service:
            foreign = await handshake_status(service.port, {"Origin": "https://evil.example"})
            own = await handshake_status(service.port, {"Origin": service.page_url.rstrip("/")})
    assert (foreign, own) == (403, 101)


async def test_a_dns_rebinding_page_cannot_drive_a_service_without_a_token() -> None:
    with trio.fail_after(10):
        async with running_service(FakeRuntime()) as service:
            rebound = {"Origin": f"http://evil.example:{service.port}", "Host": f"evil.example:{service.port}"}
            assert await handshake_status(service.port, rebound) == 403
        async with running_service(FakeRuntime(), token=TOKEN) as guarded:
            rebound = {"Origin": f"http://evil.example:{guarded.port}", "Host": f"evil.example:{guarded.port}"}
            assert await handshake_status(guarded.port, rebound) == 401  # same origin passes; the token decides
            bearer = {**rebound, "Authorization": f"Bearer {TOKEN}"}
            assert await handshake_status(guarded.port, bearer) == 101


async def test_refuses_to_listen_beyond_loopback_without_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("YAO_ACTORS_TOKEN", raising=False)
    with pytest.raises(ConfigError) as refused:
        async with open_service(FakeRuntime(), ServiceSpec(host="0.0.0.0", port=0)):
            pass
    message = str(refused.value)
    assert "0.0.0.0" in message
    assert "token" in message
    assert "YAO_ACTORS_TOKEN" in message


async def test_listens_beyond_loopback_with_a_token() -> None:
    with trio.fail_after(10):
        async with (
            open_service(FakeRuntime(), ServiceSpec(host="0.0.0.0", port=0, token=TOKEN)) as service,
            open_service_connection(f"ws://127.0.0.1:{service.port}/", token=TOKEN) as ws,
        ):
            await send(ws, {"type": "ping"})
            assert await receive(ws) == {"type": "pong"}


@pytest.mark.parametrize(
    ("proposed", "selected"),
    [
        ((), None),
        (("yao-actors",), "yao-actors"),
        (("yao-actors", f"bearer.{TOKEN}"), "yao-actors"),
        ((f"bearer.{TOKEN}",), f"bearer.{TOKEN}"),
        (("other",), None),
    ],
)
def test_selected_subprotocol(proposed: tuple[str, ...], selected: str | None) -> None:
    assert selected_subprotocol(Handshake({}, proposed)) == selected

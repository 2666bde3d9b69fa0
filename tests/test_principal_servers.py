"""The router of an ``identity: "principal"`` server (issue 32): one connection per principal, opened on demand with
that principal's tokens only, closed after :data:`IDLE_CLOSE` unused, at most ``max_principals`` at once (the
least recently used idle one closed for a newcomer; a newcomer refused while all are in use). The connections
are in-memory doubles here; tests/integration/test_oauth_principals.py has the real ones."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlencode

import attrs
import mcp
import pytest
import trio
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from prometheus_client import REGISTRY

from yao_actors.auth.desk import AuthorizationDesk, open_desk
from yao_actors.auth.principals import IDLE_CLOSE, PrincipalServers
from yao_actors.auth.vault import Grant, StoreTokenStorage, open_vault, principal_identity
from yao_actors.cli.probe import open_probe, server_reports, tool_offers
from yao_actors.conversation.interrupts.principal_servers import is_authorization_resume
from yao_actors.errors import StoreUnavailable
from yao_actors.models import FunctionModel
from yao_actors.runtime import open_runtime
from yao_actors.service.oauth_routes import OAuthRoutes
from yao_actors.specs import AssistantSpec, Config, HttpTransport, OAuthSpec, ServerRef, ServerSpec
from yao_actors.store import MemoryStore
from yao_actors.testing.servers import build_test_server
from yao_actors.tools.directory import bind_servers
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.tool_server import ServerState, ServerStatistics

SPEC = ServerSpec("hub", HttpTransport("http://127.0.0.1:9/mcp", auth=OAuthSpec(identity="principal")))
CLIENT = OAuthClientInformationFull(client_id="c", redirect_uris=["http://127.0.0.1:1/oauth/callback"])


@attrs.define(eq=False)
class FakeHandle:
    """A principal's connection: answers ``whoami`` with whose tokens it was opened with, once ``release`` is set."""

    identity: str
    state: ServerState = ServerState.READY
    tools_version: int = 1
    release: trio.Event = attrs.field(factory=trio.Event)
    closed: bool = False
    in_flight: int = 0
    """Calls the actor runs that no view made (one held open for the user's answer, say)."""

    async def call_tool(self, name: str, arguments: Any, options: Any = None) -> ToolOutcome:
        await self.release.wait()
        return ToolOutcome(result=self.identity)

    def statistics(self) -> ServerStatistics:
        return ServerStatistics(self.state, 0, self.in_flight, 0, 0, 0, None, self.tools_version, None)

    def holds_parked(self, ticket: str) -> bool:
        return False  # no call held open in this process


@attrs.define
class Actors:
    """The router's ``serve_actor``: every connection it opened, by identity."""

    opened: list[FakeHandle] = attrs.field(factory=list)

    async def __call__(self, spec: ServerSpec, *, connect: Any, task_status: Any) -> None:
        handle = FakeHandle(_identity_of(connect))
        self.opened.append(handle)
        task_status.started(handle)
        try:
            await trio.sleep_forever()
        finally:
            handle.closed = True


def _identity_of(connect: Any) -> str:
    """The identity ``principal_connector`` closed over (whose tokens the connection would carry)."""
    cells = dict(zip(connect.__code__.co_freevars, (c.cell_contents for c in connect.__closure__), strict=True))
    return str(cells["identity"])


async def desk_with_tokens(*principals: str) -> AuthorizationDesk:
    store = MemoryStore()
    vault = open_vault(store, None)
    for principal in principals:
        grant = Grant(OAuthToken(access_token=f"at-{principal}", refresh_token="rt"), None, CLIENT)
        await vault.save("hub", principal_identity(principal), grant)
    return open_desk(store, vault, None)


async def router_in(nursery: trio.Nursery, desk: AuthorizationDesk, actors: Actors, **options: Any) -> PrincipalServers:
    router = PrincipalServers(SPEC, SPEC.transport.auth, desk, None, actors, nursery, **options)  # type: ignore[arg-type]
    nursery.start_soon(router.close_idle)
    return router


async def test_each_principal_gets_its_own_connection_and_calls_go_there(autojump_clock: Any) -> None:
    actors = Actors()
    async with trio.open_nursery() as nursery:
        router = await router_in(nursery, await desk_with_tokens("alice", "bob"), actors)
        alice = await router.bind_principal("alice")
        bob = await router.bind_principal("bob")
        again = await router.bind_principal("alice")
        for handle in actors.opened:
            handle.release.set()
        said = [(await view.call_tool("whoami", {})).result for view in (alice, bob, again)]
        nursery.cancel_scope.cancel()
    assert said == ["principal:alice", "principal:bob", "principal:alice"]
    assert [h.identity for h in actors.opened] == ["principal:alice", "principal:bob"]  # alice's reused
    assert router.state is ServerState.READY


async def test_two_runs_of_one_principal_starting_together_share_one_connection(autojump_clock: Any) -> None:
    actors = Actors()
    async with trio.open_nursery() as nursery:
        router = await router_in(nursery, await desk_with_tokens("alice"), actors)
        async with trio.open_nursery() as runs:
            for _ in range(3):
                runs.start_soon(router.bind_principal, "alice")
        nursery.cancel_scope.cancel()
    assert len(actors.opened) == 1
    assert router.opening == {}


async def test_an_unused_connection_is_closed_and_opened_again_on_the_next_call(autojump_clock: Any) -> None:
    actors = Actors()
    async with trio.open_nursery() as nursery:
        router = await router_in(nursery, await desk_with_tokens("alice"), actors)
        view = await router.bind_principal("alice")
        await trio.sleep(IDLE_CLOSE - 10)
        assert router.connections
        await trio.sleep(IDLE_CLOSE / 4 + 20)
        assert not router.connections
        assert actors.opened[0].closed
        actors.opened[0].release.set()
        waiting = trio.Event()

        async def call() -> None:
            waiting.set()
            assert (await view.call_tool("whoami", {})).result == "principal:alice"

        nursery.start_soon(call)
        await waiting.wait()
        await trio.sleep(1)
        actors.opened[1].release.set()
        await trio.sleep(1)
        assert len(actors.opened) == 2
        nursery.cancel_scope.cancel()


async def test_past_the_bound_the_least_recently_used_idle_one_goes_and_all_busy_refuses(autojump_clock: Any) -> None:
    actors = Actors()
    async with trio.open_nursery() as nursery:
        router = await router_in(nursery, await desk_with_tokens("a", "b", "c"), actors, max_principals=2)
        await router.bind_principal("a")
        await trio.sleep(1)
        b = await router.bind_principal("b")
        await trio.sleep(1)
        await router.bind_principal("c")  # a was used least recently: closed
        assert sorted(router.connections) == ["b", "c"]
        assert actors.opened[0].closed
        for view in (b, await router.bind_principal("c")):
            nursery.start_soon(view.call_tool, "whoami", {})  # both in use (their calls wait)
        await trio.sleep(1)
        refused = await router.bind_principal("a")
        assert refused.state is ServerState.DOWN
        assert "all in use" in (refused.problem or "")
        outcome = await refused.call_tool("whoami", {})
        assert outcome.kind is not None
        assert outcome.kind.value == "server_unavailable"
        assert "all in use" in (outcome.error or "")
        nursery.cancel_scope.cancel()


async def test_no_token_without_a_redirect_address_is_a_down_view_saying_why(autojump_clock: Any) -> None:
    async with trio.open_nursery() as nursery:
        router = await router_in(nursery, await desk_with_tokens(), Actors())
        bound = await bind_servers({}, {"hub": router}, ("hub",), None)
        nursery.cancel_scope.cancel()
    assert bound.changed
    assert bound.needed == {}
    assert "set server.public_url" in bound.problems["hub"]
    assert bound.servers["hub"].state is ServerState.DOWN


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"interruptId": "authorization-hub", "status": "resolved"}, True),
        ({"interruptId": "approval-c1", "status": "resolved"}, False),
        ({"interruptId": 7}, False),
        ({}, False),
    ],
)
def test_which_resume_entries_answer_an_authorization(entry: dict[str, Any], expected: bool) -> None:
    assert is_authorization_resume(entry) is expected


@attrs.define
class GatedRecords:
    """The vault's records, whose ``load`` waits for ``gate`` while it is set: a store that is slow just then."""

    inner: Any
    gate: trio.Event | None = None

    async def load(self, server: str, identity: str) -> str | None:
        if self.gate is not None:
            await self.gate.wait()
        return await self.inner.load(server, identity)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_a_connection_a_call_started_on_while_its_refresh_was_considered_is_not_closed(
    autojump_clock: Any,
) -> None:
    """A run binding alice reads her tokens (due for their refresh); meanwhile another run of hers starts a call on
    her open connection: that connection is not closed under the call."""
    now = [1000.0]
    store = MemoryStore()
    vault = open_vault(store, None)
    grant = Grant(OAuthToken(access_token="at", refresh_token="rt", expires_in=3600), now[0] + 3600, CLIENT)
    await vault.save("hub", principal_identity("alice"), grant)
    records = GatedRecords(store.oauth_tokens())
    gated = attrs.evolve(vault, records=records)
    desk = AuthorizationDesk(gated, open_desk(store, vault, None).states)
    actors = Actors()
    async with trio.open_nursery() as nursery:
        router = await router_in(nursery, desk, actors, clock=lambda: now[0])
        first = await router.bind_principal("alice")
        now[0] += 3600 - 10  # due for its refresh
        records.gate = trio.Event()
        nursery.start_soon(router.bind_principal, "alice")  # waits for the store
        await trio.sleep(1)
        nursery.start_soon(first.call_tool, "whoami", {})  # a call starts on the open connection
        await trio.sleep(1)
        records.gate.set()
        await trio.sleep(1)
        assert not actors.opened[0].closed
        assert router.connections["alice"].handle is actors.opened[0]
        nursery.cancel_scope.cancel()


async def test_a_principal_logged_out_meanwhile_is_not_served_by_its_open_connection(autojump_clock: Any) -> None:
    """``auth logout --principal`` drops the record in the store: the next run of that principal does not get the
    connection that still holds its tokens in memory (it is closed; the run is asked to authorize)."""
    actors = Actors()
    desk = await desk_with_tokens("alice")
    async with trio.open_nursery() as nursery:
        router = await router_in(nursery, desk, actors)
        assert (await router.bind_principal("alice")).bound is not None
        assert await desk.vault.forget("hub", principal_identity("alice"))
        again = await router.bind_principal("alice")
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert again.bound is None
    assert actors.opened[0].closed
    assert len(actors.opened) == 1


async def test_a_refresh_after_a_logout_does_not_store_the_tokens_again() -> None:
    store = MemoryStore()
    vault = open_vault(store, None)
    storage = StoreTokenStorage(vault, "hub", principal_identity("alice"))
    await vault.save("hub", principal_identity("alice"), Grant(OAuthToken(access_token="old"), None, CLIENT))
    await storage.set_tokens(OAuthToken(access_token="refreshed", expires_in=60))
    assert (await storage.get_tokens()) == OAuthToken(access_token="refreshed", expires_in=60)
    await vault.forget("hub", principal_identity("alice"))
    await storage.set_tokens(OAuthToken(access_token="refreshed again", refresh_token="rt2"))  # a connection's refresh
    assert await vault.keys() == []


def _up(server: str) -> float | None:
    return REGISTRY.get_sample_value("yao_mcp_server_up", {"server": server})


async def test_the_router_owns_the_server_up_metric_whatever_its_principals_connections_do() -> None:
    """``yao_mcp_server_up`` of a principal server is its router's: 1 while the runtime holds it, even when a
    principal's connection is closed (idle, evicted, logged out); 0 once the runtime ends."""
    server = build_test_server("up-hub")

    @asynccontextmanager
    async def in_memory(spec: ServerSpec, *, link: Any, **options: Any) -> AsyncIterator[mcp.Client]:
        async with mcp.Client(server, mode="legacy") as client:
            yield client

    spec = attrs.evolve(SPEC, id="up-hub")
    config = Config(servers={"up-hub": spec}, assistants={"a": AssistantSpec("a", "m", servers=(ServerRef("up-hub"),))})
    model = FunctionModel(lambda messages, tools: "ok")
    with trio.fail_after(30):
        async with open_runtime(config, models={"m": model}, connect=in_memory) as runtime:
            assert _up("up-hub") == 1
            desk = runtime.authorizations
            assert desk is not None
            grant = Grant(OAuthToken(access_token="at-alice", refresh_token="rt"), None, CLIENT)
            await desk.vault.save("up-hub", principal_identity("alice"), grant)
            assert "up-hub" not in runtime.servers  # a router is no server: it takes no calls
            router = runtime.routers["up-hub"]
            view = await router.bind_principal("alice")  # type: ignore[attr-defined]
            assert view.state is ServerState.READY
            assert "echo" in [tool.name for tool in await view.list_tools()]
            connection = router.connections["alice"]  # type: ignore[attr-defined]
            router.close("alice")  # type: ignore[attr-defined]  # as the idle close does
            assert not router.connections  # type: ignore[attr-defined]
            # The connection's actor has ended (stopped is the last state it sets, as it would set the metric).
            assert await connection.handle.wait_for_state(ServerState.STOPPED) is ServerState.STOPPED
            assert _up("up-hub") == 1
    assert _up("up-hub") == 0


async def test_check_and_tools_say_a_principal_servers_tools_are_each_principals(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``check --connect`` and ``tools`` (``server_reports``) and the start-up log say plainly why such a server
    lists no tools, rather than showing it ready with none."""
    config = Config(servers={"hub": SPEC})
    with trio.fail_after(30), caplog.at_level(logging.INFO, logger="yao_actors.auth.principal_routing"):
        async with open_probe(config, deadline_s=5) as runtime:
            reports = await server_reports(runtime)
            offers = await tool_offers(runtime)
    (report,) = reports
    assert report.ok
    assert "depend on each principal's login" in report.detail
    assert "0 tool(s)" not in report.detail
    assert offers == []
    assert "its tools depend on each principal's login" in caplog.text


async def test_a_connection_holding_a_call_open_for_the_users_answer_is_not_closed(autojump_clock: Any) -> None:
    """A call held open while the user answers its question (and later answered by a resume) is not made through a
    view: its connection is not idle for that, neither for the idle close nor for a newcomer past the bound."""
    actors = Actors()
    async with trio.open_nursery() as nursery:
        router = await router_in(nursery, await desk_with_tokens("a", "b"), actors, max_principals=1)
        await router.bind_principal("a")
        actors.opened[0].in_flight = 1  # a's call waits for a's answer
        await trio.sleep(IDLE_CLOSE * 2)
        assert not actors.opened[0].closed
        refused = await router.bind_principal("b")
        assert refused.state is ServerState.DOWN
        assert not actors.opened[0].closed
        actors.opened[0].in_flight = 0
        await trio.sleep(IDLE_CLOSE / 2)
        assert actors.opened[0].closed
        nursery.cancel_scope.cancel()


SECRET_URL = "redis://:hunter2-redis-password@db.internal:6379/0"


@attrs.define
class OutOfReach:
    """The vault's records of a Redis store gone away: its error names the store's URL, password and all."""

    inner: Any
    down: bool = False

    def _check(self) -> None:
        if self.down:
            raise StoreUnavailable(f"Redis store at {SECRET_URL} is unreachable: Connection refused")

    async def load(self, server: str, identity: str) -> str | None:
        self._check()
        return await self.inner.load(server, identity)

    async def save(self, server: str, identity: str, sealed: str) -> None:
        self._check()
        await self.inner.save(server, identity, sealed)

    async def delete(self, server: str, identity: str) -> bool:
        self._check()
        return bool(await self.inner.delete(server, identity))

    async def keys(self) -> list[tuple[str, str]]:
        self._check()
        return list(await self.inner.keys())


async def desk_out_of_reach(*principals: str) -> tuple[AuthorizationDesk, OutOfReach]:
    desk = await desk_with_tokens(*principals)
    records = OutOfReach(desk.vault.records)
    vault = attrs.evolve(desk.vault, records=records)
    return AuthorizationDesk(vault, attrs.evolve(desk.states, records=records)), records


async def test_a_store_out_of_reach_is_an_outcome_that_does_not_show_the_stores_address(autojump_clock: Any) -> None:
    """A call whose connection was closed meanwhile reads the tokens again: the store out of reach then is a
    ``server_unavailable`` outcome (not an exception out of ``call_tool``), and neither it nor a new binding's
    problem shows the store's error (a Redis URL with its password): that is logged."""
    desk, records = await desk_out_of_reach("alice")
    actors = Actors()
    async with trio.open_nursery() as nursery:
        router = await router_in(nursery, desk, actors)
        view = await router.bind_principal("alice")
        router.close("alice")
        records.down = True
        outcome = await view.call_tool("whoami", {})
        other = await router.bind_principal("bob")
        nursery.cancel_scope.cancel()
    assert outcome.kind is not None
    assert outcome.kind.value == "server_unavailable"
    assert "store is out of reach" in (outcome.error or "")
    assert other.state is ServerState.DOWN
    assert "store is out of reach" in (other.problem or "")
    assert "hunter2" not in (outcome.error or "") + (other.problem or "")


@attrs.define
class PageExchange:
    """Just what the callback route uses of an exchange: the target, and the page it answers."""

    target: str
    answered: list[tuple[int, str]] = attrs.field(factory=list)

    @property
    def request(self) -> Any:
        return attrs.make_class("Request", ["target"])(self.target)

    async def respond(self, status: int, body: bytes, content_type: str, headers: Any = ()) -> None:
        await trio.lowlevel.checkpoint()
        self.answered.append((status, body.decode()))


async def test_the_callback_page_of_a_store_out_of_reach_does_not_show_the_stores_address() -> None:
    """Anyone's browser may reach ``/oauth/callback``: with the store out of reach its ``503`` page says so, and
    not what the store's error says (its URL, password and all)."""
    desk, records = await desk_out_of_reach()
    records.down = True
    exchange = PageExchange("/oauth/callback?state=abc&code=def")
    await OAuthRoutes(desk).callback(exchange)  # type: ignore[arg-type]
    ((status, page),) = exchange.answered
    assert status == 503
    assert "store is out of reach" in page
    assert "hunter2" not in page


@attrs.define
class Relay:
    """The store's held calls, as the router asks them: which tickets a live process holds."""

    held: set[str]

    async def reachable(self, ticket: str) -> bool:
        await trio.lowlevel.checkpoint()
        return ticket in self.held


async def test_a_call_held_by_another_worker_is_reached_through_the_store(autojump_clock: Any) -> None:
    """A resume that reaches this worker for a call another worker's principal connection holds open: the router
    says it is reachable (so the resume is not refused as gone) — through the store's relay, as a server actor
    would."""
    actors = Actors()
    async with trio.open_nursery() as nursery:
        router = await router_in(nursery, await desk_with_tokens("alice"), actors, relay=Relay({"t-elsewhere"}))
        view = await router.bind_principal("alice")
        reached = [await router.reaches_parked(t) for t in ("t-elsewhere", "t-gone")]
        through_view = await view.reaches_parked("t-elsewhere")
        nursery.cancel_scope.cancel()
    assert reached == [True, False]
    assert through_view


async def test_principals_connecting_at_once_stay_within_the_bound(autojump_clock: Any) -> None:
    """Three principals' first runs start together (their connections still connecting): only ``max_principals``
    get one; the others' views are down, saying why."""
    actors = Actors()
    async with trio.open_nursery() as nursery:
        router = await router_in(nursery, await desk_with_tokens("a", "b", "c"), actors, max_principals=2)
        views: list[Any] = []

        async def bind(name: str) -> None:
            views.append(await router.bind_principal(name))

        async with trio.open_nursery() as runs:
            for name in ("a", "b", "c"):
                runs.start_soon(bind, name)
        open_now = [handle for handle in actors.opened if not handle.closed]
        nursery.cancel_scope.cancel()
    assert len(open_now) == 2
    assert sorted(view.state.value for view in views) == ["down", "ready", "ready"]


async def test_an_error_the_redirect_carries_is_said_on_one_line(caplog: pytest.LogCaptureFixture) -> None:
    """The ``error_description`` of a redirect is whatever the browser's URL says: in the log (and the page) it is
    one line, so it cannot forge log records."""
    desk = await desk_with_tokens()
    await desk.states.put(
        "the-state", {"principal": "alice", "server": "hub"}, server="hub", principal="alice", url="-", asked="-"
    )
    forged = "denied\n2026-12-05 ERROR yao_actors: principal 'root' authorized everything"
    exchange = PageExchange("/oauth/callback?" + urlencode({"state": "the-state", "error": "access_denied",
                                                            "error_description": forged}))  # fmt: skip
    with caplog.at_level(logging.WARNING):
        await OAuthRoutes(desk).callback(exchange)  # type: ignore[arg-type]
    ((status, page),) = exchange.answered
    assert status == 400
    assert "refused access to server &#x27;hub&#x27;" in page  # escaped, as every word of the query
    (record,) = [r for r in caplog.records if "OAuth callback refused" in r.getMessage()]
    assert "\n" not in record.getMessage()
    assert await desk.vault.keys() == []

"""A run's servers (:class:`~yao_actors.tools.directory.RunServers`): given to the run when it starts, a server
connected per principal bound to the run's principal only once the run names it, and then once for the whole run (a
delegate naming it again gets the same view); a server the run never names is never connected. The routers here are
doubles; the principals' views are real server actors (tests/integration/test_oauth_principals.py has real routers)."""

from __future__ import annotations

from typing import Any

import attrs
import mcp.types
import pytest

from yao_actors.conversation import open_conversations
from yao_actors.conversation.loop.hooks import HookContext
from yao_actors.errors import AuthorizationRequired
from yao_actors.models import FunctionModel
from yao_actors.models.base import Completion, ToolCall
from yao_actors.specs import AssistantSpec, Hooks, ServerRef, ServerSpec, StdioTransport
from yao_actors.tools.catalog import CatalogCache
from yao_actors.tools.directory import ServerDirectory
from yao_actors.tools.tool_server import Binding, ServerState, ServerStatistics, ToolServer

from .dispatch_support import scripted_server, serving, tool


@attrs.define(eq=False)
class Router:
    """A router double: binds to each principal the ``view`` it was given (or asks for authorization), counting."""

    server_id: str
    view: ToolServer | None = None
    binds: list[str | None] = attrs.field(factory=list)
    asked: list[str] = attrs.field(factory=list)

    @property
    def id(self) -> str:
        return self.server_id

    @property
    def spec(self) -> ServerSpec:
        return ServerSpec(self.server_id, StdioTransport("unused"))

    @property
    def state(self) -> ServerState:
        return ServerState.READY

    @property
    def tools_version(self) -> int:
        return 0

    async def list_tools(self) -> tuple[mcp.types.Tool, ...]:
        return ()

    def statistics(self) -> ServerStatistics:
        return ServerStatistics(ServerState.READY, 0, 0, 0, 0, 0, None, 0, None)

    async def bind(self, principal: str | None) -> Binding:
        self.binds.append(principal)
        if self.view is None:
            return Binding(_Unbound(self.server_id), needed=AuthorizationRequired(self.server_id, "https://as/x"))
        return Binding(self.view)

    async def reaches_parked(self, ticket: str) -> bool:
        self.asked.append(ticket)
        return True


@attrs.define(eq=False)
class _Unbound:
    """A view with no connection (only what a binding needs to hold here)."""

    id: str

    async def reaches_parked(self, ticket: str) -> bool:
        return False


async def test_nothing_is_bound_until_named_and_each_router_once_a_run() -> None:
    shared, view = object(), object()
    hub, other = Router("hub", view), Router("other", object())
    runtime_cache = CatalogCache()
    servers = ServerDirectory({"s": shared}, {"hub": hub, "other": other}).for_run("alice", runtime_cache)  # type: ignore[dict-item]
    assert servers.by_id == {"s": shared}
    assert servers.catalogs is runtime_cache
    assert hub.binds == other.binds == []

    bound = await servers.bind(["s", "hub", "hub"])
    assert hub.binds == ["alice"]
    assert other.binds == []  # never named: never connected
    assert servers.by_id == {"s": shared, "hub": view}
    assert servers.get("hub") is view
    assert servers.catalogs is not runtime_cache  # the view's tools are alice's: not the runtime's cache
    assert bound.needed == {}
    assert bound.problems == {}

    cache = servers.catalogs
    await servers.bind(["hub"])  # a delegate naming it again
    assert hub.binds == ["alice"]
    assert servers.get("hub") is view
    assert servers.catalogs is cache  # nothing joined: the run's cache stays

    await servers.bind(["other", "hub"])
    assert (hub.binds, other.binds) == (["alice"], ["alice"])


async def test_what_the_principal_must_authorize_comes_back_at_each_bind_without_binding_again() -> None:
    hub = Router("hub")
    servers = ServerDirectory({}, {"hub": hub}).for_run(None, CatalogCache())
    first = await servers.bind(["hub"])
    again = await servers.bind(["hub"])
    assert first.needed["hub"] is again.needed["hub"]
    assert hub.binds == [None]


async def test_a_parked_call_is_asked_of_the_router_before_binding_and_of_the_view_after() -> None:
    hub = Router("hub")
    servers = ServerDirectory({}, {"hub": hub}).for_run("alice", CatalogCache())
    assert await servers.reaches_parked("hub", "t1") is True  # the router's answer
    assert hub.asked == ["t1"]
    await servers.bind(["hub"])
    assert await servers.reaches_parked("hub", "t2") is False  # the view's own answer
    assert hub.asked == ["t1"]
    assert await servers.reaches_parked("nowhere", "t3") is False


def to_helper(ctx: HookContext, payload: dict[str, Any]) -> dict[str, Any]:
    """The ``next`` hook of the test's first assistant: the helper goes on."""
    return {"delegate": "helper"}


@pytest.mark.parametrize("principal", ["alice", None])
async def test_a_run_and_its_delegate_call_the_principals_view_bound_once(principal: str | None) -> None:
    offered: list[list[str]] = []

    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion | str:
        offered.append(sorted(t["function"]["name"] for t in tools))
        if len(offered) > 1:
            return "done"
        return Completion(tool_calls=(ToolCall("c1", offered[0][0], '{"text": "hi"}'),))

    hub_server, other_server = scripted_server("hub", [tool("echo")]), scripted_server("other", [tool("add")])
    async with serving(hub_server, other_server) as handles:
        hub, other, unused = Router("hub", handles["hub"]), Router("other", handles["other"]), Router("unused")
        first = AssistantSpec(
            "a", "m", servers=[ServerRef("hub")], hooks=Hooks(next="tests.test_run_servers:to_helper")
        )
        helper = AssistantSpec("helper", "m", servers=[ServerRef("hub"), ServerRef("other")])
        routers = {"hub": hub, "other": other, "unused": unused}
        model = FunctionModel(answer)
        async with open_conversations({"a": first, "helper": helper}, {}, {"m": model}, routers=routers) as manager:
            result = await manager.run("a", "go", principal=principal)
    assert result.text == "done", result.events
    assert hub_server.log == [("echo", {"text": "hi"})]  # the call went to the principal's view
    assert (hub.binds, other.binds, unused.binds) == ([principal], [principal], [])
    assert offered == [["hub__echo"], ["hub__echo", "other__add"]]  # the first assistant's catalog, then the helper's

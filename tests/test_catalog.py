"""The catalog of an assistant: order, filter, cap, samples, schemas, down servers, the cache."""

from __future__ import annotations

from typing import Any

import attrs
import mcp.types
import pytest

from tests.dispatch_support import tool
from yao_actors.config import AssistantSpec, InMemoryTransport, Sample, ServerRef, ServerSpec
from yao_actors.errors import ConfigError
from yao_actors.tools.catalog import SAMPLES_HEADER, Catalog, CatalogCache, build_catalog, select_servers
from yao_actors.tools.tool_server import ServerState

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"count": {"type": "integer"}}, "x-extra": True}


@attrs.define(eq=False)
class ListedServer:
    """What a catalog reads of a server (the ``ToolSource`` protocol), counting how often it lists the tools."""

    spec: ServerSpec
    tools: list[mcp.types.Tool]
    tools_version: int = 0
    down: bool = False
    list_calls: int = 0

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def state(self) -> ServerState:
        return ServerState.RESTARTING if self.down else ServerState.READY

    def set_tools(self, tools: list[mcp.types.Tool]) -> None:
        """Change the tool list, as a ``tools/list_changed`` and the refetch after it would."""
        self.tools = tools
        self.tools_version += 1

    async def list_tools(self) -> tuple[mcp.types.Tool, ...]:
        self.list_calls += 1
        return tuple(self.tools)


def listed_server(server_id: str, tools: list[mcp.types.Tool] | None = None, **spec: Any) -> ListedServer:
    return ListedServer(ServerSpec(server_id, InMemoryTransport(None), **spec), tools or [])


def servers_of(*servers: ListedServer) -> dict[str, ListedServer]:
    return {server.id: server for server in servers}


def names(catalog: Catalog) -> list[str]:
    return [entry.name for entry in catalog.entries]


async def test_cap_keeps_the_first_tools_in_order_with_one_warning() -> None:
    a = listed_server("a", [tool(f"t{i:02}") for i in range(25)])
    b = listed_server("b", [tool("x")])
    catalog = await build_catalog([ServerRef("a"), ServerRef("b")], servers_of(a, b), max_tools=20)
    assert names(catalog) == [f"a__t{i:02}" for i in range(20)]
    (warning,) = catalog.warnings
    assert "tool limit of 20 reached" in warning
    assert "a: t20, t21, t22, t23, t24" in warning
    assert "servers not listed: b" in warning
    assert b.list_calls == 0
    assert catalog.capped == {"a": ("t20", "t21", "t22", "t23", "t24")}
    assert catalog.unlisted == ("b",)
    assert catalog.not_offered() == {
        "a": "the assistant's max_tools (20) was reached: not offered: t20, t21, t22, t23, t24",
        "b": "the assistant's max_tools (20) was reached before this server: none of its tools offered",
    }


async def test_a_catalog_iterates_over_its_entries_in_offered_order() -> None:
    """``for entry in await runtime.catalog("default")``, as the docs write it (issue 44, item 8)."""
    catalog = await build_catalog([ServerRef("b"), ServerRef("a")], servers_of(listed_server("a", [tool("x")]),
                                  listed_server("b", [tool("y"), tool("z")])), max_tools=20)  # fmt: skip
    assert [entry.name for entry in catalog] == ["b__y", "b__z", "a__x"]
    assert list(catalog) == list(catalog.entries)
    assert len(catalog) == 3


async def test_a_down_server_past_the_cap_is_not_listed_and_leaves_the_catalog_complete() -> None:
    a = listed_server("a", [tool("t1"), tool("t2")])
    down = listed_server("down", [tool("x")])
    down.down = True
    catalog = await build_catalog([ServerRef("a"), ServerRef("down")], servers_of(a, down), max_tools=2)
    assert names(catalog) == ["a__t1", "a__t2"]
    assert catalog.complete
    (warning,) = catalog.warnings
    assert "servers not listed: down" in warning


async def test_filter_keeps_named_tools_in_server_order_and_ignores_missing_names() -> None:
    a = listed_server("a", [tool("ping"), tool("status"), tool("echo")])
    catalog = await build_catalog([ServerRef("a", ("echo", "ping", "nope"))], servers_of(a))
    assert names(catalog) == ["a__ping", "a__echo"]


async def test_server_order_follows_the_list() -> None:
    a = listed_server("a", [tool("x")])
    b = listed_server("b.c", [tool("y")])
    catalog = await build_catalog([ServerRef("b.c"), ServerRef("a")], servers_of(a, b))
    assert names(catalog) == ["b_c__y", "a__x"]
    assert catalog.resolve("b_c__y") is catalog.entries[0]
    assert catalog.resolve("b.c__y") is None


async def test_a_server_listed_twice_gives_each_tool_once() -> None:
    a = listed_server("a", [tool("x"), tool("y")])
    catalog = await build_catalog([ServerRef("a", ("x",)), ServerRef("a")], servers_of(a))
    assert names(catalog) == ["a__x", "a__y"]


def test_a_non_empty_override_replaces_the_assistant_list_and_an_empty_one_does_not() -> None:
    assistant = AssistantSpec("x", "demo", servers=(ServerRef("a"),))
    assert select_servers(assistant, [ServerRef("b")]) == (ServerRef("b"),)
    assert select_servers(assistant, []) == (ServerRef("a"),)


async def test_openai_schema_passes_the_input_schema_through() -> None:
    a = listed_server("a", [tool("ping", SCHEMA, "Ping it"), tool("bare")])
    catalog = await build_catalog([ServerRef("a")], servers_of(a))
    assert list(catalog.tools) == [
        {"type": "function", "function": {"name": "a__ping", "description": "Ping it", "parameters": SCHEMA}},
        {"type": "function", "function": {"name": "a__bare", "description": "", "parameters": {"type": "object"}}},
    ]


async def test_samples_message_has_the_seed_layout_with_json_values() -> None:
    samples = (
        Sample(input={"count": 1}, output={"message": "pong", "n": 1000000}, name="single_ping"),
        Sample(input={"count": 2}, description="two pings"),
        Sample(output="done"),
        Sample(input={"count": 4}, name="fourth"),
        Sample(input={"count": 5}, name="fifth"),
    )
    a = listed_server(
        "echo", [tool("ping", SCHEMA, "Ping with optional count"), tool("other")], samples={"ping": samples}
    )
    catalog = await build_catalog([ServerRef("echo")], servers_of(a))
    assert catalog.samples_message == (
        "\n\n## MCP Tool Usage Examples\n\n"
        "The following examples demonstrate how to use MCP tools correctly:\n\n"
        "### echo__ping\n\n"
        "**Description**: Ping with optional count\n\n"
        "**Example 1 - single_ping**:\n"
        '- Input: `{"count":1}`\n'
        '- Output: `{"message":"pong","n":1000000}`\n'
        "\n"
        "**Example 2**:\n"
        "- Description: two pings\n"
        '- Input: `{"count":2}`\n'
        "\n"
        "**Example 3**:\n"
        '- Output: `"done"`\n'
        "\n"
    )


async def test_no_samples_means_no_samples_message() -> None:
    catalog = await build_catalog([ServerRef("a")], servers_of(listed_server("a")))
    assert catalog.samples_message == ""
    assert SAMPLES_HEADER.startswith("\n\n## MCP Tool Usage Examples")


async def test_samples_of_a_skipped_tool_are_not_rendered() -> None:
    a = listed_server("a", [tool("x"), tool("y")], samples={"y": (Sample(input={}),)})
    catalog = await build_catalog([ServerRef("a", ("x",))], servers_of(a))
    assert catalog.samples_message == ""


async def test_a_down_or_missing_server_contributes_a_warning_not_a_failure() -> None:
    a = listed_server("a", [tool("x")])
    down = listed_server(
        "down",
        [tool("y")],
    )
    down.down = True
    catalog = await build_catalog([ServerRef("down"), ServerRef("ghost"), ServerRef("a")], servers_of(a, down))
    assert names(catalog) == ["a__x"]
    assert not catalog.complete
    assert len(catalog.warnings) == 2
    assert "'down' is restarting" in catalog.warnings[0]
    assert "'ghost' is not running" in catalog.warnings[1]


async def test_colliding_names_are_a_config_error_naming_both() -> None:
    dotted = listed_server("a.b", [tool("x")])
    underscored = listed_server("a_b", [tool("x")])
    with pytest.raises(ConfigError) as caught:
        await build_catalog([ServerRef("a.b"), ServerRef("a_b")], servers_of(dotted, underscored))
    assert "'a.b'" in caught.value.problems[0]
    assert "'a_b'" in caught.value.problems[0]


async def test_illegal_tool_names_are_offered_sanitised_and_still_resolve() -> None:
    a = listed_server("a", [tool("get.weather"), tool("do__it")])
    catalog = await build_catalog([ServerRef("a")], servers_of(a))
    first, second = catalog.entries
    assert first.name.startswith("a__get_weather-")
    assert catalog.resolve(first.name) is first
    assert first.tool == "get.weather"
    assert second.name == "a__do__it"
    assert catalog.resolve("a__do__it") is second


async def test_the_cache_rebuilds_only_when_a_tool_list_changed() -> None:
    a = listed_server("a", [tool("x")])
    b = listed_server("b", [tool("y")])
    servers = servers_of(a, b)
    assistant = AssistantSpec("helper", "demo", servers=(ServerRef("a"), ServerRef("b")))
    cache = CatalogCache()
    first = await cache.get(assistant, servers)
    assert await cache.get(assistant, servers) is first
    assert (a.list_calls, b.list_calls) == (1, 1)
    b.set_tools([tool("y"), tool("z")])
    rebuilt = await cache.get(assistant, servers)
    assert names(rebuilt) == ["a__x", "b__y", "b__z"]
    assert await cache.get(assistant, servers) is rebuilt
    assert (a.list_calls, b.list_calls) == (2, 2)


async def test_the_cache_keeps_overrides_apart_and_retries_incomplete_catalogs() -> None:
    a = listed_server("a", [tool("x")])
    b = listed_server("b", [tool("y")])
    b.down = True
    servers = servers_of(a, b)
    assistant = AssistantSpec("helper", "demo", servers=(ServerRef("a"),))
    cache = CatalogCache()
    assert names(await cache.get(assistant, servers, override=[ServerRef("b")])) == []
    b.down = False
    assert names(await cache.get(assistant, servers, override=[ServerRef("b")])) == ["b__y"]
    assert names(await cache.get(assistant, servers)) == ["a__x"]


async def test_the_cache_is_bounded() -> None:
    servers = servers_of(*(listed_server(f"s{i}", [tool("x")]) for i in range(5)))
    assistant = AssistantSpec("helper", "demo")
    cache = CatalogCache(maxsize=2)
    for i in range(5):
        await cache.get(assistant, servers, override=[ServerRef(f"s{i}")])
    await cache.get(assistant, servers, override=[ServerRef("s0")])
    assert servers["s0"].list_calls == 2
    await cache.get(assistant, servers, override=[ServerRef("s4")])
    assert servers["s4"].list_calls == 1

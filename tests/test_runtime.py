"""open_runtime over in-memory servers: start-up all at once, handles, models, clean exit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import mcp
import pytest
import trio

from tests.support import noting_connector
from yao_actors.config import AssistantSpec, Config, InMemoryTransport, ServerRef, ServerSpec
from yao_actors.conversation import ConversationManager
from yao_actors.errors import ConfigError
from yao_actors.runtime import Runtime, open_runtime
from yao_actors.testing.servers import build_test_server
from yao_actors.tools.server_actor import ServerHandle, ServerState
from yao_actors.transports import Link, open_client


def memory_config(*ids: str, **changes: Any) -> Config:
    return Config(
        servers={i: ServerSpec(id=i, transport=InMemoryTransport(build_test_server(i)), **changes) for i in ids}
    )


@asynccontextmanager
async def slow_connect(spec: ServerSpec, *, link: Link, **kwargs: Any) -> AsyncIterator[mcp.Client]:
    """Connect for real after a second, like a stdio server importing ``mcp``; ``hang*`` ids never connect."""
    await trio.sleep(float("inf") if spec.id.startswith("hang") else 1.0)
    async with open_client(spec, link=link, **kwargs) as client:
        yield client


async def test_servers_start_all_at_once(autojump_clock: trio.abc.Clock) -> None:
    start = trio.current_time()
    async with open_runtime(memory_config("a", "b", "c", "d"), connect=slow_connect) as runtime:
        assert trio.current_time() - start == pytest.approx(1.0)
        assert list(runtime.servers) == ["a", "b", "c", "d"]
        assert all(handle.state is ServerState.READY for handle in runtime.servers.values())
        for server_id, handle in runtime.servers.items():
            assert handle.id == server_id
            assert (await handle.call_tool("echo", {"text": server_id})).result == {"text": server_id}


async def test_a_server_that_cannot_connect_does_not_block_the_others(autojump_clock: trio.abc.Clock) -> None:
    start = trio.current_time()
    async with open_runtime(memory_config("hang", "ok", connect_timeout=5.0), connect=slow_connect) as runtime:
        assert trio.current_time() - start == pytest.approx(5.0)
        assert runtime.servers["hang"].state is ServerState.RESTARTING
        assert "no connection within 5s" in (runtime.servers["hang"].statistics().last_error or "")
        assert (await runtime.servers["ok"].call_tool("add", {"a": 1, "b": 1})).result == {"sum": 2}


async def test_runtime_keeps_config_and_models() -> None:
    config = memory_config("a")
    model: Any = object()
    async with open_runtime(config, models={"mine": model}) as runtime:
        assert runtime.config is config
        assert runtime.models["mine"] is model
    async with open_runtime(Config()) as empty:
        assert empty.servers == {}


async def test_exit_stops_every_actor() -> None:
    async with open_runtime(memory_config("a", "b")) as runtime:
        handles = list(runtime.servers.values())
    assert [handle.state for handle in handles] == [ServerState.STOPPED] * 2


async def test_an_error_in_the_body_comes_out_unwrapped() -> None:
    handles: list[ServerHandle] = []

    async def body() -> None:
        async with open_runtime(memory_config("a")) as runtime:
            handles.extend(runtime.servers.values())
            raise KeyError("boom")

    with pytest.raises(KeyError):
        await body()
    assert handles[0].state is ServerState.STOPPED


async def test_cancelling_the_body_stops_every_actor() -> None:
    # Cancelled from outside once it is up (not by a short deadline, which a loaded machine can miss).
    with trio.CancelScope() as scope:
        async with open_runtime(memory_config("a", "b")) as runtime:
            handles = list(runtime.servers.values())
            scope.cancel()
            await trio.sleep_forever()
    assert scope.cancelled_caught
    assert [handle.state for handle in handles] == [ServerState.STOPPED] * 2


async def test_handles_and_the_runtime_are_made_by_their_actors_only() -> None:
    async with open_runtime(memory_config("a")) as runtime:
        handle = runtime.servers["a"]
        with pytest.raises(TypeError, match="no public constructor"):
            ServerHandle(handle.spec, None, None)  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="no public constructor"):
            Runtime(runtime.config, runtime.servers, runtime.models, runtime.conversations)  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="no public constructor"):
            ConversationManager(None, None, 1)  # type: ignore[call-arg]
        assert not hasattr(runtime, "nursery")


async def test_a_connector_is_injected_not_patched(autojump_clock: trio.abc.Clock) -> None:
    specs: list[str] = []

    recording = noting_connector(lambda spec, options: specs.append(spec.id))

    async with open_runtime(memory_config("a", "b"), connect=recording) as runtime:
        assert (await runtime.servers["b"].call_tool("echo", {"text": "x"})).ok
    assert sorted(specs) == ["a", "b"]


async def test_colliding_tool_names_are_refused_at_start_naming_both_servers() -> None:
    config = memory_config("a.b", "a_b", "c")
    refs = (ServerRef("c"), ServerRef("a.b", ("echo",)), ServerRef("a_b", ("echo", "add")))
    config = attrs.evolve(config, assistants={"x": AssistantSpec("x", "test", servers=refs)})
    with trio.fail_after(30), pytest.raises(ConfigError) as caught:
        async with open_runtime(config):
            raise AssertionError("the runtime started")
    (problem,) = caught.value.problems
    assert problem.startswith("assistants.x.mcp.servers: tool name 'a_b__echo' is claimed by both")
    assert "(mcpServers.a.b)" in problem
    assert "(mcpServers.a_b)" in problem

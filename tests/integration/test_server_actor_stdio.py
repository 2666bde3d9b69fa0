"""Server actors over real stdio subprocesses: behaviour, kill -9, a missing command, no orphans."""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
from typing import Any

import anyio
import pytest
import trio

from tests.integration import actor_checks
from tests.integration.actor_checks import PROTOCOLS, fail_in_flight, process_gone, running
from yao_actors.config import AssistantSpec, Config, RestartPolicy, ServerRef, ServerSpec, StdioTransport
from yao_actors.errors import ErrorKind
from yao_actors.models.base import Completion, ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.testing import FunctionModel
from yao_actors.tools.server_actor import ServerState
from yao_actors.transports import LineLimits, Link, open_client, open_stdio_transport

FAST_RESTART = RestartPolicy(max_restarts=3, backoff_initial=0.05, backoff_max=0.5)


def stdio_spec(server_id: str = "stdio", **changes: Any) -> ServerSpec:
    transport = StdioTransport(command=sys.executable, args=("-m", "yao_actors.testing.servers", "--name", server_id))
    return ServerSpec(id=server_id, transport=transport, restart=FAST_RESTART, **changes)


@pytest.mark.parametrize(("protocol", "version"), PROTOCOLS)
async def test_behaviour_over_stdio(protocol: str, version: str) -> None:
    with trio.fail_after(60):
        async with running(stdio_spec(timeout=3.0, protocol=protocol)) as handle:
            assert handle.statistics().protocol == version
            await actor_checks.check_all(handle)


@pytest.mark.parametrize(("protocol", "version"), PROTOCOLS)
async def test_kill_9_fails_in_flight_calls_and_restarts(protocol: str, version: str) -> None:
    with trio.fail_after(60):
        async with running(stdio_spec(timeout=100, protocol=protocol)) as handle:
            first_pid = handle.statistics().pid
            assert first_pid is not None
            # "quickly": long before the calls' own 50 s
            outcomes = await fail_in_flight(handle, 5, lambda: os.kill(first_pid, signal.SIGKILL), within=5)
            for outcome in outcomes:
                assert f"exit code {-signal.SIGKILL}" in (outcome.error or "")
                assert "test server stdio started" in outcome.stderr_tail

            await handle.wait_for_state(ServerState.READY)
            assert (await handle.call_tool("add", {"a": 1, "b": 2})).result == {"sum": 3}
            stats = handle.statistics()
            assert stats.restarts == 1
            assert stats.protocol == version
            assert stats.pid not in (None, first_pid)
            assert process_gone(first_pid)

            crashed = await handle.call_tool("crash", {"code": 3})
            assert crashed.kind is ErrorKind.SERVER_UNAVAILABLE
            assert "exit code 3" in (crashed.error or "")
            assert "crashing on purpose with code 3" in crashed.stderr_tail
            await handle.wait_for_state(ServerState.READY)
            assert (await handle.call_tool("echo", {"text": "back"})).result == {"text": "back"}


async def test_missing_command_is_reported_and_the_others_serve() -> None:
    missing = ServerSpec(
        id="missing", transport=StdioTransport(command="/nonexistent/mcp-server"), restart=FAST_RESTART
    )
    config = Config(servers={"missing": missing, "good": stdio_spec("good")})
    with trio.fail_after(60):
        async with open_runtime(config) as runtime:
            assert list(runtime.servers) == ["missing", "good"]
            bad = runtime.servers["missing"].statistics()
            assert bad.state in (ServerState.RESTARTING, ServerState.DOWN)
            assert "FileNotFoundError" in (bad.last_error or "")
            assert "/nonexistent/mcp-server" in (bad.last_error or "")
            assert (await runtime.servers["good"].call_tool("echo", {"text": "hi"})).result == {"text": "hi"}
            outcome = await runtime.servers["missing"].call_tool("echo", {"text": "hi"})
            assert outcome.kind is ErrorKind.SERVER_UNAVAILABLE
            assert "FileNotFoundError" in (outcome.error or "")


async def _start_and_collect_pids(config: Config, pids: list[int], *, then: str) -> None:
    async with open_runtime(config) as runtime:
        for handle in runtime.servers.values():
            await handle.wait_for_state(ServerState.READY)
            pid = handle.statistics().pid
            assert pid is not None
            pids.append(pid)
        assert not any(process_gone(pid) for pid in pids)
        if then == "raise":
            raise RuntimeError("the body failed")


@pytest.mark.parametrize("then", ["exit", "raise", "cancel"])
async def test_no_child_survives_the_runtime(then: str) -> None:
    config = Config(servers={f"s{i}": stdio_spec(f"s{i}") for i in range(3)})
    pids: list[int] = []
    with trio.fail_after(60):
        if then == "cancel":
            with trio.move_on_after(30) as outer:
                async with open_runtime(config) as runtime:
                    for handle in runtime.servers.values():
                        await handle.wait_for_state(ServerState.READY)
                        pids.append(handle.statistics().pid or 0)
                    outer.cancel()
                    await trio.sleep_forever()
        elif then == "raise":
            with pytest.raises(RuntimeError, match="the body failed"):
                await _start_and_collect_pids(config, pids, then=then)
        else:
            await _start_and_collect_pids(config, pids, then=then)
    assert len(pids) == 3
    assert all(process_gone(pid) for pid in pids)


# --------------------------------------------------------------------------- line limits

#: A server that writes to stdout forever without a newline.
ENDLESS_STDOUT_LINE = "import sys\nwhile True: sys.stdout.buffer.write(b'x' * 65536); sys.stdout.flush()"


def script(source: str) -> StdioTransport:
    return StdioTransport(command=sys.executable, args=("-c", source))


async def test_an_endless_stdout_line_loses_the_link() -> None:
    link = Link()
    with trio.fail_after(30):
        async with open_stdio_transport(script(ENDLESS_STDOUT_LINE), link, LineLimits(stdout=100_000)) as (
            read_stream,
            _,
        ):
            # The session's own read finds the line too long: the connection closes under it.
            with pytest.raises(anyio.EndOfStream):
                await read_stream.receive()
            assert link.lost.is_set()
            assert link.reason == "stdout line over 100000 bytes"
            assert link.exit_code is None  # the server is still writing: the line alone failed it
    assert process_gone(link.pid or 0)


async def test_an_endless_stdout_line_restarts_the_server() -> None:
    spec = ServerSpec(id="flood", transport=script(ENDLESS_STDOUT_LINE), restart=FAST_RESTART)
    connect = functools.partial(open_client, line_limits=LineLimits(stdout=100_000))
    with trio.fail_after(30):
        async with running(spec, connect=connect) as handle:
            assert handle.state in (ServerState.RESTARTING, ServerState.STARTING, ServerState.DOWN)
            assert "stdout line over 100000 bytes" in (handle.statistics().last_error or "")
            outcome = await handle.call_tool("echo", {"text": "x"})
    assert outcome.kind is ErrorKind.SERVER_UNAVAILABLE
    assert "stdout line over 100000 bytes" in (outcome.error or "")


async def test_long_stderr_lines_are_cut_and_the_tail_kept() -> None:
    source = "import sys\nsys.stderr.write('a' * 1_000_000 + '\\nshort\\n' + 'b' * 1_000_000)\nsys.exit(4)"
    link = Link()
    with trio.fail_after(30):
        async with open_stdio_transport(script(source), link, LineLimits(stderr=50)):
            await link.lost.wait()
    assert link.exit_code == 4
    assert list(link.stderr_lines) == [
        "a" * 50 + " [line cut at 50 bytes]",
        "short",
        "b" * 50 + " [line cut at 50 bytes]",
    ]


SECRET = "SECRET-db-password-hunter2"


def leaky_spec(**changes: Any) -> ServerSpec:
    """The test server over stdio; its stderr (start-up line and crash message) carries ``SECRET`` in its name."""
    transport = StdioTransport(command=sys.executable, args=("-m", "yao_actors.testing.servers", "--name", SECRET))
    return ServerSpec(id="leaky", transport=transport, restart=FAST_RESTART, **changes)


async def _crash_in_a_run(spec: ServerSpec) -> tuple[Any, Any]:
    """A run whose model calls ``leaky__crash``: (the handle's own outcome of a crash, the run's result)."""

    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion | str:
        if messages[-1]["role"] == "tool":
            return "done"
        return Completion(tool_calls=(ToolCall("c1", "leaky__crash", '{"code": 3}'),))

    model = FunctionModel(answer)
    assistant = AssistantSpec(id="a", model="m", servers=(ServerRef("leaky"),))
    with trio.fail_after(60):
        async with open_runtime(
            Config(servers={"leaky": spec}, assistants={"a": assistant}), models={"m": model}
        ) as rt:
            outcome = await rt.servers["leaky"].call_tool("crash", {"code": 3})
            await rt.servers["leaky"].wait_for_state(ServerState.READY)
            result = await rt.run("a", "crash it")
    return outcome, (result, model)


async def test_a_dead_servers_stderr_reaches_neither_the_model_nor_the_events(caplog: pytest.LogCaptureFixture) -> None:
    outcome, (result, model) = await _crash_in_a_run(leaky_spec())
    assert outcome.kind is ErrorKind.SERVER_UNAVAILABLE
    assert "exit code 3" in (outcome.error or "")
    assert SECRET not in (outcome.error or "")
    assert f"test server {SECRET}: crashing on purpose with code 3" in outcome.stderr_tail  # the embedder sees it
    assert SECRET in caplog.text  # and the log
    (call,) = result.tool_results
    assert call.kind is ErrorKind.SERVER_UNAVAILABLE
    assert "exit code 3" in (call.error or "")
    tool_message = model.calls[-1].messages[-1]
    assert tool_message["role"] == "tool"
    assert "exit code 3" in tool_message["content"]
    assert SECRET not in json.dumps(model.calls[-1].messages)
    assert SECRET not in json.dumps(list(result.events))


async def test_expose_stderr_shows_the_tail_to_the_model() -> None:
    outcome, (result, model) = await _crash_in_a_run(leaky_spec(expose_stderr=True))
    assert f"test server {SECRET}: crashing on purpose with code 3" in (outcome.error or "")
    assert SECRET in model.calls[-1].messages[-1]["content"]
    assert SECRET in json.dumps(list(result.events))

"""Cancelling a task nobody waits for (``ToolServer.cancel_task``): one ``tasks/cancel`` through the server actor,
its answer back as an outcome, shielded from the caller's own cancelling and bounded in time."""

from __future__ import annotations

import time

import trio

from yao_actors.auth.principal_view import PrincipalConnection, PrincipalView
from yao_actors.config import InMemoryTransport, ServerSpec
from yao_actors.errors import ErrorKind
from yao_actors.store.task_handle import TaskDesign, TaskHandle
from yao_actors.testing.task_servers import build_task_server
from yao_actors.tools.call_request import CallRequest
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.server_handle import ServerHandle
from yao_actors.tools.server_status import ServerStatus
from yao_actors.tools.task_flow import CANCEL_WAIT
from yao_actors.tools.task_state import TaskState
from yao_actors.tools.tool_server import ServerState


def handle_of(task_id: str) -> TaskHandle:
    now = time.time()
    return TaskHandle("srv", task_id, TaskDesign.EXTENSION, "", "forever", {}, "", "t", now, now)


def server_handle() -> tuple[ServerHandle, trio.MemoryReceiveChannel[CallRequest]]:
    spec = ServerSpec("srv", InMemoryTransport(build_task_server()[0]))
    send, receive = trio.open_memory_channel[CallRequest](spec.queue_size)
    status = ServerStatus()
    status.set_state(ServerState.READY)
    return ServerHandle._create(spec, send, status, None, None), receive


async def test_cancel_task_sends_one_tasks_cancel_and_gives_back_the_servers_answer() -> None:
    server, inbox = server_handle()
    outcomes: list[ToolOutcome] = []
    async with trio.open_nursery() as nursery:

        async def cancel() -> None:
            outcomes.append(await server.cancel_task(handle_of("t-7")))

        nursery.start_soon(cancel)
        request = await inbox.receive()
        assert request.task_op is not None
        assert (request.task_op.kind, request.task_op.task_id, request.name) == ("cancel", "t-7", "forever")
        request.answer(ToolOutcome(task=TaskState("t-7", TaskDesign.EXTENSION, "cancelled")))
    assert [outcome.task.status for outcome in outcomes if outcome.task is not None] == ["cancelled"]
    assert server.statistics().calls == 0  # asking a task to stop is not a call


async def test_cancel_task_outlives_its_callers_cancelling_within_its_bound(autojump_clock: trio.abc.Clock) -> None:
    server, inbox = server_handle()
    outcomes: list[ToolOutcome] = []
    started = trio.current_time()
    with trio.CancelScope() as caller:
        caller.cancel()  # the caller is cancelled already: the request still goes out, and is waited for
        outcomes.append(await server.cancel_task(handle_of("t-8")))
    request = inbox.receive_nowait()
    assert request.task_op is not None
    assert request.task_op.kind == "cancel"
    assert trio.current_time() - started == CANCEL_WAIT  # the server never answered: the bound ended the wait
    assert [outcome.kind for outcome in outcomes] == [ErrorKind.TIMEOUT]
    assert "got no answer within" in (outcomes[0].error or "")


class _ReopeningRouter:
    """A router whose principal's connection was closed since the call, and whose opening again never ends."""

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.id = spec.id
        self.connections: dict[str, PrincipalConnection] = {}
        self.opening = 0

    async def connection(self, name: str) -> PrincipalConnection:
        self.opening += 1
        await trio.sleep_forever()
        raise AssertionError("unreachable")


async def test_a_principals_cancel_task_is_shielded_and_bounded_while_its_connection_opens_again(
    autojump_clock: trio.abc.Clock,
) -> None:
    server, _ = server_handle()
    router = _ReopeningRouter(server.spec)
    closed = PrincipalConnection(server, trio.CancelScope(), last_used=0.0)  # no longer the router's connection
    view = PrincipalView(router, "alice", closed)  # type: ignore[arg-type]
    outcomes: list[ToolOutcome] = []
    started = trio.current_time()
    with trio.CancelScope() as caller:
        caller.cancel()  # the caller is gone already: the cancel still tries, within its bound
        outcomes.append(await view.cancel_task(handle_of("t-9")))
    assert router.opening == 1  # the connection was being opened again: the caller's cancel did not drop it
    assert trio.current_time() - started == CANCEL_WAIT  # and the opening that never ends did not hang the caller
    assert [outcome.kind for outcome in outcomes] == [ErrorKind.TIMEOUT]
    assert "got no answer within" in (outcomes[0].error or "")

"""The 2026-07-28 tasks-extension test server (``yao_actors.testing.task_servers``), over its real transports: a
stdio subprocess and streamable HTTP as its own process. Tasks that finish, fail, ask for input and never finish;
its record of task bodies; the ``Mcp-Name`` routing header it insists on over HTTP."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY

from tests.integration.task_client_support import open_task_client
from yao_actors.testing.processes import open_http_task_server
from yao_actors.testing.task_record import read_task_record


def events(record: Path, task_id: str) -> list[str]:
    return [line["event"] for line in read_task_record(record) if line["task"] == task_id]


async def test_over_stdio_a_task_finishes_with_its_result_in_tasks_get(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    gate = tmp_path / "gate"
    async with open_task_client(record=record) as client:
        created = await client.start("slow_echo", {"text": "hello", "gate": str(gate)})
        assert created["resultType"] == "task"
        assert created["status"] == "working"
        assert created["pollIntervalMs"] == 50
        seen = [await client.get(created["taskId"]) for _ in range(4)]  # one step per poll, then the gate
        assert [task["statusMessage"] for task in seen] == ["step 1 of 3", "step 2 of 3", "step 3 of 3", "step 3 of 3"]
        assert all(task["status"] == "working" and "result" not in task for task in seen)
        gate.touch()
        done = await client.until(created["taskId"], "completed", "failed", "cancelled")
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "hello"}]
    assert events(record, created["taskId"]) == ["ran", "completed"]


async def test_over_stdio_a_failed_task_carries_its_json_rpc_error() -> None:
    async with open_task_client() as client:
        created = await client.start("task_fail", {"message": "the build broke"})
        done = await client.until(created["taskId"], "completed", "failed", "cancelled")
    assert done["status"] == "failed"
    assert done["error"] == {"code": -32603, "message": "the build broke"}


async def test_over_stdio_a_task_asks_for_input_and_tasks_update_answers_it(tmp_path: Path) -> None:
    async with open_task_client() as client:
        created = await client.start("ask", {"question": "Which branch?"})
        asking = await client.until(created["taskId"], "input_required")
        request = asking["inputRequests"]["answer"]
        assert request["method"] == "elicitation/create"
        assert request["params"]["message"] == "Which branch?"
        await client.update(created["taskId"], {"unknown": {"action": "accept"}})  # not outstanding: ignored
        assert (await client.get(created["taskId"]))["status"] == "input_required"
        await client.update(created["taskId"], {"answer": {"action": "accept", "content": {"answer": "main"}}})
        done = await client.until(created["taskId"], "completed", "failed", "cancelled")
    assert done["result"]["content"] == [{"type": "text", "text": "you said: main"}]


async def test_over_stdio_cancel_reaches_a_task_that_never_finishes(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    async with open_task_client(record=record) as client:
        created = await client.start("forever", {})
        await client.cancel(created["taskId"])
        done = await client.until(created["taskId"], "completed", "failed", "cancelled")
        stats = await client.start("task_stats", {})
    assert done["status"] == "cancelled"
    assert events(record, created["taskId"]) == ["ran", "cancelled"]
    assert stats["structuredContent"]["ran"] == {"forever": 1}
    assert stats["structuredContent"]["cancelled"] == {"forever": 1}
    assert stats["structuredContent"]["polls"] >= 1


async def test_a_client_without_the_extension_gets_plain_results_or_the_missing_capability_error() -> None:
    async with open_task_client(tasks=False) as client:
        plain = await client.start("slow_echo", {"text": "inline"})
        assert plain["content"] == [{"type": "text", "text": "inline"}]
        assert "resultType" not in plain or plain["resultType"] == "complete"
        with pytest.raises(MCPError) as refused:
            await client.start("forever", {})
    assert refused.value.code == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert refused.value.error.data == {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}


async def test_over_http_a_task_outlives_its_client_and_ran_once(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    gate = tmp_path / "gate"
    async with open_http_task_server(record) as server:
        url = await server.url()
        async with open_task_client(url) as first:
            created = await first.start("slow_echo", {"text": "kept", "gate": str(gate)})
        gate.touch()
        async with open_task_client(url) as second:  # another connection, as after a restart
            done = await second.until(created["taskId"], "completed", "failed", "cancelled")
    assert done["result"]["content"] == [{"type": "text", "text": "kept"}]
    assert events(record, created["taskId"]) == ["ran", "completed"]


def _envelope(method: str, params: dict[str, object]) -> dict[str, object]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    }
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}


async def test_over_http_a_tasks_request_whose_mcp_name_is_not_the_task_id_is_refused(tmp_path: Path) -> None:
    async with open_http_task_server(tmp_path / "record.jsonl") as server:
        url = await server.url()
        async with open_task_client(url) as client:
            created = await client.start("forever", {})
            task_id = created["taskId"]
            headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}
            async with httpx2.AsyncClient() as http:
                for name in ("another-task", None):
                    sent = {**headers, "Mcp-Method": "tasks/get"} | ({"Mcp-Name": name} if name else {})
                    answer = await http.post(url, json=_envelope("tasks/get", {"taskId": task_id}), headers=sent)
                    assert answer.status_code == 400
                    error = answer.json()["error"]
                    assert error["code"] == -32020
                    assert "Mcp-Name" in error["message"]
                sent = {**headers, "Mcp-Method": "tasks/get", "Mcp-Name": task_id}
                answer = await http.post(url, json=_envelope("tasks/get", {"taskId": task_id}), headers=sent)
                assert answer.json()["result"]["status"] == "working"
            await client.cancel(task_id)

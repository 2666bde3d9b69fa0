"""A client may leave during a long task and resume the run later, from any worker (issue 41), with real parts: two
``server.py`` processes sharing a real redis-server behind a real HAProxy, the tasks-extension test server over
streamable HTTP as its own process, the fake OpenAI endpoint as the model. The websocket client that started the run disconnects while the run
waits on its task; ``detach_grace`` (2 s here) does not run while the run waits, so the run keeps polling until
the task ends on its own (80 steps, each seen by one poll at the server's 50 ms: over four seconds, two graces); a
client then resumes the run by its id on the other worker and sees its one ``TOOL_CALL_RESULT`` and its one
terminal event. The grace starts again when the task ends: the run's last steps (the result, the model's answer,
the close-out in Redis) must end within it, which a grace of a fraction of a second did not leave a loaded
machine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from tests.integration.processes import stop
from tests.integration.task_runs_support import task_caller, until_task_stored
from tests.integration.workers_support import two_service_workers
from tests.service.support import run_frame, send, until_terminal, wait_until
from yao_actors.cli.chat import open_service_connection
from yao_actors.testing.processes import open_http_task_server
from yao_actors.testing.redis_server import RedisServer
from yao_actors.testing.task_record import read_task_record

GUARD = 90
STEPS = 80
GRACE = 2.0
SAID = f"{STEPS} steps later"


#: A model that asks for ``slow_echo`` (a task of ``STEPS`` steps, one per poll), then answers with its result.
stepper = task_caller("slow_echo", {"text": SAID, "steps": STEPS}, lambda said: f"done: {said}")


def ended(record: Path) -> list[str]:
    return [line["event"] for line in read_task_record(record) if line["event"] in ("completed", "cancelled")]


async def test_a_client_detaches_during_a_task_and_resumes_the_run_on_another_worker(tmp_path: Path) -> None:
    record = tmp_path / "tasks.jsonl"
    redis = RedisServer(tmp_path)
    redis.start()
    try:
        with trio.fail_after(GUARD):
            store = {"type": "redis", "url": redis.url, "prefix": "detach:"}
            async with open_http_task_server(record) as tasks:
                servers = {"tasks": {"url": await tasks.url()}}
                settings = {"server": {"detach_grace": GRACE}}
                async with two_service_workers(tmp_path, stepper, servers, store, settings) as workers:
                    front, worker_a, worker_b, fake = workers.front, workers.a, workers.b, workers.fake
                    async with open_service_connection(f"{front}?worker=a") as ws:
                        await send(ws, run_frame("count to twenty", run_id="r1", thread_id="t1"))
                        before = await until_task_stored(ws, "r1")
                    # The client is gone; the run, detached, goes on polling its task on worker A until it ends.
                    await wait_until(lambda: ended(record))
                    async with open_service_connection(f"{front}?worker=b") as ws:
                        await send(ws, {"type": "resume", "runId": "r1", "afterSeq": before[-1]["seq"]})
                        resumed = await until_terminal(ws, "r1")
                    assert await stop(worker_a) == 0
                    assert await stop(worker_b) == 0
    finally:
        redis.stop()
    assert ended(record) == ["completed"]  # not cancelled when the client left
    events = before + resumed
    results = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert [e["content"] for e in results] == [json.dumps(SAID)]
    terminal: list[dict[str, Any]] = [e for e in events if e["type"] in ("RUN_FINISHED", "RUN_ERROR")]
    assert [e["type"] for e in terminal] == ["RUN_FINISHED"]
    assert terminal[0]["result"]["text"] == f"done: {json.dumps(SAID)}"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    progress = [e["value"]["message"] for e in events if e.get("name") == "tool_progress"]
    assert progress[-1] == f"step {STEPS} of {STEPS}"  # the run saw every step, after its client left
    assert len([r for r in fake.requests if r.body["messages"][-1]["role"] == "tool"]) == 1

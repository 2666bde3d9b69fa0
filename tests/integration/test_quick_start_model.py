"""The quick start's model is the offline demo unless the user names a model (issue 44, item 2): ``OPENAI_API_KEY``
(and ``OPENAI_BASE_URL``) exported for other tools do not send the questions anywhere, and the banner says which model
and endpoint the service uses. Real ``python server.py`` processes, a real OpenAI-compatible endpoint on loopback
that counts what reaches it."""

from __future__ import annotations

import re

import trio

from tests.integration.processes import clean_environment, server_py
from tests.integration.test_service_e2e import SEED_QUESTION
from tests.service.support import run_frame, send, until_terminal
from yao_actors.cli.chat import open_service_connection
from yao_actors.testing import Reply, open_fake_openai


async def _ask(banner: str, question: str) -> list[dict[str, object]]:
    """Ask the service whose banner this is ``question`` over its websocket; the run's events."""
    match = re.search(r"ws://127\.0\.0\.1:\d+/", banner)
    assert match, banner
    async with open_service_connection(match.group()) as ws:
        await send(ws, run_frame(question, run_id="r1"))
        return await until_terminal(ws, "r1")


def _text(events: list[dict[str, object]]) -> str:
    return "".join(str(e["delta"]) for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


async def test_an_exported_openai_api_key_leaves_the_quick_start_offline() -> None:
    with trio.fail_after(60):
        async with open_fake_openai([Reply(text="from the remote model")]) as fake:
            env = clean_environment(OPENAI_API_KEY="sk-exported-for-other-tools", OPENAI_BASE_URL=fake.base_url)
            async with server_py("--port", "0", "--store", "memory", env=env) as (_, banner):
                events = await _ask(banner, SEED_QUESTION)
    assert "model demo (offline)" in banner
    assert "OPENAI_API_KEY and OPENAI_BASE_URL set but not used: set OPENAI_MODEL or pass --model" in banner
    assert f'yao-actors chat "{SEED_QUESTION}"' in banner
    assert events[-1]["type"] == "RUN_FINISHED"
    assert [e["toolCallName"] for e in events if e["type"] == "TOOL_CALL_START"] == ["weather__get", "clothing__advise"]
    assert _text(events).startswith("北京今天晴")  # the demo model's answer
    assert fake.requests == []  # nothing left the machine


async def test_a_named_model_is_used_and_the_banner_says_where() -> None:
    with trio.fail_after(60):
        async with open_fake_openai([Reply(text="from the remote model")]) as fake:
            env = clean_environment(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake.base_url)
            async with server_py("--port", "0", "--store", "memory", "--model", "qwen2.5", env=env) as (_, banner):
                events = await _ask(banner, "hello")
    assert f"model qwen2.5 at {fake.base_url}" in banner
    assert "not used" not in banner
    assert _text(events) == "from the remote model"
    assert [request.body["model"] for request in fake.requests] == ["qwen2.5"]
    assert fake.requests[0].headers["authorization"] == "Bearer sk-test"

"""A server's URL question reaches the user only with an https URL (http to this machine): any other is declined to
the server with the reason, which the model hears. The asking server runs as a real stdio process."""

from __future__ import annotations

import json

import pytest
import trio

from tests.integration.asking_support import asking_server
from tests.integration.test_input_interrupts import config, interrupts_of, model
from tests.support import check_stream
from yao_actors import Outcome, ToolCall, open_runtime


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("javascript:alert(document.cookie)", "not javascript:"),
        ("data:text/html,<script>alert(1)</script>", "not data:"),
        ("file:///etc/passwd", "not file:"),
        ("http://127.0.0.1.evil.example/", "http: is opened only to this machine"),
        ("https://bank.example@evil.example/", "user name or password"),
    ],
)
async def test_a_url_question_with_another_scheme_is_declined_and_the_model_hears_why(url: str, why: str) -> None:
    scripted, seen = model(ToolCall("c_visit", "asking__visit", json.dumps({"url": url})))
    with trio.fail_after(60):
        async with asking_server("stdio") as where, open_runtime(config(where, "legacy"), models={"m": scripted}) as rt:
            result = await rt.run("a", "open it", thread_id="t")
    check_stream(result.events)
    assert result.outcome is Outcome.ANSWERED  # no interrupt: the user never sees the URL
    assert url not in json.dumps(
        [e for e in result.events if e["type"] != "TOOL_CALL_ARGS" and e["type"] != "TOOL_CALL_START"]
    )
    (told,) = [m["content"] for m in seen[-1] if m.get("tool_call_id") == "c_visit"]
    assert told.startswith("Error:"), told
    assert "the server's URL question was refused" in told, told
    assert why in told, told


async def test_an_https_or_loopback_http_url_question_is_an_interrupt() -> None:
    calls = [
        ToolCall("c_https", "asking__visit", json.dumps({"url": "https://pay.example/checkout?id=7"})),
        ToolCall("c_local", "asking__visit", json.dumps({"url": "http://[::1]:8765/done"})),
    ]
    scripted, _ = model(*calls)
    with trio.fail_after(60):
        async with asking_server("stdio") as where, open_runtime(config(where, "legacy"), models={"m": scripted}) as rt:
            result = await rt.run("a", "open them", thread_id="t")
    urls = {i["toolCallId"]: (i["reason"], i["url"]) for i in interrupts_of(result.events)}
    assert urls == {
        "c_https": ("url_required", "https://pay.example/checkout?id=7"),
        "c_local": ("url_required", "http://[::1]:8765/done"),
    }

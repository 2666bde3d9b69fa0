"""The official ``@modelcontextprotocol/server-everything`` (a server nobody here wrote, over stdio through ``npx``):
what its tools return, as the model sees it (issue 33), checked on the wire of the fake OpenAI endpoint."""

from __future__ import annotations

import json
import shutil
from typing import Any

import trio

from tests.integration.test_results_real import open_results_run, tool_messages
from tests.support import check_stream, require_tool
from yao_actors.config import ServerSpec, StdioTransport
from yao_actors.testing import FakeToolCall, Reply

PACKAGE = "@modelcontextprotocol/server-everything@2026.8.31"


def everything() -> ServerSpec:
    npx = shutil.which("npx")
    require_tool(npx, "npx")
    assert npx is not None
    return ServerSpec("r", StdioTransport(npx, ("-y", PACKAGE, "stdio")), timeout=30, connect_timeout=120)


async def run_calls(*calls: FakeToolCall, **options: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The request of the model's second call, and the run's events, after ``calls``."""
    script = [Reply(tool_calls=calls), Reply(text="ok")]
    with trio.fail_after(180):
        async with open_results_run(script, everything(), **options) as (fake, manager):
            result = await manager.run("a", "go")
    check_stream(list(result.events))
    assert result.text == "ok"
    return fake.requests[1].body["messages"], list(result.events)


async def test_get_tiny_image_reaches_a_vision_model_as_an_image_part() -> None:
    messages, events = await run_calls(
        FakeToolCall("r__get-tiny-image", "{}", "img"),
        FakeToolCall("r__get-annotated-message", json.dumps({"messageType": "success", "includeImage": True}), "ann"),
        model={"vision": True},
    )
    [image_event] = [e for e in events if e["type"] == "TOOL_CALL_RESULT" and e["toolCallId"] == "img"]
    data = image_event["metadata"]["media"][0]["data"]
    assert len(data) > 1000
    assert data not in json.dumps(messages[:-1])
    assert "[image image/png, " in messages[2]["content"]
    assert ", sent below]" in messages[3]["content"]
    assert messages[-1]["role"] == "user"
    urls = [part["image_url"]["url"] for part in messages[-1]["content"] if part["type"] == "image_url"]
    assert urls[0] == f"data:image/png;base64,{data}"
    assert len(urls) == 2


async def test_get_structured_content_reaches_the_model_as_its_structured_json() -> None:
    messages, events = await run_calls(
        FakeToolCall("r__get-structured-content", json.dumps({"location": "Chicago"}), "w")
    )
    weather = json.loads(messages[2]["content"])
    assert set(weather) == {"temperature", "conditions", "humidity"}
    [event] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert event["metadata"]["structured"] is True


async def test_resource_links_and_an_embedded_resource_as_the_model_sees_them() -> None:
    messages, _events = await run_calls(
        FakeToolCall("r__get-resource-links", json.dumps({"count": 2}), "links"),
        FakeToolCall("r__get-resource-reference", json.dumps({"resourceType": "Text", "resourceId": 1}), "ref"),
    )
    links = json.loads(messages[2]["content"])
    assert links[1:] == [
        "[link: Blob Resource 1 <demo://resource/dynamic/blob/1>, text/plain]",
        "[link: Text Resource 2 <demo://resource/dynamic/text/2>, text/plain]",
    ]
    reference = json.loads(messages[3]["content"])
    assert reference[1].startswith("Resource 1: This is a plaintext resource")


async def test_read_links_inlines_the_linked_text_resources() -> None:
    server = everything()
    server = ServerSpec(server.id, server.transport, timeout=30, connect_timeout=120, read_links=True)
    script = [
        Reply(tool_calls=(FakeToolCall("r__get-resource-links", json.dumps({"count": 2}), "l"),)),
        Reply(text="ok"),
    ]
    with trio.fail_after(180):
        async with open_results_run(script, server) as (fake, manager):
            result = await manager.run("a", "go")
    assert result.text == "ok"
    shown = json.loads(tool_messages(fake.requests[1].body)[0]["content"])
    assert shown[1] == "[link: Blob Resource 1 <demo://resource/dynamic/blob/1>, text/plain]"  # binary: stays a link
    assert shown[2].startswith("Resource 2: This is a plaintext resource")

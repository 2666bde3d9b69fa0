"""Images and audio in tool results (issue 33): placeholders in tool messages, never base64; the images a model
taking them is sent; the data the ``TOOL_CALL_RESULT`` event carries for clients."""

from __future__ import annotations

from typing import Any

import trio

from yao_actors.events import RunEvents
from yao_actors.tools.media import event_media, image_message, images_to_send
from yao_actors.tools.results import ToolCallResult, tool_message_content

PNG = {"type": "image", "data": "A" * 4096, "mimeType": "image/png"}
WAV = {"type": "audio", "data": "B" * 400, "mimeType": "audio/wav"}


def result(value: Any, call_id: str = "c1", error: str | None = None) -> ToolCallResult:
    return ToolCallResult(call_id, "s__t", "s", "t", "{}", result=value, error=error, rich=True)


def test_a_tool_message_shows_images_and_audio_as_placeholders() -> None:
    content = tool_message_content(result(["a caption", PNG, WAV]))
    assert content == '["a caption","[image image/png, 3.0 KB]","[audio audio/wav, 300 B]"]'
    assert tool_message_content(result(PNG)) == '"[image image/png, 3.0 KB]"'
    assert tool_message_content(
        result(
            ["a caption", PNG, PNG],
        ),
        1,
    ) == ('["a caption","[image image/png, 3.0 KB, sent below]","[image image/png, 3.0 KB]"]')
    assert tool_message_content(result({"type": "image", "data": 3})) == '{"type":"image","data":3}'  # no media


def test_a_turn_sends_the_first_images_in_call_order_and_never_audio() -> None:
    results = [result([PNG, PNG], "c1"), result(WAV, "c2"), result(None, "c3", "boom"), result([PNG, PNG], "c4")]
    assert images_to_send(results, 3) == [2, 0, 0, 1]
    assert images_to_send(results, 0) == [0, 0, 0, 0]
    message = image_message(results, [2, 0, 0, 1])
    assert message["role"] == "user"
    kinds = [part["type"] for part in message["content"]]
    assert kinds == ["text", "text", "image_url", "text", "image_url", "text", "image_url"]
    assert message["content"][-2]["text"] == "[image image/png, 3.0 KB] from call c4"
    assert message["content"][-1]["image_url"]["url"] == "data:image/png;base64," + "A" * 4096


def test_events_carry_the_data_up_to_a_size_then_the_size_only() -> None:
    assert event_media([PNG, WAV], 10_000) == [
        {"type": "image", "mimeType": "image/png", "data": PNG["data"]},
        {"type": "audio", "mimeType": "audio/wav", "data": WAV["data"]},
    ]
    assert event_media([PNG, WAV], 4096) == [
        {"type": "image", "mimeType": "image/png", "data": PNG["data"]},
        {"type": "audio", "mimeType": "audio/wav", "size": 300},
    ]


async def test_the_tool_call_result_event_has_media_in_its_metadata() -> None:
    send, receive = trio.open_memory_channel[Any](4)
    events = RunEvents("r", "t", send, validate=True)
    event = await events.tool_call_result("m1", result(["x", PNG]), media_bytes=100)
    assert event["content"] == '["x","[image image/png, 3.0 KB]"]'
    assert event["metadata"]["media"] == [{"type": "image", "mimeType": "image/png", "size": 3072}]
    assert receive.receive_nowait() is event


def test_a_json_text_that_looks_like_an_image_is_the_tools_data() -> None:
    text_only = ToolCallResult("c1", "s__t", "s", "t", "{}", result=PNG)  # no image block: the tool's own JSON
    assert tool_message_content(text_only) == '{"type":"image","data":"' + "A" * 4096 + '","mimeType":"image/png"}'
    assert images_to_send([text_only], 4) == [0]

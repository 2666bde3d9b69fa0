"""Tool annotations (issue 33): the spec's defaults, the title offered to the model, and the ``destructive``
approval policy end to end over our result server (in process)."""

from __future__ import annotations

import io
import json
from typing import Any

import mcp.types
import trio

from tests.support import check_stream
from yao_actors.cli.chat_render import Renderer
from yao_actors.config import AssistantSpec, Config, InMemoryTransport, ServerRef, ServerSpec
from yao_actors.events import Outcome
from yao_actors.models.base import Completion, ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.testing import FunctionModel
from yao_actors.testing.result_servers import build_result_server
from yao_actors.tools.hints import ToolHints, offered_description


def tool(**annotations: Any) -> mcp.types.Tool:
    notes = mcp.types.ToolAnnotations(**annotations) if annotations else None
    return mcp.types.Tool(name="t", input_schema={"type": "object"}, annotations=notes)


def test_hints_take_the_specs_defaults() -> None:
    assert ToolHints.of(tool()) == ToolHints(read_only=False, destructive=True, idempotent=False, open_world=True)
    assert ToolHints.of(tool()).may_destroy
    assert not ToolHints.of(tool(read_only_hint=True, destructive_hint=True)).may_destroy  # read-only wins
    assert not ToolHints.of(tool(destructive_hint=False)).may_destroy
    assert ToolHints.of(tool(idempotent_hint=True)).safe_to_repeat
    assert not ToolHints.of(tool(destructive_hint=False)).safe_to_repeat
    assert ToolHints.of(tool(title="From annotations")).title == "From annotations"


def test_the_title_leads_the_description_offered() -> None:
    assert offered_description("Reads a record.", "Look up a record") == "Look up a record. Reads a record."
    assert offered_description("", "Look up a record") == "Look up a record"
    assert offered_description("Look up a record by key.", "Look up a record") == "Look up a record by key."
    assert offered_description("Reads.", "") == "Reads."


async def test_destructive_approval_holds_what_may_destroy_and_titles_reach_model_and_events() -> None:
    offered: list[dict[str, Any]] = []

    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        offered.extend(tools)
        calls = [("1", "r__lookup", {"key": "k"}), ("2", "r__erase", {"key": "k"}), ("3", "r__note", {"text": "t"})]
        return Completion(tool_calls=tuple(ToolCall(i, name, json.dumps(args)) for i, name, args in calls))

    spec = AssistantSpec(id="a", model="m", servers=(ServerRef("r"),), approval="destructive")
    config = Config(servers={"r": ServerSpec("r", InMemoryTransport(build_result_server()))}, assistants={"a": spec})
    with trio.fail_after(30):
        async with open_runtime(config, models={"m": FunctionModel(answer)}) as runtime:
            result = await runtime.run("a", "go")
    check_stream(result.events)
    assert result.outcome is Outcome.INTERRUPT
    (interrupt,) = result.events[-1]["outcome"]["interrupts"]
    assert interrupt["toolCallId"] == "2"  # erase: destructive; lookup is read-only, note destructiveHint: false
    assert [(r.call_id, r.result) for r in result.tool_results] == [("1", "record k"), ("3", "noted t")]
    descriptions = {t["function"]["name"]: t["function"]["description"] for t in offered}
    assert descriptions["r__lookup"] == "Look up a record"
    assert descriptions["r__note"] == ""
    titles = {e["toolCallId"]: e["metadata"].get("title") for e in result.events if e["type"] == "TOOL_CALL_RESULT"}
    assert titles == {"1": "Look up a record", "3": None}


def test_the_chat_client_names_a_call_alike_on_its_call_and_result_lines_and_shows_its_title() -> None:
    out = io.StringIO()
    renderer = Renderer(out=out)
    renderer.render({"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "r__lookup"})
    renderer.render({"type": "TOOL_CALL_END", "toolCallId": "c1"})
    metadata = {"server": "r", "tool": "lookup", "durationMs": 3.0, "title": "Look up a record"}
    renderer.render({"type": "TOOL_CALL_RESULT", "toolCallId": "c1", "content": '"record k"', "metadata": metadata})
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("⚙ r__lookup {} … running")
    assert lines[-1] == '✓ r__lookup {} → "record k" (Look up a record, 3 ms)'

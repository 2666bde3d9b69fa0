"""What a run asks its model: the request's messages and tools (in the seed's order: prompts, samples, history,
input), the prompt that closes an argument-retry request, and what the ``next`` hook is given."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from yao_actors.models.base import Completion, Message
from yao_actors.specs import AssistantSpec
from yao_actors.tools.catalog import Catalog
from yao_actors.tools.results import ToolCallResult

TOOL_RETRY_PROMPT = (
    "Some of your tool calls failed; the tool messages above give the error of each one. "
    "Fix the arguments of the failed calls using those errors and the tools' parameter schemas, "
    "and call the tools again. Calls that succeeded already have their results above: do not repeat them. "
    "If a failed call cannot be fixed (the tool does not exist, or it cannot do what was asked), "
    "do not call it again: answer the user without it, and say what could not be done."
)
"""The system message that closes an argument-retry request (the seed sent an untranslated i18n key)."""


def build_request(
    prompts: Sequence[str], assistant: AssistantSpec, catalog: Catalog, conversation: Sequence[Message]
) -> list[Message]:
    """Step 1: global prompts, the assistant's prompts, the samples message, then history and input (seed order)."""
    messages: list[Message] = [{"role": "system", "content": p} for p in (*prompts, *assistant.prompt) if p]
    if catalog.samples_message:
        messages.append({"role": "system", "content": catalog.samples_message})
    messages.extend(conversation)
    return messages


def request_tools(assistant: AssistantSpec, catalog: Catalog) -> Sequence[Mapping[str, Any]]:
    """The tools offered: the assistant's static ``options.tools`` first, then the MCP tools (seed order)."""
    static = assistant.options.get("tools") or ()
    return (*static, *catalog.tools) if static else catalog.tools


def next_payload(
    conversation: Sequence[Message], completion: Completion, results: Sequence[ToolCallResult]
) -> dict[str, Any]:
    """What the ``next`` hook gets: the seed's fields, and ``tool_results`` (this project's earlier name)."""
    return {
        "messages": list(conversation),
        "completion": completion,
        "tools": list(results),
        "tool_results": list(results),
        "error": "",
    }

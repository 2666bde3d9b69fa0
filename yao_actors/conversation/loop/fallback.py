"""The fallback assistant and its brief.

When the tool loop fails (max turns reached, or a model call failed after its
own retries) the run delegates to the built-in assistant
:data:`FALLBACK_ASSISTANT_ID`: no tools, the seed's synthesiser prompt
(:data:`FALLBACK_PROMPT`, verbatim), and one user
message built by :func:`build_fallback_brief` in the seed's Markdown layout.
Two of the seed's faults are fixed here on purpose:
the brief carries the assistant's own system prompts under
``## Assistant Context`` (Yao left it empty), and **all** tool results of the
run (Yao sent only the first round), within the assistant's result budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from yao_actors.models.base import Message
from yao_actors.specs import DEFAULT_RESULT_BUDGET, ResultBudget
from yao_actors.tools.budget import fit_results
from yao_actors.tools.results import ToolCallResult, compact_json

FALLBACK_ASSISTANT_ID = "__yao.loop_fallback"
"""The id of the built-in fallback assistant (the seed's)."""

FALLBACK_DESCRIPTION = "Synthesize tool call results into natural language when tool loop fails or reaches max turns"

FALLBACK_PROMPT = """\
You are a response synthesizer for an AI assistant.
You are the FALLBACK — you are called only when the primary tool loop has been exhausted.

## Your Input

You will receive a single message containing three sections in Markdown format:

### "## Assistant Context"
This is the system prompt / personality of the original assistant that the user is talking to.
You MUST adopt this context as your own — respond as if you ARE that assistant.
Follow its tone, domain expertise, language preferences, and constraints.

### "## Conversation"
This shows the recent conversation between the user and the assistant.
The last user message is the question you need to answer.

### "## Tool Results"
These are the results from tools that were executed to help answer the user's question.
Each result is labeled with the tool name and contains JSON data or an error message.

## Your Task

1. Read the Assistant Context — adopt that persona
2. Understand what the user asked in the Conversation
3. Use the Tool Results data to formulate your answer
4. Respond naturally as the original assistant would

## Rules

- Respond in the SAME LANGUAGE as the user's message
- Be concise and directly answer what was asked
- Do NOT mention tool names, server IDs, JSON structures, or any technical internals
- Do NOT say "based on the tool results" or "according to the data" — just answer naturally
- If results contain structured data (lists, tables), format them readably
- If the Assistant Context has specific formatting/style rules, follow them
- You have NO access to any tools — do NOT suggest calling tools, retrying, or trying alternative methods
- Work ONLY with the Tool Results provided — do NOT fabricate or guess data
- If all tool results are errors or empty, honestly tell the user the request could not be completed and suggest rephrasing
"""
"""The fallback assistant's system prompt, verbatim from the seed (a YAML ``|`` block: one trailing newline)."""

_CLOSING = (
    "---\n"
    "Please answer the user's question based on the above context and tool results.\n"
    "Respond in the same language as the user.\n"
)


def message_text(content: Any) -> str:
    """The text of a message's content (the seed's ``messageText``).

    ``None`` is empty; a string is itself; a list of parts gives the ``text`` of
    its ``type: "text"`` parts joined by newlines; anything else its ``str``.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
        )
    return str(content)


def result_heading(result: ToolCallResult) -> str:
    """``server.tool`` when the server is known, else the tool (or the flat name the model used)."""
    if result.server:
        return f"{result.server}.{result.tool}"
    return result.tool or result.name


def _context_section(system_prompts: Iterable[str], messages: Sequence[Message]) -> str:
    texts = [*system_prompts, *(message_text(m.get("content")) for m in messages if m.get("role") == "system")]
    return "## Assistant Context\n\n" + "".join(f"{text}\n\n" for text in texts if text)


def _conversation_section(messages: Sequence[Message]) -> str:
    labels = {"user": "**User**", "assistant": "**Assistant**"}
    lines = []
    for message in messages:
        label = labels.get(str(message.get("role")))
        text = message_text(message.get("content"))
        if label and text:
            lines.append(f"{label}: {text}\n\n")
    return "## Conversation\n\n" + "".join(lines)


def _result_text(result: ToolCallResult) -> str:
    return result.error if result.error is not None else compact_json(result.result)


def _result_block(result: ToolCallResult, text: str) -> str:
    heading = f"### {result_heading(result)}\n"
    if result.error is not None:
        return f"{heading}Error: {text}\n\n"
    return f"{heading}```json\n{text}\n```\n\n"


def build_fallback_brief(
    system_prompts: Sequence[str],
    messages: Sequence[Message],
    tool_results: Sequence[ToolCallResult],
    budget: ResultBudget = DEFAULT_RESULT_BUDGET,
) -> str:
    """The fallback assistant's one user message, in the seed's exact Markdown layout.

    ``system_prompts`` are the assistant's prompts; system messages found in
    ``messages`` follow them in ``## Assistant Context``. ``messages`` are the
    conversation (history and input), ``tool_results`` every result of the run,
    shown within the assistant's result ``budget`` as if they were one turn's.
    """
    return (
        _context_section(system_prompts, messages)
        + _conversation_section(messages)
        + tool_results_section(tool_results, budget)
        + _CLOSING
    )


def fallback_messages(brief: str, prompts: Sequence[str] = (FALLBACK_PROMPT,)) -> list[dict[str, Any]]:
    """The whole request of a fallback assistant: its system prompts (the seed's by default), then the brief."""
    return [*({"role": "system", "content": p} for p in prompts if p), {"role": "user", "content": brief}]


def tool_results_section(tool_results: Sequence[ToolCallResult], budget: ResultBudget = DEFAULT_RESULT_BUDGET) -> str:
    """The brief's ``## Tool Results`` section, within ``budget`` (:mod:`yao_actors.tools.budget`); also the hard
    fallback's answer when no model produced text."""
    texts = fit_results([_result_text(result) for result in tool_results], budget)
    return "## Tool Results\n\n" + "".join(_result_block(r, text) for r, text in zip(tool_results, texts, strict=True))

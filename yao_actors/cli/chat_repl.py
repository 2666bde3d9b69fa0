"""``yao-actors chat`` without a question: a conversation on one thread, a message a line, until ``/quit`` or the
end of the input.

On a terminal it prompts (with line editing and history); otherwise it reads standard input line by line, each
line echoed after the prompt so the transcript reads as the conversation. Approvals and a server's questions are
asked inline from the same input (a form field by field: typing a value answers it; ``/decline`` or ``/cancel``
answers the whole form so). Lines starting with ``/`` are commands (:data:`COMMANDS`). ``--thread ID`` continues a
thread. The exit code: 0, or 1 when a run failed (``RUN_ERROR``), 2 when the service could not be reached, and
:data:`~yao_actors.cli.chat.WAITING` when the input ended while a run waited for answers (they are printed).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Final, TextIO

import attrs

from yao_actors.cli.chat import (
    WAITING,
    Conversation,
    print_history,
)
from yao_actors.cli.terminal_questions import LineReader

#: The prompt before each message.
PROMPT: Final = "› "

#: The commands, each with what it does.
COMMANDS: Final = {
    "/tools": "the tools the assistant is offered now",
    "/history": "this thread's messages and runs",
    "/thread": "this thread's id (continue it later with --thread ID)",
    "/help": "this list",
    "/quit": "leave (also /exit, or the end of the input)",
}


@attrs.define
class Repl:
    """The conversation and what the commands need of it."""

    conversation: Conversation
    reader: LineReader
    out: TextIO
    raw: bool
    code: int = 0

    async def serve(self) -> int | None:
        """Read and answer lines until the end; the exit code (``None``: ``out`` was closed)."""
        while (line := await self.reader.read(PROMPT)) is not None:
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                command = COMMAND_HANDLERS.get(line.split()[0].lower())
                if command is None:
                    self._say(f"unknown command {line.split()[0]}: {', '.join(COMMANDS)}")
                elif await command(self) is False:
                    break
                continue
            code = await self.conversation.say(line)
            if code is None or code == WAITING or self.conversation.ws.closed:
                return code
            self.code = self.code or code
        return self.code

    def _say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    async def _tools(self) -> None:
        frame = {"type": "tools", **({"assistant": a} if (a := self.conversation.assistant) else {})}
        answer = await self.conversation.request(frame, "tools")
        if self.raw or answer.get("type") != "tools":
            self._say(json.dumps(answer, ensure_ascii=False) if self.raw else f"✗ {answer.get('message')}")
            return
        tools = answer["tools"]
        lines = [
            f"  {tool['name']}"
            + (f" — {tool['title']}" if tool.get("title") else "")
            + (" (read-only)" if tool.get("readOnly") else "")
            for tool in tools
        ]
        lines += [f"  ({server}: {why})" for server, why in (answer.get("notOffered") or {}).items()]
        self._say(f"{len(tools)} tool(s) of assistant {answer['assistant']}:" + "".join(f"\n{x}" for x in lines))

    async def _history(self) -> None:
        snapshot = await self.conversation.request(
            {"type": "history", "threadId": self.conversation.thread_id}, "MESSAGES_SNAPSHOT"
        )
        if print_history(snapshot, self.raw, self.out) == 0 and not snapshot.get("messages") and not self.raw:
            self._say(f"(nothing yet on thread {self.conversation.thread_id})")

    async def _thread(self) -> None:
        self._say(f"thread {self.conversation.thread_id}")

    async def _help(self) -> None:
        self._say("Type a message; or:" + "".join(f"\n  {name:<9} {what}" for name, what in COMMANDS.items()))

    async def _quit(self) -> bool:
        return False


COMMAND_HANDLERS: Final[dict[str, Callable[[Repl], Awaitable[bool | None]]]] = {
    "/tools": Repl._tools,
    "/history": Repl._history,
    "/thread": Repl._thread,
    "/help": Repl._help,
    "/quit": Repl._quit,
    "/exit": Repl._quit,
}


async def hold_conversation(conversation: Conversation, lines: LineReader) -> int | None:
    """Converse on ``conversation``'s thread, a message a line of ``lines``, until the input ends or ``/quit``;
    the exit code (see the module docstring; ``None``: the output was closed)."""
    out = conversation.out
    if lines.interactive:
        assistant = conversation.assistant or "default"
        out.write(
            f"yao-actors chat · {conversation.url} · assistant {assistant} · thread {conversation.thread_id}\n"
            "Type a message, /help for commands, /quit to leave.\n"
        )
    return await Repl(conversation, lines, out, raw=conversation.renderer is None).serve()

"""Printing a run's AG-UI events on the terminal as they arrive: :class:`Renderer` (``yao-actors chat``)."""

from __future__ import annotations

from typing import Any, Final, TextIO
from urllib.parse import quote

import attrs

_CLEAR_LINE: Final = "\r\x1b[K"


@attrs.define
class _Call:
    name: str
    arguments: str = ""


@attrs.define
class Renderer:
    """Prints a run's events readably as they arrive.

    Text is written as it streams. A tool call gets a status line when the model has finished it, which on a
    terminal (``live``) is rewritten in place with its progress and then its result; elsewhere each state is
    its own line. Retries, server status, the fallback and the final usage get a line each. A result with an
    interface (an MCP App's activity) gets a line saying so, with the link to the thread in the service's ``page``
    (its URL; ``None``: no page to link to).
    """

    out: TextIO
    live: bool = False
    page: str | None = None
    _thread: str = attrs.field(default="", init=False)
    _calls: dict[str, _Call] = attrs.field(factory=dict, init=False)
    _mid_line: bool = attrs.field(default=False, init=False)
    _status_of: str | None = attrs.field(default=None, init=False)

    def render(self, event: dict[str, Any]) -> None:
        """Print one event (events without a readable form are skipped)."""
        kind = event.get("type")
        if kind == "TEXT_MESSAGE_CONTENT":
            self._text(str(event.get("delta", "")))
        elif kind == "TEXT_MESSAGE_END" and self._mid_line:
            self._line("")
        elif kind == "TOOL_CALL_START":
            self._calls[event["toolCallId"]] = _Call(name=str(event.get("toolCallName", "?")))
        elif kind == "TOOL_CALL_ARGS" and event.get("toolCallId") in self._calls:
            self._calls[event["toolCallId"]].arguments += str(event.get("delta", ""))
        elif kind == "TOOL_CALL_END" and event.get("toolCallId") in self._calls:
            self._status(event["toolCallId"], "… running")
        elif kind == "TOOL_CALL_RESULT":
            self._result(event)
        elif kind == "RUN_STARTED":
            self._thread = str(event.get("threadId") or "")
        elif kind == "ACTIVITY_SNAPSHOT" and event.get("activityType") == "mcp-apps":
            self._app(event.get("content") or {})
        elif kind == "CUSTOM":
            self._custom(str(event.get("name")), event.get("value") or {})
        elif kind == "SUBAGENT_STARTED":
            self._line(f"⇢ fallback: {event.get('name', 'assistant')} takes over")
        elif kind == "SUBAGENT_ERROR":
            self._line(f"✗ fallback failed: {event.get('message', '')}")
        elif kind == "RUN_FINISHED":
            self._finished(event)
        elif kind == "RUN_ERROR":
            self._line(f"✗ error [{event.get('code', 'run_error')}]: {event.get('message', '')}")

    def _text(self, delta: str) -> None:
        self._end_status()
        self.out.write(delta)
        self.out.flush()
        self._mid_line = not delta.endswith("\n") if delta else self._mid_line

    def _line(self, text: str) -> None:
        """Print a line of its own, after any text or status line in progress."""
        self._end_status()
        if self._mid_line and text:
            self.out.write("\n")
        self.out.write(text + "\n")
        self.out.flush()
        self._mid_line = False

    def _status(self, call_id: str, state: str, *, mark: str = "⚙") -> None:
        """Show a call's state: in place when it is the last line of a terminal, else as a new line."""
        call = self._calls[call_id]
        text = f"{mark} {call.name} {call.arguments or '{}'} {state}"
        if not self.live:
            self._line(text)
            return
        if self._status_of == call_id:
            self.out.write(_CLEAR_LINE + text)
        else:
            self._end_status()
            self.out.write(("\n" if self._mid_line else "") + text)
            self._mid_line = False
        self.out.flush()
        self._status_of = call_id

    def _end_status(self) -> None:
        if self._status_of is not None:
            self.out.write("\n")
            self._status_of = None

    def _result(self, event: dict[str, Any]) -> None:
        """Settle a call's line with its result (✓) or error (✗) and its duration."""
        call_id = str(event.get("toolCallId", ""))
        metadata = event.get("metadata") or {}
        self._calls.setdefault(call_id, _Call(name=str(metadata.get("tool", call_id))))
        about = [str(metadata["title"])] if metadata.get("title") else []  # the tool's title, for people
        if "durationMs" in metadata:
            about.append(f"{metadata['durationMs']:.0f} ms")
        duration = f" ({', '.join(about)})" if about else ""
        mark = "✗" if "kind" in metadata else "✓"
        self._status(call_id, f"→ {shorten(str(event.get('content', '')))}{duration}", mark=mark)
        self._end_status()

    def _app(self, content: Any) -> None:
        """A result with an interface: which, and where to see it (the thread in the page)."""
        where = f"{content.get('serverId')}: {content.get('resourceUri')}" if isinstance(content, dict) else "an app"
        link = f"; open it in the page: {self.page}#thread={quote(self._thread)}" if self.page and self._thread else ""
        self._line(f"▣ this result has an interface ({where}){link}")

    def _custom(self, name: str, value: Any) -> None:
        if name == "tool_progress" and value.get("toolCallId") in self._calls:
            total = value.get("total")
            amount = f"{value.get('progress')}/{total}" if total else f"{value.get('progress')}"
            message = f" {value['message']}" if value.get("message") else ""
            self._status(value["toolCallId"], f"… {amount}{message}")
        elif name == "tool_retry":
            count = len(value.get("toolCallIds", []))
            self._line(f"↻ asking the model to fix {count} failed call(s) (attempt {value.get('attempt')})")
        elif name == "sequential_retry":
            self._line(f"↻ running {len(value.get('toolCallIds', []))} failed call(s) again, one by one")
        elif name == "server_status":
            detail = f" ({value['detail']})" if value.get("detail") else ""
            self._line(f"⚠ server {value.get('server')}: {value.get('state')}{detail}")

    def _finished(self, event: dict[str, Any]) -> None:
        result = event.get("result")
        outcome = result.get("outcome") if isinstance(result, dict) else None
        outcome = outcome or (event.get("outcome") or {}).get("type", "finished")
        usage = (event.get("usage") or [{}])[0]
        tokens = (
            f" · tokens: {usage.get('inputTokens', 0)} in, {usage.get('outputTokens', 0)} out,"
            f" {usage.get('totalTokens', 0)} total"
            if usage
            else ""
        )
        self._line(f"— {outcome}{tokens}")


def shorten(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"

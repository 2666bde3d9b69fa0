"""The websocket protocol: the frames a client may send, their JSON schema, and the frames the service writes itself.

Client → service, one JSON object per text frame::

    {"type": "run", "threadId"?, "runId"?, "assistant"?, "messages": [{"role": "user", "content": "..."}], ...}
    {"type": "cancel", "runId": "..."}
    {"type": "ping"}
    {"type": "history", "threadId": "..."}          → MESSAGES_SNAPSHOT (with threadId and runs)
    {"type": "resume", "runId": "...", "afterSeq": N} → the run's events after N, ending with its terminal one
    {"type": "forget", "threadId": "..."}           → {"type": "forgotten", "threadId"}
    {"type": "threads"}                             → {"type": "threads", "threads": [...]}

A ``run`` frame carries the fields of AG-UI's ``RunAgentInput`` plus ``assistant``; ``threadId`` and ``runId``
may be left out (a new thread, a fresh run id). The thread's history lives in the service, so ``messages`` are
the new input of this run only. ``tools`` are the client's own tools (AG-UI frontend tools): the model may call
them beside the MCP tools, and the client answers such a call with a ``{"role": "tool", "toolCallId",
"content"}`` message in the next run's ``messages``. ``resume`` entries answer the interrupts of calls held
for approval (``messages`` may then be empty). A ``run`` frame whose ``forwardedProps`` carries
``__proxiedMCPRequest`` is an app's MCP request (MCP Apps), answered with ``RUN_STARTED`` and ``RUN_FINISHED``
(its ``result`` the MCP result, or ``{"error"}``) and no run (:mod:`~yao_actors.service.app_proxy`).

Service → client: the run's AG-UI events (camelCase, each with ``runId`` and ``seq``), ``{"type": "pong"}``, and
``RUN_ERROR`` events the front end writes itself for frames it refuses (code from :class:`FrameError`, ``seq``
1, ``runId`` the frame's or empty). A refused frame never closes the connection. Two refusals are about a
frame, not a run, and so are non-terminal ``{"type": "error", "code", "runId", "message"}`` frames
(:func:`error_frame`): ``duplicate_run_id`` (a run with that id is in flight; it keeps its own one terminal
event) and ``unknown_run`` (a ``cancel`` for no run in flight).

Hostile input is refused before it can reach anything else (:mod:`~yao_actors.service.frame_safety`): a frame nested
deeper than :data:`~yao_actors.service.frame_safety.MAX_DEPTH` (which would otherwise exhaust the parser's recursion), and any string or key that cannot be encoded as UTF-8
(a lone surrogate such as ``"\\ud800"`` is valid JSON but not text) are ``bad_request`` naming the field. A
run's input is user messages only unless the operator lists other roles (``server.allow_client_roles``):
otherwise a client could slip its own ``system`` prompt next to the operator's.

Every frame is checked against :data:`FRAME_SCHEMAS`: first with each schema compiled to a plain predicate
(:mod:`~yao_actors.tools.schema_check`) that only ever says yes to a valid frame, so a well-formed frame costs no
generic walk; a frame it does not pass goes to the precompiled ``jsonschema`` validators, whose failure raises
:class:`FrameError` whose ``code`` is the ``RUN_ERROR`` code and whose message names the field. The hostile-input
walk is skipped for frame text that cannot hold what it looks for (no ``\\uD8..`` escape, fewer brackets than
:data:`~yao_actors.service.frame_safety.MAX_DEPTH`). The exact ``{"type": "ping"}`` is valid by construction and answered without either.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection, Mapping
from typing import Any, Final

import attrs
import jsonschema  # type: ignore[import-untyped]

from yao_actors.conversation.app_requests import PROXIED_KEY
from yao_actors.conversation.request import RunRequest
from yao_actors.errors import ErrorFrameCode, FrameError, RunErrorCode
from yao_actors.events import encode_json
from yao_actors.service.frame_safety import MAX_DEPTH, hostile_value, is_text, json_path, plainly_safe
from yao_actors.store.codec import MAX_SEQ
from yao_actors.tools.schema_check import compile_check

#: The roles a client may send when the operator allows no others.
USER_ROLES: Final = frozenset({"user"})

#: The assistant a ``run`` frame without ``assistant`` goes to.
DEFAULT_ASSISTANT: Final = "default"

_ID: Final[dict[str, Any]] = {"type": "string", "minLength": 1, "maxLength": 200}

_MESSAGE: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["role", "content"],
    "properties": {
        "id": {"type": "string"},
        "role": {"enum": ["user", "system", "developer", "assistant", "tool"]},
        "content": {"type": "string"},
        "name": {"type": "string"},
        "toolCallId": _ID,
    },
    "additionalProperties": False,
    "if": {"properties": {"role": {"const": "tool"}}},
    "then": {"required": ["toolCallId"]},
}

_RESUME: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["interruptId", "status"],
    "properties": {"interruptId": _ID, "status": {"enum": ["resolved", "cancelled"]}, "payload": {}, "metadata": {}},
    "additionalProperties": False,
}

_TOOL: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["name", "description"],
    "properties": {
        "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"},
        "description": {"type": "string"},
        "parameters": {"type": "object"},
        "metadata": {},
    },
    "additionalProperties": False,
}


def _small_frame(
    kind: str, required: Mapping[str, Any] | None = None, optional: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The schema of a frame of type ``kind`` with the ``required`` and ``optional`` fields and nothing else."""
    return {
        "type": "object",
        "required": ["type", *(required or {})],
        "properties": {"type": {"const": kind}, **(required or {}), **(optional or {})},
        "additionalProperties": False,
    }


#: The JSON schema of each client frame, by ``type``.
FRAME_SCHEMAS: Final[Mapping[str, dict[str, Any]]] = {
    "run": {
        "type": "object",
        "required": ["type", "messages"],
        "properties": {
            "type": {"const": "run"},
            "assistant": _ID,
            "threadId": _ID,
            "runId": _ID,
            "parentRunId": _ID,
            "protocolVersion": {"type": "string"},
            "messages": {"type": "array", "items": _MESSAGE},
            "tools": {"type": "array", "items": _TOOL, "maxItems": 128},
            "context": {"type": "array"},
            "state": {},
            "forwardedProps": {},
            "resume": {"type": "array", "items": _RESUME, "maxItems": 128},
        },
        "additionalProperties": False,
        "anyOf": [
            {"properties": {"messages": {"minItems": 1}}},
            {"required": ["resume"], "properties": {"resume": {"minItems": 1}}},
            {"required": ["forwardedProps"], "properties": {"forwardedProps": {"required": [PROXIED_KEY]}}},
        ],
    },
    "cancel": _small_frame("cancel", {"runId": _ID}),
    "ping": _small_frame("ping"),
    "history": _small_frame("history", {"threadId": _ID}),
    "resume": _small_frame(
        "resume", {"runId": _ID}, {"afterSeq": {"type": "integer", "minimum": 0, "maximum": MAX_SEQ}}
    ),
    "forget": _small_frame("forget", {"threadId": _ID}),
    "threads": _small_frame("threads", optional={"limit": {"type": "integer", "minimum": 1, "maximum": 1000}}),
    "tools": _small_frame("tools", optional={"assistant": _ID}),
}

_VALIDATORS: Final = {name: jsonschema.Draft202012Validator(schema) for name, schema in FRAME_SCHEMAS.items()}
#: Each frame's schema as a plain predicate that only says yes to valid frames (``False``: ask the validator).
_CHECKS: Final = {name: compile_check(schema) for name, schema in FRAME_SCHEMAS.items()}
#: The one valid ``ping`` frame, answered without the walk and the schema.
_PING: Final[dict[str, Any]] = {"type": "ping"}


@attrs.frozen
class RunFrame:
    """Start a run of ``assistant`` on thread ``thread_id`` (``None``: a new thread) with new ``messages``."""

    run_id: str
    assistant: str
    messages: tuple[Mapping[str, str], ...]
    thread_id: str | None = None
    tools: tuple[Mapping[str, Any], ...] = ()
    """The client's own tools (AG-UI frontend tools), as function tools."""
    resume: tuple[Mapping[str, Any], ...] = ()
    """AG-UI ``resume`` entries answering the thread's calls held for approval."""
    proxied: Any = None
    """``forwardedProps.__proxiedMCPRequest``: an app's MCP request, answered instead of a run
    (:mod:`~yao_actors.service.app_proxy`)."""

    def to_request(self, principal: str | None) -> RunRequest:
        """The run this frame asks for, as ``principal`` (the connection's)."""
        return RunRequest(
            self.assistant,
            [dict(message) for message in self.messages],
            thread_id=self.thread_id,
            run_id=self.run_id,
            principal=principal,
            client_tools=self.tools,
            resume=self.resume,
        )


@attrs.frozen
class CancelFrame:
    """Cancel the run ``run_id`` of this connection."""

    run_id: str


@attrs.frozen
class PingFrame:
    """Ask for a ``pong`` (an application-level liveness check; websocket pings work too)."""


@attrs.frozen
class HistoryFrame:
    """Ask for a thread's stored messages and runs."""

    thread_id: str


@attrs.frozen
class ResumeFrame:
    """Follow run ``run_id`` from after ``after_seq``: its stored events, then its live ones."""

    run_id: str
    after_seq: int = 0


@attrs.frozen
class ForgetFrame:
    """Delete a thread and its runs."""

    thread_id: str


@attrs.frozen
class ThreadsFrame:
    """List the client's threads, newest first."""

    limit: int = 100


@attrs.frozen
class ToolsFrame:
    """List the tools ``assistant``'s runs are offered now."""

    assistant: str = DEFAULT_ASSISTANT


Frame = RunFrame | CancelFrame | PingFrame | HistoryFrame | ResumeFrame | ForgetFrame | ThreadsFrame | ToolsFrame


def parse_frame(message: str | bytes, *, max_bytes: int, client_roles: Collection[str] = USER_ROLES) -> Frame:
    """Decode and validate one client frame, or raise :class:`FrameError`.

    ``max_bytes`` bounds the UTF-8 size of a frame (``frame_too_large``); binary frames, non-JSON text, too
    deep nesting, text that is not UTF-8, messages whose role is not in ``client_roles`` and schema violations
    are ``bad_request`` with a message naming the offending field.
    """
    if isinstance(message, bytes):
        raise FrameError(RunErrorCode.BAD_REQUEST, "binary frames are not supported; send JSON text frames")
    try:
        size = len(message.encode())
        plain = True  # no lone surrogate in the text itself
    except UnicodeEncodeError:
        size, plain = len(message.encode(errors="surrogatepass")), False
    if size > max_bytes:
        raise FrameError(RunErrorCode.FRAME_TOO_LARGE, f"frame of {size} bytes exceeds the limit of {max_bytes} bytes")
    try:
        data = json.loads(message)
    except ValueError as error:  # JSONDecodeError, or an integer of more digits than Python converts
        raise FrameError(RunErrorCode.BAD_REQUEST, f"frame is not valid JSON: {error}") from None
    except RecursionError:
        raise FrameError(RunErrorCode.BAD_REQUEST, f"frame: nested deeper than {MAX_DEPTH} levels") from None
    if data == _PING:
        return PingFrame()  # the whole frame is known good: no walk, no schema
    if not isinstance(data, dict):
        raise FrameError(RunErrorCode.BAD_REQUEST, "frame must be a JSON object")
    run_id = data.get("runId") if isinstance(data.get("runId"), str) and is_text(data["runId"]) else None
    hostile = None if plain and plainly_safe(message) else hostile_value(data)
    if hostile is not None:
        raise FrameError(RunErrorCode.BAD_REQUEST, hostile, run_id=run_id)
    kind: Any = data.get("type")
    validator = _VALIDATORS.get(kind) if isinstance(kind, str) else None
    if validator is None:
        raise FrameError(
            RunErrorCode.BAD_REQUEST, f"type: must be one of {sorted(FRAME_SCHEMAS)}, got {kind!r}", run_id=run_id
        )
    if not _CHECKS[kind](data):  # the common well-formed frame passes here, without the validator's walk
        problem = jsonschema.exceptions.best_match(validator.iter_errors(data))
        if problem is not None:
            raise FrameError(
                RunErrorCode.BAD_REQUEST, f"{json_path(problem.absolute_path)}: {problem.message}", run_id=run_id
            )
    if kind == "run":
        _check_roles(data["messages"], {*client_roles, "tool"}, run_id)
    return _build(data)


def _check_roles(messages: list[dict[str, Any]], allowed: Collection[str], run_id: str | None) -> None:
    """Refuse input messages whose role the operator did not allow clients to send."""
    for index, message in enumerate(messages):
        if message["role"] not in allowed:
            raise FrameError(
                RunErrorCode.BAD_REQUEST,
                f"messages[{index}].role: {message['role']!r} is not accepted from clients (allowed: "
                f"{', '.join(sorted(allowed))}; the operator may allow more with server.allow_client_roles)",
                run_id=run_id,
            )


def _build(data: dict[str, Any]) -> Frame:
    """Turn a validated frame object into its record."""
    kind = data["type"]
    if kind == "ping":
        return PingFrame()
    if kind == "cancel":
        return CancelFrame(run_id=data["runId"])
    if kind == "history":
        return HistoryFrame(thread_id=data["threadId"])
    if kind == "resume":
        return ResumeFrame(run_id=data["runId"], after_seq=data.get("afterSeq", 0))
    if kind == "forget":
        return ForgetFrame(thread_id=data["threadId"])
    if kind == "threads":
        return ThreadsFrame(limit=data.get("limit", 100))
    if kind == "tools":
        return ToolsFrame(assistant=data.get("assistant", DEFAULT_ASSISTANT))
    return RunFrame(
        run_id=data.get("runId") or uuid.uuid4().hex,
        assistant=data.get("assistant", DEFAULT_ASSISTANT),
        messages=tuple(_message(m) for m in data["messages"]),
        thread_id=data.get("threadId"),
        tools=tuple(function_tool(t["name"], t["description"], t.get("parameters")) for t in data.get("tools", ())),
        resume=tuple(data.get("resume", ())),
        proxied=proxied_request(data.get("forwardedProps")),
    )


def proxied_request(props: Any) -> Any:
    """What ``forwardedProps`` carries as an app's proxied request (``None``: nothing, the frame asks for a run)."""
    return props.get(PROXIED_KEY) if isinstance(props, dict) else None


def _message(message: dict[str, Any]) -> dict[str, str]:
    """A frame's message in the seed's shape (a tool message answers ``tool_call_id``)."""
    if message["role"] == "tool":
        return {"role": "tool", "tool_call_id": message["toolCallId"], "content": message["content"]}
    return {"role": message["role"], "content": message["content"]}


def function_tool(name: str, description: str, parameters: Any) -> dict[str, Any]:
    """An AG-UI ``Tool`` as the model's function tool (no parameters: an object with none)."""
    schema = parameters if isinstance(parameters, dict) and parameters else {"type": "object", "properties": {}}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}


def encode(frame: Mapping[str, Any]) -> str:
    """Serialise a frame compactly, keeping non-ASCII text as is.

    The result is always valid UTF-8: a frame holding a string that is not (a lone surrogate that reached an
    event some other way) is written with ``\\u`` escapes instead, so the writer cannot fail on it.
    """
    return encode_json(frame)


def error_frame(
    code: ErrorFrameCode, message: str, run_id: str | None = None, *, thread_id: str | None = None
) -> dict[str, Any]:
    """A non-terminal ``error`` frame about a frame (not a run): ``duplicate_run_id``, ``unknown_run``,
    ``unknown_thread``, ``store_unavailable``; it names the frame's ``runId`` or ``threadId``."""
    frame: dict[str, Any] = {"type": "error", "code": code, "message": message}
    if run_id is not None:
        frame["runId"] = run_id
    if thread_id is not None:
        frame["threadId"] = thread_id
    return frame


PONG: Final[dict[str, Any]] = {"type": "pong"}

"""The websocket protocol: the frames a client may send, their JSON schema, and the frames the service writes itself.

Client → service, one JSON object per text frame (DESIGN §5.2)::

    {"type": "run", "threadId"?, "runId"?, "assistant"?, "messages": [{"role": "user", "content": "..."}], ...}
    {"type": "cancel", "runId": "..."}
    {"type": "ping"}

A ``run`` frame carries the fields of AG-UI's ``RunAgentInput`` plus ``assistant``; ``threadId`` and ``runId``
may be left out (a new thread, a fresh run id). The thread's history lives in the service, so ``messages`` are
the new input of this run only. Client-side tools are not supported (``tools`` must be empty): the service runs
only the tools of the MCP servers in its own configuration.

Service → client: the run's AG-UI events (camelCase, each with ``runId`` and ``seq``), ``{"type": "pong"}``, and
``RUN_ERROR`` events the front end writes itself for frames it refuses (code from :class:`FrameError`, ``seq``
1, ``runId`` the frame's or empty). A refused frame never closes the connection.

Every frame is checked against :data:`FRAME_SCHEMAS` with precompiled ``jsonschema`` validators; a failure
raises :class:`FrameError` whose ``code`` is the ``RUN_ERROR`` code and whose message names the field.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any, Final

import attrs
import jsonschema  # type: ignore[import-untyped]

from yao_actors.errors import FrameError, RunErrorCode

#: ``RUN_ERROR`` codes of the front end.

#: The assistant a ``run`` frame without ``assistant`` goes to.
DEFAULT_ASSISTANT: Final = "default"

_ID: Final[dict[str, Any]] = {"type": "string", "minLength": 1, "maxLength": 200}

_MESSAGE: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["role", "content"],
    "properties": {
        "id": {"type": "string"},
        "role": {"enum": ["user", "system", "developer", "assistant"]},
        "content": {"type": "string"},
        "name": {"type": "string"},
    },
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
            "messages": {"type": "array", "minItems": 1, "items": _MESSAGE},
            "tools": {"type": "array", "maxItems": 0},
            "context": {"type": "array"},
            "state": {},
            "forwardedProps": {},
            "resume": {},
        },
        "additionalProperties": False,
    },
    "cancel": {
        "type": "object",
        "required": ["type", "runId"],
        "properties": {"type": {"const": "cancel"}, "runId": _ID},
        "additionalProperties": False,
    },
    "ping": {
        "type": "object",
        "required": ["type"],
        "properties": {"type": {"const": "ping"}},
        "additionalProperties": False,
    },
}

_VALIDATORS: Final = {name: jsonschema.Draft202012Validator(schema) for name, schema in FRAME_SCHEMAS.items()}


@attrs.frozen
class RunFrame:
    """Start a run of ``assistant`` on thread ``thread_id`` (``None``: a new thread) with new ``messages``."""

    run_id: str
    assistant: str
    messages: tuple[Mapping[str, str], ...]
    thread_id: str | None = None


@attrs.frozen
class CancelFrame:
    """Cancel the run ``run_id`` of this connection."""

    run_id: str


@attrs.frozen
class PingFrame:
    """Ask for a ``pong`` (an application-level liveness check; websocket pings work too)."""


Frame = RunFrame | CancelFrame | PingFrame


def parse_frame(message: str | bytes, *, max_bytes: int) -> Frame:
    """Decode and validate one client frame, or raise :class:`FrameError`.

    ``max_bytes`` bounds the UTF-8 size of a frame (``frame_too_large``); binary frames, non-JSON text and
    schema violations are ``bad_request`` with a message naming the offending field.
    """
    if isinstance(message, bytes):
        raise FrameError(RunErrorCode.BAD_REQUEST, "binary frames are not supported; send JSON text frames")
    size = len(message.encode())
    if size > max_bytes:
        raise FrameError(RunErrorCode.FRAME_TOO_LARGE, f"frame of {size} bytes exceeds the limit of {max_bytes} bytes")
    try:
        data = json.loads(message)
    except json.JSONDecodeError as error:
        raise FrameError(RunErrorCode.BAD_REQUEST, f"frame is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise FrameError(RunErrorCode.BAD_REQUEST, "frame must be a JSON object")
    run_id = data.get("runId") if isinstance(data.get("runId"), str) else None
    kind = data.get("type")
    validator = _VALIDATORS.get(kind) if isinstance(kind, str) else None
    if validator is None:
        raise FrameError(
            RunErrorCode.BAD_REQUEST, f"type: must be one of {sorted(FRAME_SCHEMAS)}, got {kind!r}", run_id=run_id
        )
    problem = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if problem is not None:
        raise FrameError(
            RunErrorCode.BAD_REQUEST, f"{_json_path(problem.absolute_path)}: {problem.message}", run_id=run_id
        )
    return _build(data)


def _build(data: dict[str, Any]) -> Frame:
    """Turn a validated frame object into its record."""
    if data["type"] == "ping":
        return PingFrame()
    if data["type"] == "cancel":
        return CancelFrame(run_id=data["runId"])
    return RunFrame(
        run_id=data.get("runId") or uuid.uuid4().hex,
        assistant=data.get("assistant", DEFAULT_ASSISTANT),
        messages=tuple({"role": m["role"], "content": m["content"]} for m in data["messages"]),
        thread_id=data.get("threadId"),
    )


def _json_path(path: Any) -> str:
    """``["messages", 0, "role"]`` → ``messages[0].role`` (``frame`` for the whole object)."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text.lstrip(".") or "frame"


def encode(frame: Mapping[str, Any]) -> str:
    """Serialise a frame compactly, keeping non-ASCII text as is."""
    return json.dumps(frame, ensure_ascii=False, separators=(",", ":"))


PONG: Final[dict[str, Any]] = {"type": "pong"}

"""Python hooks of an assistant: ``create`` before the run, ``next`` after the tools ran.

Hooks are configured as ``"module:function"`` references (:class:`~yao_actors.config.Hooks`)
and resolved when a run starts, so a wrong reference fails that run with a
clear :class:`~yao_actors.errors.RunError` (code ``hook_error``) naming it.
A hook may be a plain or an ``async`` function; a plain one runs in the Trio
thread and must not block.

- ``create(ctx, messages)`` may return ``None``, a :class:`CreateResult`, or a
  dict with the same keys: ``servers`` (or the seed's ``mcp_servers``) replaces
  the run's MCP server list (an empty list does not disable tools, the seed's
  rule), ``messages`` replace the conversation the model sees for this run (the
  seed's ``createResponse.Messages``; the thread still records the run's real
  input), ``delegate`` hands the whole run to another assistant. Any other key
  is a ``hook_error`` naming it.
- ``next(ctx, payload)`` runs after every completion of the first model call
  and its argument-retry block (the seed's branch A), tool calls or not. It
  receives the seed's fields ``{"messages", "completion", "tools", "error"}``
  (``tools``: the tool results so far, also under this project's earlier name
  ``tool_results``; ``error``: ``""``) and returns ``None`` (the standard
  response), data (``{"data": ...}``, a :class:`NextResult`, or any other
  value), or a delegation (``{"delegate": "assistant"}`` or
  ``{"delegate": {"assistant_id", "messages"}}``).

Only an assistant whose ``next`` is configured takes the ``next`` branch of the
run; a ``create`` hook alone leaves the tool loop running (the seed took the
branch for any hook script).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from yao_actors.errors import RunError, RunErrorCode
from yao_actors.models.base import Message
from yao_actors.specs import Hooks, ServerRef

HookFunction = Callable[..., Any]


@attrs.frozen
class HookContext:
    """What a hook knows about the run it is called for."""

    assistant_id: str
    thread_id: str
    run_id: str


@attrs.frozen
class Delegation:
    """Hand the run to another assistant, with these messages (``None``: the run's own)."""

    assistant_id: str
    messages: tuple[Message, ...] | None = None


@attrs.frozen
class CreateResult:
    """What a ``create`` hook may change for one run."""

    servers: tuple[ServerRef, ...] | None = None
    messages: tuple[Message, ...] | None = None
    delegate: str | None = None


@attrs.frozen
class NextResult:
    """What a ``next`` hook decided: data to finish the run with, or a delegation."""

    data: Any = None
    delegate: Delegation | None = None


@attrs.frozen
class ResolvedHooks:
    """An assistant's hooks as callables; ``None`` where none is configured."""

    create: HookFunction | None = None
    next: HookFunction | None = None


def _hook_error(reference: str, problem: str) -> RunError:
    return RunError(f"hook {reference!r}: {problem}", code=RunErrorCode.HOOK_ERROR)


def resolve_reference(reference: str) -> HookFunction:
    """Import ``"module:function"`` and return the function; a clear ``RunError`` if that fails."""
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise _hook_error(reference, 'expected "module:function"')
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise _hook_error(reference, f"cannot import module {module_name!r}: {error}") from error
    function = getattr(module, attribute, None)
    if function is None:
        raise _hook_error(reference, f"module {module_name!r} has no attribute {attribute!r}")
    if not callable(function):
        raise _hook_error(reference, f"{attribute!r} is not callable")
    return function  # type: ignore[no-any-return]


def resolve_hooks(hooks: Hooks) -> ResolvedHooks:
    """Resolve both references of an assistant's hooks."""
    return ResolvedHooks(
        create=None if hooks.create is None else resolve_reference(hooks.create),
        next=None if hooks.next is None else resolve_reference(hooks.next),
    )


async def _call(function: HookFunction, *args: Any) -> Any:
    """Call a plain or async hook; its own exceptions become a ``RunError`` naming it."""
    name = f"{function.__module__}:{function.__qualname__}"
    try:
        value = function(*args)
        if inspect.isawaitable(value):
            value = await value
    except RunError:
        raise
    except Exception as error:
        raise _hook_error(name, f"raised {type(error).__name__}: {error}") from error
    return value


def _server_ref(value: Any) -> ServerRef:
    if isinstance(value, ServerRef):
        return value
    if isinstance(value, str):
        return ServerRef(value)
    if isinstance(value, Mapping) and isinstance(value.get("server_id"), str):
        return ServerRef(value["server_id"], tuple(value.get("tools") or ()))
    raise RunError(f"create hook: not a server reference: {value!r}", code=RunErrorCode.HOOK_ERROR)


def _messages(value: Any, where: str) -> tuple[Message, ...] | None:
    if value is None:
        return None
    if isinstance(value, Sequence) and not isinstance(value, str) and all(isinstance(m, Mapping) for m in value):
        return tuple(value)
    raise RunError(f"{where}: messages must be a list of message objects, got {value!r}", code=RunErrorCode.HOOK_ERROR)


_CREATE_KEYS = ("servers", "mcp_servers", "messages", "delegate")
"""The keys a ``create`` hook's dict may have (``mcp_servers`` is the seed's name of ``servers``)."""


def _create_result(value: Any) -> CreateResult:
    if value is None:
        return CreateResult()
    if isinstance(value, CreateResult):
        return value
    if not isinstance(value, Mapping):
        raise RunError(
            f"create hook returned {type(value).__name__}, expected a dict or CreateResult",
            code=RunErrorCode.HOOK_ERROR,
        )
    unknown = sorted(str(key) for key in value if key not in _CREATE_KEYS)
    if unknown:
        allowed = ", ".join(_CREATE_KEYS)
        raise RunError(
            f"create hook: unknown key {', '.join(map(repr, unknown))} (allowed: {allowed})",
            code=RunErrorCode.HOOK_ERROR,
        )
    if "servers" in value and "mcp_servers" in value:
        raise RunError("create hook: give 'servers' or 'mcp_servers', not both", code=RunErrorCode.HOOK_ERROR)
    servers = value.get("servers", value.get("mcp_servers"))
    delegate = value.get("delegate")
    if delegate is not None and not isinstance(delegate, str):
        raise RunError(f"create hook: delegate must be an assistant id, got {delegate!r}", code=RunErrorCode.HOOK_ERROR)
    return CreateResult(
        servers=None if servers is None else tuple(_server_ref(s) for s in servers),
        messages=_messages(value.get("messages"), "create hook"),
        delegate=delegate,
    )


def _delegation(value: Any) -> Delegation:
    if isinstance(value, Delegation):
        return value
    if isinstance(value, str):
        return Delegation(value)
    if isinstance(value, Mapping):
        assistant = value.get("assistant_id", value.get("agent_id"))
        if isinstance(assistant, str):
            return Delegation(assistant, _messages(value.get("messages"), "next hook"))
    raise RunError(f"next hook: not a delegation: {value!r}", code=RunErrorCode.HOOK_ERROR)


def _next_result(value: Any) -> NextResult | None:
    if value is None or isinstance(value, NextResult):
        return value
    if isinstance(value, Mapping) and value.get("delegate") is not None:
        return NextResult(delegate=_delegation(value["delegate"]))
    if isinstance(value, Mapping) and "data" in value:
        return NextResult(data=value["data"])
    return NextResult(data=value)


async def run_create(hooks: ResolvedHooks, ctx: HookContext, messages: Sequence[Message]) -> CreateResult:
    """Run the ``create`` hook if there is one; no hook changes nothing."""
    if hooks.create is None:
        return CreateResult()
    return _create_result(await _call(hooks.create, ctx, list(messages)))


async def run_next(hooks: ResolvedHooks, ctx: HookContext, payload: Mapping[str, Any]) -> NextResult | None:
    """Run the ``next`` hook (the caller checked there is one); ``None`` means the standard response."""
    if hooks.next is None:
        raise RuntimeError("run_next called for an assistant without a next hook")
    return _next_result(await _call(hooks.next, ctx, dict(payload)))

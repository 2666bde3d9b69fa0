"""What a run may use (:class:`RunResources`): its runtime's assistants, servers and models by id, its catalog
cache, the global prompts and the approval policy; never the manager itself."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attrs

from yao_actors.conversation.interrupts.approvals import ApprovalPolicy
from yao_actors.errors import RunError, RunErrorCode
from yao_actors.events import DEFAULT_MEDIA_BYTES
from yao_actors.models.base import Model, with_params
from yao_actors.specs import AssistantSpec
from yao_actors.tools.catalog import CatalogCache
from yao_actors.tools.directory import ServerDirectory

V = TypeVar("V")


def _lookup(table: Mapping[str, V], key: str, what: str, code: RunErrorCode) -> V:
    """``table[key]``, or a ``RunError`` with ``code`` naming what is known."""
    value = table.get(key)
    if value is None:
        known = ", ".join(sorted(table)) or "none"
        raise RunError(f"unknown {what} {key!r} (known: {known})", code=code)
    return value


@attrs.frozen
class RunResources:
    """What a run may use: the runtime's assistants, servers and models by id, its catalog cache, and the
    global ``prompts`` put before every assistant's own.

    A run calls none of ``servers`` directly: it is given its own, bound to its principal
    (:meth:`~yao_actors.tools.directory.ServerDirectory.for_run`).
    """

    assistants: Mapping[str, AssistantSpec]
    servers: ServerDirectory
    models: Mapping[str, Model]
    catalogs: CatalogCache = attrs.field(factory=CatalogCache)
    prompts: tuple[str, ...] = ()
    approvals: ApprovalPolicy = attrs.field(factory=ApprovalPolicy)
    clock: Callable[[], float] = time.time
    """Wall-clock time, for the expiry of approvals (tests pass their own)."""
    media_bytes: int = DEFAULT_MEDIA_BYTES
    """The image and audio data one ``TOOL_CALL_RESULT`` carries at most (the service's ``max_frame_bytes``)."""

    def assistant(self, ref: str | AssistantSpec) -> AssistantSpec:
        """An assistant by id (or the spec itself); ``RunError`` code ``unknown_assistant`` if there is none."""
        if isinstance(ref, AssistantSpec):
            return ref
        return _lookup(self.assistants, ref, "assistant", RunErrorCode.UNKNOWN_ASSISTANT)

    def model(self, model_id: str, options: Mapping[str, Any] | None = None) -> Model:
        """A model by id, with an assistant's request ``options`` applied; ``RunError`` code ``unknown_model``.

        ``tools`` in ``options`` are not request fields here: the run offers them
        itself, before the MCP tools (:func:`request_tools`).
        """
        return with_params(_lookup(self.models, model_id, "model", RunErrorCode.UNKNOWN_MODEL), options or {})

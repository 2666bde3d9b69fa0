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
from yao_actors.tools.directory import ServerRouter
from yao_actors.tools.tool_server import ToolServer, ToolSource

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

    ``servers`` are those the run calls; ``routers`` stand for the servers connected per principal, which a run
    binds to its principal (:func:`~yao_actors.tools.directory.bind_servers`): their views then join ``servers``.
    """

    assistants: Mapping[str, AssistantSpec]
    servers: Mapping[str, ToolServer]
    models: Mapping[str, Model]
    catalogs: CatalogCache = attrs.field(factory=CatalogCache)
    prompts: tuple[str, ...] = ()
    approvals: ApprovalPolicy = attrs.field(factory=ApprovalPolicy)
    clock: Callable[[], float] = time.time
    """Wall-clock time, for the expiry of approvals (tests pass their own)."""
    media_bytes: int = DEFAULT_MEDIA_BYTES
    """The image and audio data one ``TOOL_CALL_RESULT`` carries at most (the service's ``max_frame_bytes``)."""
    routers: Mapping[str, ServerRouter] = attrs.field(factory=dict)

    @property
    def sources(self) -> dict[str, ToolSource]:
        """What a catalog for no principal reads: the servers, and the routers not bound here (no tools of theirs)."""
        return {**self.routers, **self.servers}

    async def reaches_parked(self, server_id: str, ticket: str) -> bool:
        """Whether a call held open under ``ticket`` by server ``server_id`` is held by a live server actor."""
        server = self.servers.get(server_id) or self.routers.get(server_id)
        return server is not None and await server.reaches_parked(ticket)

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

"""What the service needs of a runtime: its runs, resumes and stored threads, and what ``/readyz`` reports of it.

:class:`~yao_actors.runtime.Runtime` is one; so is any object with these methods (a test's runtime, a runtime
behind another process). Both front ends (the websocket :class:`~yao_actors.service.connection.Connection` and
``POST /agui``) take a :class:`RunOpener`; the service as a whole a :class:`ServedRuntime`.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from yao_actors.auth.desk import AuthorizationDesk
from yao_actors.conversation.app_requests import AppRequest
from yao_actors.service.http_endpoints import Observable
from yao_actors.service.relay import ResumedStream, RunStarter
from yao_actors.tools.catalog import Catalog


class RunOpener(RunStarter, Protocol):
    """What the front end needs of a runtime: ``Runtime.open_run`` with a whole request, resume, and the stored
    threads."""

    def open_resume(
        self, run_id: str, *, after_seq: int = 0, principal: str | None = None
    ) -> AbstractAsyncContextManager[ResumedStream]:
        """A run's events after ``after_seq``, ending with its terminal one; ``RunError`` ``unknown_run``."""
        ...

    async def run_exists(self, run_id: str) -> bool:
        """Whether a run with this id is stored, whoever's; ``RunError`` ``store_unavailable`` when unknowable."""
        ...

    async def history(self, thread_id: str, *, principal: str | None = None) -> Snapshot:
        """A thread's stored messages and runs (``.to_wire()``: the ``MESSAGES_SNAPSHOT`` frame)."""
        ...

    async def forget(self, thread_id: str, *, principal: str | None = None) -> bool:
        """Delete a thread; ``False`` when it is unknown to ``principal``."""
        ...

    async def threads(self, *, principal: str | None = None, limit: int = 100) -> Sequence[ThreadSummary]:
        """``principal``'s threads, newest first."""
        ...

    async def catalog(self, assistant: str) -> Catalog:
        """The tools ``assistant``'s runs are offered now; ``KeyError`` for an assistant not configured."""
        ...

    async def app_request(self, request: AppRequest, *, principal: str | None = None) -> dict[str, Any]:
        """An app's proxied MCP request answered; ``AppRequestRefused`` saying why not."""
        ...


class Snapshot(Protocol):
    """A thread's history as ``Runtime.history`` gives it."""

    def to_wire(self) -> dict[str, Any]: ...


class ThreadSummary(Protocol):
    """A stored thread as ``Runtime.threads`` lists it."""

    @property
    def thread_id(self) -> str: ...

    @property
    def created_at(self) -> datetime.datetime: ...

    @property
    def updated_at(self) -> datetime.datetime: ...


class ServedRuntime(RunOpener, Protocol):
    """What the service needs of a runtime (a :class:`~yao_actors.runtime.Runtime`): its runs and stored threads
    (:class:`RunOpener`), and what ``/readyz`` reports of it."""

    @property
    def sources(self) -> Mapping[str, Observable]:
        """The servers whose readiness counts (the routers of those connected per principal too)."""
        ...

    def store_problem(self) -> str | None:
        """Why its conversation store cannot take calls now (``None``: it can)."""
        ...

    async def tools_not_offered(self) -> dict[str, dict[str, str]]:
        """By assistant, the servers whose tools its ``max_tools`` cap leaves out, and why."""
        ...

    @property
    def authorizations(self) -> AuthorizationDesk | None:
        """Where the authorizations of principals' OAuth servers finish (``GET /oauth/callback``), if any."""
        ...

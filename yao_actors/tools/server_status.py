"""What a server actor publishes about itself: :class:`ServerStatus`, written by the actor, read by its handle.

The state and its changes, the connection's pid and protocol, the last loss and why, restarts and backoff, the
calls in flight, the calls held open for the user's answer, and the catalog with its version.
"""

from __future__ import annotations

from typing import Any

import attrs
import mcp.types
import trio

from yao_actors.store.task_handle import TaskDesign
from yao_actors.tools.apps import interfaces
from yao_actors.tools.input_requests import InputAnswer, ParkedQuestion
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.task_wire import task_support
from yao_actors.tools.tool_server import ServerState
from yao_actors.transports import Link


def loss_kind(link: Link | None) -> str | None:
    """What kind of failure a lost connection was: ``exited`` (a stdio server's process ended), ``unauthorized``
    (behind OAuth, with no usable tokens) or ``unreachable`` (the server could not be reached, in time or at all,
    or its connection broke); ``None`` before any."""
    if link is None:
        return None
    if link.unauthorized:
        return "unauthorized"
    return "exited" if link.exit_code is not None else "unreachable"


@attrs.define(eq=False)
class ServerStatus:
    """What a server actor publishes about itself, changed only through its methods: the actor's connection,
    restarts and calls in flight; its handles read it, and count the calls they made (:meth:`count_call`: a
    handle answers some calls itself, a full queue, a timeout)."""

    state: ServerState = ServerState.STARTING
    tools_version: int = 0
    catalog: tuple[mcp.types.Tool, ...] = ()
    #: The ``outputSchema`` of each tool of the catalog that declares one.
    output_schemas: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    app_tools: frozenset[str] = frozenset()
    """The tools with an app's resource (``_meta.ui.resourceUri``): their results are kept as the server sent them."""
    restarts: int = 0
    in_flight: int = 0
    calls: int = 0
    errors: int = 0
    last_error: str | None = None
    last_loss: Link | None = None
    pid: int | None = None
    protocol: str | None = None
    #: When (``trio.current_time()``) the next connection attempt is, while backing off.
    next_attempt: float | None = None
    parked: dict[str, ParkedQuestion] = attrs.field(factory=dict)
    """Handshake-era calls held open while the user answers their question, by ticket."""
    task_design: TaskDesign | None = None
    """The tasks design the server offers on the current connection (``None``: it offers none)."""
    task_support: dict[str, str] = attrs.field(factory=dict)
    """Each tool's ``execution.taskSupport`` where it allows a task (``"optional"``, ``"required"``)."""
    task_tools: frozenset[str] = frozenset()
    """Tools whose calls ask a 2025-11-25 server for a task (:meth:`offer_tasks`)."""
    ask_optional: bool = True
    """Whether a tool that may run as a task is asked to (the server's ``tasks: "auto"``)."""
    state_changed: trio.Event = attrs.field(factory=trio.Event)
    catalog_changed: trio.Event = attrs.field(factory=trio.Event)

    def set_state(self, state: ServerState) -> None:
        """Change ``state`` and wake whoever waits for a change."""
        if state is self.state:
            return
        self.state = state
        self.state_changed.set()
        self.state_changed = trio.Event()

    def count_call(self, ok: bool) -> None:
        """A call made through a handle has its outcome."""
        self.calls += 1
        if not ok:
            self.errors += 1

    def call_started(self) -> None:
        """A worker of the actor sends a call to the server."""
        self.in_flight += 1

    def call_ended(self) -> None:
        """A worker's call to the server is over (answered, failed or abandoned)."""
        self.in_flight -= 1

    def connected(self, pid: int | None) -> None:
        """A connection is up (``pid``: a stdio server's process)."""
        self.pid = pid

    def lost(self, link: Link, message: str) -> None:
        """The connection of ``link`` is gone; ``message`` says why."""
        self.last_loss = link
        self.last_error = message

    def negotiated(self, protocol: str | None) -> None:
        """The connection speaks ``protocol`` (an MCP protocol version)."""
        self.protocol = protocol

    def park(self, question: ParkedQuestion) -> None:
        """A handshake-era call is held open while the user answers ``question``."""
        self.parked[question.ticket] = question

    def unpark(self, ticket: str) -> ParkedQuestion | None:
        """Take the call held for ``ticket`` (to answer it, or because it was not answered in time)."""
        question = self.parked.pop(ticket, None)
        if question is not None:
            question.close()
        return question

    async def answer_parked(self, ticket: str, answer: InputAnswer) -> ToolOutcome | None:
        """Give the call held for ``ticket`` its answer; its outcome then (``None``: no such call is held)."""
        question = self.unpark(ticket)
        if question is None:
            await trio.lowlevel.checkpoint()
            return None
        question.give(answer)
        outcome: ToolOutcome = await question.wait_outcome()
        return outcome

    def backing_off(self, until: float) -> None:
        """The actor waits until ``until`` (``trio.current_time()``) before its next attempt to connect."""
        self.next_attempt = until

    def restarted(self) -> None:
        """The actor connects again after a loss (its wait is over)."""
        self.next_attempt = None
        self.restarts += 1

    def offer_tasks(self, design: TaskDesign | None) -> None:
        """The current connection's server offers ``design``: choose the tools whose calls ask for a task (on
        2025-11-25; on 2026-07-28 every call declares the extension, and the server chooses)."""
        self.task_design = design
        if design is not TaskDesign.HANDSHAKE_ERA:
            self.task_tools = frozenset()
            return
        wanted = ("required", "optional") if self.ask_optional else ("required",)
        self.task_tools = frozenset(name for name, support in self.task_support.items() if support in wanted)

    def set_catalog(self, tools: tuple[mcp.types.Tool, ...]) -> None:
        """Publish a freshly fetched catalog under a new ``tools_version``."""
        self.catalog = tools
        self.output_schemas = {tool.name: tool.output_schema for tool in tools if tool.output_schema is not None}
        self.task_support = {tool.name: support for tool in tools if (support := task_support(tool)) != "forbidden"}
        self.offer_tasks(self.task_design)
        self.app_tools = frozenset(name for name, found in interfaces(tools).items() if found.resource_uri)
        self.tools_version += 1
        self.catalog_changed.set()
        self.catalog_changed = trio.Event()

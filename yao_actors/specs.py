"""Configuration records: the attrs values every part of the runtime agrees on.

They mirror the JSON file's four sections: ``mcpServers`` → :class:`ServerSpec`
(one MCP server each), ``models`` → :class:`ModelSpec`, ``assistants`` →
:class:`AssistantSpec`, and ``server`` → :class:`ServiceSpec` (the websocket
*service* this runtime offers, not an MCP server), and ``store`` → :class:`StoreSpec`
(where threads live between runs). :class:`Config` holds them all.

Build them in code for an embedded runtime, or read them from a file with
:func:`yao_actors.config.load_config`. This module depends on nothing of the
package but the history budget's defaults and the transport records
(:mod:`yao_actors.transport_specs`, re-exported here), so every other module (models included) can import it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from yao_actors.errors import ConfigError
from yao_actors.history_budget import MAX_THREAD_BYTES, MAX_THREADS_BYTES
from yao_actors.transport_specs import HttpTransport as HttpTransport
from yao_actors.transport_specs import IdentityProviderSpec as IdentityProviderSpec
from yao_actors.transport_specs import InMemoryTransport as InMemoryTransport
from yao_actors.transport_specs import OAuthSpec as OAuthSpec
from yao_actors.transport_specs import SseTransport as SseTransport
from yao_actors.transport_specs import StdioTransport as StdioTransport
from yao_actors.transport_specs import Transport as Transport
from yao_actors.transport_specs import as_strings

# --------------------------------------------------------------------------- MCP servers


@attrs.frozen
class RestartPolicy:
    """How a server actor restarts its server after it died.

    Delays grow from ``backoff_initial`` doubling up to ``backoff_max`` seconds, and the actor keeps trying at
    that pace for as long as it runs (a compose start-up race or a remote blip heals by itself). With
    ``max_restarts`` set, after that many consecutive failed lives the actor stays down and fails calls fast.
    """

    max_restarts: int | None = None
    backoff_initial: float = 0.5
    backoff_max: float = 30.0


#: Samples of one tool the model is shown (the seed's limit).
MAX_SAMPLES_PER_TOOL = 3


@attrs.frozen
class Sample:
    """A usage example of one tool, rendered into the samples system message."""

    input: Any = None
    output: Any = None
    name: str = ""
    description: str = ""


@attrs.frozen
class ServerSpec:
    """One configured MCP server.

    ``timeout`` is the per-call deadline in seconds; ``max_concurrency`` the
    number of calls served at once, ``queue_size`` how many more may wait;
    ``dispatch`` ``"sequential"`` makes dispatch run this server's calls one by
    one. ``samples`` maps tool names to their examples. ``expose_stderr`` lets
    the model and clients see the tail of a dead stdio server's stderr (it may
    hold secrets; otherwise it goes to the logs and ``ToolOutcome.stderr_tail`` only).
    A ``disabled`` server is not started and its tools are not offered (the
    ``disabled: true`` of Claude Desktop, Cursor and Cline files).
    """

    id: str
    transport: Transport
    timeout: float = 60.0
    max_concurrency: int = 16
    queue_size: int = 256
    dispatch: Literal["parallel", "sequential"] = "parallel"
    restart: RestartPolicy = RestartPolicy()
    samples: Mapping[str, tuple[Sample, ...]] = attrs.field(factory=dict)
    connect_timeout: float = 30.0
    expose_stderr: bool = False
    disabled: bool = False
    approval: bool | frozenset[str] = False
    """Calls that need a person's approval: ``True`` every tool of the server, or the tools named."""
    protocol: str = attrs.field(default="auto", validator=lambda _s, _a, value: check_protocol(value))
    """How to speak MCP: ``"auto"`` (a bounded ``server/discover``, then the ``initialize`` handshake),
    ``"legacy"`` (the handshake only) or a protocol version pinned (``"2026-07-28"``)."""
    input_timeout: float = 600.0
    """How long a handshake-era call that asked the user for input stays open waiting for the answer."""
    read_links: bool = False
    """Read the text resources a result links to (through the server, within the call's deadline) and show
    the model their text instead of the link."""
    identity: Literal["service", "principal"] = "service"
    """Whose connection serves a call: one for the whole service, or (``"principal"``) a connection of each run's
    principal (a stdio server: a process each), opened on demand, bounded and closed when idle. A server with
    ``auth`` says it in ``auth.identity`` (then each principal also has its own tokens)."""
    tasks: Literal["auto", "never"] = "auto"
    """Whether calls ask to run as MCP tasks: ``"auto"`` where the server and the tool offer it (the 2026-07-28
    tasks extension is declared on each request), ``"never"`` (a 2025-11-25 tool that requires a task still gets
    one)."""
    apps: bool = True
    """Show the interfaces (MCP Apps) of its tools: the client declares the UI extension to the server, a call of a
    tool with an interface emits an ``ACTIVITY_SNAPSHOT``, and the app's own requests are served. Off, its tools
    are plain tools (those only an app may call are still never offered to the model)."""


def protocol_choices() -> tuple[str, ...]:
    """What ``ServerSpec.protocol`` may say: ``auto``, ``legacy``, and the stateless protocol versions the SDK speaks."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS  # the SDK's types (pydantic): not for a client's start

    return ("auto", "legacy", *MODERN_PROTOCOL_VERSIONS)


def check_protocol(value: str) -> None:
    """Raise ``ConfigError`` unless ``value`` is one of :func:`protocol_choices`."""
    choices = protocol_choices()
    if value not in choices:
        raise ConfigError([f"protocol: must be one of {', '.join(map(repr, choices))}, got {value!r}"])


# --------------------------------------------------------------------------- models


@attrs.frozen
class ModelSpec:
    """One configured model.

    ``provider`` ``"openai"`` is any OpenAI-compatible Chat Completions endpoint;
    ``"demo"``, ``"test"`` and ``"direct"`` are the offline stand-ins (:mod:`yao_actors.models.offline`,
    :mod:`yao_actors.models.direct`).
    ``params`` are extra request fields (``temperature``, ``parallel_tool_calls``, ...).
    """

    id: str
    provider: Literal["openai", "demo", "test", "direct"]
    base_url: str = "https://api.openai.com/v1"
    model: str = ""
    api_key_env: str | None = "OPENAI_API_KEY"
    headers: Mapping[str, str] = attrs.field(factory=dict)
    params: Mapping[str, Any] = attrs.field(factory=dict)
    stream: bool = True
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    max_retries: int = 3
    retry_budget: float = 60.0
    vision: bool = False
    """The model takes images: those of tool results are sent to it after the tool messages."""
    max_images: int = 4
    """Images of one turn's tool results a ``vision`` model is sent at most."""


# --------------------------------------------------------------------------- assistants


@attrs.frozen
class ServerRef:
    """An entry of an assistant's ``mcp.servers``: a server and an optional tool filter."""

    server_id: str
    tools: tuple[str, ...] = attrs.field(default=(), converter=as_strings)


def _refs(refs: Iterable[ServerRef]) -> tuple[ServerRef, ...]:
    return tuple(refs)


@attrs.frozen
class RunTimeouts:
    """Deadlines of a run, in seconds: the whole run, one model call, one tool batch (turn)."""

    run: float = 300.0
    model: float = 120.0
    turn: float = 120.0


#: The smallest ``per_result`` and ``per_turn`` of a :class:`ResultBudget` (room for a cut note and some text).
MIN_RESULT_BUDGET = 256


@attrs.frozen
class ResultBudget:
    """How much of its tool results a model sees, in characters: of one result, and of one turn's results together.

    A longer result reaches the model cut, with a note saying so (:mod:`yao_actors.tools.budget`); the whole result
    stays in the ``TOOL_CALL_RESULT`` event and the thread's history.
    """

    per_result: int = 32768
    per_turn: int = 131072


DEFAULT_RESULT_BUDGET = ResultBudget()


@attrs.frozen
class Hooks:
    """Python hooks as ``"module:function"`` references (resolved when a run starts)."""

    create: str | None = None
    next: str | None = None


DESTRUCTIVE = "destructive"
"""The ``approval`` entry that holds every call of a tool that may destroy something: one not marked
``readOnlyHint`` and not marked ``destructiveHint: false`` (MCP's defaults)."""


@attrs.frozen
class AssistantSpec:
    """One assistant: its model, prompts, MCP servers and loop options.

    ``tool_loop`` and ``max_turn`` follow Yao's rules:
    only a real ``false`` disables the loop; ``max_turn`` is a number > 0
    (fractional truncated), anything else means 5. ``prompt`` is a string (one
    system prompt) or a sequence of them. ``history_max_messages`` is
    how many of the thread's stored messages a request carries (20 by default;
    ``0`` none, ``None`` all). ``options`` are request fields merged over the
    model's ``params``. ``fallback`` is ``True`` (the built-in fallback
    assistant), ``False`` (none: running out of turns is ``RUN_ERROR``
    ``max_turns``) or the id of a configured assistant that gets the brief.
    """

    id: str
    model: str
    prompt: tuple[str, ...] = attrs.field(default=(), converter=as_strings)
    servers: tuple[ServerRef, ...] = attrs.field(default=(), converter=_refs)
    tool_loop: bool = True
    max_turn: int = 5
    max_tools: int = 20
    timeouts: RunTimeouts = RunTimeouts()
    hooks: Hooks = Hooks()
    fallback_model: str | None = None
    history_max_messages: int | None = 20
    options: Mapping[str, Any] = attrs.field(factory=dict)
    fallback: bool | str = True
    approval: tuple[str, ...] = attrs.field(default=(), converter=as_strings)
    """Flat tool names (``server__tool``, or ``server__*``) whose calls need a person's approval, and
    :data:`DESTRUCTIVE` for every tool that may destroy something."""
    approval_timeout: float = 3600.0
    """Seconds a held call waits for its approval (the interrupt's ``expiresAt``)."""
    task_timeout: float = 3600.0
    """Seconds a run waits for a call a server answered with an MCP task (then the server is asked to cancel it,
    and the model is told the task did not finish); the server's ``timeout`` bounds only the request creating it."""
    result_budget: ResultBudget = DEFAULT_RESULT_BUDGET
    """How much of the tool results the model sees (and the fallback brief carries)."""


# --------------------------------------------------------------------------- service


@attrs.frozen
class ServiceSpec:
    """The websocket service: where it listens, who may connect, and its limits.

    ``max_thread_bytes`` and ``max_threads_bytes`` bound the conversation
    histories kept in memory (they apply to embedded runtimes too).
    """

    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    #: Principals and their tokens (``{"alice": "${ALICE_TOKEN}"}``); a thread belongs to its creator's principal.
    tokens: Mapping[str, str] = attrs.field(factory=dict)
    allowed_origins: tuple[str, ...] = ()
    #: Roles besides ``user`` a client may send in a run's input (``system``, ``developer``, ``assistant``).
    allow_client_roles: tuple[str, ...] = ()
    max_frame_bytes: int = 1 << 20
    max_connections: int = 1000
    max_runs_per_connection: int = 8
    max_runs: int = 2000
    #: Runs one principal may have in flight at once, detached ones included (``None``: a quarter of ``max_runs``,
    #: at least 1, when the service has several principals; all of ``max_runs`` when it has one).
    max_runs_per_principal: int | None = None
    idle_timeout: float = 120.0
    shutdown_grace: float = 5.0
    max_thread_bytes: int = MAX_THREAD_BYTES
    max_threads_bytes: int = MAX_THREADS_BYTES
    #: Seconds a run whose client went away keeps going, waiting to be resumed, before it is cancelled.
    detach_grace: float = 30.0
    #: The service's address as browsers reach it (``https://agent.example``): the OAuth redirect URI is
    #: ``<public_url>/oauth/callback`` and its Client ID Metadata Document ``<public_url>/oauth/client-metadata.json``.
    public_url: str | None = None
    #: The origin the page hosts MCP Apps on (``https://apps.agent.example``): another name for this service, so
    #: an app's frame shares nothing with the page. ``None``: a page at ``127.0.0.1:PORT`` hosts its apps on
    #: ``localhost:PORT`` and the other way round; a page reached by any other name shows no apps.
    apps_origin: str | None = None
    #: Servers without which a worker is not ready (``/readyz`` 503 while one is not ready); any other server may be
    #: down and the worker still takes runs, without that server's tools.
    required_servers: tuple[str, ...] = ()


# --------------------------------------------------------------------------- the conversation store

DEFAULT_EVENT_TTL = 86400.0
"""Seconds a run's event log is kept after its last event (one day)."""

DEFAULT_LEASE_TTL = 10.0
"""Seconds a thread's lease lasts unless renewed (a run renews it every third of that)."""

DEFAULT_LEASE_WAIT = 30.0
"""Seconds a run waits for its thread's lease, held elsewhere, before it ends with ``thread_busy``."""

StoreType = Literal["memory", "sqlite", "redis"]


def default_sqlite_path(environ: Mapping[str, str] | None = None, *, name: str | None = None) -> Path:
    """Where the service keeps its threads by default:
    ``${XDG_STATE_HOME:-~/.local/state}/yao-actors/conversations-<name>.sqlite3`` (``conversations.sqlite3``
    without a ``name``; ``yao-actors serve`` names it after its config file, or its port)."""
    environ = os.environ if environ is None else environ
    state = environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "yao-actors" / (f"conversations-{name}.sqlite3" if name else "conversations.sqlite3")


@attrs.frozen
class StoreSpec:
    """Which conversation store to open: ``memory``, ``sqlite`` (``path``) or ``redis`` (``url``, ``prefix``).

    ``event_ttl`` is how many seconds a run's event log is kept after its last event. ``lease_ttl`` how long
    a thread's lease lasts unless renewed, ``lease_wait`` how long a run waits for a lease held elsewhere
    (:mod:`yao_actors.store.leases`). ``exclusive`` (SQLite) whether the store is the only one to open its
    file (:func:`~yao_actors.store.sqlite.open_sqlite_store`); ``None``: not said, which a lone
    ``yao-actors serve`` takes as ``True`` and everything else as ``False``.
    """

    type: StoreType = "memory"
    path: str | None = None
    url: str | None = None
    prefix: str = "yao:"
    event_ttl: float = DEFAULT_EVENT_TTL
    lease_ttl: float = DEFAULT_LEASE_TTL
    lease_wait: float = DEFAULT_LEASE_WAIT
    exclusive: bool | None = None
    #: The key OAuth tokens are encrypted with in the store (:mod:`yao_actors.auth.cipher`); never shown.
    secret_key: str | None = attrs.field(default=None, repr=False)

    @classmethod
    def sqlite(cls, path: str | os.PathLike[str] | None = None) -> StoreSpec:
        """A SQLite store in ``path`` (default: :func:`default_sqlite_path`)."""
        return cls("sqlite", path=os.fspath(path if path is not None else default_sqlite_path()))


# --------------------------------------------------------------------------- the whole


@attrs.frozen
class Config:
    """A whole configuration: servers, models, assistants and the service.

    ``prompts`` are global system prompts, put before every assistant's own. ``store`` is the
    ``store`` section: ``None`` when the file has none (a runtime then keeps its threads in memory; the
    service opens SQLite at :func:`default_sqlite_path`).
    Every entry's key must be its record's ``id`` (``servers={"time": ServerSpec("time", ...)}``):
    a mismatch raises :class:`~yao_actors.errors.ConfigError` naming both, instead of
    a server that never serves. :func:`yao_actors.config.check_config` checks the
    references between the records.
    """

    servers: Mapping[str, ServerSpec] = attrs.field(factory=dict)
    models: Mapping[str, ModelSpec] = attrs.field(factory=dict)
    assistants: Mapping[str, AssistantSpec] = attrs.field(factory=dict)
    service: ServiceSpec = ServiceSpec()
    prompts: tuple[str, ...] = attrs.field(default=(), converter=as_strings)
    store: StoreSpec | None = None
    notes: tuple[str, ...] = attrs.field(default=(), eq=False)
    """What reading the file noted without refusing it (another client's keys, ignored or not used), each with
    its key path; logged with the file's name when it is read, and printed by ``check``."""

    def __attrs_post_init__(self) -> None:
        sections = (("mcpServers", self.servers), ("models", self.models), ("assistants", self.assistants))
        problems = [
            f"{section}.{key}: the key of an entry must be its id, but this one has id {record.id!r}"
            for section, records in sections
            for key, record in records.items()
            if record.id != key
        ]
        if problems:
            raise ConfigError(problems)


DEFAULT_PROMPT = (
    "You are a helpful assistant. Use the available tools when they help answer the question, "
    "and answer in the same language as the user."
)
"""The system prompt of the default assistant."""

BUILTIN_MODEL_IDS = ("demo", "test", "direct")
"""Model ids every runtime has without configuring them: the offline stand-ins (each its own provider)."""

"""The error tree; the error kinds of tool calls (:mod:`.tool_failures`) and the codes of ``RUN_ERROR`` (:mod:`.codes`).

Exceptions are for what a caller must handle; a tool call that failed is *not* an
exception but a value (``ToolOutcome`` / ``ToolCallResult``) carrying an
:class:`ErrorKind`, because every call in a model turn must still get a result.
Every exception this package raises on purpose is drawn here::

    YaoActorsError
    ├── ConfigError            a configuration was refused; ``.problems`` lists each one with its key path
    ├── ModelError             a model call failed after its own retries
    │   ├── ModelHTTPError     the endpoint answered with an error status (carries its own message)
    │   ├── ModelTimeout       a connect or read deadline fired
    │   └── ModelStreamError   the stream was malformed or ended before its finish
    ├── RunError               a run could not start or go on; ``.code`` is its :class:`RunErrorCode`
    ├── FrameError             the service refused a client frame; ``.code`` is its :class:`RunErrorCode`
    ├── NotReady               servers were not ready in time; ``.servers`` maps each to its state and last error
    ├── StoreError             a conversation store could not do what it was asked; the call wrote nothing
    │   ├── StoreUnavailable   the store cannot be reached (Redis down, SQLite file unwritable)
    │   ├── RunClosed          the store has the run closed already (another process took it for dead)
    │   ├── UnknownThread      a write to a thread that is not stored (also a ``LookupError``)
    │   ├── UnknownRun         a write to a run that is not stored, or not on that thread (also a ``LookupError``)
    │   ├── RunIdTaken         a run was started under an id a stored run has (also a ``ValueError``)
    │   ├── SeqConflict        events whose numbers do not rise above the run's stored log (also a ``ValueError``)
    │   ├── InvalidStoreInput  a message, event or approval the store cannot keep (also a ``ValueError``)
    │   └── CorruptTaskRecord  a stored task record that does not read back as a task's handle (also a ``ValueError``)
    ├── AuthorizationError     an OAuth-protected server could not be authorized; the message never holds a token
    │   ├── NeedsLogin         no usable tokens for the server (and identity): someone must log in first
    │   ├── AuthorizationRequired  a principal must authorize a server first (``url``: where)
    │   ├── AuthorizationUnavailable  the authorization server cannot be reached or refused the discovery
    │   ├── CallbackRefused    a redirect to ``/oauth/callback`` finishes no pending authorization (a 400 page)
    │   └── TokenKeyError      stored tokens do not open with ``store.secret_key`` (a wrong or changed key)
    ├── ListenError            the service cannot listen where it was told (the port is taken, no such address)
    └── BenchError             ``yao-actors bench`` cannot run what it was asked; ``.problems`` names each option

    RuntimeError
    ├── StreamClosedError      an event was emitted after the run's terminal event (a bug in the caller)
    └── GuestClosed            work handed to the asyncio bridge's Trio guest run after it ended (yao_actors.aio.guest)

Beside the tree, a few exceptions say what their own module's caller must handle, and never reach a user as
they are (each is caught where its module is used, and said in the terms above)::

    ValueError
    ├── JSONTooDeep            untrusted JSON nested deeper than the limit (yao_actors.untrusted.json)
    ├── JSONNotFinite          untrusted JSON with NaN or Infinity (yao_actors.untrusted.json)
    ├── JSONNotObject          untrusted JSON that must hold an object holds another value (yao_actors.untrusted.json)
    ├── SampleFieldError       a ``sample`` file's field cannot be read (yao_actors.config.sample_files)
    ├── EnvFileError           a stdio server's ``envFile`` cannot be read (yao_actors.config.env_files)
    ├── NoClientFile           no file where a named client keeps its servers (yao_actors.cli.client_files)
    ├── DirectError            a ``direct`` model's line names no tool or has unreadable arguments (yao_actors.models.direct)
    └── CspRefused             an app resource's declared CSP the sandbox cannot apply (yao_actors.service.apps_host)
    Exception
    ├── ModuleServerError      a ``module`` server cannot be imported or built (yao_actors.config.module_servers)
    ├── InProcessServerExit    an in-process server's task ended (yao_actors.transports)
    ├── WorkerFailed           a worker process of ``serve --workers`` failed (yao_actors.cli.workers)
    ├── BadRequest             an HTTP request the service cannot parse (yao_actors.service.http)
    ├── ClientGone             an ASGI client left before its request was whole (yao_actors.aio.asgi)
    ├── InputError             a ``POST /agui`` body the service refuses (yao_actors.service.agui_input)
    ├── AppRequestRefused      an app's proxied MCP request not answered (yao_actors.conversation.app_requests)
    ├── TaskAnswered           a ``tools/call`` answered with a task, which the run follows (yao_actors.tools.task_wire)
    ├── MaxTurns               the tool loop used its turns (yao_actors.conversation.loop.answer; becomes the fallback)
    ├── NoAnswer               standard input ended at a terminal question (yao_actors.cli.terminal_questions)
    ├── FormAnswered           a form declined or cancelled at one of its fields (yao_actors.cli.terminal_questions)
    └── CallsPending           a turn waits for client tools' results (yao_actors.conversation.interrupts.client_tools)
    trio.BrokenResourceError
    └── ClientStalled          a client took no bytes for the write deadline (yao_actors.service.http)
    RunError
    └── TooManyRuns            a run over the budget of concurrent runs (yao_actors.service.budget)

A server that cannot serve is not an exception either: its calls get
``server_unavailable`` outcomes whose text :func:`server_unavailable_message` writes.

Errors are classified by type, :class:`ErrorKind` and :class:`RunErrorCode`,
never by searching the text of an exception.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import TypeVar

# The codes and the kinds of a failed tool call have modules of their own (one idea each); imported from here too.
from yao_actors.errors.codes import ErrorFrameCode as ErrorFrameCode
from yao_actors.errors.codes import RunErrorCode as RunErrorCode
from yao_actors.errors.tool_failures import INFRASTRUCTURE_WORDS as INFRASTRUCTURE_WORDS
from yao_actors.errors.tool_failures import ErrorKind as ErrorKind
from yao_actors.errors.tool_failures import is_retryable as is_retryable
from yao_actors.errors.tool_failures import server_unavailable_message as server_unavailable_message

logger = logging.getLogger(__name__)

E = TypeVar("E", bound=BaseException)


class YaoActorsError(Exception):
    """Base of every exception this package raises on purpose."""


class ConfigError(YaoActorsError):
    """A configuration was refused.

    ``problems`` holds one message per problem, each starting with the key path it
    concerns (``assistants.default.mcp.servers[1]: unknown server "wether"``).
    """

    def __init__(self, problems: Sequence[str], *, source: str | None = None) -> None:
        self.problems = tuple(problems)
        self.source = source
        head = f"invalid configuration{f' in {source}' if source else ''}"
        super().__init__(head + ":\n" + "\n".join(f"  - {p}" for p in self.problems))


class ModelError(YaoActorsError):
    """A model call failed after its own retries."""


class ModelHTTPError(ModelError):
    """The model endpoint answered with an error status."""

    def __init__(self, status: int, message: str, *, url: str = "") -> None:
        self.status = status
        self.message = message
        self.url = url
        super().__init__(f"model endpoint {url or ''} returned HTTP {status}: {message}".replace("  ", " "))


class ModelTimeout(ModelError):
    """A connect or read deadline of a model call fired."""


class ModelStreamError(ModelError):
    """A model stream was malformed or ended before its finish reason / ``[DONE]``."""


class RunError(YaoActorsError):
    """A run could not start or continue; ``code`` says why (the ``RUN_ERROR`` code)."""

    def __init__(self, message: str, *, code: RunErrorCode = RunErrorCode.RUN_ERROR) -> None:
        self.code = code
        super().__init__(message)


class FrameError(YaoActorsError):
    """A client frame was refused; ``code`` is the ``RUN_ERROR`` code, ``run_id`` the frame's run if it named one."""

    def __init__(self, code: RunErrorCode, message: str, *, run_id: str | None = None) -> None:
        self.code = code
        self.run_id = run_id
        super().__init__(message)


class NotReady(YaoActorsError):
    """Some servers were not ready (connected, tools listed) in time, or gave up.

    ``servers`` maps each such server id to its state and its last error (``"restarting: server 'x' unavailable: ..."``).
    """

    def __init__(self, servers: Mapping[str, str]) -> None:
        self.servers = dict(servers)
        lines = "\n".join(f"  - {server_id}: {why}" for server_id, why in self.servers.items())
        super().__init__(f"{len(self.servers)} server(s) not ready:\n{lines}")


class StoreError(YaoActorsError):
    """A conversation store could not do what it was asked; the call that raised it wrote nothing.

    Reads of something unknown are not errors (they answer ``None`` or ``[]``); writes are, each of its kind.
    """


class StoreUnavailable(StoreError):
    """The conversation store cannot be reached or written; the call that raised it wrote nothing.

    Its message is for the log: it may name where the store is (the SQLite file's path, the Redis server's
    address). ``shown`` is what a client may hear of why (``None``: nothing past that the store is unavailable).
    """

    def __init__(self, message: str, *, shown: str | None = None) -> None:
        self.shown = shown
        super().__init__(message)

    def run_error(self) -> RunError:
        """The ``RunError`` ``store_unavailable`` a client hears: "the conversation store is unavailable", and
        :attr:`shown`; the message itself, which may name the store's place, is logged here instead.

        How a store out of reach ends a run or a request, and the only one: a block of store calls turns it into
        this through :func:`store_trouble_ends_the_run`; a run's journal keeps the one its run ends with."""
        logger.warning("the conversation store is unavailable: %s", self)
        said = "the conversation store is unavailable" + (f": {self.shown}" if self.shown else "")
        return RunError(said, code=RunErrorCode.STORE_UNAVAILABLE)


@contextlib.contextmanager
def store_trouble_ends_the_run() -> Iterator[None]:
    """A block of store calls whose :class:`StoreUnavailable` reaches the caller as its :meth:`~StoreUnavailable.run_error`
    (``RunError`` ``store_unavailable``): how every run and request that needs the store fails when it is out of reach."""
    try:
        yield
    except StoreUnavailable as error:
        raise error.run_error() from error


class RunClosed(StoreError):
    """A write to a run the store has closed already: its process was taken for dead (its thread's lease expired)
    and another closed it with ``RUN_ERROR`` ``interrupted``. The call wrote nothing."""


class UnknownThread(StoreError, LookupError):
    """A write to a thread the store does not hold (never opened, or forgotten meanwhile)."""


class UnknownRun(StoreError, LookupError):
    """A write to a run the store does not hold, or holds on another thread."""


class RunIdTaken(StoreError, ValueError):
    """A run was started under the id of a run the store holds already."""


class SeqConflict(StoreError, ValueError):
    """Events whose ``seq`` numbers do not rise above the run's stored log (nor within their batch)."""


class InvalidStoreInput(StoreError, ValueError):
    """A message, an event or an approval the store cannot keep (not a mapping, not JSON, a bad ``seq``)."""


class CorruptTaskRecord(StoreError, ValueError):
    """A stored task record that does not read back as a task's handle (not JSON, a field missing, of the wrong
    type or out of range): ``thread_id`` and ``task_id`` say which record (as the store keys it), ``why`` what
    is wrong with it. Nothing was written."""

    def __init__(self, thread_id: str, task_id: str, why: str) -> None:
        self.thread_id = thread_id
        self.task_id = task_id
        self.why = why
        super().__init__(f"the stored record of task {task_id!r} of thread {thread_id!r} cannot be read: {why}")


class AuthorizationError(YaoActorsError):
    """An OAuth-protected server could not be authorized: the flow failed, or its tokens are missing or unreadable.
    The message names the server and never holds a token."""


class NeedsLogin(AuthorizationError):
    """No usable tokens for a server (and identity): someone must log in (``yao-actors auth login SERVER``)."""


class AuthorizationUnavailable(AuthorizationError):
    """The authorization server (or the MCP server's discovery) cannot be reached or refused: the server's calls
    are ``server_unavailable`` until it can."""


class AuthorizationRequired(AuthorizationError):
    """A principal has no usable tokens for a server with ``auth.identity: "principal"``: ``url`` is where it
    authorizes (the run ends with an ``authorization_required`` interrupt carrying it)."""

    def __init__(self, server: str, url: str) -> None:
        super().__init__(f"server {server!r} needs your authorization: visit the URL, then resume the run")
        self.server = server
        self.url = url


class TokenKeyError(AuthorizationError):
    """Stored tokens do not open with ``store.secret_key``: the key is wrong, or changed since they were stored."""


class ListenError(YaoActorsError):
    """The service cannot listen on ``host:port``: ``reason`` says why (the port is in use, the address is not
    this machine's, the name does not resolve); ``errno`` is the operating system's code when it gave one."""

    def __init__(self, host: str, port: int, reason: str, *, errno: int | None = None) -> None:
        self.host = host
        self.port = port
        self.reason = reason
        self.errno = errno
        where = f"[{host}]" if ":" in host else host
        super().__init__(f"cannot listen on {where}:{port}: {reason}")

    @classmethod
    def from_os_error(cls, host: str, port: int, error: OSError) -> ListenError:
        """The error for an ``OSError`` of ``bind`` or ``getaddrinfo``, in the system's own words, in lower case."""
        reason = error.strerror or str(error) or type(error).__name__
        return cls(host, port, reason[:1].lower() + reason[1:], errno=error.errno)


class BenchError(YaoActorsError):
    """``yao-actors bench`` was asked for something it cannot run (an unknown tool, bad ``--args``, ...).

    ``problems`` holds one message per problem, each starting with the option it concerns.
    """

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("cannot run the benchmark:\n" + "\n".join(f"  - {p}" for p in self.problems))


class StreamClosedError(RuntimeError):
    """An event was emitted after the run's terminal event (a bug in the caller)."""


def exception_leaves(group: BaseExceptionGroup[E]) -> list[E]:
    """The exceptions a (nested) exception group holds, in order, without the groups around them.

    The one way this package unwraps what a nursery raised: a caller gets the
    exception that happened, not a tree of groups.
    """
    leaves: list[E] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            leaves.extend(exception_leaves(exc))
        else:
            leaves.append(exc)
    return leaves

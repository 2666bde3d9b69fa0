"""The commands of ``yao-actors`` (entered through :func:`yao_actors.cli.main`): ``serve`` runs the service,
``chat "question"`` asks it, ``history THREAD`` prints a thread it keeps, ``bench`` times tools.

``serve [--config FILE] [--host HOST] [--port PORT] [--workers N] [--log-level LEVEL] [--log-format text|json]`` — with no
config, the embedded default (the bundled demo servers and the offline ``demo`` model, or a real model from
``OPENAI_*``) on 127.0.0.1:8765. The current directory is on the import path, so the config's ``module`` servers and
hooks may live there. It prints one line saying where it listens and how to try it, logs to standard error, sends
traces where the ``OTEL_*`` variables say (with the ``otel`` extra installed), and on SIGINT/SIGTERM shuts down
gracefully (a second signal stops at once) and exits 0 with every MCP server process stopped. ``--workers N`` runs
N such processes on the port through ``SO_REUSEPORT``, supervised by this one (:mod:`yao_actors.workers`).

``chat "question" [--url URL] [--token TOKEN] [--json] [--assistant NAME] [--thread ID]`` and
``history ID [--url URL] [--token TOKEN] [--json]`` — see :mod:`yao_actors.chat`; the token defaults to
``YAO_ACTORS_TOKEN``.

``check [--config FILE]`` validates a configuration file as ``serve`` would (the schema, the reader, the references
between its records, every ``${VAR}`` it uses set): one line per problem, exit 0 when there is none, 2 otherwise.
``config schema`` prints the configuration's JSON Schema. ``--version`` prints the version.

``bench --call SERVER__TOOL ...`` — time calls of your own tools, see :mod:`yao_actors.bench.cli`.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from functools import partial
from typing import Any, Final, NoReturn
from urllib.parse import urlsplit

import attrs
import trio

from yao_actors import __version__
from yao_actors.auth.cli import add_auth_parser
from yao_actors.auth.keys import secret_key_problem
from yao_actors.bench.cli import add_bench_parser
from yao_actors.chat import DEFAULT_URL, chat, show_history
from yao_actors.config import Config, ServiceSpec, config_problems, default_config, load_config
from yao_actors.config.schema import schema_text
from yao_actors.errors import ConfigError, ListenError, StoreUnavailable, YaoActorsError, exception_leaves
from yao_actors.observability.logs import LOG_FORMATS, configure_logging
from yao_actors.observability.otel_setup import configure_tracing
from yao_actors.runtime import open_runtime
from yao_actors.service import Service, serve_service
from yao_actors.service.allocator import return_large_blocks
from yao_actors.service.auth import MAX_PORT, TOKEN_ENV, check_listen, resolve_credentials, resolve_token
from yao_actors.service.frontend import open_listeners
from yao_actors.service.heap import keep_heap
from yao_actors.specs import StoreSpec, default_sqlite_path
from yao_actors.store.spec import alone, check_shared
from yao_actors.workers import reserve_port, reuse_port_listener, serve_workers, worker_command

#: What ``yao-actors --help`` says first.
DESCRIPTION: Final = "Serve language models the tools of MCP servers over a websocket and POST /agui; ask the service."
#: The question the service suggests trying (the seed's example).
SAMPLE_QUESTION = "北京今天适合穿什么?"


def run_command(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` (default: ``sys.argv[1:]``) names; returns the exit code."""
    args = _parser().parse_args(argv)
    code: int = args.command(args)
    return code


class _Parser(argparse.ArgumentParser):
    """Refuses bad arguments in one line on standard error (what was wrong, and where the usage is), exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (usage: {self.prog} --help)\n")


def port_number(text: str) -> int:
    """``--port``: a TCP port, 0 to 65535 (the system would take a larger one modulo 65536 and listen elsewhere)."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"expected a port number from 0 to {MAX_PORT} (0: any free port), got {text}")
    return port


def utf8_text(text: str) -> str:
    """A text argument, which must be UTF-8: Python keeps other bytes of the command line as lone surrogates,
    which no frame, URL or header can carry."""
    if problem := not_utf8(text):
        raise argparse.ArgumentTypeError(problem)
    return text


def not_utf8(text: str) -> str | None:
    """What keeps ``text`` (decoded with ``surrogateescape``, as ``sys.argv`` and ``os.environ`` are) from being
    UTF-8, naming the first bad byte; ``None`` when it is UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        byte = text[error.start].encode("utf-8", "surrogateescape")[:1].hex()
        return (
            f"not UTF-8 text (byte 0x{byte} at character {error.start + 1}); give it in UTF-8 (is the terminal's "
            "encoding UTF-8?)"
        )
    return None


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="yao-actors", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"yao-actors {__version__}")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    _add_serve_parser(commands)
    _add_client_parsers(commands)
    add_bench_parser(commands)
    add_auth_parser(commands)

    check = commands.add_parser("check", help="validate a configuration file; one line per problem, exit 0 or 2")
    check.add_argument("--config", help="configuration file (default: the embedded demo)")
    check.set_defaults(command=_check_command)

    config = commands.add_parser("config", help="about the configuration file")
    config_commands = config.add_subparsers(required=True, metavar="WHAT")
    schema = config_commands.add_parser("schema", help="print the configuration's JSON Schema (draft 2020-12)")
    schema.set_defaults(command=_schema_command)
    return parser


def _add_serve_parser(commands: Any) -> None:
    """``serve``: the service, its listening address, store, workers and logs."""
    serve = commands.add_parser("serve", help="run the websocket service")
    serve.add_argument("--config", help="configuration file (default: the embedded demo)")
    serve.add_argument("--host", type=utf8_text, help="address to listen on (default: the config's, else 127.0.0.1)")
    serve.add_argument("--port", type=port_number, help="port to listen on (default: the config's, else 8765)")
    serve.add_argument(
        "--store",
        choices=("memory", "sqlite"),
        help="where threads live: 'memory' (gone when the service stops) or 'sqlite' (the default file "
        f"{default_sqlite_path()}); default: the config's 'store', else sqlite",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes sharing the port through SO_REUSEPORT, each a whole runtime; the parent restarts "
        "one that dies; more than 1 needs a shared store (sqlite or redis) (default: 1)",
    )
    serve.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)  # a worker of --workers
    serve.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
        help="the least severe records logged (default: INFO)",
    )
    serve.add_argument(
        "--log-format", default="text", choices=LOG_FORMATS, help="text, or json: one object per line (default: text)"
    )
    serve.set_defaults(command=_serve_command)


def _add_client_parsers(commands: Any) -> None:
    """``chat`` and ``history``: a client of a running service."""
    ask = commands.add_parser("chat", help="ask the service a question and print the answer as it streams")
    ask.add_argument("question", type=utf8_text)
    _add_connection_options(ask)
    ask.add_argument("--json", action="store_true", help="print the raw events, one JSON object a line")
    ask.add_argument("--assistant", type=utf8_text, help="assistant to ask (default: the service's default)")
    ask.add_argument(
        "--thread", type=utf8_text, help="continue this thread (default: a new one; its id is printed on stderr)"
    )
    ask.set_defaults(command=_chat_command, parser=ask)

    show = commands.add_parser("history", help="print a thread the service keeps: its messages and runs")
    show.add_argument("thread", type=utf8_text)
    _add_connection_options(show)
    show.add_argument("--json", action="store_true", help="print the MESSAGES_SNAPSHOT frame as it came")
    show.set_defaults(command=_history_command, parser=show)


def _add_connection_options(parser: argparse.ArgumentParser) -> None:
    """Where a client finds the service, and its token."""
    parser.add_argument(
        "--url", type=utf8_text, default=DEFAULT_URL, help=f"websocket URL of the service (default: {DEFAULT_URL})"
    )
    parser.add_argument("--token", type=utf8_text, help=f"bearer token (default: ${TOKEN_ENV})")


def _check_command(args: argparse.Namespace) -> int:
    _import_from_the_current_directory()  # `check` reads a file as `serve` does, module servers included
    source = args.config or "the embedded default"
    try:
        config = load_config(args.config) if args.config else default_config()
        problems = config_problems(config)
        if (key_problem := secret_key_problem(config, service_store(config.store, None))) is not None:
            problems.append(key_problem)
    except ConfigError as error:
        problems = list(error.problems)
    for problem in problems:
        print(f"{source}: {problem}")
    if problems:
        return 2
    print(f"{source}: ok ({len(config.servers)} server(s), {len(config.assistants)} assistant(s))")
    return 0


def _schema_command(args: argparse.Namespace) -> int:
    print(schema_text(), end="")
    return 0


def _chat_command(args: argparse.Namespace) -> int:
    run = partial(
        chat,
        args.question,
        url=args.url,
        token=_token(args),
        assistant=args.assistant,
        thread_id=args.thread,
        raw=args.json,
    )
    try:
        return trio.run(run)
    except KeyboardInterrupt:  # leaving closes the connection, which cancels the run on the service
        print(file=sys.stderr)
        return 130


def _history_command(args: argparse.Namespace) -> int:
    return trio.run(partial(show_history, args.thread, url=args.url, token=_token(args), raw=args.json))


def _token(args: argparse.Namespace) -> str | None:
    """``--token``, else ``$YAO_ACTORS_TOKEN``, which must be UTF-8 text too (refused as a bad argument)."""
    token: str | None = args.token if args.token is not None else os.environ.get(TOKEN_ENV)
    if token is not None and (problem := not_utf8(token)):
        args.parser.error(f"${TOKEN_ENV}: {problem}")
    return token


def _import_from_the_current_directory() -> None:
    """As `python -m` and uvicorn do: modules in the current directory can be named by `module` and hooks."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())


def _serve_command(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, args.log_format)
    _import_from_the_current_directory()
    try:
        config = load_config(args.config) if args.config else default_config()
        overrides = {"host": args.host, "port": args.port}
        spec = attrs.evolve(config.service, **{k: v for k, v in overrides.items() if v is not None})
        check_listen(spec.host, resolve_credentials(spec))
        store = service_store(config.store, args.store)
        check_workers(args.workers, store)
        check_shared(store, args.workers)
        if (key_problem := secret_key_problem(config, store)) is not None:
            raise ConfigError([key_problem])
        lone = args.workers == 1 and not args.reuse_port  # its SQLite file is its own, unless the config says not
        config = attrs.evolve(config, store=alone(store) if lone else store)
    except ConfigError as error:
        report_config_error(error)
        return 2
    if args.workers > 1:
        try:
            return _serve_workers(args, spec)
        except (ConfigError, ListenError) as error:
            report_start_error(error)
            return 2
    stop_tracing = configure_tracing(os.environ)
    try:
        trio.run(partial(serve_until_signalled, config, spec, reuse_port=args.reuse_port))
    except (*START_ERRORS, BaseExceptionGroup) as error:
        if (errors := start_errors(error)) is None:
            raise
        for each in errors:
            report_start_error(each)
        return 2
    finally:
        if stop_tracing is not None:
            stop_tracing()  # flushes the spans still batched
    return 0


#: What keeps the service from starting that the user can act on: each is said in one line, exit 2.
START_ERRORS: Final = (ConfigError, StoreUnavailable, ListenError)


def start_errors(error: BaseException) -> list[YaoActorsError] | None:
    """The :data:`START_ERRORS` ``error`` is made of (a nursery may have grouped them), or ``None`` if it holds
    anything else (a bug, whose traceback is worth seeing)."""
    if isinstance(error, START_ERRORS):
        return [error]
    if isinstance(error, BaseExceptionGroup):
        matched, rest = error.split(START_ERRORS)
        if matched is not None and rest is None:
            return [leaf for leaf in exception_leaves(matched) if isinstance(leaf, YaoActorsError)]
    return None


def report_start_error(error: YaoActorsError) -> None:
    """Say why the service cannot start, one line per problem on standard error."""
    if isinstance(error, ConfigError):
        report_config_error(error)
        return
    hint = ""
    if isinstance(error, ListenError) and error.errno == errno.EADDRINUSE:
        hint = " (another process listens there: stop it, or choose another --port; 0 picks a free one)"
    print(f"yao-actors: {error}{hint}", file=sys.stderr)


def report_config_error(error: ConfigError) -> None:
    """One line on standard error per problem, each naming the file it is in (as ``check`` prints them)."""
    where = f"{error.source}: " if error.source else ""
    for problem in error.problems:
        print(f"yao-actors: {where}{problem}", file=sys.stderr)


def check_workers(workers: int, store: StoreSpec | None) -> None:
    """``--workers`` is at least 1, and more than 1 only with a store the workers share."""
    if workers < 1:
        raise ConfigError([f"--workers: expected a number of worker processes >= 1, got {workers}"])
    if workers > 1 and (store is None or store.type == "memory"):
        raise ConfigError(
            [
                f"--workers {workers}: the workers must share their threads, so the store must be 'sqlite' (one "
                "machine) or 'redis' (several), not 'memory' (set the config's store, or drop --store memory)"
            ]
        )


def _serve_workers(args: argparse.Namespace, spec: ServiceSpec) -> int:
    """The parent of ``--workers N``: reserve the port, start the workers on it, print one banner, supervise."""
    reserved = reserve_port(spec.host, spec.port)  # port 0: a free one, the same for every worker
    port = reserved.getsockname()[1]
    argv = ["--host", spec.host, "--port", str(port), "--reuse-port"]
    argv += ["--log-level", args.log_level, "--log-format", args.log_format]
    if args.config:
        argv += ["--config", args.config]
    if args.store:
        argv += ["--store", args.store]

    def ready(banners: list[str]) -> None:
        first = banners[0].removeprefix("yao-actors: ")
        print(f"yao-actors: {args.workers} workers (SO_REUSEPORT) {first}", flush=True)

    with reserved:
        return trio.run(serve_workers, worker_command(argv), args.workers, ready)


def service_store(configured: StoreSpec | None, choice: str | None) -> StoreSpec:
    """The service's store: ``--store`` if given, else the config's, else SQLite at :func:`default_sqlite_path`
    (so the service keeps its threads across restarts with no set-up)."""
    if choice == "memory":
        return StoreSpec("memory")
    if choice == "sqlite" and (configured is None or configured.type != "sqlite"):
        return StoreSpec.sqlite()
    return configured or StoreSpec.sqlite()


async def serve_until_signalled(config: Config, spec: ServiceSpec, *, reuse_port: bool = False) -> None:
    """Serve ``config`` until SIGINT or SIGTERM, then shut down gracefully (a second signal stops at once).

    A signal before the service serves stops its start at once (there is nothing to drain yet). Either way every MCP
    server process is stopped. ``reuse_port``: listen with ``SO_REUSEPORT``, as one of several workers on the port.
    """
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            stop = _StopOnSignals(nursery.cancel_scope)
            nursery.start_soon(stop.watch, signals)
            await _serve(config, spec, stop, reuse_port=reuse_port)
            nursery.cancel_scope.cancel()


@attrs.define(eq=False)
class _StopOnSignals:
    """What SIGINT and SIGTERM do: the first once the service serves asks for a graceful shutdown
    (``requested``); one before it serves, or a second, stops at once (cancels ``scope``)."""

    scope: trio.CancelScope
    serving: bool = False
    requested: trio.Event = attrs.field(factory=trio.Event)

    async def watch(self, signals: AsyncIterator[int]) -> None:
        async for _ in signals:
            if self.serving and not self.requested.is_set():
                self.requested.set()
            else:
                self.scope.cancel()


async def _serve(config: Config, spec: ServiceSpec, stop: _StopOnSignals, *, reuse_port: bool) -> None:
    """Start the runtime and the service, print the banner, serve until ``stop`` asks, shut down gracefully."""
    return_large_blocks()  # a run's megabytes go back to the system once freed (service/allocator.py)
    # Listen before the servers start, so a port that is taken is said at once; connections wait in the
    # backlog meanwhile. A worker joins its port only once it can serve (its siblings serve meanwhile).
    listeners = None if reuse_port else await open_listeners(spec.host, spec.port)
    try:
        async with open_runtime(config) as runtime, trio.open_nursery() as nursery:
            if reuse_port:
                listeners = [reuse_port_listener(spec.host, spec.port)]
            service: Service = await nursery.start(partial(serve_service, runtime, spec, listeners=listeners))
            await nursery.start(keep_heap)  # start-up's objects out of the collector's passes (service/heap.py)
            stop.serving = True
            print(_banner(service, config), flush=True)
            await stop.requested.wait()
            await service.shutdown()
            nursery.cancel_scope.cancel()
    finally:
        for listener in listeners or ():
            listener.socket.close()  # the service closed them already, unless it never started


def _banner(service: Service, config: Config) -> str:
    """The one line printed at start: where the service listens and how to try it."""
    token = " --token $YAO_ACTORS_TOKEN" if resolve_token(service.spec) else ""
    url = "" if service.url == DEFAULT_URL else f" --url {service.url}"
    models = sorted({config.models[a.model].provider for a in config.assistants.values() if a.model in config.models})
    model = f" ({', '.join(models)} model)" if models else ""
    store = config.store or StoreSpec()
    redis = urlsplit(store.url or "")  # named without its password
    kept = {"sqlite": f"threads in {store.path}", "redis": f"threads in Redis at {redis.hostname}:{redis.port or 6379}"}
    kept_where = kept.get(store.type, "threads in memory")
    return (
        f"yao-actors: serving {len(config.assistants)} assistant(s){model} on {service.url} ({kept_where}) — try: "
        f'yao-actors chat "{SAMPLE_QUESTION}"{url}{token}, or open {service.page_url} in a browser'
    )

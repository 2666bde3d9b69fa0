"""``yao-actors serve``: read the configuration, choose the store, listen, print the banner, serve until signalled.

With no config, the embedded default (the bundled demo servers and the offline ``demo`` model, or a real model from
``OPENAI_*``) on 127.0.0.1:8765. The current directory is on the import path, so the config's ``module`` servers and
hooks may live there. It prints one line saying where it listens and how to try it, logs to standard error, sends
traces where the ``OTEL_*`` variables say (with the ``otel`` extra installed), and on SIGINT/SIGTERM shuts down
gracefully (a second signal stops at once) and exits 0 with every MCP server process stopped. ``--workers N`` runs
N such processes on the port through ``SO_REUSEPORT``, supervised by this one (:mod:`yao_actors.cli.workers`). The
command line itself is :mod:`yao_actors.cli.commands`, which imports this module only for ``serve``.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Final, TypeVar
from urllib.parse import urlsplit

import attrs
import trio

from yao_actors.auth.keys import secret_key_problem
from yao_actors.cli.chat import DEFAULT_URL
from yao_actors.cli.problems import report_config_error
from yao_actors.cli.workers import reserve_port, reuse_port_listener, serve_workers, worker_command
from yao_actors.config import (
    Config,
    InMemoryTransport,
    ServerSpec,
    ServiceSpec,
    StdioTransport,
    default_config,
    load_config,
)
from yao_actors.config.providers import unused_openai_variables
from yao_actors.errors import ConfigError, ListenError, StoreUnavailable, YaoActorsError, exception_leaves
from yao_actors.observability.logs import configure_logging
from yao_actors.observability.otel_setup import configure_tracing
from yao_actors.runtime import open_runtime
from yao_actors.service import Service, serve_service
from yao_actors.service.allocator import return_large_blocks
from yao_actors.service.auth import check_listen, resolve_credentials, resolve_token
from yao_actors.service.heap import keep_heap
from yao_actors.service.listening import open_listeners
from yao_actors.service.protocol import DEFAULT_ASSISTANT
from yao_actors.specs import StoreSpec
from yao_actors.store.spec import alone, check_shared, default_store_name, service_store

T = TypeVar("T")

#: The question the service suggests trying with the bundled weather server (the seed's example).
SAMPLE_QUESTION = "北京今天适合穿什么?"
#: The question it suggests for other configs: any model can answer it from its tools.
GENERIC_QUESTION = "Which tools can you use?"
#: The module of the bundled weather server.
DEMO_WEATHER_MODULE = "yao_actors.demo.weather"


def import_from_the_current_directory() -> None:
    """As `python -m` and uvicorn do: modules in the current directory can be named by `module` and hooks."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())


def serve_command(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, args.log_format)
    import_from_the_current_directory()
    try:
        environ = model_environ(args.model)
        config = load_config(args.config, environ=environ) if args.config else default_config(environ=environ)
        overrides = {"host": args.host, "port": args.port}
        spec = attrs.evolve(config.service, **{k: v for k, v in overrides.items() if v is not None})
        check_listen(spec.host, resolve_credentials(spec))
        store = service_store(config.store, args.store, name=default_store_name(args.config, spec.port))
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
        failed = run_or_report(partial(serve_until_signalled, config, spec, reuse_port=args.reuse_port))
    finally:
        if stop_tracing is not None:
            stop_tracing()  # flushes the spans still batched
    return 0 if failed is None else failed


#: What keeps the service from starting that the user can act on: each is said in one line, exit 2.
START_ERRORS: Final = (ConfigError, StoreUnavailable, ListenError)


def run_or_report(fn: Callable[[], Awaitable[T]]) -> T | int:
    """``trio.run(fn)``'s result; 2 once each start error (:data:`START_ERRORS`) that ended it is said in a line."""
    try:
        return trio.run(fn)
    except (*START_ERRORS, BaseExceptionGroup) as error:
        if (errors := start_errors(error)) is None:
            raise
        for each in errors:
            report_start_error(each)
        return 2


def model_environ(model: str | None) -> dict[str, str]:
    """The environment the config is read with: ``--model`` stands for ``OPENAI_MODEL`` (the model of the default
    assistant when the config declares none)."""
    return {**os.environ, "OPENAI_MODEL": model} if model else dict(os.environ)


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
    if args.model:
        argv += ["--model", args.model]

    def ready(banners: list[str]) -> None:
        first = banners[0].removeprefix("yao-actors: ")
        print(f"yao-actors: {args.workers} workers (SO_REUSEPORT) {first}", flush=True)

    with reserved:
        return trio.run(serve_workers, worker_command(argv), args.workers, ready)


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
    """The one line printed at start: where the service listens, with which model(s), and how to try it."""
    token = " --token $YAO_ACTORS_TOKEN" if resolve_token(service.spec) else ""
    url = "" if service.url == DEFAULT_URL else f" --url {service.url}"
    assistant = "" if DEFAULT_ASSISTANT in config.assistants else f" --assistant {next(iter(config.assistants), '?')}"
    store = config.store or StoreSpec()
    redis = urlsplit(store.url or "")  # named without its password
    kept = {"sqlite": f"threads in {store.path}", "redis": f"threads in Redis at {redis.hostname}:{redis.port or 6379}"}
    kept_where = kept.get(store.type, "threads in memory")
    return (  # the service's own addresses first: scripts read the first ws:// and http:// of this line
        f"yao-actors: serving {len(config.assistants)} assistant(s) on {service.url} ({kept_where}) — try: "
        f'yao-actors chat "{suggested_question(config)}"{url}{assistant}{token}, or open {service.page_url} in a '
        f"browser — {models_said(config)}{unused_variables_said(config)}"
    )


def models_said(config: Config) -> str:
    """The assistants' models as the banner says them: ``model qwen2.5 at http://127.0.0.1:11434/v1`` for an
    OpenAI-compatible one (where the questions go), ``model demo (offline)`` for a stand-in."""
    said = []
    for model_id in dict.fromkeys(a.model for a in config.assistants.values()):
        spec = config.models.get(model_id)
        if spec is not None and spec.provider == "openai":
            said.append(f"{spec.model} at {spec.base_url}")
        else:
            said.append(f"{spec.provider if spec is not None else model_id} (offline)")
    return f"model{'s' if len(said) > 1 else ''} {', '.join(said)}" if said else "no model"


def suggested_question(config: Config) -> str:
    """The question the banner suggests: the demo's weather question when the assistant asked by default has the
    bundled weather server (the one scenario the offline ``demo`` model plays), else one any assistant can answer."""
    assistant = config.assistants.get(DEFAULT_ASSISTANT) or next(iter(config.assistants.values()), None)
    if assistant is None:
        return GENERIC_QUESTION
    servers = (config.servers.get(ref.server_id) for ref in assistant.servers)
    return SAMPLE_QUESTION if any(_runs_demo_weather(spec) for spec in servers) else GENERIC_QUESTION


def _runs_demo_weather(spec: ServerSpec | None) -> bool:
    """Whether a server is the bundled weather server, as a subprocess or in this process."""
    transport = None if spec is None else spec.transport
    if isinstance(transport, StdioTransport):
        return DEMO_WEATHER_MODULE in transport.args
    if isinstance(transport, InMemoryTransport):
        return (transport.reference or "").partition(":")[0] == DEMO_WEATHER_MODULE
    return False


def unused_variables_said(config: Config) -> str:
    """A note when an assistant's model is an offline stand-in while ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` are
    set, choosing nothing (neither ``OPENAI_MODEL`` nor ``--model`` named a model)."""
    offline = any(
        config.models[a.model].provider != "openai" if a.model in config.models else True
        for a in config.assistants.values()
    )
    unused = unused_openai_variables()
    if not (offline and unused):
        return ""
    return (
        f" ({' and '.join(unused)} set but not used: set OPENAI_MODEL or pass --model to use an OpenAI-compatible "
        "model)"
    )

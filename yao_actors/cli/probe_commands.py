"""The commands that look at a configuration's servers and models: ``check [--connect]``, ``tools`` and ``call``.

``check [--config FILE] [--connect] [--strict] [--timeout S]`` validates a file as ``serve`` would read it, then what
will fail first (a stdio command not on ``PATH``, an unset ``api_key_env``), and says as warnings what it noted
without refusing (another client's keys it ignores); with ``--connect`` it also reaches every server and model once
within the deadline and says how each answered, and warns of the tools each assistant's ``max_tools`` hides, and how
to choose them; it also says what of a tool's schemas is not enforced (neither a failure nor a warning: such a tool's
calls go to its server unchecked, and nothing in the file can change it). One line per finding; exit 0 when nothing
failed, 2 otherwise (``--strict``: warnings too).

``tools [--config FILE] [--server S] [--json]`` lists the tools of the servers (names, titles, servers) and, for each
assistant, the name its model is offered a tool under or why it is not, and what of a tool's schemas is not enforced
(a ``$ref`` outside the schema, a pattern the linear-time engine refuses), and the tool's app (MCP Apps: its ``ui://``
resource and who may call it); exit 1 when a server could not be reached.

``call SERVER TOOL ['{json}'] [--accept-defaults]`` starts that one server and calls the tool with the arguments; the
result is printed as JSON; exit 1 when the call failed. What the tool asks meanwhile is asked on the terminal as
``chat`` asks it, or accepted with the form's defaults (:mod:`yao_actors.cli.call_questions`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, TypeVar

import trio

from yao_actors.auth.keys import secret_key_problem
from yao_actors.cli.call_questions import call_input
from yao_actors.cli.probe import (
    Report,
    ToolOffer,
    cap_warnings,
    open_probe,
    probe_model,
    server_reports,
    tool_offers,
)
from yao_actors.cli.problems import report_config_error
from yao_actors.config import Config, config_problems, default_config, load_config
from yao_actors.config.preflight import preflight_problems
from yao_actors.errors import ConfigError
from yao_actors.specs import ModelSpec, StoreSpec
from yao_actors.store.spec import default_store_name, service_store
from yao_actors.tools.input_requests import InputHandler
from yao_actors.tools.tool_server import CallOptions, ServerState

T = TypeVar("T")


def _load(args: argparse.Namespace) -> Config:
    """The configuration as ``serve`` reads it (modules of the current directory importable)."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    return load_config(args.config) if args.config else default_config()


def _logins(args: argparse.Namespace, config: Config) -> StoreSpec:
    """The store ``serve`` and ``yao-actors auth login`` use with this config: where its servers' logins are."""
    return service_store(config.store, None, name=default_store_name(args.config, config.service.port))


def _run_quietly(fn: Callable[[], Awaitable[T]]) -> T:
    """``trio.run(fn)`` with logging off: what the servers' actors and the SDK log is said once, in the reports."""
    with _logging_off():
        return trio.run(fn)


@contextmanager
def _logging_off() -> Iterator[None]:
    before = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(before)


def check_command(args: argparse.Namespace) -> int:
    source = args.config or "the embedded default"
    warnings: list[str] = []
    try:
        with _logging_off():  # the file's notes are printed below, as warnings
            config = _load(args)
        warnings += config.notes
        problems = config_problems(config) or preflight_problems(config)
        store = _logins(args, config)
        if (key_problem := secret_key_problem(config, store)) is not None:
            problems.append(key_problem)
    except ConfigError as error:
        problems = list(error.problems)
    for line in [*problems, *(f"warning: {w}" for w in warnings)]:
        print(f"{source}: {line}")
    if problems:
        return 2
    if args.connect:
        try:
            connecting = partial(_connect_reports, config, args.timeout, source, _logins(args, config))
            failed, capped = _run_quietly(connecting)
        except ConfigError as error:
            failed, capped = True, []
            for problem in error.problems:
                print(f"{source}: {problem}")
        for warning in capped:
            print(f"{source}: warning: {warning}")
        warnings += capped
        if failed:
            return 2
    if args.strict and warnings:
        print(f"{source}: --strict: {len(warnings)} warning(s) count as problems")
        return 2
    print(f"{source}: ok ({len(config.servers)} server(s), {len(config.assistants)} assistant(s))")
    return 0


async def _connect_reports(config: Config, deadline_s: float, source: str, logins: StoreSpec) -> tuple[bool, list[str]]:
    """Print how each server and model answered; whether any failed, and what the tool caps leave out (warnings)."""
    used = {a.model for a in config.assistants.values()} | {a.fallback_model for a in config.assistants.values()}
    reports: list[Report] = []
    async with open_probe(config, deadline_s=deadline_s, logins=logins) as runtime:
        reports += await server_reports(runtime)
        async with trio.open_nursery() as nursery:
            for model_id, spec in config.models.items():
                if model_id in used:
                    nursery.start_soon(_probe_model, reports, spec, deadline_s)
        capped = await cap_warnings(runtime)
    for report in reports:
        print(f"{source}: {report.what}: {report.detail}")
        for note in report.notes:
            print(f"{source}: {report.what}: {note}")
    return not all(report.ok for report in reports), capped


async def _probe_model(reports: list[Report], spec: ModelSpec, deadline_s: float) -> None:
    reports.append(await probe_model(spec, deadline_s=deadline_s))


def tools_command(args: argparse.Namespace) -> int:
    try:
        config = _load(args)
        unknown = [server for server in args.server or () if server not in config.servers]
        if unknown:
            raise ConfigError([f"--server {s}: no such server (known: {', '.join(config.servers)})" for s in unknown])
        listing = partial(_list_tools, config, args.timeout, args.server, args.json, _logins(args, config))
        return _run_quietly(listing)
    except ConfigError as error:
        return report_config_error(error)


async def _list_tools(
    config: Config, deadline_s: float, only: Iterable[str] | None, raw: bool, logins: StoreSpec
) -> int:
    async with open_probe(config, deadline_s=deadline_s, logins=logins) as runtime:
        reports = await server_reports(runtime)
        offers = [offer for offer in await tool_offers(runtime) if only is None or offer.server in only]
    reports = [r for r in reports if only is None or r.what.removeprefix("server ") in only]
    if raw:
        servers = {r.what.removeprefix("server "): {"ok": r.ok, "detail": r.detail} for r in reports}
        tools = [
            {"server": o.server, "tool": o.tool, "title": o.title, "description": o.description,
             "inputSchema": dict(o.input_schema), "offered": dict(o.offered), "not_offered": dict(o.not_offered),
             "schema_notes": list(o.schema_notes), "app": _app(o), "taskSupport": o.tasks}
            for o in offers
        ]  # fmt: skip
        print(json.dumps({"servers": servers, "tools": tools}, ensure_ascii=False, indent=2))
    else:
        for report in reports:
            print(f"{report.what}: {report.detail}", file=sys.stdout if report.ok else sys.stderr)
        for offer in offers:
            print(f"\n{offer.server}.{offer.tool}" + (f" — {offer.title}" if offer.title else ""))
            for assistant_id, name in offer.offered.items():
                print(f"  {assistant_id}: offered as {name}")
            for assistant_id, why in offer.not_offered.items():
                print(f"  {assistant_id}: not offered: {why}")
            if offer.tasks != "forbidden":
                print(f"  runs as an MCP task: {offer.tasks}")
            for note in offer.schema_notes:
                print(f"  schema: {note}")
            if (app := _app(offer)) is not None:
                print(f"  app: {_app_line(app)}")
    return 0 if all(report.ok for report in reports) else 1


def _app(offer: ToolOffer) -> dict[str, Any] | None:
    """What ``tools --json`` says of a tool's app (``None``: the tool says nothing of one)."""
    interface = offer.interface
    if interface.resource_uri is None and interface.for_model and interface.for_app:
        return None
    visibility = [who for who in ("model", "app") if who in interface.visibility]
    return {"resourceUri": interface.resource_uri, "visibility": visibility, "shown": offer.apps}


def _app_line(app: dict[str, Any]) -> str:
    """The ``app:`` line of a tool with an interface, or one only the model or its app may call."""
    who = " and ".join({"model": "the model", "app": "its app"}[name] for name in app["visibility"])
    who += " only" if len(app["visibility"]) == 1 else ""
    text = f"{app['resourceUri']}, called by {who}" if app["resourceUri"] else f"no interface, called by {who}"
    return text if app["shown"] else f"{text} (not shown: the server's apps is off)"


def call_command(args: argparse.Namespace) -> int:
    try:
        arguments = json.loads(args.arguments)
    except json.JSONDecodeError as error:
        args.parser.error(f"ARGUMENTS: not valid JSON: {error}")
    if not isinstance(arguments, dict):
        args.parser.error(f"ARGUMENTS: expected a JSON object, got {args.arguments}")
    try:
        config = _load(args)
        spec = config.servers.get(args.server)
        if spec is None:
            raise ConfigError([f"SERVER {args.server}: no such server (known: {', '.join(config.servers)})"])
        if spec.disabled:
            raise ConfigError([f"SERVER {args.server}: the server is disabled in the configuration"])
        answers = call_input(accept_defaults=args.accept_defaults)
        calling = partial(
            _call, config, args.server, args.tool, arguments, args.timeout, _logins(args, config), answers
        )
        return _run_quietly(calling)
    except ConfigError as error:
        return report_config_error(error)


def _say_progress(tool: str, _done: float, _total: float | None, message: str | None) -> None:
    """A status line on stderr for each progress message of the call (a task's status messages among them)."""
    if message:
        print(f"yao-actors: {tool}: {message}", file=sys.stderr, flush=True)


async def _call(
    config: Config,
    server_id: str,
    tool: str,
    arguments: dict[str, Any],
    deadline_s: float,
    logins: StoreSpec,
    answers: InputHandler,
) -> int:
    only = [server_id]
    async with open_probe(config, deadline_s=deadline_s, only=only, logins=logins, input_handler=answers) as runtime:
        handle = runtime.servers[server_id]
        if handle.state is not ServerState.READY:
            print(f"yao-actors: {handle.statistics().last_error}", file=sys.stderr)
            return 1
        names = [t.name for t in await handle.list_tools()]
        if tool not in names:
            raise ConfigError([f"TOOL {tool}: server {server_id!r} has no such tool (its tools: {', '.join(names)})"])
        outcome = await handle.call_tool(tool, arguments, CallOptions(progress=partial(_say_progress, tool)))
    if not outcome.ok:  # its result, if any, is the same text
        print(f"yao-actors: {outcome.kind}: {outcome.error}", file=sys.stderr)
        return 1
    print(json.dumps(outcome.result, ensure_ascii=False, indent=2))
    return 0

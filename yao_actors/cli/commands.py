"""The command line of ``yao-actors`` (entered through :func:`yao_actors.cli.main`): its parser, and the commands
of a client of the service.

``serve`` runs the service (:mod:`yao_actors.cli.serving`); ``chat ["question"] [--url URL] [--token TOKEN] [--json]
[--assistant NAME] [--thread ID]`` asks it (without a question: a conversation, :mod:`yao_actors.cli.chat_repl`; with
``--config FILE`` / ``--model ID``: a service of its own, :mod:`yao_actors.cli.chat_local`) and ``history ID [--url URL]
[--token TOKEN] [--json]`` prints a thread it keeps (:mod:`yao_actors.cli.chat`; the token defaults to
``YAO_ACTORS_TOKEN``); ``check [--config FILE] [--connect]``,
``tools`` and ``call SERVER TOOL '{json}'`` look at a configuration's servers and models
(:mod:`yao_actors.cli.probe_commands`); ``bench --call SERVER__TOOL ...`` times calls of your own tools
(:mod:`yao_actors.cli.bench`); ``config schema`` prints the configuration's JSON Schema; ``--version`` the version.

Building the parser imports only what a client needs (the standard library, Trio, the chat client): each other
command's module is imported when that command runs (:func:`later`), so ``chat`` starts without importing the
service, the MCP SDK or the runtime.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Final, NoReturn

import trio

from yao_actors import __version__
from yao_actors.cli.auth_options import add_auth_parser
from yao_actors.cli.bench_options import add_bench_parser
from yao_actors.cli.chat import DEFAULT_URL, Hold, chat, show_history
from yao_actors.cli.client_files import CONFIG_HELP, config_file
from yao_actors.observability.logs import LOG_FORMATS
from yao_actors.service.auth import MAX_PORT, TOKEN_ENV
from yao_actors.specs import default_sqlite_path

#: What ``yao-actors --help`` says first.
DESCRIPTION: Final = "Serve language models the tools of MCP servers over a websocket and POST /agui; ask the service."
#: Seconds ``check --connect``, ``tools`` and ``call`` give each server to connect and each model to answer.
DEFAULT_PROBE_TIMEOUT: Final = 15.0


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
    add_bench_parser(commands, later("yao_actors.cli.bench", "bench_command"))
    _add_probe_parsers(commands)
    add_auth_parser(commands, later)

    config = commands.add_parser("config", help="about the configuration file")
    config_commands = config.add_subparsers(required=True, metavar="WHAT")
    schema = config_commands.add_parser("schema", help="print the configuration's JSON Schema (draft 2020-12)")
    schema.set_defaults(command=_schema_command)
    return parser


def later(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """The command ``name`` of ``module``, imported only when it runs (``chat`` need not import the service)."""

    def command(args: argparse.Namespace) -> int:
        code: int = getattr(importlib.import_module(module), name)(args)
        return code

    return command


def _add_serve_parser(commands: Any) -> None:
    """``serve``: the service, its listening address, store, workers and logs."""
    serve = commands.add_parser("serve", help="run the websocket service")
    serve.add_argument("--config", type=config_file, help=CONFIG_HELP)
    serve.add_argument("--host", type=utf8_text, help="address to listen on (default: the config's, else 127.0.0.1)")
    serve.add_argument("--port", type=port_number, help="port to listen on (default: the config's, else 8765)")
    serve.add_argument(
        "--model",
        type=utf8_text,
        help="use this OpenAI-compatible model (at $OPENAI_BASE_URL, default OpenAI's, with $OPENAI_API_KEY) as the "
        "default assistant's, as $OPENAI_MODEL does, when the config declares no 'models' (default: $OPENAI_MODEL, "
        "else the offline demo model)",
    )
    serve.add_argument(
        "--store",
        choices=("memory", "sqlite"),
        help="where threads live: 'memory' (gone when the service stops) or 'sqlite' (by default a file in "
        f"{default_sqlite_path().parent} named after the config file, or the port; printed at start); default: the "
        "config's 'store', else sqlite",
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
    serve.set_defaults(command=later("yao_actors.cli.serving", "serve_command"))


def _add_client_parsers(commands: Any) -> None:
    """``chat`` and ``history``: a client of a running service."""
    ask = commands.add_parser(
        "chat",
        help="ask the service a question and print the answer as it streams; without one, a conversation: a "
        "message a line (from the terminal, or standard input), /help for commands",
    )
    ask.add_argument("question", type=utf8_text, nargs="?", help="one question (default: a conversation)")
    _add_connection_options(ask, url_default=None)
    ask.add_argument(
        "--config", help="serve this configuration here, in this process, instead of asking a running service"
    )
    ask.add_argument(
        "--model",
        type=utf8_text,
        help="with a service of its own (see --config; default: the embedded demo): every assistant uses this model, "
        "e.g. 'direct', which calls what you write: call server.tool key=value",
    )
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


def _add_connection_options(parser: argparse.ArgumentParser, *, url_default: str | None = DEFAULT_URL) -> None:
    """Where a client finds the service, and its token (``url_default`` ``None``: told apart from not given)."""
    parser.add_argument(
        "--url", type=utf8_text, default=url_default, help=f"websocket URL of the service (default: {DEFAULT_URL})"
    )
    parser.add_argument("--token", type=utf8_text, help=f"bearer token (default: ${TOKEN_ENV})")


def _add_probe_parsers(commands: Any) -> None:
    """``check``, ``tools`` and ``call`` (:mod:`yao_actors.cli.probe_commands`)."""
    check = commands.add_parser(
        "check", help="validate a configuration file (--connect: and reach its servers and models); exit 0 or 2"
    )
    _add_config_options(check)
    check.add_argument("--connect", action="store_true", help="start every server and ask every model once")
    check.add_argument(
        "--strict", action="store_true", help="warnings (keys ignored, tools the max_tools cap hides) fail too"
    )
    check.set_defaults(command=later("yao_actors.cli.probe_commands", "check_command"))

    tools = commands.add_parser("tools", help="list the servers' tools and which assistants offer them (and why not)")
    _add_config_options(tools)
    tools.add_argument("--server", action="append", help="only this server's tools (may be repeated)")
    tools.add_argument("--json", action="store_true", help="print one JSON object")
    tools.set_defaults(command=later("yao_actors.cli.probe_commands", "tools_command"))

    call = commands.add_parser("call", help="call one tool of one server and print its result as JSON")
    call.add_argument("server")
    call.add_argument("tool")
    call.add_argument("arguments", nargs="?", default="{}", help="the tool's arguments as a JSON object (default {})")
    call.add_argument(
        "--accept-defaults",
        action="store_true",
        help="answer a form the tool asks by accepting its defaults, without asking (default: ask on the terminal)",
    )
    _add_config_options(call)
    call.set_defaults(command=later("yao_actors.cli.probe_commands", "call_command"), parser=call)


def _add_config_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=config_file, help=CONFIG_HELP)
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_PROBE_TIMEOUT,
        help=f"seconds each server gets to connect and each model to answer (default: {DEFAULT_PROBE_TIMEOUT:g})",
    )


def _schema_command(args: argparse.Namespace) -> int:
    from yao_actors.config.schema import schema_text  # the configuration's reader, for this command only

    print(schema_text(), end="")
    return 0


def _chat_command(args: argparse.Namespace) -> int:
    local = args.config is not None or args.model is not None
    if local and args.url is not None:
        args.parser.error("--url asks a running service; --config and --model serve one here: give one or the other")

    async def converse(url: str, token: str | None) -> int:
        options = {"assistant": args.assistant, "thread_id": args.thread, "raw": args.json}
        if args.question is not None:
            question: str | Hold = args.question
        else:
            from yao_actors.cli.chat_repl import hold_conversation  # the conversation, for this form only

            question = hold_conversation
        # A service of its own keeps its threads in memory: nothing to continue later.
        return await chat(question, url=url, token=token, lasting=not local, **options)

    try:
        if local:
            from yao_actors.cli.chat_local import run_locally  # the runtime and the service, for this form only

            return run_locally(args, converse)
        return trio.run(converse, args.url or DEFAULT_URL, _token(args))
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

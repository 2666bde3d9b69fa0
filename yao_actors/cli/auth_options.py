"""The options of ``yao-actors auth`` (the commands are in :mod:`.auth`): only what building the parser needs, so the
other commands do not import the OAuth client."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def add_auth_parser(commands: Any, later: Callable[[str, str], Callable[[argparse.Namespace], int]]) -> None:
    """Add ``auth`` and its subcommands to the ``yao-actors`` parser's subparsers; ``later(module, name)`` is a
    command imported when it runs (:mod:`.auth` has them)."""
    auth = commands.add_parser("auth", help="log the service in to MCP servers behind OAuth (mcpServers.<id>.auth)")
    subcommands = auth.add_subparsers(required=True, metavar="WHAT")
    log_in = subcommands.add_parser("login", help="print the authorization URL, wait for the browser, keep tokens")
    log_in.add_argument("server", help="the server's id in mcpServers")
    log_in.add_argument("--port", type=int, default=0, help="loopback port of the redirect URI (default: any free)")
    log_in.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the browser (default 300)")
    log_in.set_defaults(command=later("yao_actors.cli.auth", "login_command"))
    status = subcommands.add_parser("status", help="which OAuth servers are logged in")
    status.set_defaults(command=later("yao_actors.cli.auth", "status_command"))
    log_out = subcommands.add_parser("logout", help="forget a server's tokens")
    log_out.add_argument("server", help="the server's id in mcpServers")
    log_out.add_argument(
        "--principal", help="forget this principal's own tokens (a server with auth.identity 'principal')"
    )
    log_out.set_defaults(command=later("yao_actors.cli.auth", "logout_command"))
    for parser in (log_in, status, log_out):
        parser.add_argument("--config", required=True, help="configuration file (its mcpServers and store)")

"""``yao-actors auth login SERVER | status | logout SERVER [--config F]``: the service's logins to OAuth servers.

The tokens go to the store the config's ``store`` names (SQLite at the default path without one, as for
``serve``), sealed under ``store.secret_key``: the service reads them from there. ``login`` prints the
authorization URL and waits (``--timeout``) for the browser to come back to its loopback redirect URI
(``--port``, default any free one); ``status`` says, for each server with ``auth``, whether it is logged in and
when its access token expires (never a token); ``logout`` forgets the server's tokens.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from yao_actors.auth.keys import oauth_of, oauth_servers, secret_key_problem
from yao_actors.auth.login import login, oauth_server
from yao_actors.auth.vault import SERVICE_IDENTITY, TokenVault, open_vault
from yao_actors.config import Config, load_config
from yao_actors.errors import ConfigError, YaoActorsError
from yao_actors.specs import StoreSpec
from yao_actors.store import open_store


def add_auth_parser(commands: Any) -> None:
    """Add ``auth`` and its subcommands to the ``yao-actors`` parser's subparsers."""
    auth = commands.add_parser("auth", help="log the service in to MCP servers behind OAuth (mcpServers.<id>.auth)")
    subcommands = auth.add_subparsers(required=True, metavar="WHAT")
    log_in = subcommands.add_parser("login", help="print the authorization URL, wait for the browser, keep tokens")
    log_in.add_argument("server", help="the server's id in mcpServers")
    log_in.add_argument("--port", type=int, default=0, help="loopback port of the redirect URI (default: any free)")
    log_in.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the browser (default 300)")
    log_in.set_defaults(command=_login_command)
    status = subcommands.add_parser("status", help="which OAuth servers are logged in")
    status.set_defaults(command=_status_command)
    log_out = subcommands.add_parser("logout", help="forget a server's tokens")
    log_out.add_argument("server", help="the server's id in mcpServers")
    log_out.set_defaults(command=_logout_command)
    for parser in (log_in, status, log_out):
        parser.add_argument("--config", required=True, help="configuration file (its mcpServers and store)")


def _with_vault(args: argparse.Namespace, work: Callable[[Config, TokenVault], Awaitable[int]]) -> int:
    """Load the config, open its store and vault, run ``work``; errors as one line each on standard error."""
    try:
        config = load_config(args.config)
        store_spec = config.store or StoreSpec.sqlite()  # as `serve` has it
        if (problem := secret_key_problem(config, store_spec)) is not None:
            raise ConfigError([problem], source=args.config)

        async def main() -> int:
            async with open_store(store_spec) as store:
                secret_key = store_spec.secret_key
                return await work(config, open_vault(store, secret_key))

        return trio.run(main)
    except ConfigError as error:
        where = f"{error.source}: " if error.source else ""
        for problem in error.problems:
            print(f"yao-actors: {where}{problem}", file=sys.stderr)
        return 2
    except YaoActorsError as error:
        print(f"yao-actors: {error}", file=sys.stderr)
        return 1
    except trio.TooSlowError:
        print(f"yao-actors: no authorization came back within {args.timeout:g}s", file=sys.stderr)
        return 1


def _login_command(args: argparse.Namespace) -> int:
    async def work(config: Config, vault: TokenVault) -> int:
        spec = oauth_server(config, args.server)
        tools = await login(spec, vault, say=lambda text: print(text, flush=True), port=args.port, timeout=args.timeout)
        print(f"logged in to {spec.id!r}: {tools} tool(s); the tokens are in the store", flush=True)
        return 0

    return _with_vault(args, work)


def _status_command(args: argparse.Namespace) -> int:
    async def work(config: Config, vault: TokenVault) -> int:
        now = time.time()
        for server_id in oauth_servers(config):
            auth = oauth_of(config.servers[server_id])
            if auth is not None and auth.identity == "principal":
                print(f"{server_id}: identity 'principal' is not served by this version yet")
                continue
            try:
                grant = await vault.load(server_id, SERVICE_IDENTITY)
            except YaoActorsError as error:
                print(f"{server_id}: {error}")
                continue
            if grant.tokens is None:
                print(f"{server_id}: not logged in (yao-actors auth login {server_id})")
                continue
            left = "" if grant.expires_at is None else f", access token expires in {grant.expires_at - now:.0f}s"
            refresh = ", refreshable" if grant.tokens.refresh_token else ""
            usable = "logged in" if grant.usable(now) else "login expired"
            print(f"{server_id}: {usable}{left}{refresh}")
        return 0

    return _with_vault(args, work)


def _logout_command(args: argparse.Namespace) -> int:
    async def work(config: Config, vault: TokenVault) -> int:
        spec = oauth_server(config, args.server)
        forgotten = await vault.forget(spec.id, SERVICE_IDENTITY)
        print(f"logged out of {spec.id!r}" if forgotten else f"{spec.id!r} was not logged in")
        return 0

    return _with_vault(args, work)

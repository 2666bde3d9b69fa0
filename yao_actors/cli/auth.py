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
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import trio

from yao_actors.auth.keys import oauth_of, oauth_servers, secret_key_problem
from yao_actors.auth.login import login, oauth_server
from yao_actors.auth.vault import PRINCIPAL_PREFIX, SERVICE_IDENTITY, TokenVault, open_vault, principal_identity
from yao_actors.cli.problems import report_config_error
from yao_actors.config import Config, load_config
from yao_actors.errors import ConfigError, YaoActorsError
from yao_actors.store import open_store
from yao_actors.store.spec import default_store_name, service_store


@asynccontextmanager
async def open_service_vault(config: Config, config_path: str | None) -> AsyncIterator[TokenVault]:
    """The vault of the store ``serve`` uses with ``config`` (read from ``config_path``): where the service's logins
    are kept. :class:`ConfigError` when that store needs a ``store.secret_key`` the config lacks."""
    # The store `serve` uses with this config (its default SQLite file is named after the config file).
    store_spec = service_store(config.store, None, name=default_store_name(config_path, config.service.port))
    if (problem := secret_key_problem(config, store_spec)) is not None:
        raise ConfigError([problem], source=config_path)
    async with open_store(store_spec) as store:
        yield open_vault(store, store_spec.secret_key)


def _with_vault(args: argparse.Namespace, work: Callable[[Config, TokenVault], Awaitable[int]]) -> int:
    """Load the config, open its store and vault, run ``work``; errors as one line each on standard error."""
    try:
        config = load_config(args.config)

        async def main() -> int:
            async with open_service_vault(config, args.config) as vault:
                return await work(config, vault)

        return trio.run(main)
    except ConfigError as error:
        return report_config_error(error)
    except YaoActorsError as error:
        print(f"yao-actors: {error}", file=sys.stderr)
        return 1
    except trio.TooSlowError:
        print(f"yao-actors: no authorization came back within {args.timeout:g}s", file=sys.stderr)
        return 1


def login_command(args: argparse.Namespace) -> int:
    async def work(config: Config, vault: TokenVault) -> int:
        spec = oauth_server(config, args.server)
        tools = await login(spec, vault, say=lambda text: print(text, flush=True), port=args.port, timeout=args.timeout)
        print(f"logged in to {spec.id!r}: {tools} tool(s); the tokens are in the store", flush=True)
        return 0

    return _with_vault(args, work)


def status_command(args: argparse.Namespace) -> int:
    async def work(config: Config, vault: TokenVault) -> int:
        now = time.time()
        for server_id in oauth_servers(config):
            auth = oauth_of(config.servers[server_id])
            if auth is not None and auth.identity == "principal":
                print(await _principals_status(vault, server_id, now))
                continue
            if auth is not None and not auth.needs_login:
                print(f"{server_id}: {auth.type}: gets its tokens itself from {auth.issuer}, no login")
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


def logout_command(args: argparse.Namespace) -> int:
    async def work(config: Config, vault: TokenVault) -> int:
        if args.principal is not None:  # one principal's own tokens, of a server with identity "principal"
            spec = oauth_server(config, args.server, identity="principal")
            forgotten = await vault.forget(spec.id, principal_identity(args.principal))
            who = f"principal {args.principal!r}"
            print(f"{who} logged out of {spec.id!r}" if forgotten else f"{who} was not logged in to {spec.id!r}")
            return 0
        spec = oauth_server(config, args.server)
        forgotten = await vault.forget(spec.id, SERVICE_IDENTITY)
        print(f"logged out of {spec.id!r}" if forgotten else f"{spec.id!r} was not logged in")
        return 0

    return _with_vault(args, work)


async def _principals_status(vault: TokenVault, server_id: str, now: float) -> str:
    """One line on the principals that hold tokens for ``server_id`` (identity ``"principal"``); never a token."""
    said: list[str] = []
    for server, identity in await vault.keys():
        if server != server_id or not identity.startswith(PRINCIPAL_PREFIX):
            continue
        try:
            grant = await vault.load(server, identity)
        except YaoActorsError:
            state = "tokens do not open with store.secret_key"
        else:
            state = "authorized" if grant.usable(now) else "authorization expired"
        said.append(f"{identity.removeprefix(PRINCIPAL_PREFIX)!r} {state}")
    if not said:
        return f"{server_id}: identity 'principal': no principal has authorized it yet"
    return f"{server_id}: identity 'principal': " + ", ".join(said)

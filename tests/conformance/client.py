"""The client the official MCP conformance suite drives: ``python tests/conformance/client.py URL``.

The suite (``@modelcontextprotocol/conformance``, run by :mod:`tests.conformance.test_conformance`) starts a
scenario's server and runs this with its URL, the scenario's name in ``MCP_CONFORMANCE_SCENARIO`` and, where the
scenario hands out credentials, a JSON object in ``MCP_CONFORMANCE_CONTEXT``. What it does is what a user of the
project does, through the project's own code: write a configuration naming that server (streamable HTTP), log the
service in where the server is behind the authorization-code flow (``yao-actors auth login``: the suite's
authorization server approves without a person, so this client follows its redirect to the login's loopback
redirect URI, as a browser would), then ``yao-actors tools --json`` and ``yao-actors call`` of every tool it lists
(arguments made from each tool's input schema; a question the tool asks is accepted with its defaults, as a person
pressing Enter at every field would). The commands run in this process (one Python start per scenario), through
the command line's own entry point.

The configuration says what the scenario's context gives: a pre-registered ``client_id`` / ``client_secret``,
``auth.type: "client_credentials"`` (with a secret, or a private key signing a JWT), or ``"cross_app_access"``
(an identity provider's ID token exchanged for the MCP server's access). The product never looks at the scenario.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import trio

from yao_actors.auth.login import login
from yao_actors.cli.auth import open_service_vault
from yao_actors.cli.commands import run_command
from yao_actors.config import load_config

SERVER = "conformance"
#: The key the store seals the tokens with (a throwaway store in a temporary folder).
SECRET_KEY = "conformance-suite-secret-key"
#: The last line of a finished run on standard error, before its exit code.
FINISHED = "conformance client: exit"
#: What a command says when the server needs the service to log in (again).
LOGIN_AGAIN = f"run `yao-actors auth login {SERVER}`"
#: Seconds each command gives the server (the suite's own limit per scenario is longer).
TIMEOUT = "20"


#: Where this client's Client ID Metadata Document would be published (the suite's authorization servers take it
#: as the client id without fetching it).
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


def issuer_of(url: str) -> str:
    """The authorization server the MCP server at ``url`` names in its protected resource metadata (RFC 9728): what
    a person configuring a client without a login reads once, and writes down as ``auth.issuer``."""
    parts = urlsplit(url)
    where = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path.rstrip('/')}"
    issuer: str = httpx2.get(where).raise_for_status().json()["authorization_servers"][0]
    return issuer


def auth_of(url: str, context: dict[str, Any]) -> dict[str, Any] | None:
    """``mcpServers.<id>.auth`` for what the scenario's context hands out (``None``: no authorization)."""
    name = str(context.get("name", ""))
    if "client_id" not in context:
        return None
    client = {"client_id": context["client_id"]}
    secret = {"client_secret": context.get("client_secret")}
    if "idp_id_token" in context:
        provider = {key: context[f"idp_{key}"] for key in ("token_endpoint", "client_id", "id_token")}
        return {"type": "cross_app_access", "issuer": issuer_of(url), **client, **secret, "identity_provider": provider}
    if "private_key_pem" in context:
        key = {
            "private_key": context["private_key_pem"],
            "signing_algorithm": context.get("signing_algorithm", "ES256"),
        }
        return {"type": "client_credentials", "issuer": issuer_of(url), **client, **key}
    if "client-credentials" in name:
        return {"type": "client_credentials", "issuer": issuer_of(url), **client, **secret}
    return {"type": "oauth", **client, **secret}  # a client registered with the authorization server beforehand


def config_of(url: str, scenario: str, context: dict[str, Any], folder: Path) -> dict[str, Any]:
    server: dict[str, Any] = {"url": url}
    login = {"type": "oauth", "client_metadata_url": CLIENT_METADATA_URL}
    auth = auth_of(url, context) or (login if scenario.startswith("auth/") else None)
    if auth is not None:
        server["auth"] = auth
    store = {"type": "sqlite", "path": str(folder / "store.sqlite3"), "secret_key": SECRET_KEY}
    return {"mcpServers": {SERVER: server}, "store": store}


async def log_in(config_path: Path) -> None:
    """``yao-actors auth login``'s flow, the authorization URL visited as a browser would (following redirects)."""
    config = load_config(str(config_path))
    async with open_service_vault(config, str(config_path)) as vault, trio.open_nursery() as nursery:

        async def visit(url: str) -> None:
            async with httpx2.AsyncClient(follow_redirects=True) as browser:
                await browser.get(url)

        def say(text: str) -> None:
            print(text, file=sys.stderr)
            nursery.start_soon(visit, next(w for w in text.split() if w.startswith("http")))

        await login(config.servers[SERVER], vault, say=say, timeout=float(TIMEOUT))


def command(*args: str) -> tuple[int, str, str]:
    """One ``yao-actors`` command, in this process: its exit code and what it printed (out, then err)."""
    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = run_command(list(args))
    sys.stderr.write(out.getvalue() + err.getvalue())
    return code, out.getvalue(), err.getvalue()


def sample(schema: dict[str, Any]) -> Any:
    """A value of the JSON Schema ``schema`` (its default, first enum member, or a plain value of its type)."""
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type", "string")
    if kind == "object":
        required = schema.get("required") or []
        return {k: sample(v) for k, v in (schema.get("properties") or {}).items() if k in required}
    return {"integer": 1, "number": 1, "boolean": False, "array": [], "null": None}.get(kind, "x")


def main(url: str) -> int:
    """Run the scenario; say its exit code last on standard error (its harness tells a finished client by it)."""
    try:
        code = run(url)
    except Exception as error:  # a login refused (as some scenarios mean it to be): said, exit 1
        print(f"conformance client: {type(error).__name__}: {error}", file=sys.stderr)
        code = 1
    print(f"{FINISHED} {code}", file=sys.stderr)
    return code


def run(url: str) -> int:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory(prefix="yao-conformance-") as folder:
        config = config_of(url, scenario, context, Path(folder))
        path = Path(folder) / "config.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        if config["mcpServers"][SERVER].get("auth", {}).get("type") == "oauth":
            trio.run(log_in, path)
        code, listed, _ = command("tools", "--config", str(path), "--timeout", TIMEOUT, "--json")
        if code != 0:
            return code
        for tool in json.loads(listed)["tools"]:
            call = ("call", SERVER, tool["tool"], json.dumps(sample(tool["inputSchema"])), "--accept-defaults")
            code, _, said = command(*call, "--config", str(path), "--timeout", TIMEOUT)
            if code != 0 and LOGIN_AGAIN in said:  # the server wants more (a step-up): log in once more, retry
                trio.run(log_in, path)
                code, _, said = command(*call, "--config", str(path), "--timeout", TIMEOUT)
            if code != 0:
                return code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

"""The OAuth test server as a process, and a scripted browser that approves an authorization URL."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx2
import trio

from yao_actors.models import Completion, FunctionModel, ToolCall
from yao_actors.specs import (
    AssistantSpec,
    Config,
    HttpTransport,
    OAuthSpec,
    RestartPolicy,
    ServerRef,
    ServerSpec,
    StoreSpec,
)
from yao_actors.testing.processes import read_line, stop_process

#: The store's secret key in these tests (it seals the tokens).
KEY = "a test key of enough length"


@attrs.frozen
class OAuthTestServer:
    """The running server: its ``/mcp`` URL, and its test hooks."""

    url: str

    @property
    def base(self) -> str:
        return self.url.rsplit("/", 1)[0]

    async def hook(self, name: str) -> Any:
        async with httpx2.AsyncClient() as client:
            response = await (client.get if name == "log" else client.post)(f"{self.base}/test/{name}")
            response.raise_for_status()
            return response.json()


@asynccontextmanager
async def open_oauth_server(*options: str) -> AsyncIterator[OAuthTestServer]:
    """``python -m yao_actors.testing.oauth_server`` on a free loopback port; stopped on exit."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "yao_actors.testing.oauth_server", "--port", "0", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        with trio.fail_after(30):
            line = await read_line(process.stdout)
        assert line.startswith("LISTENING "), line
        yield OAuthTestServer(line.split()[1])
    finally:
        await stop_process(process)


async def approve_in_browser(authorization_url: str, user: str | None = None) -> httpx2.Response:
    """Play the person's browser: open the URL, approve on the consent page (as ``user``, when given), follow
    the redirect home."""
    async with httpx2.AsyncClient() as browser:
        response = await browser.get(authorization_url)
        assert response.status_code == 302, response.text
        consent = response.headers["location"]
        page = await browser.get(consent)
        assert page.status_code == 200
        transaction = consent.split("transaction=", 1)[1]
        form = {"transaction": transaction, "approve": "yes", **({"user": user} if user else {})}
        approved = await browser.post(consent, data=form)
        assert approved.status_code == 302, approved.text
        return await browser.get(approved.headers["location"])  # the redirect URI: the client's callback


def oauth_hub(url: str, **auth: Any) -> ServerSpec:
    """The server ``hub`` at ``url``, behind OAuth (scope ``tools``, and ``auth``), restarted soon after a failure."""
    transport = HttpTransport(url, auth=OAuthSpec(scopes=("tools",), **auth))
    return ServerSpec("hub", transport, connect_timeout=20, restart=RestartPolicy(backoff_initial=0.05))


def hub_config(hub: ServerSpec, tmp_path: Path, *, assistant: str = "a", **store: Any) -> Config:
    """``hub`` for the one assistant ``assistant``, with an SQLite store sealed with :data:`KEY` (and ``store``)."""
    return Config(
        servers={"hub": hub},
        assistants={assistant: AssistantSpec(assistant, "m", servers=(ServerRef("hub"),))},
        store=StoreSpec("sqlite", path=str(tmp_path / "s.sqlite3"), secret_key=KEY, **store),
    )


@asynccontextmanager
async def hub_behind_oauth(
    tmp_path: Path, *options: str, assistant: str = "a", **auth: Any
) -> AsyncIterator[tuple[OAuthTestServer, Config]]:
    """The OAuth test server (its ``options``) and a config of :func:`hub_config` for its ``hub`` (with ``auth``)."""
    async with open_oauth_server(*options) as server:
        yield server, hub_config(oauth_hub(server.url, **auth), tmp_path, assistant=assistant)


def whoami_model(*, last_only: bool = False) -> FunctionModel:
    """Calls ``hub__whoami`` when it is offered and the last message is the user's, then says what the tool
    answered (every answer joined by `` | ``, or with ``last_only`` the last one), or with no answer the tools it had."""

    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        names = [tool["function"]["name"] for tool in tools]
        if messages[-1]["role"] == "user" and "hub__whoami" in names:
            return Completion(tool_calls=(ToolCall("c1", "hub__whoami", "{}"),))
        said = [str(m["content"]) for m in messages if m["role"] == "tool"]
        if not said:
            return f"tools: {names}"
        return said[-1] if last_only else " | ".join(said)

    return FunctionModel(answer)


def authorization_url(text: str) -> str:
    """The URL in what ``login`` said."""
    return next(word for word in text.split() if word.startswith("http"))

"""The MCP Apps browser tests' common parts: a model that shows an app's tool, a one-server config, an app server
of the test's own HTML, the page signed in with the service's token, the app's frame, and the frames the page sent."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import attrs
from mcp.server.mcpserver import MCPServer
from playwright.sync_api import BrowserContext, FrameLocator, Page

from tests.integration.browser_support import STEP_MS, ask, chromium_context, drive_runtime
from yao_actors.config import AssistantSpec, Config, ServerRef, ServerSpec
from yao_actors.models import Completion, FunctionModel, ToolCall

T = TypeVar("T")
TOKEN = "apps-browser-token-0123456789"
#: What a run's user said when the app asked the page to send a message (ui/message).
HEARD = "heard: "


def app_script(tool: str) -> FunctionModel:
    """Calls ``tool`` when asked for it, then says the result; any other question is answered ``heard: ...``."""

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion | str:
        last = messages[-1]
        if last["role"] == "tool":
            return f"result: {last['content']}"
        if "show" in str(last["content"]):
            return Completion(tool_calls=(ToolCall("c_app", tool, "{}"),))
        return f"{HEARD}{last['content']}"

    return FunctionModel(script)


def app_config(server: ServerSpec) -> Config:
    assistant = AssistantSpec("default", "m", prompt="Be brief", servers=(ServerRef(server.id),))
    return Config(servers={server.id: server}, assistants={"default": assistant})


async def drive_app(server: ServerSpec, drive: Callable[..., T], *args: Any, tool: str = "", guard: float = 90) -> T:
    """Serve ``server`` (its ``tool``, by default its ``show``) with the token and run ``drive(page_url, *args)``."""
    models = {"m": app_script(tool or f"{server.id}__show")}
    return await drive_runtime(app_config(server), models, drive, *args, guard=guard, token=TOKEN)


def app_server(name: str, html: Callable[[], str], meta: dict[str, Any] | None = None) -> MCPServer:
    """An MCP server ``name`` whose tool ``show`` shows its app ``ui://NAME/app.html``: ``html()``, with ``meta``."""
    server = MCPServer(name)
    uri = f"ui://{name}/app.html"

    @server.resource(uri, mime_type="text/html;profile=mcp-app", meta=meta)
    def app() -> str:
        return html()

    @server.tool(meta={"ui": {"resourceUri": uri}})
    def show() -> str:
        """Shows the app."""
        return "shown"

    return server


#: An app's side of the bridge, in a test's own app: ``request(method, params)`` (a promise of the page's answer)
#: and ``start(name)`` (ui/initialize, then the initialized notification).
APP_BRIDGE = """let next = 0;
const pending = new Map();
const request = (method, params) => new Promise((resolve) => {
  const id = ++next; pending.set(id, resolve);
  parent.postMessage({ jsonrpc: "2.0", id, method, params }, "*");
});
addEventListener("message", (event) => {
  const data = event.data;
  if (data && pending.has(data.id)) { pending.get(data.id)(data.result || { error: data.error }); pending.delete(data.id); }
});
const start = async (name) => {
  await request("ui/initialize", { protocolVersion: "2026-01-26", appInfo: { name, version: "1" }, appCapabilities: {} });
  parent.postMessage({ jsonrpc: "2.0", method: "ui/notifications/initialized", params: {} }, "*");
};
"""


def app_page(body: str, script: str) -> str:
    """An app's HTML: ``body``, then ``script`` run after :data:`APP_BRIDGE`."""
    return f"<!doctype html><html><body>{body}<script>\n{APP_BRIDGE}{script}\n</script></body></html>"


@attrs.frozen
class SignedIn:
    """A signed-in page of its own browser (:func:`signed_in_browser`), and the frames it sent and received."""

    context: BrowserContext
    page: Page
    sent: list[dict[str, Any]]
    received: list[dict[str, Any]]


@contextmanager
def signed_in_browser(
    page_url: str, *, asking: str | None = None, prepare: Callable[[BrowserContext], None] | None = None
) -> Iterator[SignedIn]:
    """A fresh browser (``prepare``d first) at ``page_url``, signed in, that has asked ``asking`` (if given)."""
    with chromium_context() as context:
        if prepare is not None:
            prepare(context)
        page, sent, received = signed_in(context, page_url)
        if asking is not None:
            ask(page, asking)
        yield SignedIn(context, page, sent, received)


def signed_in(context: BrowserContext, page_url: str) -> tuple[Page, list[dict[str, Any]], list[dict[str, Any]]]:
    """A page at ``page_url`` signed in with the token; the websocket frames it sends and receives, as JSON."""
    page = context.new_page()
    sent: list[dict[str, Any]] = []
    received: list[dict[str, Any]] = []

    def watch(ws: Any) -> None:
        ws.on("framesent", lambda payload: sent.append(json.loads(payload)))
        ws.on("framereceived", lambda payload: received.append(json.loads(payload)))

    page.on("websocket", watch)
    page.goto(page_url)
    sign_in(page)
    return page, sent, received


def sign_in(page: Page) -> None:
    """Enter the token and wait until the page is connected."""
    page.fill("#token", TOKEN)
    page.press("#token", "Enter")
    page.wait_for_function("() => document.querySelector('#state').textContent === 'connected'")


def app_frame(page: Page) -> FrameLocator:
    """The app's own frame: inside the sandbox proxy's frame (on the apps origin) inside the page."""
    try:
        page.wait_for_selector('.app[data-app="initialized"]', timeout=STEP_MS)
    except Exception as error:
        raise AssertionError(f"no app initialized; the page shows: {page.inner_text('#log')!r}") from error
    return inner_frame(page)


def inner_frame(page: Page) -> FrameLocator:
    """The app's frame, whether or not it has started."""
    return page.frame_locator("iframe.app-frame").frame_locator("iframe")


def runs_sent(sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run frames the page sent with a message of the user's (not an app's proxied request, not a replay)."""
    return [frame for frame in sent if frame.get("type") == "run" and frame.get("messages")]


def proxied(sent: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    requests = [frame["forwardedProps"]["__proxiedMCPRequest"] for frame in sent if frame.get("forwardedProps")]
    return [request for request in requests if request["method"] == method]


def time_shown(app: FrameLocator, other_than: str = "Loading...") -> str:
    """The time the app shows, once it shows one other than ``other_than``."""
    shown = app.locator("#server-time")
    shown.filter(has_text=re.compile(r"^20")).filter(has_not_text=other_than).wait_for(timeout=STEP_MS)
    return shown.inner_text()

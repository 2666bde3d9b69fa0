"""The page's MCP Apps host on the service's side: which origin hosts a page's apps, the sandbox proxy served
only there with its Content-Security-Policy, and the page's host script and vendored bridge served beside the page.

Real loopback sockets; the runtime is the fake one (``tests/integration/test_apps_browser.py`` drives the page
and real apps in Chromium).
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest
import trio

from tests.service.fake_runtime import FakeRuntime
from tests.service.support import http_request, running_service
from yao_actors.config import parse_config
from yao_actors.config.check import config_problems
from yao_actors.errors import ConfigError
from yao_actors.service.apps_host import CspRefused, apps_origin, page_origins, sandbox_csp
from yao_actors.specs import ServiceSpec


def directives(policy: str) -> dict[str, str]:
    return {part.split(" ", 1)[0]: part.split(" ", 1)[1] for part in policy.split("; ")}


def test_a_page_on_a_loopback_address_hosts_its_apps_on_the_other_loopback_name() -> None:
    spec = ServiceSpec()
    assert apps_origin(spec, "127.0.0.1:8765") == "http://localhost:8765"
    assert apps_origin(spec, "[::1]:9000") is None  # a CSP cannot name an IPv6 address (frame-ancestors)
    assert apps_origin(spec, "localhost:8765") == "http://127.0.0.1:8765"
    assert apps_origin(spec, "LOCALHOST") == "http://127.0.0.1"
    assert apps_origin(spec, "agent.example") is None  # no second name known: no apps
    assert apps_origin(spec, None) is None
    assert page_origins(spec, "localhost:8765") == ("http://127.0.0.1:8765",)
    assert page_origins(spec, "127.0.0.1:8765") == ("http://localhost:8765",)
    assert page_origins(spec, "agent.example") is None


def test_a_configured_apps_origin_is_used_everywhere_and_only_it_serves_the_sandbox() -> None:
    spec = ServiceSpec(
        apps_origin="https://apps.agent.example", public_url="https://agent.example/x", allowed_origins=("*",)
    )
    assert apps_origin(spec, "agent.example") == "https://apps.agent.example"
    assert apps_origin(spec, "127.0.0.1:8765") == "https://apps.agent.example"
    assert page_origins(spec, "apps.agent.example") == ("https://agent.example",)
    assert page_origins(spec, "agent.example") is None
    assert page_origins(spec, "localhost:8765") is None


def test_the_sandbox_policy_is_strict_and_adds_only_what_the_resource_declares() -> None:
    bare = directives(sandbox_csp(None, ["http://127.0.0.1:1"]))
    assert bare["default-src"] == "'none'"
    assert bare["connect-src"] == "'none'"  # not even the service: an app reaches only what it declares
    assert bare["frame-src"] == "'none'"
    assert bare["form-action"] == "'none'"
    assert bare["frame-ancestors"] == "http://127.0.0.1:1"
    assert "'unsafe-eval'" not in bare["script-src"]
    declared = {
        "connectDomains": ["https://api.example.com", "wss://live.example.com:8443"],
        "resourceDomains": ["https://*.cdn.example"],
        "wasmUnsafeEval": True,
    }
    policy = directives(sandbox_csp(json.dumps(declared), ["http://localhost:2"]))
    assert policy["connect-src"] == "https://api.example.com wss://live.example.com:8443"
    assert policy["script-src"] == "'self' 'unsafe-inline' 'wasm-unsafe-eval' https://*.cdn.example"
    assert policy["img-src"].endswith("https://*.cdn.example")
    # the proxy's own script is the one thing loaded from the apps origin (the service): no image, style, font or
    # media of the app's comes from it
    for directive in ("style-src", "img-src", "font-src", "media-src"):
        assert "'self'" not in policy[directive], directive


@pytest.mark.parametrize(
    ("declared", "named"),
    [
        ({"connectDomains": ["https://a.example; script-src *"]}, "connectDomains[0]"),
        ({"resourceDomains": ["https://ok.example", "'unsafe-eval'"]}, "resourceDomains[1]"),
        ({"frameDomains": ["javascript:alert(1)"]}, "frameDomains[0]"),
        ({"baseUriDomains": "https://a.example"}, "baseUriDomains"),
        ({"connectDomains": ["*"]}, "connectDomains[0]"),
        ({"connectDomains": ["https://evil.example\n"]}, "connectDomains[0]"),
        ({"resourceDomains": ["https://ok.example", "https://*.com"]}, "resourceDomains[1]"),
        (["https://a.example"], "_meta.ui.csp"),
    ],
)
def test_a_declared_csp_that_could_widen_the_policy_is_refused_naming_the_entry(declared: object, named: str) -> None:
    with pytest.raises(CspRefused, match=named.replace("[", r"\[").replace("]", r"\]")):
        sandbox_csp(json.dumps(declared), ["http://localhost:2"])


def test_server_apps_origin_is_read_as_an_origin_and_refused_otherwise() -> None:
    read = parse_config({"mcpServers": {}, "server": {"apps_origin": "https://Apps.Agent.example/"}})
    assert read.service.apps_origin == "https://apps.agent.example"
    for wrong in ("apps.agent.example", "https://apps.example/path", "javascript:x", "https://u:p@apps.example"):
        with pytest.raises(ConfigError, match=r"server\.apps_origin"):
            parse_config({"mcpServers": {}, "server": {"apps_origin": wrong}})


def test_an_apps_origin_needs_the_pages_origin_beside_it_and_another_one() -> None:
    def problems(server: dict[str, object]) -> list[str]:
        return [p for p in config_problems(parse_config({"mcpServers": {}, "server": server})) if "apps_origin" in p]

    assert problems({"apps_origin": "https://apps.example"}) == [
        "server.apps_origin: also set server.public_url (the page's address), or allowed_origins: only the page "
        "may embed an app's sandbox"
    ]
    assert (
        "the page's own origin" in problems({"apps_origin": "https://a.example", "public_url": "https://a.example/"})[0]
    )
    assert problems({"apps_origin": "https://apps.example", "public_url": "https://agent.example"}) == []


async def test_the_page_learns_its_apps_origin_and_the_sandbox_is_served_only_there() -> None:
    with trio.fail_after(10):
        async with running_service(FakeRuntime()) as service:
            port = service.port
            page = await http_request(port, "/")
            script = await http_request(port, "/page_apps.js")
            bridge = await http_request(port, "/vendor/ext-apps-app-bridge.js")
            csp = urllib.parse.quote(json.dumps({"connectDomains": ["https://api.example.com"]}))
            apps = {"Host": f"localhost:{port}"}
            sandbox = await http_request(port, f"/apps/sandbox.html?csp={csp}", headers=apps)
            sandbox_js = await http_request(port, "/apps/sandbox.js", headers=apps)
            elsewhere = await http_request(port, "/apps/sandbox.html", headers={"Host": "agent.example"})
            bad = urllib.parse.quote(json.dumps({"connectDomains": ["https://a.example 'unsafe-eval'"]}))
            refused = await http_request(port, f"/apps/sandbox.html?csp={bad}", headers=apps)
            newline = urllib.parse.quote(json.dumps({"connectDomains": ["https://evil.example\n"]}))
            refused_newline = await http_request(port, f"/apps/sandbox.html?csp={newline}", headers=apps)
            still = await http_request(port, "/page_apps.js")
    assert f'<meta name="yao-apps-origin" content="http://localhost:{port}">'.encode() in page.body
    assert (script.status, script.headers["content-type"]) == (200, "text/javascript; charset=utf-8")
    assert b'from "/vendor/ext-apps-app-bridge.js"' in script.body
    assert bridge.status == 200
    assert b"AppBridge" in bridge.body
    assert sandbox.status == 200
    policy = directives(sandbox.headers["content-security-policy"])
    assert policy["frame-ancestors"] == f"http://127.0.0.1:{port}"
    assert policy["connect-src"] == "https://api.example.com"
    assert b'<script src="/apps/sandbox.js">' in sandbox.body
    assert sandbox_js.status == 200
    assert b'inner.setAttribute("sandbox", "allow-scripts allow-forms")' in sandbox_js.body  # no allow-same-origin
    assert elsewhere.status == 404
    assert refused.status == 400
    assert b"connectDomains[0]" in refused.body
    # a trailing newline is no origin either: a 400 naming it, not a header that breaks the answer
    assert refused_newline.status == 400
    assert b'connectDomains[0]: "https://evil.example\\n" is not an origin' in refused_newline.body
    assert still.status == 200


async def test_a_configured_apps_origin_serves_the_sandbox_and_not_the_page() -> None:
    with trio.fail_after(10):
        async with running_service(FakeRuntime(), apps_origin="http://apps.test:8080") as service:
            apps = {"Host": "apps.test:8080"}
            page_there = await http_request(service.port, "/", headers=apps)
            script_there = await http_request(service.port, "/page_apps.js", headers=apps)
            sandbox = await http_request(service.port, "/apps/sandbox.html", headers=apps)
            page = await http_request(service.port, "/")
            sandbox_here = await http_request(service.port, "/apps/sandbox.html")
    assert (page_there.status, script_there.status, sandbox.status) == (404, 404, 200)
    assert directives(sandbox.headers["content-security-policy"])["frame-ancestors"] == "'none'"
    assert b'content="http://apps.test:8080"' in page.body
    assert sandbox_here.status == 404


def test_the_vendored_host_bridge_is_of_the_ext_apps_version_the_tests_pin() -> None:
    """The bundle's header and its README name the ``@modelcontextprotocol/ext-apps`` version installed for the
    tests (tests/node/package-lock.json): a new pin without a rebuilt bundle fails here."""
    root = Path(__file__).parents[2]
    lock = json.loads((root / "tests/node/package-lock.json").read_text(encoding="utf-8"))
    pinned = lock["packages"]["node_modules/@modelcontextprotocol/ext-apps"]["version"]
    vendor = root / "yao_actors/service/vendor"
    header = (vendor / "ext-apps-app-bridge.js").read_text(encoding="utf-8")[:200]
    assert header.startswith(f"/* @modelcontextprotocol/ext-apps {pinned}, dist/src/app-bridge.js")
    assert f"`@modelcontextprotocol/ext-apps` {pinned}'s own host code" in (vendor / "README.md").read_text("utf-8")

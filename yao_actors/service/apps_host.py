"""The page's MCP Apps host, on the service's side: which origin hosts apps, and the files served for it.

An MCP App is HTML a server wrote. The page never loads it into its own origin: it embeds a *sandbox proxy*
document served on another origin (the apps origin), which loads the app's HTML into an inner iframe sandboxed
without ``allow-same-origin`` (an opaque origin: no storage, no cookies, no way into the proxy or the page) and
relays the bridge's postMessage JSON-RPC between the page and the app. Two origins are needed because a
sandboxed iframe of the page's own origin could be given its way back in by one wrong attribute; a page and a
frame of different origins share nothing but the messages they choose to post.

The apps origin is ``server.apps_origin`` when set. Without it, a page reached on loopback gets the other
loopback name of the same port: the page at ``http://127.0.0.1:8765/`` hosts apps on ``http://localhost:8765``,
the page at ``http://localhost:8765/`` on ``http://127.0.0.1:8765`` — the same process, two origins. A page
reached by any other name (``[::1]`` too: a CSP cannot name an IPv6 address) shows no apps until
``apps_origin`` names a second name for the service (``https://apps.agent.example``, routed to the same service).

Routes: the page's host script (``/page_apps.js``) and the vendored bridge (``/vendor/...``) are served on the
page's origin only; the sandbox proxy (``/apps/sandbox.html`` and its script) only on the apps origin, with a
strict Content-Security-Policy built from the app resource's declared ``_meta.ui.csp`` (domains checked one by
one; a malformed one refuses the document, naming it) that an ``about:srcdoc`` app inherits, and
``frame-ancestors`` naming the page's origins.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import re
import urllib.parse
from collections.abc import Iterable
from typing import Any, Final

from yao_actors.service.http import Exchange, Routes
from yao_actors.specs import ServiceSpec

#: Where the sandbox proxy document is served (on the apps origin only).
SANDBOX_PATH: Final = "/apps/sandbox.html"
SANDBOX_SCRIPT_PATH: Final = "/apps/sandbox.js"
#: The page's host script and the vendored ``@modelcontextprotocol/ext-apps`` bridge (on the page's origin only).
PAGE_APPS_PATH: Final = "/page_apps.js"
BRIDGE_PATH: Final = "/vendor/ext-apps-app-bridge.js"
#: The placeholder in page.html that the page's request gets its apps origin in (empty: apps are not shown).
APPS_ORIGIN_MARK: Final = b"__YAO_APPS_ORIGIN__"

#: The most bytes of a declared CSP the proxy's URL may carry, and domains per directive.
MAX_CSP_BYTES: Final = 8192
MAX_DOMAINS: Final = 32
#: A CSP source a server may declare: a scheme, a host and an optional port; a wildcard host (``*.``) needs two
#: labels after it (``https://*.cdn.example``, not ``https://*.com``). Matched whole (``fullmatch``: a ``$`` would
#: let a trailing newline through, into the header).
_SOURCE: Final = re.compile(
    r"(https?|wss?)://(\*\.[a-z0-9-]+(\.[a-z0-9-]+)+|[a-z0-9-]+(\.[a-z0-9-]+)*)(:(\d{1,5}|\*))?", re.IGNORECASE
)
_CSP_KEYS: Final = ("connectDomains", "resourceDomains", "frameDomains", "baseUriDomains")
_JS: Final = "text/javascript; charset=utf-8"
#: Without ``apps_origin``: the page on one loopback name hosts its apps on the other.
_OTHER_NAME: Final = {"127.0.0.1": "http://localhost", "localhost": "http://127.0.0.1"}


class CspRefused(ValueError):
    """An app resource's declared CSP that the sandbox cannot apply (the message names the entry)."""


def _origin_of(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def _split_host(host_header: str) -> tuple[str, str]:
    """``Host`` as (name, ``:port`` or empty); IPv6 keeps its brackets."""
    match = re.fullmatch(r"(\[[^\]]*\]|[^:]*)(:\d+)?", host_header.strip().lower())
    if match is None:
        return host_header.lower(), ""
    return match.group(1), match.group(2) or ""


def apps_origin(spec: ServiceSpec, host_header: str | None) -> str | None:
    """The apps origin for a page requested with ``Host: host_header`` (``None``: this page shows no apps)."""
    if spec.apps_origin:
        return spec.apps_origin
    if not host_header:
        return None
    name, port = _split_host(host_header)
    return _OTHER_NAME[name] + port if name in _OTHER_NAME else None


def apps_only(spec: ServiceSpec, host_header: str | None) -> bool:
    """Whether ``Host: host_header`` is a configured apps origin, where the page is not served (without
    ``apps_origin`` each loopback name serves the page and hosts the apps of the page on the other)."""
    if not spec.apps_origin or not host_header:
        return False
    name, port = _split_host(host_header)
    return urllib.parse.urlsplit(spec.apps_origin).netloc.lower() == f"{name}{port}"


def page_origins(spec: ServiceSpec, host_header: str | None) -> tuple[str, ...] | None:
    """The origins a page may embed the sandbox from, when ``Host: host_header`` is the apps origin (``None``: it
    is not, and the sandbox is not served here)."""
    if not host_header:
        return None
    name, port = _split_host(host_header)
    if spec.apps_origin:
        if not apps_only(spec, host_header):
            return None
        pages = [o for o in spec.allowed_origins if o not in ("*", "null")]
        if spec.public_url:
            pages.append(_origin_of(spec.public_url))
        return tuple(dict.fromkeys(pages))
    return (_OTHER_NAME[name] + port,) if name in _OTHER_NAME else None


def _sources(declared: dict[str, Any], key: str) -> list[str]:
    value = declared.get(key, [])
    if not isinstance(value, list) or len(value) > MAX_DOMAINS:
        raise CspRefused(f"_meta.ui.csp.{key}: must be a list of at most {MAX_DOMAINS} origins")
    for index, entry in enumerate(value):
        if not isinstance(entry, str) or not _SOURCE.fullmatch(entry):
            shown = json.dumps(entry)[:120]
            raise CspRefused(f"_meta.ui.csp.{key}[{index}]: {shown} is not an origin (scheme://host[:port])")
    return value


def _or_none(sources: Iterable[str]) -> str:
    return " ".join(sources) or "'none'"


def sandbox_csp(declared_json: str | None, frame_ancestors: Iterable[str]) -> str:
    """The sandbox document's Content-Security-Policy for an app whose resource declared ``declared_json``
    (``_meta.ui.csp`` as JSON; ``None``: nothing declared). Raise :class:`CspRefused` for what cannot be applied."""
    declared: Any = {}
    if declared_json:
        if len(declared_json.encode()) > MAX_CSP_BYTES:
            raise CspRefused(f"_meta.ui.csp: over {MAX_CSP_BYTES} bytes")
        try:
            declared = json.loads(declared_json)
        except ValueError:
            raise CspRefused("_meta.ui.csp: not JSON") from None
    if not isinstance(declared, dict):
        raise CspRefused("_meta.ui.csp: must be an object")
    connect, resource, frame, base = (_sources(declared, key) for key in _CSP_KEYS)
    wasm = ["'wasm-unsafe-eval'"] if declared.get("wasmUnsafeEval") is True else []
    res = " ".join(resource)
    directives = [  # 'self' (the apps origin: the service) for the proxy's own script only
        "default-src 'none'",
        " ".join(["script-src 'self' 'unsafe-inline'", *wasm, *resource]),
        f"style-src 'unsafe-inline' {res}".strip(),
        f"img-src data: blob: {res}".strip(),
        f"font-src data: {res}".strip(),
        f"media-src data: blob: {res}".strip(),
        f"connect-src {_or_none(connect)}",
        f"frame-src {_or_none(frame)}",
        f"base-uri {_or_none(base)}",
        "form-action 'none'",
        "object-src 'none'",
        f"frame-ancestors {_or_none(frame_ancestors)}",
    ]
    return "; ".join(directives)


@functools.cache
def _asset(name: str) -> bytes:
    return importlib.resources.files("yao_actors.service").joinpath(name).read_bytes()


def page_with_apps_origin(page: bytes, spec: ServiceSpec, host_header: str | None) -> bytes:
    """The page, told its apps origin (empty: none)."""
    return page.replace(APPS_ORIGIN_MARK, (apps_origin(spec, host_header) or "").encode())


def add_apps_routes(routes: Routes, spec: ServiceSpec) -> None:
    """Serve the host script and the bridge on the page's origin, the sandbox proxy on the apps origin."""

    async def not_here(exchange: Exchange) -> None:
        await exchange.respond(404, b"not found\n", "text/plain; charset=utf-8")

    def on_page_origin(name: str, content_type: str) -> Any:
        async def serve(exchange: Exchange) -> None:
            if apps_only(spec, exchange.request.headers.get("host")):
                return await not_here(exchange)
            await exchange.respond(200, _asset(name), content_type)

        return serve

    async def sandbox_script(exchange: Exchange) -> None:
        if page_origins(spec, exchange.request.headers.get("host")) is None:
            return await not_here(exchange)
        await exchange.respond(200, _asset("apps_sandbox.js"), _JS)

    async def sandbox(exchange: Exchange) -> None:
        ancestors = page_origins(spec, exchange.request.headers.get("host"))
        if ancestors is None:
            return await not_here(exchange)
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(exchange.request.target).query)
        try:
            policy = sandbox_csp(query.get("csp", [None])[0], ancestors)
        except CspRefused as refused:
            body = f"the app is not shown: {refused}\n".encode()
            return await exchange.respond(400, body, "text/plain; charset=utf-8")
        headers = [("content-security-policy", policy), ("x-content-type-options", "nosniff")]
        headers.append(("referrer-policy", "no-referrer"))
        await exchange.respond(200, _asset("apps_sandbox.html"), "text/html; charset=utf-8", headers)

    routes.add(PAGE_APPS_PATH, on_page_origin("page_apps.js", _JS))
    routes.add(BRIDGE_PATH, on_page_origin("vendor/ext-apps-app-bridge.js", _JS))
    routes.add(SANDBOX_PATH, sandbox)
    routes.add(SANDBOX_SCRIPT_PATH, sandbox_script)

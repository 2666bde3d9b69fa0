// The sandbox proxy of an MCP App (the MCP Apps specification's arrangement): this document is on the apps
// origin, never the page's; the app's HTML goes into an inner iframe sandboxed without allow-same-origin, so the
// app runs in an opaque origin of its own (no storage, no cookies, no access to this frame or the page). This
// script relays the bridge's JSON-RPC messages: from the page (its parent, whose origin it checks) to the app,
// and from the app to the page (posted to the page's origin only). The page's
// ui/notifications/sandbox-resource-ready is taken here: it carries the app's HTML and permissions (its CSP is
// this document's header already, which the inner about:srcdoc frame inherits).
"use strict";
(() => {
  const READY = "ui/notifications/sandbox-proxy-ready";
  const RESOURCE = "ui/notifications/sandbox-resource-ready";
  if (window.parent === window) throw new Error("the MCP App sandbox works only inside the page");
  // The page's origin: the browser's own list of who embeds this frame (frame-ancestors has already limited it).
  const ancestors = window.location.ancestorOrigins;
  const pageOrigin = ancestors && ancestors.length ? ancestors[0] : new URL(document.referrer || "null:").origin;
  if (!pageOrigin || pageOrigin === "null" || pageOrigin === window.location.origin) {
    throw new Error("the MCP App sandbox must be embedded by a page of another origin");
  }
  // Permissions an app may ask for, as iframe `allow` features (the page grants the same to this frame).
  const FEATURES = { camera: "camera", microphone: "microphone", geolocation: "geolocation", clipboardWrite: "clipboard-write" };
  let inner = null;

  function load(params) {
    if (inner || !params || typeof params.html !== "string") return;  // one app per sandbox, loaded once
    inner = document.createElement("iframe");
    inner.setAttribute("sandbox", "allow-scripts allow-forms");
    const allowed = Object.keys(FEATURES).filter((name) => params.permissions && params.permissions[name]);
    if (allowed.length) inner.setAttribute("allow", allowed.map((name) => FEATURES[name]).join("; "));
    inner.setAttribute("title", "MCP App");
    inner.srcdoc = params.html;
    document.body.append(inner);
  }

  window.addEventListener("message", (event) => {
    if (event.source === window.parent) {
      if (event.origin !== pageOrigin) return;
      const data = event.data;
      if (data && data.method === RESOURCE) load(data.params);
      else if (inner && inner.contentWindow) inner.contentWindow.postMessage(data, "*");  // the app's origin is opaque
    } else if (inner && event.source === inner.contentWindow) {
      window.parent.postMessage(event.data, pageOrigin);
    }
  });
  window.parent.postMessage({ jsonrpc: "2.0", method: READY, params: {} }, pageOrigin);
})();

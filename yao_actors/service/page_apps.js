// The page's MCP Apps host (served beside page.html as /page_apps.js; see yao_actors/service/apps_host.py).
//
// An "mcp-apps" activity ({result, resourceUri, serverId, toolInput}) names a tool's interface: its ui://
// resource is read through the service (a proxied MCP request: the page never talks to an MCP server itself),
// then shown in a sandbox proxy frame on the apps origin, another origin than the page's, which loads the app's
// HTML into an inner frame sandboxed without allow-same-origin. The bridge is @modelcontextprotocol/ext-apps'
// own AppBridge (vendored, /vendor/ext-apps-app-bridge.js): it answers the app's ui/initialize with the host
// context, then gets the tool's input and result; the app's tools/call goes through the service's proxy,
// ui/message starts a run with the app's text as the user's message, ui/open-link opens only what the page's
// link rule allows, and size changes resize the frame.
import { AppBridge, PostMessageTransport, buildAllowAttribute } from "/vendor/ext-apps-app-bridge.js";

const HOST = { name: "yao-actors page", version: "1" };
const SANDBOX_PATH = "/apps/sandbox.html";
const MIME = "text/html;profile=mcp-app";
const MAX_HEIGHT = 2000;   // pixels an app may grow to (past that it scrolls inside)

// Shows the app of `content` in `box`. `host`: {appsOrigin, request(serverId, method, params) -> Promise of the
// MCP result (rejected with an Error for {error}), say(text) -> start a run with that user message,
// linkRefusal(url) -> why a link may not be opened, or null}.
export async function showApp(box, content, host) {
  const status = (text, className = "note") => {
    const line = document.createElement("div");
    line.className = className;
    line.textContent = text;
    box.append(line);
    return line;
  };
  if (!host.appsOrigin) {
    status("this tool has an interface: it is shown when the page is opened at http://127.0.0.1:PORT/ or http://localhost:PORT/, or when the service sets server.apps_origin");
    return;
  }
  let resource;
  try {
    resource = await readResource(content, host);
  } catch (error) {
    status(`the app could not be loaded: ${error.message}`, "error");
    return;
  }
  const frame = document.createElement("iframe");
  frame.className = "app-frame";
  frame.title = `MCP App ${content.resourceUri}`;
  frame.setAttribute("sandbox", "allow-scripts allow-same-origin allow-forms");
  const allow = buildAllowAttribute(resource.permissions);
  if (allow) frame.setAttribute("allow", allow);
  const url = new URL(SANDBOX_PATH, host.appsOrigin);
  if (resource.csp) url.searchParams.set("csp", JSON.stringify(resource.csp));
  const bridge = newBridge(frame, content, host, status);
  const ready = sandboxReady(frame);
  frame.src = url.href;
  box.append(frame);
  await ready;
  const initialized = new Promise((resolve) => { bridge.oninitialized = resolve; });
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
  await bridge.sendSandboxResourceReady({ html: resource.html, csp: resource.csp, permissions: resource.permissions });
  await initialized;
  box.dataset.app = "initialized";
  await bridge.sendToolInput({ arguments: content.toolInput || {} });
  if (content.result) await bridge.sendToolResult(content.result);
}

// The app's HTML and what its resource declares (_meta.ui.csp, _meta.ui.permissions), read through the service.
async function readResource(content, host) {
  const read = await host.request(content.serverId, "resources/read", { uri: content.resourceUri });
  const item = (read && Array.isArray(read.contents) ? read.contents : []).find((c) => c && c.uri === content.resourceUri)
    || (read && read.contents && read.contents[0]);
  if (!item) throw new Error(`${content.resourceUri} has no content`);
  if (item.mimeType !== MIME) throw new Error(`${content.resourceUri} is ${item.mimeType || "untyped"}, not ${MIME}`);
  const html = typeof item.text === "string" ? item.text : decodeBlob(item.blob);
  const ui = (item._meta && item._meta.ui) || {};
  return { html, csp: ui.csp, permissions: ui.permissions };
}

function decodeBlob(blob) {
  if (typeof blob !== "string") throw new Error("the resource has neither text nor blob");
  return new TextDecoder().decode(Uint8Array.from(atob(blob), (c) => c.charCodeAt(0)));
}

// Resolves when the sandbox proxy in `frame` says it is ready (a message from that frame only).
function sandboxReady(frame) {
  return new Promise((resolve) => {
    const listener = (event) => {
      if (event.source !== frame.contentWindow || !event.data || event.data.method !== "ui/notifications/sandbox-proxy-ready") return;
      window.removeEventListener("message", listener);
      resolve();
    };
    window.addEventListener("message", listener);
  });
}

function hostContext(frame) {
  const dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  return {
    theme: dark ? "dark" : "light",
    displayMode: "inline",
    availableDisplayModes: ["inline"],
    containerDimensions: { maxHeight: MAX_HEIGHT, width: frame.parentElement ? frame.parentElement.clientWidth : 600 },
    locale: navigator.language,
    timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
    platform: "web",
    userAgent: HOST.name,
  };
}

// The bridge's host side: what the app may ask of the page, each answered here and nowhere else.
function newBridge(frame, content, host, status) {
  const capabilities = { openLinks: {}, serverTools: {}, logging: {}, message: { text: {} } };
  const bridge = new AppBridge(null, HOST, capabilities, { hostContext: hostContext(frame) });
  bridge.oncalltool = (params) => host.request(content.serverId, "tools/call", params);
  bridge.onmessage = async (params) => {
    const text = (params.content || []).filter((block) => block && block.type === "text").map((block) => block.text).join("\n");
    if (!text) return { isError: true };
    host.say(text);
    return {};
  };
  bridge.onopenlink = async ({ url }) => {
    const refusal = host.linkRefusal(String(url));
    if (refusal) {
      status(`link not opened: ${refusal}`, "error refused");
      return { isError: true };
    }
    window.open(url, "_blank", "noopener,noreferrer");
    return {};
  };
  bridge.onloggingmessage = (params) => {
    host.request(content.serverId, "notifications/message", params).catch(() => {});
  };
  bridge.onsizechange = ({ width, height }) => {
    if (typeof height === "number" && height >= 0) frame.style.height = `${Math.min(Math.ceil(height), MAX_HEIGHT)}px`;
    if (typeof width === "number" && width >= 0) frame.style.minWidth = `min(${Math.ceil(width)}px, 100%)`;
  };
  return bridge;
}

// The page's MCP Apps host (served beside page.html as /page_apps.js; see yao_actors/service/apps_host.py).
//
// An "mcp-apps" activity ({result, resourceUri, serverId, toolInput}) names a tool's interface: its ui://
// resource is read through the service (a proxied MCP request: the page never talks to an MCP server itself),
// then shown in a sandbox proxy frame on the apps origin, another origin than the page's, which loads the app's
// HTML into an inner frame sandboxed without allow-same-origin. The bridge is @modelcontextprotocol/ext-apps'
// own AppBridge (vendored, /vendor/ext-apps-app-bridge.js): it answers the app's ui/initialize with the host
// context, then gets the tool's input and result; the app's tools/call goes through the service's proxy,
// ui/message puts the app's text in the page's message box for the user to send (an app never starts a run; an
// app shown again from the conversation's history is not heard until the user has used it), ui/open-link opens
// only what the page's link rule allows, and size changes resize the frame. Messages are taken only from the
// sandbox frame on the apps origin and posted only to that origin; a sandbox or app that does not answer within
// the page's bound (30 s) gets a note in its box instead of a wait without end.
import { AppBridge, PostMessageTransport, buildAllowAttribute } from "/vendor/ext-apps-app-bridge.js";

const HOST = { name: "yao-actors page", version: "1" };
const SANDBOX_PATH = "/apps/sandbox.html";
const MIME = "text/html;profile=mcp-app";
const MAX_HEIGHT = 2000;   // pixels an app may grow to (past that it scrolls inside)
const WAIT_SECONDS = 30;   // how long the sandbox and the app have to answer, unless the page says otherwise

// The bridge's transport, held to the apps origin: it takes messages only from the sandbox frame's window *and*
// the apps origin (a frame navigated elsewhere keeps its window), and posts only to the apps origin (the vendored
// transport posts to "*" and takes no target origin, so its target is a window posting to that origin only).
class AppsOriginTransport extends PostMessageTransport {
  constructor(frameWindow, origin) {
    super({ postMessage: (message) => frameWindow.postMessage(message, origin) }, frameWindow);
    const listener = this.messageListener;
    this.messageListener = (event) => { if (event.origin === origin) listener(event); };
  }
}

// `promise`, or an Error saying `what` once `seconds` have passed without it.
function within(promise, seconds, what) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} within ${seconds} s`)), seconds * 1000);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

// Shows the app of `content` in `box`. `host`: {appsOrigin, request(serverId, method, params) -> Promise of the
// MCP result (rejected with an Error for {error}), propose(text, app, label) -> put that text in the message box
// as `app`'s (any value naming the app's instance), or say why not, linkRefusal(url) -> why a link may not be
// opened, or null, replayed: whether the app is shown again from the conversation's history, waitSeconds: the
// bound on the sandbox's and the app's answers (default 30)}.
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
  const origin = new URL(host.appsOrigin).origin;
  const bridge = newBridge(frame, box, content, host, status);
  const ready = sandboxReady(frame, origin);
  const seconds = host.waitSeconds > 0 ? host.waitSeconds : WAIT_SECONDS;
  frame.src = url.href;
  box.append(frame);
  const initialized = new Promise((resolve) => { bridge.oninitialized = resolve; });
  try {
    await within(ready, seconds, "the app's sandbox did not load");
    await bridge.connect(new AppsOriginTransport(frame.contentWindow, origin));
    await bridge.sendSandboxResourceReady({ html: resource.html, csp: resource.csp, permissions: resource.permissions });
    box.dataset.app = "starting";  // the app has its HTML; its ui/initialize is awaited from now on
    await within(initialized, seconds, "the app did not start (ui/initialize)");
  } catch (error) {
    box.dataset.app = "not-started";
    status(`${error.message}: it may not work (its tool's result is in the card above)`, "error");
    return;
  }
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

// Resolves when the sandbox proxy in `frame` says it is ready (a message from that frame, on the apps origin, only).
function sandboxReady(frame, origin) {
  return new Promise((resolve) => {
    const listener = (event) => {
      if (event.source !== frame.contentWindow || event.origin !== origin) return;
      if (!event.data || event.data.method !== "ui/notifications/sandbox-proxy-ready") return;
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
function newBridge(frame, box, content, host, status) {
  const capabilities = { openLinks: {}, serverTools: {}, logging: {}, message: { text: {} } };
  const bridge = new AppBridge(null, HOST, capabilities, { hostContext: hostContext(frame) });
  bridge.oncalltool = (params) => host.request(content.serverId, "tools/call", params);
  bridge.onmessage = messageHandler(frame, box, content, host);
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

// ui/message: the app's text goes into the page's message box, saying which app proposed it, for the user to send,
// edit or clear; the app never starts a run itself. An app shown again from the conversation's history is not heard
// until the user has used it (focused its frame): an app that asks on load would otherwise ask again each time the
// conversation is opened. What is not taken is said once in the app's box (the last reason), and the app gets an error.
function messageHandler(frame, box, content, host) {
  let used = !host.replayed;
  window.addEventListener("blur", () => { if (document.activeElement === frame) used = true; });
  let note = null;
  const refuse = (why) => {
    note = note || box.appendChild(Object.assign(document.createElement("div"), { className: "note message-refused" }));
    note.textContent = `message not taken: ${why}`;
    return { isError: true };
  };
  const label = `${content.resourceUri} (server ${content.serverId})`;
  return async (params) => {
    const text = (params.content || []).filter((block) => block && block.type === "text").map((block) => block.text).join("\n");
    if (!text) return refuse("it has no text");
    used = used || document.activeElement === frame;
    if (!used) return refuse("this app was shown again from the conversation's history; use it first");
    const refusal = host.propose(text, box, label);
    return refusal ? refuse(refusal) : {};
  };
}

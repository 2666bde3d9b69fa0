"""A hostile MCP server written as raw JSON-RPC: some of its answers to ``tools/call`` cannot be parsed.

``python -m tests.integration.malformed_server`` speaks over stdio; ``--http`` serves streamable HTTP on
127.0.0.1 (port 0, printing ``LISTENING http://127.0.0.1:PORT/mcp`` once bound), answering each request with a JSON
body, or with ``--sse`` as an event stream. Handshake-era only (``initialize``); its tools:

- ``deep``: answers with ``structuredContent`` nested 900 levels deep;
- ``surrogate``: answers with a text holding a lone surrogate escape (``"\\ud800"``);
- ``shapeless``: answers with JSON that is not a tool's result (``content`` a number);
- ``unasked_task``: answers with a 2025-11-25 ``CreateTaskResult`` though the call asked for no task;
- ``echo``: answers ``{"said": <its text argument>}`` properly.
"""

from __future__ import annotations

import argparse
import http.server
import json
import sys
from typing import Any

DEPTH = 900

TOOLS = [
    {"name": name, "description": name, "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}
    for name in ("deep", "surrogate", "shapeless", "unasked_task", "echo")
]


def _result(request_id: Any, result: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})


def answer(message: dict[str, Any]) -> str | None:
    """The JSON text answering ``message`` (``None`` for a notification)."""
    request_id, method, params = message.get("id"), message.get("method"), message.get("params") or {}
    if request_id is None:
        return None
    if method == "initialize":
        return _result(
            request_id,
            {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "malformed", "version": "1"},
            },
        )
    if method == "tools/list":
        return _result(request_id, {"tools": TOOLS})
    if method == "tools/call":
        name = params.get("name")
        if name == "deep":
            nested = '{"a":' * DEPTH + "1" + "}" * DEPTH
            return f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"result":{{"content":[],"structuredContent":{nested}}}}}'
        if name == "surrogate":
            return f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"result":{{"content":[{{"type":"text","text":"\\ud800"}}]}}}}'
        if name == "shapeless":
            return _result(request_id, {"content": 5})
        if name == "unasked_task":
            at = "2026-12-06T12:00:00Z"
            task = {"taskId": "t-1", "status": "working", "createdAt": at, "lastUpdatedAt": at, "ttl": None}
            return _result(request_id, {"task": task})
        said = {"said": (params.get("arguments") or {}).get("text")}
        return _result(request_id, {"content": [{"type": "text", "text": json.dumps(said)}], "structuredContent": said})
    error = {"code": -32601, "message": f"method not found: {method}"}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error})


def serve_stdio() -> None:
    for line in sys.stdin:
        if line.strip():
            reply = answer(json.loads(line))
            if reply is not None:
                sys.stdout.write(reply + "\n")
                sys.stdout.flush()


class _Handler(http.server.BaseHTTPRequestHandler):
    sse = False

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        reply = answer(json.loads(body))
        if reply is None:
            self.send_response(202)
            self.end_headers()
            return
        data = f"event: message\ndata: {reply}\n\n".encode() if self.sse else reply.encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream" if self.sse else "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.send_response(405)
        self.end_headers()

    do_DELETE = do_GET

    def log_message(self, format: str, *args: Any) -> None:  # the standard library's name
        pass


def serve_http(sse: bool) -> None:
    handler = type("Handler", (_Handler,), {"sse": sse})
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        print(f"LISTENING http://127.0.0.1:{server.server_address[1]}/mcp", flush=True)
        server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--sse", action="store_true")
    args = parser.parse_args()
    serve_http(args.sse) if args.http else serve_stdio()

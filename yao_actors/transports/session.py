"""The SDK's client and session as the runtime uses them: subclasses, never patched.

Two of the SDK's behaviours do not suit a server actor, and each is changed where the SDK lets a subclass
change it, so nothing of the SDK (its classes, its modules, one of its sessions) is ever assigned to:

- **Structured output** is checked by the tool's outcome (:func:`~yao_actors.tools.results.call_outcome`,
  through the schema gate): a mismatch is the tool's error, saying where. The SDK's own check
  (``validate_tool_result``) raises a ``RuntimeError`` that would read as the server failing, and resolves no
  schema the way the gate does; :class:`GatedSession` leaves it out.
- **The ``server/discover`` probe** of ``protocol: "auto"`` waits :data:`DISCOVER_TIMEOUT` seconds (the SDK's
  fixed 10 s would stall a start): past it, the probe counts as unanswered, and the handshake follows, as the
  SDK does for its own timeout.
- **A 2025-11-25 task** answers ``tools/call`` with a ``CreateTaskResult``, which the SDK's check of that
  method's result refuses (it knows the shape, not as an answer to ``tools/call``):
  :meth:`GatedSession.send_task_call` sends the task-augmented call as the SDK sends any request (stamped the
  same way, through the same dispatcher) and reads either answer itself.

The client's extensions (the tasks extension, :mod:`~yao_actors.tools.task_wire`) are folded into the session as
``mcp.Client`` folds them: their capabilities are declared, their result shapes claimed.

:class:`GatedClient` is ``mcp.Client`` whose session is a :class:`GatedSession`.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any, Final

import mcp
import mcp.types
import mcp_types
import trio
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter

#: MCP Apps' extension, which a client of a server with ``apps`` on declares, with the MIME type it renders.
UI_EXTENSION: Final = "io.modelcontextprotocol/ui"
#: The MIME type of an app's HTML resource.
APP_MIME_TYPE: Final = "text/html;profile=mcp-app"
#: What the client declares under :data:`UI_EXTENSION`.
UI_SETTINGS: Final = {"mimeTypes": [APP_MIME_TYPE]}

#: Seconds ``protocol: "auto"`` waits for the answer to ``server/discover`` before it tries the handshake.
DISCOVER_TIMEOUT: Final = 2.0


class GatedSession(ClientSession):
    """The SDK's session, with structured output left to the outcome and a bounded discover probe."""

    async def validate_tool_result(self, name: str, result: mcp.types.CallToolResult) -> None:
        """Accept every result here: the outcome checks structured output against the tool's ``outputSchema``."""

    async def send_discover(self, version: str) -> dict[str, Any]:
        """The SDK's probe, unanswered after :data:`DISCOVER_TIMEOUT` seconds (an ``MCPError``, as its own
        timeout is; the probe is not cancelled at the server, as the SDK's is not)."""
        with trio.move_on_after(DISCOVER_TIMEOUT):
            return await super().send_discover(version)
        message = f"server/discover got no answer within {DISCOVER_TIMEOUT:g} s"
        raise MCPError(mcp.types.REQUEST_TIMEOUT, message)

    async def send_task_call(
        self, request: mcp_types.CallToolRequest
    ) -> mcp_types.CreateTaskResult | mcp_types.CallToolResult:
        """Send a 2025-11-25 ``tools/call`` that asks for a task; its answer, a task or (a server may decline)
        the result. ``MCPError`` for a JSON-RPC error, ``pydantic.ValidationError`` for an answer of neither shape."""
        data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
        options: Any = {}
        self._stamp(data, options)
        raw = await self._dispatcher.send_raw_request(data["method"], data.get("params"), options)
        return CALL_OR_TASK.validate_python(raw, by_name=False)


#: What a 2025-11-25 ``tools/call`` that asked for a task may be answered with.
CALL_OR_TASK: Final[TypeAdapter[mcp_types.CreateTaskResult | mcp_types.CallToolResult]] = TypeAdapter(
    mcp_types.CreateTaskResult | mcp_types.CallToolResult
)


class GatedClient(mcp.Client):
    """``mcp.Client`` on a :class:`GatedSession`, which it builds as the SDK builds its own session.

    The SDK takes no session class as an option: its one seam is the client's ``_build_session``, overridden
    here. The runtime uses no response cache (the actor keeps the catalog): a client asked for one is refused. Its
    client extensions are folded in as the SDK's builder folds them — MCP Apps' ``io.modelcontextprotocol/ui``
    (declared, with its settings) and the tasks extension (declared, and its ``resultType: "task"`` claimed) — but
    for notification bindings, which it refuses.
    """

    async def _build_session(self, exit_stack: AsyncExitStack) -> ClientSession:
        folded = self._folded_extensions
        if self.cache is not None or folded.bindings:
            raise ValueError("GatedClient takes neither a response cache nor extension notifications: pass cache=None")
        dispatcher = await self._connect(exit_stack, self.mode, self.raise_exceptions)
        return GatedSession(
            dispatcher=dispatcher,
            read_timeout_seconds=self.read_timeout_seconds,
            sampling_callback=self.sampling_callback,
            sampling_capabilities=self.sampling_capabilities,
            list_roots_callback=self.list_roots_callback,
            logging_callback=self.logging_callback,
            log_level=self.log_level,
            message_handler=self.message_handler,
            client_info=self.client_info,
            elicitation_callback=self.elicitation_callback,
            extensions=folded.ad,
            result_claims=folded.claims or None,
        )

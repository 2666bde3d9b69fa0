"""A run's ``ACTIVITY_SNAPSHOT`` for a call of a tool with an interface (MCP Apps).

It follows the call's ``TOOL_CALL_RESULT`` and goes through the run's emitter like every event, so it is stored
with the run (history and ``resume`` give it again). Its content is what ``@ag-ui/mcp-apps-middleware`` emits
(:func:`~yao_actors.tools.apps.activity_content`). An activity must fit in one frame: one whose encoded content
is over ``limit`` bytes is not emitted, and a ``server_status`` event (state ``app_result_too_large``) says so.
"""

from __future__ import annotations

import logging

from yao_actors.events import RunEvents
from yao_actors.tools.apps import ACTIVITY_TYPE, AppCall, activity_content
from yao_actors.untrusted.json import dumps_utf8

logger = logging.getLogger(__name__)

#: The ``server_status`` state of an activity left out for its size.
TOO_LARGE = "app_result_too_large"


async def emit_activity(events: RunEvents, message_id: str, call: AppCall, limit: int) -> None:
    """Emit ``call``'s activity under ``message_id``, or say why not when it is over ``limit`` bytes."""
    content = activity_content(call)
    size = len(dumps_utf8(content))
    if size > limit:
        detail = f"the result for the app of {call.resource_uri} is {size} bytes, over the {limit} an event carries"
        logger.warning("server %r: %s", call.server_id, detail, extra={"server": call.server_id})
        await events.server_status(call.server_id, TOO_LARGE, detail)
        return
    await events.activity_snapshot(message_id, ACTIVITY_TYPE, content)

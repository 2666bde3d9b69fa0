"""Threads and runs as the store has them: a thread's history for clients, and a stored run's events replayed.

:class:`ThreadHistory` is what ``history`` answers: the thread's messages and its runs, and their wire form
(an AG-UI ``MESSAGES_SNAPSHOT`` with the messages in AG-UI form, plus ``threadId`` and a ``runs`` list).

:class:`StoredRunStream` is what ``resume`` gives for a run that is not going on in this process: its stored
events after a ``seq``, always ending with its one terminal event. A run still ``running`` in the store (in
another process sharing it) is followed until its terminal event is stored (the store's ``wait_events``: Redis
blocks on the run's stream, SQLite polls). When the log no longer holds a
terminal event past the client's ``seq`` (it was already seen, or the log expired after ``event_ttl``), the
stored terminal event is sent again, or one is made from the run's record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import attrs
import trio

from yao_actors.errors import RunErrorCode, store_trouble_ends_the_run
from yao_actors.events import TERMINAL_TYPES, EventDict
from yao_actors.models.base import Message
from yao_actors.store import ConversationStore, RunRecord, RunStatus
from yao_actors.tasks import patiently

FOLLOW_WAIT: Final = 5.0
"""Longest wait for a run going on in another process before its record is looked at again."""


@attrs.frozen
class ThreadHistory:
    """A stored thread: its messages (the seed's shapes, as the model sees them) and its runs, oldest first."""

    thread_id: str
    messages: tuple[Message, ...]
    runs: tuple[RunRecord, ...]

    def to_wire(self) -> dict[str, Any]:
        """The ``history`` answer: ``MESSAGES_SNAPSHOT`` with ``threadId``, AG-UI messages and ``runs``."""
        return {
            "type": "MESSAGES_SNAPSHOT",
            "threadId": self.thread_id,
            "messages": [agui_message(m, f"{self.thread_id}.{i + 1}") for i, m in enumerate(self.messages)],
            "runs": [run.to_wire() for run in self.runs],
        }


def agui_message(message: Message, message_id: str) -> dict[str, Any]:
    """One stored chat message in AG-UI form: ``toolCalls`` for an assistant's calls, ``toolCallId`` for a result."""
    role = message.get("role")
    content = message.get("content")
    wire: dict[str, Any] = {"id": message_id, "role": role}
    if isinstance(content, str) and (content or role != "assistant"):
        wire["content"] = content
    elif content is not None and not isinstance(content, str):
        wire["content"] = json.dumps(content, ensure_ascii=False)
    if role == "assistant" and message.get("tool_calls"):
        wire["toolCalls"] = [
            {
                "id": call.get("id", ""),
                "type": "function",
                "function": {
                    "name": call.get("function", {}).get("name", ""),
                    "arguments": call.get("function", {}).get("arguments", ""),
                },
            }
            for call in message["tool_calls"]
        ]
    if role == "tool":
        wire["toolCallId"] = message.get("tool_call_id", "")
    return wire


async def stored_run_stream(
    store: ConversationStore, run_id: str, after_seq: int, principal: str | None
) -> StoredRunStream | None:
    """The stored run's events after ``after_seq``; ``None`` for an unknown run or another principal's."""
    run = await patiently(lambda: store.get_run(run_id))
    if run is None:
        return None
    thread = await patiently(lambda: store.get_thread(run.thread_id))
    if thread is None or thread.principal != principal:
        return None
    return StoredRunStream(store, run, after_seq)


class StoredRunStream(trio.abc.ReceiveChannel[EventDict]):
    """A stored run's events with ``seq`` above ``after_seq``, up to its one terminal event (see the module)."""

    def __init__(self, store: ConversationStore, run: RunRecord, after_seq: int) -> None:
        self._store = store
        self._run = run
        self._after = after_seq
        self._pending: list[EventDict] = []
        self._finished = False
        self.run_id: Final = run.run_id
        self.thread_id: Final = run.thread_id

    def cancel(self) -> None:
        """Nothing to cancel here: the run is not going on in this process."""

    def receive_nowait(self) -> EventDict:
        """The next event already read from the store; ``trio.WouldBlock`` when the store must be asked."""
        if self._pending:
            return self._pending.pop(0)
        if self._finished:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    async def receive(self) -> EventDict:
        """The next event; ``RunError`` ``store_unavailable`` when the store stays out of reach (the front end
        tells its client, who resumes again later: the run is not over)."""
        while not self._pending and not self._finished:
            with store_trouble_ends_the_run():
                await patiently(self._fetch)
        if self._pending:
            event = self._pending.pop(0)
            await trio.lowlevel.checkpoint()
            return event
        await trio.lowlevel.checkpoint()
        raise trio.EndOfChannel

    async def _fetch(self) -> None:
        """Read what is new; with nothing new, wait for a running run, or end with the terminal event."""
        if await self._read():
            return
        record = await self._store.get_run(self._run.run_id)
        if record is not None and record.status is RunStatus.RUNNING:
            await self._store.wait_events(self._run.run_id, self._after, FOLLOW_WAIT)
            return
        # The run ended between the read and the look at its record: its last events (the terminal one
        # among them) may have come meanwhile; read once more before making a terminal event up.
        if await self._read():
            return
        self._pending.append(await self._terminal(record or self._run))
        self._finished = True

    async def _read(self) -> bool:
        """Take the stored events after the last one taken (up to a terminal one); whether there were any."""
        events = await self._store.read_events(self._run.run_id, self._after)
        for event in events:
            self._pending.append(event)
            self._after = event["seq"]
            if event.get("type") in TERMINAL_TYPES:
                self._finished = True
                break
        return bool(events)

    async def _terminal(self, record: RunRecord) -> EventDict:
        """The run's stored terminal event, or one made from its record when the log no longer has it.

        Numbered past what the client has seen: a process that died may have sent events it never stored,
        and the terminal event a sweep appended then has a ``seq`` the client already saw on another event.
        """
        for event in reversed(await self._store.read_events(record.run_id, 0)):
            if event.get("type") in TERMINAL_TYPES:
                return event if event["seq"] > self._after else {**event, "seq": self._after + 1}
        return terminal_from_record(record, self._after + 1)

    async def aclose(self) -> None:
        self._finished = True
        self._pending.clear()
        await trio.lowlevel.checkpoint()


def terminal_from_record(record: RunRecord, seq: int) -> EventDict:
    """A terminal event for a run whose log expired: ``RUN_FINISHED`` or ``RUN_ERROR`` from its stored outcome."""
    base: dict[str, Any] = {"runId": record.run_id, "seq": seq, "threadId": record.thread_id}
    usage: Mapping[str, Any] = record.usage
    if record.status is RunStatus.FINISHED:
        result = {"outcome": record.outcome, "usage": dict(usage), "note": "the run's event log has expired"}
        return {"type": "RUN_FINISHED", **base, "result": result}
    code = RunErrorCode.INTERRUPTED if record.status is RunStatus.INTERRUPTED else RunErrorCode.RUN_ERROR
    message = f"the run ended with {record.outcome or record.status.value}; its event log has expired"
    return {"type": "RUN_ERROR", **base, "message": message, "code": code.value}

"""One websocket connection: read frames, start and cancel runs, write their events back.

A :class:`Connection` is served by one task (:meth:`Connection.serve`), with these parts:

- the reader (in the serving task itself, reading the socket: :class:`~yao_actors.service.websocket.ServerWebSocket`):
  validates each frame, answers ``ping``, cancels runs, starts runs; it also keeps the connection alive: it
  pings the client every half ``idle_timeout`` and drops it when the pong has not come back by the next ping;
- one task per run, holding ``runtime.open_run`` open with the frame's request (:meth:`RunFrame.to_request`)
  and relaying the run's events into the writer's queue as they become visible (once stored, with a durable
  store), a burst at a time — several runs at once, each on its own thread (the runtime routes runs to
  conversation actors by ``threadId``). The relay, and how a run and a client are admitted, are those of
  ``POST /agui`` too (:mod:`yao_actors.service.relay`): the two front ends differ only in framing;
- the writer, the only task that sends on the websocket, fed by a bounded channel: a slow reader on the
  client side fills it and so slows its own runs, never memory (every channel is bounded). Frames that are
  ready together go out in one socket write, each still its own websocket message.

Besides runs, a client may ask for a thread's ``history``, ``resume`` a run (its stored events after a
``seq``, then its live ones: relayed like a run), ``forget`` a thread, and list its ``threads``; each is
answered from the runtime's conversation store, for the connection's principal only.

Ends: the client leaving (or not answering pings) ends the connection's tasks at once; its runs are *detached*, not
cancelled: each goes on for ``server.detach_grace`` seconds waiting for a ``resume`` (from any connection of the
same principal), and is cancelled only if none comes (0: at once); until it ends it keeps its slot in
``server.max_runs`` and in its principal's share (:meth:`RunBudget.release_when_done`). :meth:`Connection.stop`
(service shutdown) ends gracefully: reading stops, every run is cancelled yet still writes its one terminal event,
the writer drains, and the connection closes with 1001.
A connection with no run and no frame for ``idle_timeout`` seconds is closed (1000).

Failures stay local: an exception out of one run (a runtime bug, an event that cannot be encoded) ends that
run with ``RUN_ERROR`` ``internal_error`` and is logged with its traceback; the connection and its other runs
go on. Anything else that fails in a connection ends that connection only (see the front end).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

import attrs
import trio
from trio_websocket import ConnectionClosed

from yao_actors.config import ServiceSpec
from yao_actors.conversation.request import RunRequest
from yao_actors.errors import ErrorFrameCode, FrameError, RunError, RunErrorCode
from yao_actors.events import encoded_event
from yao_actors.service.app_proxy import proxied_answer, proxy_events
from yao_actors.service.budget import DetachedRun, RunBudget, RunSlot
from yao_actors.service.protocol import (
    PONG,
    USER_ROLES,
    CancelFrame,
    ForgetFrame,
    HistoryFrame,
    PingFrame,
    ResumeFrame,
    RunFrame,
    ThreadsFrame,
    ToolsFrame,
    error_frame,
    parse_frame,
)
from yao_actors.service.relay import RunRelay, admit_run
from yao_actors.service.served import RunOpener, ThreadSummary
from yao_actors.service.websocket import MessageSocket
from yao_actors.store.records import iso
from yao_actors.tasks import receive_now_or_wait, send_now_or_wait

logger = logging.getLogger(__name__)

#: Frames buffered per connection before the runs feeding it wait for the client.
OUTGOING_BUFFER: Final = 16
#: The most frames the writer sends in one socket write.
MAX_WRITE_BATCH: Final = 64
#: Close codes (RFC 6455): normal, going away (service shutdown, unanswered pings), and a failure in the service.
CLOSE_NORMAL: Final = 1000
CLOSE_GOING_AWAY: Final = 1001
CLOSE_INTERNAL_ERROR: Final = 1011

Event = Mapping[str, Any]


@attrs.define(eq=False)
class Connection:
    """The state of one accepted websocket; see the module docstring for its tasks and how it ends."""

    ws: MessageSocket
    runtime: RunOpener
    spec: ServiceSpec
    budget: RunBudget
    #: Who the handshake's token says the client is (``None``: no tokens, every local client is one principal).
    principal: str | None = None
    close_code: int = CLOSE_NORMAL
    close_reason: str | None = None
    #: The client left or stopped answering: nothing more can be sent, not even a close frame.
    lost: bool = False
    _runs: dict[str, RunRelay] = attrs.field(factory=dict, init=False)
    _reading: trio.CancelScope = attrs.field(factory=trio.CancelScope, init=False)
    _everything: trio.CancelScope = attrs.field(factory=trio.CancelScope, init=False)
    _outgoing: tuple[trio.MemorySendChannel[str], trio.MemoryReceiveChannel[str]] = attrs.field(
        factory=lambda: trio.open_memory_channel[str](OUTGOING_BUFFER), init=False
    )

    def stop(self) -> None:
        """End gracefully: stop reading, cancel every run (each still writes its terminal event), close 1001."""
        self.close_code, self.close_reason = CLOSE_GOING_AWAY, "service shutting down"
        self._reading.cancel()

    async def serve(self) -> None:
        """Serve the connection until the client leaves, it idles out, or :meth:`stop`; closing is the caller's."""
        send, receive = self._outgoing
        with self._everything:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write, receive)
                with send:  # closed once the runs are over: the writer drains the queue and ends
                    async with trio.open_nursery() as runs:
                        try:
                            await self._read(runs)
                        except ConnectionClosed:
                            self._lost()
                        if not self.lost:  # a lost client's runs are detached, waiting to be resumed
                            for run in self._runs.values():
                                run.cancel()

    def _lost(self) -> None:
        """The client is gone (or unresponsive): detach its runs, and end everything of this connection at once.

        When nothing is left to end (no run in flight, the writer waiting on an empty queue: a client that
        leaves after its runs) the connection ends as it does after ``stop``, without a cancellation: each
        one delivered costs tens of microseconds (the ``Cancelled``, and trio's reprs of it and its task).
        """
        self.lost = True
        for run in self._runs.values():
            # Detached, not cancelled: the client may come back (a dropped network, a reloaded page) and
            # ``resume`` it from any connection; the run's work is not thrown away for a blip.
            run.detach()
        # Nothing can be sent any more, so nothing of this connection may wait to send: its relays and writer end
        # at once (the detached runs go on in the runtime). Unless nothing is left to end at all (see above).
        if self._runs or not self._outgoing[1].statistics().tasks_waiting_receive:
            self._everything.cancel()

    async def _read(self, runs: trio.Nursery) -> None:
        """Read and handle frames until stopped or idle; raises ``ConnectionClosed`` when the client leaves.

        Between frames it keeps the connection alive: a ping every half ``idle_timeout``; a client whose pong
        has not come back by the next ping (or whose socket takes no ping for that long) is gone.
        """
        ws = self.ws
        idle_timeout = self.spec.idle_timeout
        interval = idle_timeout / 2
        with self._reading:
            now = trio.current_time()
            idle_at, ping_at = now + idle_timeout, now + interval
            while True:
                message = await ws.get_message(min(idle_at, ping_at))
                if message is not None:
                    await self._handle(message, runs)
                    idle_at = trio.current_time() + idle_timeout
                    continue
                now = trio.current_time()
                if now >= idle_at:
                    if not self._runs:
                        self.close_reason = "idle timeout"
                        return
                    idle_at = now + idle_timeout
                if now >= ping_at:
                    if not await self._ping(interval):
                        self._lost()
                        return
                    ping_at = now + interval

    async def _ping(self, interval: float) -> bool:
        """Ping the client; ``False`` when it has not answered the last ping, or its socket takes none in time."""
        if self.ws.awaiting_pong:
            return False
        with trio.move_on_after(interval) as late:
            await self.ws.ping()
        return not late.cancelled_caught

    async def _handle(self, message: str | bytes, runs: trio.Nursery) -> None:
        """Handle one frame; a refused frame gets a ``RUN_ERROR`` (or an ``error`` frame) and the connection goes on."""
        roles = USER_ROLES | set(self.spec.allow_client_roles)
        try:
            frame = parse_frame(message, max_bytes=self.spec.max_frame_bytes, client_roles=roles)
            if isinstance(frame, PingFrame):
                await self._emit(PONG)
            elif isinstance(frame, CancelFrame):
                await self._cancel(frame.run_id)
            elif isinstance(frame, HistoryFrame | ForgetFrame | ThreadsFrame):
                await self._answer(frame)
            elif isinstance(frame, ToolsFrame):
                await self._list_tools(frame.assistant)
            elif frame.run_id in self._runs:
                message = f"runId {frame.run_id!r} is already in flight on this connection; that run goes on"
                await self._emit(error_frame(ErrorFrameCode.DUPLICATE_RUN_ID, message, frame.run_id))
            elif isinstance(frame, ResumeFrame):
                self._start_resume(frame, runs)
            else:
                self._start_run(frame, runs)
        except FrameError as error:
            logger.info(
                "refused a frame (%s): %s",
                error.code.value,
                error,
                extra={"code": error.code.value, "run_id": error.run_id or "", "principal": self.principal},
            )
            await RunRelay(error.run_id or "", "", self._emit).end(str(error), error.code)

    async def _cancel(self, run_id: str) -> None:
        """Cancel a run of this connection; a run not in flight gets an ``unknown_run`` error frame."""
        run = self._runs.get(run_id)
        if run is None:
            await self._emit(
                error_frame(ErrorFrameCode.UNKNOWN_RUN, f"no run {run_id!r} is in flight on this connection", run_id)
            )
        else:
            run.cancel()

    async def _answer(self, frame: HistoryFrame | ForgetFrame | ThreadsFrame) -> None:
        """Answer a question about the client's threads from the store (``store_unavailable`` when it is out)."""
        thread_id = None if isinstance(frame, ThreadsFrame) else frame.thread_id
        try:
            if isinstance(frame, HistoryFrame):
                await self._emit((await self.runtime.history(frame.thread_id, principal=self.principal)).to_wire())
            elif isinstance(frame, ThreadsFrame):
                listed = await self.runtime.threads(principal=self.principal, limit=frame.limit)
                await self._emit({"type": "threads", "threads": [_thread_entry(t) for t in listed]})
            elif await self.runtime.forget(frame.thread_id, principal=self.principal):
                await self._emit({"type": "forgotten", "threadId": frame.thread_id})
            else:
                message = f"no thread {frame.thread_id!r} is stored"
                await self._emit(error_frame(ErrorFrameCode.UNKNOWN_THREAD, message, thread_id=frame.thread_id))
        except RunError as error:
            code = ErrorFrameCode.STORE_UNAVAILABLE
            await self._emit(error_frame(code, str(error), thread_id=thread_id))

    async def _list_tools(self, assistant: str) -> None:
        """Answer a ``tools`` frame: what ``assistant``'s runs are offered now (the servers that are ready)."""
        try:
            catalog = await self.runtime.catalog(assistant)
        except KeyError:
            message = f"no assistant {assistant!r} is configured"
            await self._emit(error_frame(ErrorFrameCode.UNKNOWN_ASSISTANT, message))
            return
        tools = [
            {"name": e.name, "server": e.server, "tool": e.tool, "title": e.hints.title, "readOnly": e.hints.read_only}
            for e in catalog.entries
        ]
        await self._emit({"type": "tools", "assistant": assistant, "tools": tools, "notOffered": catalog.not_offered()})

    def _check_room(self, run_id: str) -> None:
        """Raise ``too_many_runs`` when the connection has ``max_runs_per_connection`` runs in flight."""
        if len(self._runs) >= self.spec.max_runs_per_connection:
            limit = self.spec.max_runs_per_connection
            message = f"this connection already has {len(self._runs)} runs in flight (limit {limit})"
            raise FrameError(RunErrorCode.TOO_MANY_RUNS, message, run_id=run_id)

    def _start_resume(self, frame: ResumeFrame, runs: trio.Nursery) -> None:
        """Follow a run on this connection (it counts towards the connection's runs, not the service's)."""
        self._check_room(frame.run_id)
        run = self._runs[frame.run_id] = RunRelay(frame.run_id, "", self._emit, resumed=True, last_seq=frame.after_seq)
        runs.start_soon(self._resume, frame, run)

    async def _resume(self, frame: ResumeFrame, run: RunRelay) -> None:
        """Relay a resumed run up to its terminal event; an unknown run gets ``RUN_ERROR`` ``unknown_run``."""
        try:
            await run.relay(self.runtime.open_resume(frame.run_id, after_seq=frame.after_seq, principal=self.principal))
        finally:
            del self._runs[run.run_id]

    def _start_run(self, frame: RunFrame, runs: trio.Nursery) -> None:
        """Admit a run within the limits and start relaying it, or raise :class:`FrameError`."""
        try:
            if not self.budget.closing:  # shutting down is what a refused client hears first
                self._check_room(frame.run_id)
            slot = admit_run(self.budget, self.principal)
        except RunError as refused:
            raise FrameError(refused.code, str(refused), run_id=frame.run_id) from None
        if frame.proxied is not None:
            runs.start_soon(self._proxied, frame, slot)
            return
        request = frame.to_request(self.principal)
        # A new thread's id is the client's to learn from RUN_STARTED: a run refused before it names none.
        run = self._runs[frame.run_id] = RunRelay(request.run_id, frame.thread_id or "", self._emit)
        runs.start_soon(self._run, request, run, slot)

    async def _proxied(self, frame: RunFrame, slot: RunSlot) -> None:
        """An app's proxied request: ``RUN_STARTED`` and ``RUN_FINISHED`` with its answer, numbered 1 and 2 (no run,
        nothing stored); the store out of reach is ``RUN_ERROR`` ``store_unavailable``."""
        thread_id = frame.thread_id or ""
        try:
            result = await proxied_answer(self.runtime, thread_id, frame.proxied, self.principal)
        except RunError as error:
            await RunRelay(frame.run_id, thread_id, self._emit).end(str(error), error.code)
            return
        finally:
            slot.release()
        for seq, event in enumerate(proxy_events(thread_id, frame.run_id, result), start=1):
            await self._emit({**event, "seq": seq})

    async def _run(self, request: RunRequest, run: RunRelay, slot: RunSlot) -> None:
        """Relay one run (its events come straight to the writer's queue), then free its slot.

        A run the client left goes on detached, and keeps its slot until it ends.
        """
        try:
            await run.relay(self.runtime.open_run(request))
        finally:
            del self._runs[run.run_id]
            stream = run.stream
            if run.detached and isinstance(stream, DetachedRun):
                self.budget.release_when_done(slot, stream)
            else:
                slot.release()

    async def _emit(self, frame: Event) -> None:
        """Queue a frame for the writer, waiting while the client is behind.

        While the queue has room this takes no trip through the scheduler: the events a run emits together
        (a step's start, its tool call, its end) are all queued before the writer runs, and go out in one
        socket write. A full queue waits (and checkpoints) as a channel send does. A run's event
        (:class:`~yao_actors.events.WireEvent`) goes out as the text it was encoded to once, the text its
        run's journal stores.
        """
        await send_now_or_wait(self._outgoing[0], encoded_event(frame))

    async def _write(self, receive: trio.MemoryReceiveChannel[str]) -> None:
        """Send queued frames in order until the queue is closed and drained; a client gone ends everything.

        The frames queued when the writer takes one go out with it in one socket write (up to
        :data:`MAX_WRITE_BATCH`), each its own websocket message. The queue is read without a checkpoint
        while it has frames: the write checkpoints.
        """
        ws = self.ws
        try:
            with receive:
                while True:
                    batch = [await receive_now_or_wait(receive)]
                    while len(batch) < MAX_WRITE_BATCH:
                        try:
                            batch.append(receive.receive_nowait())
                        except (trio.WouldBlock, trio.EndOfChannel):  # the end comes on the next round
                            break
                    await ws.send_messages(batch)
        except trio.EndOfChannel:
            pass  # the reader and the runs are over already (the queue closes after them)
        except (ConnectionClosed, trio.BrokenResourceError, trio.ClosedResourceError):
            self._lost()  # the last two: the client went away while a write was going out (this cancels all)


def _thread_entry(thread: ThreadSummary) -> dict[str, Any]:
    """One entry of a ``threads`` answer."""
    return {"threadId": thread.thread_id, "createdAt": iso(thread.created_at), "updatedAt": iso(thread.updated_at)}

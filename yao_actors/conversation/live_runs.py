"""The runs going on in this process, by run id: listed from being queued until they end.

A run listed here can be followed live (a resume reads its log, then its new events), is cancelled with its
thread when the thread is forgotten, and is waited out when its caller leaves: cancelled and waited for until it
closed out, or, when its stream detached, left going on for its ``detach_grace`` unfollowed.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager

import attrs
import trio

from yao_actors.conversation.actor import CLEANUP_GRACE
from yao_actors.conversation.order import FollowStream, RunControl, RunOrder
from yao_actors.conversation.request import RunRequest
from yao_actors.conversation.streaming.outlet import RunOutlet
from yao_actors.conversation.thread import ConversationHandle
from yao_actors.errors import RunError, RunErrorCode
from yao_actors.specs import AssistantSpec


@attrs.define(eq=False)
class LiveRuns:
    """The runs going on, by id; the grace timers of detached runs run in ``nursery``."""

    _nursery: trio.Nursery
    _detach_grace: float
    _orders: dict[str, RunOrder] = attrs.field(factory=dict)

    def __contains__(self, run_id: str) -> bool:
        return run_id in self._orders

    def order(self, request: RunRequest, spec: AssistantSpec, outlet: RunOutlet) -> RunOrder:
        """The order of ``request``'s run, unlisted here as it ends (no task waits for it to end: a spawn and two
        scheduler trips per run)."""
        unlist = functools.partial(self._orders.pop, request.run_id, None)
        return RunOrder(request, spec, outlet, RunControl(unlist))

    def check_new(self, run_id: str) -> None:
        """``RunError`` ``bad_request`` when a run ``run_id`` is going on already."""
        if run_id in self._orders:
            raise RunError(f"run {run_id!r} is already going on", code=RunErrorCode.BAD_REQUEST)

    async def submit(self, order: RunOrder, handle: ConversationHandle) -> None:
        """Queue ``order`` on its thread's actor (``handle``), listed as live until it ends."""
        self._orders[order.run_id] = order
        try:
            await handle.submit(order)
        except BaseException:  # not queued: it never ends
            del self._orders[order.run_id]
            raise

    @contextmanager
    def following(self, run_id: str, after_seq: int, principal: str | None) -> Iterator[FollowStream | None]:
        """``principal``'s run ``run_id`` followed live from ``after_seq`` (``None`` when there is none here);
        while followed, a detached run is not cancelled, and its ``detach_grace`` starts again as it is left."""
        order = self._orders.get(run_id)
        if order is None or order.request.principal != principal:
            yield None
            return
        stream = FollowStream(order, after_seq)
        order.control.follow(+1)
        try:
            yield stream
        finally:
            order.control.follow(-1)

    async def cancel_thread(self, thread_id: str) -> None:
        """Cancel the runs of ``thread_id`` in flight or waiting, and wait (up to ``CLEANUP_GRACE``) until they
        have closed out."""
        runs = [order.control for order in self._orders.values() if order.thread_id == thread_id]
        for control in runs:
            control.cancel()
        with trio.move_on_after(CLEANUP_GRACE):
            for control in runs:
                await control.wait_done()

    async def wait_out(self, order: RunOrder) -> None:
        """The caller leaves: a detached run goes on (see :meth:`RunStream.detach`); any other is cancelled,
        and waited for until it has recorded its result and ended (if it started). A run that has ended
        (the usual case: its stream ran to the end) needs neither."""
        control = order.control
        if control.ended:
            return
        if control.detached and self._detach_grace > 0 and order.run_id in self._orders:
            self._nursery.start_soon(control.serve_detached, self._detach_grace)
            return
        control.cancel()
        if control.started:
            # Shielded: the caller may be leaving because it was cancelled, and still must not go on before the
            # run's close-out (its history and record) is done; bounded, so a wedged store cannot hold it forever.
            with trio.CancelScope(shield=True), trio.move_on_after(CLEANUP_GRACE):
                await control.wait_done()

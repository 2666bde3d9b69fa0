"""The service's budget of runs: ``server.max_runs`` across every connection, detached runs included.

A run takes a slot (:class:`RunSlot`) when it is admitted and gives it back when the run ends — when the run is
over in the runtime, not when the client's socket is: a client that stops reading does not keep its run's slot
once the run has ended. A run whose client left goes on *detached* (it waits ``server.detach_grace`` seconds
for a ``resume``): it keeps its slot until it ends, waited for in the service's nursery, so a client that starts
runs and drops, again and again, cannot hold more than ``max_runs`` of them. Shutdown waits on the budget
(:meth:`RunBudget.wait_idle`) and, after its grace, cancels the detached runs as any other
(:meth:`RunBudget.cancel_detached`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import attrs
import trio


@runtime_checkable
class DetachedRun(Protocol):
    """A run that can go on without its client: detach it, cancel it, wait for its end (a resumed run is not one)."""

    def detach(self) -> None:
        """Stop reading without cancelling the run."""
        ...

    def cancel(self) -> None: ...

    async def wait_done(self) -> None: ...


class EndingRun(Protocol):
    """A run whose end can be waited for (its slot is given back then)."""

    async def wait_done(self) -> None: ...


@attrs.define(eq=False)
class RunSlot:
    """One admitted run's place in the budget; :meth:`release` gives it back (once, however often it is called)."""

    _budget: RunBudget
    released: bool = False

    def release(self) -> None:
        """Give the slot back (the run ended, or never started); a second call does nothing."""
        if not self.released:
            self.released = True
            self._budget._give_back()

    async def release_when_done(self, run: EndingRun) -> None:
        """Wait for ``run`` to end, then give the slot back (in a task beside whatever relays the run; cancelled,
        it leaves the slot to its owner)."""
        await run.wait_done()
        self.release()


@attrs.define(eq=False)
class RunBudget:
    """The runs in flight across the whole service, at most ``limit``; shutdown waits on it until none is left.

    A run whose client left (detached: it waits ``detach_grace`` seconds for a ``resume``) keeps its slot
    until it ends, waited for in ``nursery`` (the service's): otherwise a client that starts runs and drops,
    again and again, would hold any number of them.
    """

    limit: int
    #: Where detached runs are waited for (the service's nursery).
    nursery: trio.Nursery
    active: int = 0
    closing: bool = False
    _detached: set[DetachedRun] = attrs.field(factory=set, init=False)
    _changed: trio.lowlevel.ParkingLot = attrs.field(factory=trio.lowlevel.ParkingLot, init=False)

    def try_acquire(self) -> RunSlot | None:
        """Take a slot for a new run, or ``None`` if the service is at its limit."""
        if self.active >= self.limit:
            return None
        self.active += 1
        return RunSlot(self)

    def _give_back(self) -> None:
        self.active -= 1
        self._changed.unpark_all()

    def release_when_done(self, slot: RunSlot, stream: DetachedRun) -> None:
        """Give back a detached run's slot once the run ends."""
        self._detached.add(stream)
        self.nursery.start_soon(self._wait_detached, slot, stream)

    def cancel_detached(self) -> None:
        """Cancel every detached run (shutdown, after its grace); each still ends with its terminal event."""
        for stream in self._detached:
            stream.cancel()

    async def _wait_detached(self, slot: RunSlot, stream: DetachedRun) -> None:
        try:
            await stream.wait_done()
        finally:
            self._detached.discard(stream)
            slot.release()

    async def wait_idle(self) -> None:
        """Return once no run is in flight."""
        while self.active:
            await self._changed.park()

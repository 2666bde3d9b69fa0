"""The service's budget of runs: ``server.max_runs`` across every connection, detached runs included.

A run takes a slot when it is admitted and gives it back when it ends. A run whose client left goes on
*detached* (it waits ``server.detach_grace`` seconds for a ``resume``): it keeps its slot until it ends, waited
for in the service's nursery, so a client that starts runs and drops, again and again, cannot hold more than
``max_runs`` of them. Shutdown waits on the budget (:meth:`RunBudget.wait_idle`) and, after its grace,
cancels the detached runs as any other (:meth:`RunBudget.cancel_detached`).
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

    def try_acquire(self) -> bool:
        """Take a slot for a new run, or ``False`` if the service is at its limit."""
        if self.active >= self.limit:
            return False
        self.active += 1
        return True

    def release(self) -> None:
        """Give back the slot of a run that ended."""
        self.active -= 1
        self._changed.unpark_all()

    def release_when_done(self, stream: DetachedRun) -> None:
        """Give back a detached run's slot once the run ends."""
        self._detached.add(stream)
        self.nursery.start_soon(self._wait_detached, stream)

    def cancel_detached(self) -> None:
        """Cancel every detached run (shutdown, after its grace); each still ends with its terminal event."""
        for stream in self._detached:
            stream.cancel()

    async def _wait_detached(self, stream: DetachedRun) -> None:
        try:
            await stream.wait_done()
        finally:
            self._detached.discard(stream)
            self.release()

    async def wait_idle(self) -> None:
        """Return once no run is in flight."""
        while self.active:
            await self._changed.park()

"""A server without OAuth with ``identity: "principal"`` (a stdio server, say): each principal a connection of its
own, opened on demand with the server's own connector, bounded and closed when idle, as for OAuth servers
(tests/test_principal_servers.py); tests/integration/test_input_routing.py runs real processes."""

from __future__ import annotations

from typing import Any

import attrs
import trio

from tests.test_principal_servers import FakeHandle
from yao_actors.auth.keys import per_principal
from yao_actors.auth.principals import IDLE_CLOSE, PrincipalServers
from yao_actors.specs import HttpTransport, OAuthSpec, ServerSpec, StdioTransport

SPEC = ServerSpec("asking", StdioTransport("python", ("-m", "asking")), identity="principal")


def connect(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the fake actors never connect")


@attrs.define
class Actors:
    """The router's ``serve_actor``: each connection it opened, and the connector it was given."""

    opened: list[tuple[FakeHandle, Any]] = attrs.field(factory=list)

    async def __call__(self, spec: ServerSpec, *, connect: Any, task_status: Any) -> None:
        handle = FakeHandle(f"connection {len(self.opened) + 1}")
        self.opened.append((handle, connect))
        task_status.started(handle)
        try:
            await trio.sleep_forever()
        finally:
            handle.closed = True


def test_identity_or_auth_identity_principal_makes_a_server_per_principal() -> None:
    assert per_principal(SPEC)
    assert not per_principal(attrs.evolve(SPEC, identity="service"))
    oauth = HttpTransport("http://127.0.0.1:9/mcp", auth=OAuthSpec(identity="principal"))
    assert per_principal(ServerSpec("hub", oauth))


async def test_each_principal_gets_a_connection_of_its_own_closed_when_idle(autojump_clock: Any) -> None:
    actors = Actors()
    async with trio.open_nursery() as nursery:
        router = PrincipalServers(SPEC, None, None, connect, actors, nursery, max_principals=2)
        nursery.start_soon(router.close_idle)
        ann, bob, ann_again = [await router.bind_principal(name) for name in ("ann", "bob", "ann")]
        for handle, _ in actors.opened:
            handle.release.set()
        said = [(await view.call_tool("whoami", {})).result for view in (ann, bob, ann_again)]
        assert sorted(router.connections) == ["ann", "bob"]
        await trio.sleep(1)
        await router.bind_principal("cy")  # past the bound: the least recently used idle one (ann's) goes
        assert sorted(router.connections) == ["bob", "cy"]
        await trio.sleep(IDLE_CLOSE + IDLE_CLOSE / 4)
        assert not router.connections
        nursery.cancel_scope.cancel()
    assert said == ["connection 1", "connection 2", "connection 1"]
    assert [connector for _, connector in actors.opened] == [connect] * 3  # the server's own: no tokens to add
    assert all(handle.closed for handle, _ in actors.opened)

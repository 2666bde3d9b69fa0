"""``yao-actors chat`` URLs (ws, wss, and the http URL the banner prints) and a reader that leaves early."""

from __future__ import annotations

import io
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from functools import partial

import pytest
import trio
import trustme

from tests.service.fake_runtime import FakeRuntime
from tests.service.support import receive, running_service, send
from yao_actors.cli.chat import chat, open_service_connection, websocket_address


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("ws://127.0.0.1:8765/", ("127.0.0.1", 8765, False, "/")),
        ("http://127.0.0.1:8765/", ("127.0.0.1", 8765, False, "/")),
        ("wss://yao.example/chat?x=1", ("yao.example", 443, True, "/chat?x=1")),
        ("https://[::1]:9000", ("::1", 9000, True, "/")),
        ("ws://h/café?q=ü&r=%C3%A9", ("h", 80, False, "/caf%C3%A9?q=%C3%BC&r=%C3%A9")),  # as a browser sends it
    ],
)
def test_websocket_and_page_urls_name_the_same_place(url: str, address: tuple[str, int, bool, str]) -> None:
    assert websocket_address(url) == address


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/", "127.0.0.1:8765", "ws:///nohost", "ws://h:99999/"])
def test_other_urls_are_refused(url: str) -> None:
    with pytest.raises(ValueError, match=r"URL|port"):
        websocket_address(url)


def test_a_host_not_in_ascii_is_refused() -> None:
    with pytest.raises(ValueError, match=r"expected a host in ASCII .*got 'café.example'"):
        websocket_address("ws://café.example/")


async def test_chat_with_the_page_url_the_banner_prints(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    with trio.fail_after(10):
        async with running_service(FakeRuntime()) as service:
            code = await chat("hello", url=service.page_url, out=out)
            bad = await chat("hello", url="ftp://127.0.0.1/", out=out)
    assert code == 0
    assert "echo: hello" in out.getvalue()
    assert bad == 2
    assert "expected a ws://, wss://" in capsys.readouterr().err


async def test_a_tools_frame_lists_what_an_assistant_is_offered_and_names_an_unknown_one() -> None:
    with trio.fail_after(10):
        async with running_service(FakeRuntime()) as service, open_service_connection(service.url) as ws:
            await send(ws, {"type": "tools"})
            listed = await receive(ws)
            await send(ws, {"type": "tools", "assistant": "nobody"})
            unknown = await receive(ws)
    assert listed == {"type": "tools", "assistant": "default", "tools": [], "notOffered": {}}
    assert unknown == {"type": "error", "code": "unknown_assistant", "message": "no assistant 'nobody' is configured"}


@asynccontextmanager
async def tls_proxy(port: int, ca: trustme.CA) -> AsyncIterator[int]:
    """A TLS-terminating proxy on a free loopback port in front of ``port`` (as a reverse proxy would be)."""
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)

    async def relay(source: trio.abc.ReceiveStream, target: trio.abc.SendStream) -> None:
        async for data in source:
            await target.send_all(data)

    async def handle(tcp: trio.SocketStream) -> None:
        tls = trio.SSLStream(tcp, server_context, server_side=True)
        async with tls, await trio.open_tcp_stream("127.0.0.1", port) as upstream, trio.open_nursery() as nursery:
            nursery.start_soon(relay, tls, upstream)
            nursery.start_soon(relay, upstream, tls)

    async def handle_quietly(tcp: trio.SocketStream) -> None:
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError, ExceptionGroup):
            await handle(tcp)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, handle_quietly, 0, host="127.0.0.1"))
        yield listeners[0].socket.getsockname()[1]
        nursery.cancel_scope.cancel()


async def test_wss_urls_connect_over_tls() -> None:
    ca = trustme.CA()
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    with trio.fail_after(10):
        async with (
            running_service(FakeRuntime()) as service,
            tls_proxy(service.port, ca) as port,
            open_service_connection(f"wss://127.0.0.1:{port}/", ssl_context=client_context) as ws,
        ):
            await send(ws, {"type": "ping"})
            assert await receive(ws) == {"type": "pong"}


async def test_a_reader_that_leaves_early_ends_chat_quietly() -> None:
    with trio.fail_after(30):
        async with running_service(FakeRuntime()) as service:
            command = [sys.executable, "-m", "yao_actors.cli", "chat", "flood:200", "--url", service.url]
            process = await trio.lowlevel.open_process(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            assert process.stdout is not None
            assert process.stderr is not None
            await process.stdout.receive_some(10)  # like `| head -c 10`: read a little, then leave
            await process.stdout.aclose()
            errors = b""
            while data := await process.stderr.receive_some():
                errors += data
            code = await process.wait()
    assert errors.decode() == ""
    assert code == 0

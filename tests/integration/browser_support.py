"""The browser tests' common parts: headless Chromium (the system's ``/usr/bin/chromium``, driven by Playwright's
sync API in a worker thread) against the real service on loopback."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trio
from playwright.sync_api import BrowserContext, Page, sync_playwright

from tests.service.support import running_service
from yao_actors.config import Config
from yao_actors.models import Model
from yao_actors.runtime import open_runtime
from yao_actors.service import Service

T = TypeVar("T")
CHROMIUM = "/usr/bin/chromium"

# CI installs Debian's chromium (.ci/run) and must never skip these tests; elsewhere a machine without it skips,
# saying how.
needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists() and os.environ.get("CI") != "true",
    reason="needs Debian's chromium: apt-get install chromium (CI installs it and runs this test)",
)
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: How long one page step may take before it fails (Playwright's bound, in milliseconds).
STEP_MS = 30_000


@contextmanager
def chromium_context() -> Iterator[BrowserContext]:
    """A context (its own cookies and storage) of a fresh headless Chromium; the browser is closed at the end."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            yield browser.new_context()
        finally:
            browser.close()


@contextmanager
def chromium_page(page_url: str) -> Iterator[Page]:
    """A page of a fresh headless Chromium, opened at ``page_url``; the browser is closed at the end."""
    with chromium_context() as context:
        page = context.new_page()
        page.goto(page_url)
        yield page


def ask(page: Page, question: str, *, until: str | None = None) -> None:
    """Type ``question`` into the page and send it; with ``until``, wait for that selector to show."""
    page.fill("#question", question)
    page.click("#send")
    if until is not None:
        page.wait_for_selector(until, timeout=STEP_MS)


def texts(page: Page, selector: str) -> list[str]:
    """The text of every element ``selector`` matches, in order."""
    found: list[str] = page.eval_on_selector_all(selector, "nodes => nodes.map(n => n.textContent)")
    return found


def thread_of(page: Page) -> str:
    """The thread the page shows (its ``#thread=`` fragment)."""
    thread: str = page.evaluate("() => new URLSearchParams(location.hash.slice(1)).get('thread')")
    return thread


@asynccontextmanager
async def serving_runtime(
    config: Config, models: Mapping[str, Model] | None = None, **service: Any
) -> AsyncIterator[Service]:
    """A runtime of ``config`` (with ``models``) served on loopback; ``service`` overrides the service's limits."""
    async with open_runtime(config, models=models) as runtime, running_service(runtime, **service) as served:
        yield served


async def in_chromium(service: Service, drive: Callable[..., T], *args: Any) -> T:
    """``drive(page_url, *args)`` in a worker thread (Playwright's sync API blocks): what it returns."""
    return await trio.to_thread.run_sync(drive, service.page_url, *args)


async def drive_runtime(
    config: Config,
    models: Mapping[str, Model] | None,
    drive: Callable[..., T],
    *args: Any,
    guard: float = 90,
    **service: Any,
) -> T:
    """Serve a runtime of ``config`` and run ``drive(page_url, *args)`` against it, all within ``guard`` seconds."""
    with trio.fail_after(guard):
        async with serving_runtime(config, models, **service) as served:
            return await in_chromium(served, drive, *args)

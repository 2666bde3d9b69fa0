"""The browser page in headless Chromium (the system's ``/usr/bin/chromium``, driven by Playwright), against the
real service: ask the seed's question, see the tool calls and the answer appear."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
from playwright.sync_api import Page

from tests.integration.browser_support import (
    STEP_MS,
    ask,
    chromium_page,
    drive_runtime,
    in_chromium,
    needs_chromium,
    texts,
    thread_of,
)
from tests.integration.test_service_e2e import SEED_QUESTION, demo_service
from tests.service.fake_runtime import FakeRuntime
from tests.service.support import running_service
from tests.support import require_tool
from tests.test_approvals import QUESTION, _config, _seed_model
from yao_actors.config import AssistantSpec, Config, InMemoryTransport, ServerRef, ServerSpec, parse_config
from yao_actors.models import Completion, FunctionModel, ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.testing.asking import build_asking_server

pytestmark = needs_chromium


def tool_cards(page: Page) -> dict[str, list[str]]:
    """What the page's tool call cards show, in order: each call's tool, status and result."""
    return {
        "tools": page.eval_on_selector_all(".run .tool .name", "nodes => nodes.map(n => n.textContent)"),
        "statuses": page.eval_on_selector_all(".run .tool", "nodes => nodes.map(n => n.dataset.status)"),
        "results": page.eval_on_selector_all(".run .tool .result", "nodes => nodes.map(n => n.textContent)"),
    }


def ask_in_browser(page_url: str, question: str) -> dict[str, Any]:
    """Open the page, ask ``question``, wait for the run to end, and read what the page shows."""
    with chromium_page(page_url) as page:
        ask(page, question, until=".run.done")
        return {
            "answer": page.inner_text(".run .answer"),
            **tool_cards(page),
            "failed": page.query_selector(".run.failed") is not None,
            "state": page.inner_text("#state"),
        }


async def test_the_page_asks_the_seeds_question_in_chromium() -> None:
    with trio.fail_after(90):
        async with demo_service() as service:
            shown = await in_chromium(service, ask_in_browser, SEED_QUESTION)
    assert shown["state"] == "connected"
    assert not shown["failed"]
    assert shown["tools"] == ["weather__get", "clothing__advise"]
    assert shown["statuses"] == ["done", "done"]
    assert '"temp"' in shown["results"][0]
    assert "北京" in shown["answer"]


def ask_with_a_token_when_told(page_url: str, token: str) -> dict[str, Any]:
    """Ask without a token, read what the page says, then enter the token and see the kept question answered."""
    with chromium_page(page_url) as page:
        ask(page, "hello")
        page.wait_for_function("document.querySelector('#state').textContent.startsWith('could not connect')")
        told = page.inner_text("#state")
        focused = page.evaluate("document.activeElement.id")
        page.fill("#token", token)
        page.press("#token", "Enter")
        page.wait_for_selector(".run.done", timeout=STEP_MS)
        return {
            "told": told,
            "focused": focused,
            "answer": page.inner_text(".run .answer"),
            "state": page.inner_text("#state"),
        }


async def test_the_page_tells_the_user_a_token_is_needed_and_takes_one_in_chromium() -> None:
    token = "browser-test-token-0123"
    with trio.fail_after(90):
        async with running_service(FakeRuntime(), token=token) as service:
            shown = await in_chromium(service, ask_with_a_token_when_told, token)
    assert "may need a token" in shown["told"]
    assert shown["focused"] == "token"
    assert shown["answer"] == "echo: hello"
    assert shown["state"] == "connected"


def approve_in_browser(page_url: str, question: str) -> dict[str, Any]:
    """Ask ``question``, click Approve on the held call, and read the run that follows."""
    with chromium_page(page_url) as page:
        ask(page, question, until=".run.done .approval button.approve")
        asked = page.inner_text(".approval")
        page.click(".approval button.approve")
        page.wait_for_selector(".run.done + .run.done", timeout=STEP_MS)
        return {
            "asked": asked,
            "answers": texts(page, ".run .answer"),
            **tool_cards(page),
        }


async def test_the_page_shows_a_held_call_with_approve_and_deny_in_chromium() -> None:
    shown = await drive_runtime(_config(), {"m": _seed_model([])}, approve_in_browser, QUESTION)
    assert "weather__get" in shown["asked"]
    assert "Deny" in shown["asked"]
    assert shown["tools"] == ["weather__get", "clothing__advise"]
    assert '"city":"Beijing"' in shown["answers"][-1]
    # the approved call's card (shown by the run that held it) gets its result (issue 34, item 9)
    assert shown["statuses"] == ["done", "done"]
    assert "Beijing" in shown["results"][0]
    assert shown["results"][1]


def threads_after_going_back(page_url: str, question: str) -> dict[str, Any]:
    """Ask in a conversation A, start a new one B and ask there, go back to A and ask again; read the list."""
    with chromium_page(page_url) as page:
        ask(page, question, until=".run.done")
        first = thread_of(page)
        page.click("#new-thread")
        ask(page, question, until=".run.done")
        page.wait_for_function("() => document.querySelectorAll('#threads button.thread').length === 2")
        created_order = page.eval_on_selector_all("#threads button.thread", "bs => bs.map(b => b.dataset.threadId)")
        page.click(f'#threads button[data-thread-id="{first}"]')
        page.wait_for_selector(".run", timeout=STEP_MS)  # its history
        ask(page, question, until=".run.done")
        page.wait_for_function(
            "first => document.querySelector('#threads button.thread').dataset.threadId === first", arg=first
        )
        return {
            "first": first,
            "before": created_order,
            "after": page.eval_on_selector_all("#threads button.thread", "bs => bs.map(b => b.dataset.threadId)"),
        }


async def test_the_page_lists_conversations_by_their_last_update_in_chromium() -> None:
    """Issue 34, item 9: the list is labelled with each thread's last update, and ordered by it."""
    with trio.fail_after(120):
        async with demo_service() as service:
            shown = await in_chromium(service, threads_after_going_back, SEED_QUESTION)
    second = next(t for t in shown["before"] if t != shown["first"])
    assert shown["before"] == [second, shown["first"]]  # the newer one first
    assert shown["after"] == [shown["first"], second]  # the one just used first, although created first


def fill_the_form_in_browser(page_url: str, question: str) -> dict[str, Any]:
    """Ask ``question``; fill the server's form the page built (a text, a number, an enum, a checkbox), send it."""
    with chromium_page(page_url) as page:
        ask(page, question, until=".run.done .input button.accept")
        kinds = page.eval_on_selector_all(
            ".input input, .input select", "nodes => nodes.map(n => n.name + ':' + (n.type || n.tagName))"
        )
        page.fill(".input input[name=date]", "2027-01-02")
        page.fill(".input input[name=guests]", "2")
        page.select_option(".input select[name=seat]", "aisle")
        page.check(".input input[name=breakfast]")
        page.click(".input button.accept")
        page.wait_for_selector(".run.done + .run.done", timeout=STEP_MS)
        answers = texts(page, ".run .answer")
        return {"kinds": kinds, "answers": answers}


async def test_the_page_renders_a_servers_form_and_sends_the_answer_in_chromium() -> None:
    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion | str:
        if messages[-1]["role"] == "tool":
            return messages[-1]["content"]
        return Completion(tool_calls=(ToolCall("c_book", "asking__book", '{"hotel": "Grand"}'),))

    spec = ServerSpec("asking", InMemoryTransport(build_asking_server()), protocol="2026-07-28")
    assistant = AssistantSpec("default", "m", prompt="Be brief", servers=(ServerRef("asking"),))
    config = Config(servers={"asking": spec}, assistants={"default": assistant})
    shown = await drive_runtime(config, {"m": FunctionModel(script)}, fill_the_form_in_browser, "book the Grand")
    assert shown["kinds"] == ["date:text", "guests:number", "seat:select-one", "breakfast:checkbox"]
    assert '"seat":"aisle"' in shown["answers"][-1]
    assert '"guests":2' in shown["answers"][-1]
    assert '"breakfast":true' in shown["answers"][-1]


EVERYTHING = Path(__file__).parents[1] / "node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"


def answer_every_kind_in_browser(page_url: str) -> dict[str, Any]:
    """Call server-everything's form through the direct model; read the controls the page built and their
    defaults, answer some fields (a multi-select, titled enums by their titles), send it; then decline a second."""
    with chromium_page(page_url) as page:
        ask(page, "call everything.trigger-elicitation-request", until=".run.done .input button.accept")
        form = ".input:last-of-type"
        controls = page.eval_on_selector_all(
            f"{form} input, {form} select",
            "nodes => nodes.map(n => [n.name, n.type, n.type === 'checkbox' ? n.checked : n.value, n.value])",
        )
        titles = page.eval_on_selector_all(
            f"{form} select[name=titledSingleSelectEnum] option", "nodes => nodes.map(n => n.textContent)"
        )
        page.fill(f"{form} input[name=integer]", "101")  # above its maximum: the page says so, and sends nothing
        page.click(f"{form} button.accept")
        problems = page.inner_text(f"{form} .problems")
        page.fill(f"{form} input[name=integer]", "7")
        page.fill(f"{form} input[name=name]", "Ann Lee")
        page.fill(f"{form} input[name=email]", "ann@example.com")
        page.fill(f"{form} input[name=birthdate]", "2000-01-02")
        page.check(f"{form} input[name=untitledMultipleSelectEnum][value=Piano]")
        page.select_option(f"{form} select[name=titledSingleSelectEnum]", label="Wonder Woman")
        page.uncheck(f"{form} input[name=titledMultipleSelectEnum][value=Tuna]")
        page.check(f"{form} input[name=titledMultipleSelectEnum][value=Trout]")
        page.select_option(f"{form} select[name=legacyTitledEnum]", label="Dogs")
        page.click(f"{form} button.accept")
        page.wait_for_selector(".run.done + .run.done", timeout=STEP_MS)
        ask(
            page,
            "call everything.trigger-elicitation-request",
            until=".run.done + .run.done + .run.done .input button.decline",
        )
        page.click(".run:nth-of-type(3) .input button.decline")
        page.wait_for_selector(".run.done:nth-of-type(4)", timeout=STEP_MS)
        return {
            "controls": controls,
            "titles": titles,
            "problems": problems,
            "headings": texts(page, ".run .question"),
            "answers": texts(page, ".run .answer"),
        }


async def test_the_page_renders_every_kind_of_field_and_sends_choices_as_their_values_in_chromium() -> None:
    """server-everything's form asks every kind MCP's elicitation allows: each gets its control with its default,
    a multi-select is sent as an array, a titled enum shows titles and sends values, and the run that carries the
    answer says what was answered."""
    require_tool(str(EVERYTHING) if EVERYTHING.exists() else None, "server-everything (npm ci --prefix tests/node)")
    config = parse_config(
        {
            "mcpServers": {"everything": {"command": "node", "args": [str(EVERYTHING), "stdio"]}},
            "assistants": {"default": {"model": "direct", "mcp": {"servers": ["everything"]}}},
        }
    )
    with trio.fail_after(120):
        async with open_runtime(config, ready_timeout=60) as runtime, running_service(runtime) as service:
            shown = await in_chromium(service, answer_every_kind_in_browser)
    controls = {(name, kind): (state, value) for name, kind, state, value in shown["controls"]}
    assert controls[("name", "text")] == ("", "")
    assert controls[("check", "checkbox")][0] is False
    assert controls[("firstLine", "text")][0] == "It was a dark and stormy night."
    assert ("email", "email") in controls
    assert ("homepage", "url") in controls
    assert ("birthdate", "date") in controls
    assert controls[("integer", "number")][0] == "42"
    assert controls[("number", "number")][0] == "3.14"
    assert controls[("untitledSingleSelectEnum", "select-one")] == ("0", "0")  # Monica, the default
    multi = [(value, on) for name, _, on, value in shown["controls"] if name == "untitledMultipleSelectEnum"]
    assert multi == [("Guitar", True), ("Piano", False), ("Violin", False), ("Drums", False), ("Bass", False)]
    assert shown["titles"] == ["Superman", "Green Lantern", "Wonder Woman"]
    assert "integer:" in shown["problems"]
    assert shown["headings"][1] == "↩ sent the form “Please provide inputs for the following fields:”"
    assert shown["headings"][3] == "↩ declined “Please provide inputs for the following fields:”"
    raw = json.loads(
        json.loads(shown["answers"][1].removeprefix("everything__trigger-elicitation-request: "))[-1].split(
            "Raw result: ", 1
        )[1]
    )
    assert raw == {
        "action": "accept",
        "content": {
            "name": "Ann Lee",
            "check": False,
            "firstLine": "It was a dark and stormy night.",
            "email": "ann@example.com",
            "birthdate": "2000-01-02",
            "integer": 7,
            "number": 3.14,
            "untitledSingleSelectEnum": "Monica",
            "untitledMultipleSelectEnum": ["Guitar", "Piano"],
            "titledSingleSelectEnum": "hero-3",
            "titledMultipleSelectEnum": ["fish-3"],
            "legacyTitledEnum": "pet-2",
        },
    }
    assert '\\"action\\": \\"decline\\"' in shown["answers"][3]


def refuse_links_in_browser(page_url: str) -> dict[str, Any]:
    """Show a run ending with a URL question of each scheme, on the page itself, and read what it shows and sends."""
    with chromium_page(page_url) as page:
        page.wait_for_function("document.querySelector('#state').textContent === 'connected'")
        page.evaluate(
            """() => {
              window.sentFrames = [];
              send = (frame) => window.sentFrames.push(frame);
              const urls = ["javascript:alert(1)", "data:text/html,<script>alert(1)</script>", "file:///etc/passwd",
                            "http://example.com/pay", "https://example.com/pay", "http://127.0.0.1:8765/done"];
              addRun("r1", "pay");
              render({type: "RUN_FINISHED", runId: "r1", threadId, outcome: {type: "interrupt", interrupts: urls.map(
                (url, i) => ({id: `u${i}`, reason: "url_required", message: `Open ${i}`, url}))}});
            }"""
        )
        links = page.eval_on_selector_all(".input a", "nodes => nodes.map(n => n.getAttribute('href'))")
        refused = page.eval_on_selector_all(".input .refused", "nodes => nodes.map(n => n.textContent)")
        for button in page.query_selector_all(".input button.accept:not([disabled])"):
            button.click()
        return {"links": links, "refused": refused, "sent": page.evaluate("window.sentFrames")}


async def test_the_page_offers_only_https_links_and_http_ones_on_loopback_in_chromium() -> None:
    with trio.fail_after(90):
        async with running_service(FakeRuntime()) as service:
            shown = await in_chromium(service, refuse_links_in_browser)
    assert shown["links"] == ["https://example.com/pay", "http://127.0.0.1:8765/done"]
    rule = "not opened: a link must be https: (or http: on this machine), this one has"
    assert shown["refused"] == [f"{rule} {scheme}" for scheme in ("javascript:", "data:", "file:", "http:")]
    [frame] = [sent for sent in shown["sent"] if sent["type"] == "run"]
    actions = {entry["interruptId"]: entry["payload"]["action"] for entry in frame["resume"]}
    assert actions == {
        "u0": "decline",
        "u1": "decline",
        "u2": "decline",
        "u3": "decline",
        "u4": "accept",
        "u5": "accept",
    }

"""The one rule for URLs that reach a person (:mod:`yao_actors.untrusted.urls`): https, http only to this machine."""

from __future__ import annotations

import mcp.types
import pytest

from yao_actors.tools.input_requests import InputRound, input_round, refusal
from yao_actors.untrusted.urls import MAX_URL_LENGTH, is_loopback, url_refusal


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/login?flow=42",
        "HTTPS://Example.COM/",
        "https://example.com:8443/a#b",
        "https://xn--bcher-kva.example/",
        "http://localhost/callback",
        "http://LOCALHOST:8080/",
        "http://127.0.0.1:3000/x",
        "http://127.9.8.7/",
        "http://[::1]:8080/",
        "http://127.0.0.1:8765/done",
        "http://localhost/x",
        "http://[::1]:9/",
        "http://[::ffff:127.0.0.1]/",
    ],
)
def test_https_and_http_to_this_machine_pass(url: str) -> None:
    assert url_refusal(url) is None


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("javascript:alert(document.cookie)", "not javascript:"),
        ("JavaScript:alert(1)", "not javascript:"),
        ("data:text/html,<script>alert(1)</script>", "not data:"),
        ("file:///etc/passwd", "not file:"),
        ("vbscript:msgbox", "not vbscript:"),
        ("ftp://example.com/", "not ftp:"),
        ("//evil.example/path", "not this"),
        ("example.com/login", "not this"),
        ("", "not this"),
        ("http://example.com/", "not 'example.com'"),
        ("http://127.0.0.1.evil.com/", "not '127.0.0.1.evil.com'"),
        ("http://localhost.evil.com/", "not 'localhost.evil.com'"),
        ("http://127.1/", "not '127.1'"),
        ("http://2130706433/", "not '2130706433'"),
        ("http://0.0.0.0:8000/", "not '0.0.0.0'"),
        ("http://[::]/", "not '::'"),
        ("http://10.0.0.5/", "not '10.0.0.5'"),
        ("http://10.0.0.5/", "http:"),
        ("http://example.com/pay", "http:"),
        ("//example.com/x", "not this"),
        ("https:///no-host", "names no host"),
        ("https://bank.example@evil.example/", "user name or password"),
        ("https://user:secret@example.com/", "user name or password"),
        ("https://:@example.com/", "user name or password"),
        ("http://admin@localhost/", "user name or password"),
        ("java\tscript:alert(1)", "whitespace"),
        ("https://exa\nmple.com/", "whitespace"),
        (" https://example.com/", "whitespace"),
        ("https://example.com/\x00", "control character"),
        ("https:\\\\evil.example\\", "backslash"),
        ("https://", "names no host"),
        ("https:///path", "names no host"),
        ("https:evil.example", "names no host"),
        ("https://example.com:99999/", "cannot be read"),
        ("https://example.com:port/", "cannot be read"),
        ("https://[::1/", "cannot be read"),
        ("https://example.com/" + "a" * MAX_URL_LENGTH, "longer than"),
    ],
)
def test_other_urls_are_refused_saying_why(url: str, why: str) -> None:
    refused = url_refusal(url)
    assert refused is not None
    assert why in refused, refused


def test_loopback_is_the_name_localhost_or_a_loopback_address() -> None:
    assert [is_loopback(h) for h in ("localhost", "127.0.0.1", "::1", "::ffff:127.0.0.2")] == [True] * 4
    assert [is_loopback(h) for h in ("localhost.", "127.0.0.1.nip.io", "::2", "example.com", "")] == [False] * 5


def url_question(url: str) -> mcp.types.ElicitRequestURLParams:
    return mcp.types.ElicitRequestURLParams(message="Open this", url=url, elicitation_id="e1")


def test_a_url_question_is_refused_by_the_rule_and_a_form_never() -> None:
    assert refusal(url_question("https://example.com/")) is None
    assert "not javascript:" in (refusal(url_question("javascript:alert(1)")) or "")
    form = mcp.types.ElicitRequestFormParams(message="Name?", requested_schema={"type": "object", "properties": {}})
    assert refusal(form) is None


def input_required(*urls: str) -> mcp.types.InputRequiredResult:
    return mcp.types.InputRequiredResult(
        input_requests={f"k{i}": mcp.types.ElicitRequest(params=url_question(url)) for i, url in enumerate(urls)},
        request_state="s",
    )


def test_a_2026_input_round_with_a_refused_url_is_the_calls_failure_saying_why() -> None:
    ok = input_round("srv", "tool", {}, input_required("https://example.com/a", "http://[::1]:9/b"))
    assert isinstance(ok, InputRound)
    assert [q.url for _, q in ok.questions] == ["https://example.com/a", "http://[::1]:9/b"]
    refused = input_round("srv", "tool", {}, input_required("https://example.com/a", "data:text/html,<b>x</b>"))
    assert isinstance(refused, str)
    assert refused.startswith("the server's URL question was refused: ")
    assert "not data:" in refused

"""Hooks: resolution by reference, plain and async functions, result shapes."""

from __future__ import annotations

from typing import Any

import pytest

from yao_actors.config import Hooks, ServerRef
from yao_actors.conversation.loop.hooks import (
    CreateResult,
    Delegation,
    HookContext,
    NextResult,
    ResolvedHooks,
    resolve_hooks,
    resolve_reference,
    run_create,
    run_next,
)
from yao_actors.errors import RunError

CTX = HookContext(assistant_id="a", thread_id="t", run_id="r")
seen: list[Any] = []

NOT_CALLABLE = 42


def create_plain(ctx: HookContext, messages: list[Any]) -> dict[str, Any]:
    seen.append((ctx, messages))
    return {"servers": ["b", {"server_id": "c", "tools": ["x"]}], "messages": [{"role": "user", "content": "+"}]}


async def create_async(ctx: HookContext, messages: list[Any]) -> CreateResult:
    return CreateResult(delegate="other")


def create_none(ctx: HookContext, messages: list[Any]) -> None:
    return None


def create_bad(ctx: HookContext, messages: list[Any]) -> int:
    return 3


async def next_echo(ctx: HookContext, payload: dict[str, Any]) -> Any:
    return payload["tool_results"]


def next_raises(ctx: HookContext, payload: dict[str, Any]) -> Any:
    raise ValueError("broken hook")


def test_resolve_imports_module_function() -> None:
    assert resolve_reference("tests.test_hooks:create_plain") is create_plain
    hooks = resolve_hooks(Hooks(create="tests.test_hooks:create_async"))
    assert hooks == ResolvedHooks(create=create_async, next=None)


@pytest.mark.parametrize(
    ("reference", "problem"),
    [
        ("no_such_module_xyz:f", "cannot import"),
        ("tests.test_hooks:missing", "has no attribute 'missing'"),
        ("tests.test_hooks:NOT_CALLABLE", "not callable"),
        ("tests.test_hooks", 'expected "module:function"'),
    ],
)
def test_resolve_errors_name_the_reference(reference: str, problem: str) -> None:
    with pytest.raises(RunError) as caught:
        resolve_reference(reference)
    assert caught.value.code == "hook_error"
    assert reference in str(caught.value)
    assert problem in str(caught.value)


async def test_create_plain_function_with_dict_result() -> None:
    seen.clear()
    messages = [{"role": "user", "content": "q"}]
    result = await run_create(ResolvedHooks(create=create_plain), CTX, messages)
    assert result == CreateResult(
        servers=(ServerRef("b"), ServerRef("c", ("x",))),
        messages=({"role": "user", "content": "+"},),
    )
    assert seen == [(CTX, messages)]


async def test_create_async_and_none_and_absent() -> None:
    assert await run_create(ResolvedHooks(create=create_async), CTX, []) == CreateResult(delegate="other")
    assert await run_create(ResolvedHooks(create=create_none), CTX, []) == CreateResult()
    assert await run_create(ResolvedHooks(), CTX, []) == CreateResult()


async def test_create_wrong_shape_is_a_hook_error() -> None:
    with pytest.raises(RunError) as caught:
        await run_create(ResolvedHooks(create=create_bad), CTX, [])
    assert caught.value.code == "hook_error"


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        (None, None),
        ({"data": {"x": 1}}, NextResult(data={"x": 1})),
        ({"delegate": "helper"}, NextResult(delegate=Delegation("helper"))),
        (
            {"delegate": {"assistant_id": "helper", "messages": [{"role": "user", "content": "m"}]}},
            NextResult(delegate=Delegation("helper", ({"role": "user", "content": "m"},))),
        ),
        ([1, 2], NextResult(data=[1, 2])),
        (NextResult(data="d"), NextResult(data="d")),
    ],
)
async def test_next_result_shapes(returned: Any, expected: NextResult | None) -> None:
    payload = {"messages": [], "completion": None, "tool_results": returned}
    assert await run_next(ResolvedHooks(next=next_echo), CTX, payload) == expected


async def test_next_hook_exception_becomes_hook_error_naming_it() -> None:
    with pytest.raises(RunError) as caught:
        await run_next(ResolvedHooks(next=next_raises), CTX, {})
    assert caught.value.code == "hook_error"
    assert "next_raises" in str(caught.value)
    assert "ValueError" in str(caught.value)

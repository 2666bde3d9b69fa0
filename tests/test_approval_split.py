"""Which calls of a batch are held for approval: the policy's rules, and the shortcut when there are none."""

from __future__ import annotations

from yao_actors.conversation.interrupts.approvals import ApprovalPolicy, split_held
from yao_actors.models.base import ToolCall
from yao_actors.specs import AssistantSpec
from yao_actors.tools.catalog import Catalog, CatalogEntry
from yao_actors.tools.naming import ToolNameTable, ToolRef

ENTRIES = (
    CatalogEntry("fs__write", "fs", "write", "", {"type": "object"}),
    CatalogEntry("fs__read", "fs", "read", "", {"type": "object"}),
    CatalogEntry("weather__get", "weather", "get", "", {"type": "object"}),
)
CATALOG = Catalog(ENTRIES, table=ToolNameTable.build(ToolRef(e.server, e.tool) for e in ENTRIES))
CALLS = [ToolCall("c1", "fs__write", "{}"), ToolCall("c2", "weather__get", "{}"), ToolCall("c3", "fs__read", "{}")]


def assistant(*approval: str) -> AssistantSpec:
    return AssistantSpec("a", "m", ("p",), approval=approval)


def test_without_any_rule_every_call_runs_in_order_and_none_is_held() -> None:
    policy = ApprovalPolicy()
    assert not policy.holds_any(assistant())
    run, held = split_held(policy, assistant(), CALLS, CATALOG, now=100.0)
    assert [c.id for c in run] == ["c1", "c2", "c3"]
    assert held == []
    assert run is not CALLS  # the caller's list is not handed back


def test_a_server_rule_holds_the_tools_it_names_only() -> None:
    policy = ApprovalPolicy({"fs": frozenset({"write"})})
    assert policy.holds_any(assistant())
    run, held = split_held(policy, assistant(), CALLS, CATALOG, now=100.0)
    assert [c.id for c in run] == ["c2", "c3"]
    assert [(p.call.id, p.interrupt_id, p.expires_at) for p in held] == [("c1", "approval-c1", 3700.0)]


def test_an_assistant_pattern_holds_every_tool_of_its_server() -> None:
    policy = ApprovalPolicy()
    spec = assistant("fs__*")
    assert policy.holds_any(spec)
    run, held = split_held(policy, spec, CALLS, CATALOG, now=0.0)
    assert [c.id for c in run] == ["c2"]
    assert [p.call.id for p in held] == ["c1", "c3"]


def test_a_server_rule_that_holds_nothing_still_holds_nothing() -> None:
    policy = ApprovalPolicy({"fs": False})
    run, held = split_held(policy, assistant(), CALLS, CATALOG, now=0.0)
    assert [c.id for c in run] == ["c1", "c2", "c3"]
    assert held == []

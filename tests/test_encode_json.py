"""encode_json (how events and frames are written) keeps one C encoder for every call: the same text and the same
errors as the plain compact encoder, and nothing left behind by a value it refused."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yao_actors.untrusted.json import encode_json

_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_values)
def test_encode_json_writes_what_the_compact_encoder_writes(value: Any) -> None:
    expected = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if not expected.isascii():
        try:
            expected.encode()
        except UnicodeEncodeError:  # a lone surrogate: the whole value is written with escapes instead
            expected = json.dumps(value, separators=(",", ":"))
    assert encode_json(value) == expected


def test_encode_json_refuses_what_is_not_json_and_goes_on() -> None:
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    with pytest.raises(ValueError, match="Circular reference"):
        encode_json({"a": [cycle]})
    with pytest.raises(TypeError, match="not JSON serializable"):
        encode_json({"a": object()})
    with pytest.raises(TypeError, match="keys must be"):
        encode_json({(1, 2): 3})
    del cycle["self"]  # the same containers, no longer a cycle: nothing of the refusals stayed behind
    assert encode_json({"a": [cycle], "b": 1.5, "c": "é"}) == '{"a":[{}],"b":1.5,"c":"é"}'

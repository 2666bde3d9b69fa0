"""How a store checks and encodes what it is given, and decodes what it read: messages, sequence numbers,
approvals, the answers and outcomes of held calls. Shared by the backends; JSON as the wire has it
(:func:`~yao_actors.untrusted.json.encode_json`)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final

from yao_actors.errors import InvalidStoreInput, SeqConflict
from yao_actors.store.records import EncodedEvent, Message, interrupted_event
from yao_actors.untrusted.json import encode_json

MAX_SEQ: Final = 2**63 - 1
"""The largest event ``seq`` a store keeps (SQLite's largest ``INTEGER``): a batch above it is refused, and an
``after_seq`` above it asks for nothing (:func:`seq_floor`)."""


def new_owner_token() -> str:
    """A token naming one store object (one process's hold on its runs)."""
    return uuid.uuid4().hex


def encode_message(message: Message) -> str:
    """One message as compact JSON (:func:`~yao_actors.untrusted.json.encode_json`, as events are: never a raw line feed,
    which the Redis store relies on, and valid UTF-8); refuses a message that is not a mapping with a string
    ``role``."""
    if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
        raise InvalidStoreInput(f"a stored message must be a mapping with a string 'role', got {message!r:.200}")
    return encode_json(message)


def encode_usage(usage: Mapping[str, Any] | None) -> str:
    return json.dumps(dict(usage or {}), separators=(",", ":"))


def event_seqs(events: Sequence[EncodedEvent]) -> list[int]:
    """The ``seq`` numbers of a batch, checked to be positive integers that strictly rise."""
    seqs: list[int] = []
    for index, (seq, _) in enumerate(events):
        if isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq <= MAX_SEQ:
            raise InvalidStoreInput(f"events[{index}]: 'seq' must be a positive integer up to {MAX_SEQ}, got {seq!r}")
        if seqs and seq <= seqs[-1]:
            raise SeqConflict(f"events[{index}]: seq {seq} does not rise above {seqs[-1]}")
        seqs.append(seq)
    return seqs


def seq_floor(after_seq: int) -> int:
    """``after_seq`` as a store looks events up after it: an integer (``InvalidStoreInput`` otherwise) within
    ``0..MAX_SEQ`` (below 0 asks for every event, as 0 does; above :data:`MAX_SEQ` for none, as it does), so a
    caller's number never overflows SQLite's integers nor makes a stream id Redis refuses."""
    if isinstance(after_seq, bool) or not isinstance(after_seq, int):
        raise InvalidStoreInput(f"after_seq must be an integer, got {after_seq!r}")
    return min(max(after_seq, 0), MAX_SEQ)


def check_rises(run_id: str, seqs: Sequence[int], last_seq: int) -> None:
    """Refuse a batch whose first number is not above the stored log's last."""
    if seqs and seqs[0] <= last_seq:
        raise SeqConflict(f"run {run_id}: event seq {seqs[0]} is not above the stored last seq {last_seq}")


def purge_interval(event_ttl: float) -> float:
    """How often a store sweeps expired event logs away: every minute, or every ``event_ttl`` if shorter."""
    return min(event_ttl, 60.0)


def encode_approvals(approvals: Sequence[Mapping[str, Any]]) -> str:
    """A thread's pending approvals as one compact JSON array; refuses anything but JSON objects."""
    for index, approval in enumerate(approvals):
        if not isinstance(approval, Mapping):
            raise InvalidStoreInput(
                f"approvals[{index}]: a stored approval must be a JSON object, got {approval!r:.200}"
            )
    try:
        return json.dumps([dict(a) for a in approvals], separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as error:
        raise InvalidStoreInput(f"approvals: not JSON: {error}") from None


def decode_approvals(text: str | bytes | None) -> list[dict[str, Any]]:
    """Stored pending approvals back as dicts (``[]`` for none)."""
    if not text:
        return []
    value: list[dict[str, Any]] = json.loads(text)
    return value


def encode_object(value: Mapping[str, Any], what: str) -> str:
    """A held call's answer or outcome as compact JSON; ``InvalidStoreInput`` for anything but a JSON object."""
    if not isinstance(value, Mapping):
        raise InvalidStoreInput(f"a held call's {what} must be a JSON object, got {value!r:.200}")
    try:
        return encode_json(dict(value))
    except (TypeError, ValueError) as error:
        raise InvalidStoreInput(f"a held call's {what} is not JSON: {error}") from None


def decode_json(text: str | bytes) -> dict[str, Any]:
    """A stored message, event, answer or outcome back as a dict."""
    value: dict[str, Any] = json.loads(text)
    return value


def encoded_interruption(run_id: str, seq: int, now: float) -> EncodedEvent:
    """The terminal event a store appends for a run whose process died (:func:`interrupted_event`), encoded as the
    wire encodes events."""
    return EncodedEvent(seq, encode_json(interrupted_event(run_id, seq, now)))

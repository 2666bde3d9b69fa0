"""The memory store: the library's default, gone with the process (its leases, held calls, tokens and event logs beside it)."""

from yao_actors.store.memory.leases import MemoryLeases
from yao_actors.store.memory.store import MemoryStore

__all__ = ["MemoryLeases", "MemoryStore"]

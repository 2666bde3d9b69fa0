"""The Redis store: threads shared by processes and machines (needs the ``redis`` extra: coredis), its keys,
scripts, leases, held calls and tokens beside it."""

from yao_actors.store.redis.reach import shown_url
from yao_actors.store.redis.store import RedisStore, open_redis_store

__all__ = ["RedisStore", "open_redis_store", "shown_url"]

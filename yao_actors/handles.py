"""What every actor handle shares: it is made by its actor's ``serve_*`` function, never by a caller.

A handle holds the send side of its actor's inbox and a read-only view of the
actor's status; the actor keeps everything else. :class:`NoPublicConstructor`
makes that visible: calling the class raises ``TypeError``, and the actor builds
its handle with ``Handle._create(...)`` (trio makes its channels the same way).
"""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


class NoPublicConstructor(type):
    """A metaclass whose classes can only be built through ``cls._create(...)``."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{cls.__module__}.{cls.__qualname__} has no public constructor")

    def _create(cls: type[T], *args: Any, **kwargs: Any) -> T:
        made: T = super().__call__(*args, **kwargs)  # type: ignore[misc]
        return made

"""The handle every ``register_*_hook`` returns (``torch.utils.hooks.RemovableHandle``;
re-exported as ``nova.utils.hooks``). In ``core`` because hooks hang on tensors,
GradFns and modules alike: every layer above registers them."""
from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

_ids = itertools.count()
_changes = [0]


def generation() -> int:
    """How many times a hook has been registered or removed, anywhere: ``nv.compile``
    replays only while this is what it was when its call last ended, since a replay
    skips the Python that would run a hook added (or not run one removed) since."""
    return _changes[0]


class RemovableHandle:
    """``remove()`` takes the hook off (a second call does nothing); usable as a
    context manager that removes it on exit. ``id`` is unique per registration.
    ``remove`` pops the hook from its table and returns it (None if already gone)."""

    def __init__(self, remove: Callable[[int], None]):
        self.id = next(_ids)
        self._remove = remove
        _changes[0] += 1

    def remove(self) -> None:
        if self._remove(self.id) is not None:
            _changes[0] += 1

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

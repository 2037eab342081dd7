"""The handle every ``register_*_hook`` returns (``torch.utils.hooks.RemovableHandle``;
re-exported as ``nova.utils.hooks``). In ``core`` because hooks hang on tensors,
GradFns and modules alike: every layer above registers them."""
from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

_ids = itertools.count()


class RemovableHandle:
    """``remove()`` takes the hook off (a second call does nothing); usable as a
    context manager that removes it on exit. ``id`` is unique per registration."""

    def __init__(self, remove: Callable[[int], None]):
        self.id = next(_ids)
        self._remove = remove

    def remove(self) -> None:
        self._remove(self.id)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

"""``skip_init``: build a module without computing its initial values."""
from __future__ import annotations

from typing import Any, TypeVar

from nova.nn.module import Module
from nova.tensor.creation import empty
from nova.tensor.random import get_rng_state, set_rng_state

ModuleT = TypeVar("ModuleT", bound=Module)


def skip_init(module_cls: type[ModuleT], *args: Any, **kwargs: Any) -> ModuleT:
    """``module_cls(*args, **kwargs)`` with every parameter and buffer left
    uninitialized (``torch.nn.utils.skip_init``), on ``device`` (a keyword, default
    cpu), for loading values into afterwards.

    PyTorch builds the module on the meta device and requires ``module_cls`` to take a
    ``device`` argument. Nova records lazily instead: the constructor runs as usual,
    then each value is replaced by an empty one (zeros, as ``nv.empty`` gives), so the
    recorded initialization is never computed. ``device`` is not passed on (not every
    Nova layer takes one), and the random generator is restored afterwards, so the skipped
    initialization draws no random numbers, as on PyTorch's meta device."""
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"skip_init: expected a Module class; got {module_cls!r}")
    device = kwargs.pop("device", "cpu")
    state = get_rng_state()
    try:
        module = module_cls(*args, **kwargs)
    finally:
        set_rng_state(state)
    for t in list(module.parameters()) + list(module.buffers()):
        t.data = empty(t.shape, dtype=t.dtype, device=device)
    return module


__all__ = ["skip_init"]

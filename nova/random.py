"""``nv.random``: the global random number generator's functions, as ``torch.random``.

Nova has one default generator (``nova.tensor.random.default_generator``, a
counter-based Philox key) whose key every device's step reads, so the functions here
act on all devices at once: ``fork_rng`` saves and restores that one state whatever
``devices`` names (PyTorch keeps a generator per CUDA device and restores those
listed)."""
from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

from nova.tensor.random import (  # noqa: F401  (Generator, default_generator: as torch.random)
    Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed,
    set_rng_state,
)

_DEVICE_TYPES = ("cpu", "cuda")


@contextlib.contextmanager
def fork_rng(devices: Iterable[Any] | None = None, enabled: bool = True,
             _caller: str = "fork_rng", _devices_kw: str = "devices",
             device_type: str | None = None) -> Iterator[None]:
    """Run the block, then put the global generator back as it was
    (``torch.random.fork_rng``): draws inside do not change what later draws give.
    ``enabled=False`` does nothing. ``devices`` (device indices, as PyTorch's) and
    ``device_type`` are checked and accepted; the one Nova state covers them."""
    if device_type is not None and device_type not in _DEVICE_TYPES:
        raise ValueError(f"{_caller}: device_type must be one of {_DEVICE_TYPES}, got "
                         f"{device_type!r}")
    if devices is not None:
        for d in devices:
            if isinstance(d, bool) or not isinstance(d, (int, str)) and \
                    not hasattr(d, "type"):
                raise TypeError(f"{_caller}: {_devices_kw} must hold device indices or "
                                f"devices, got {type(d).__name__} {d!r}")
    if not enabled:
        yield
        return
    state = default_generator.get_state()
    try:
        yield
    finally:
        default_generator.set_state(state)


__all__ = ["set_rng_state", "get_rng_state", "manual_seed", "seed", "initial_seed",
           "fork_rng"]

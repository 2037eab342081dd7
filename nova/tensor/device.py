"""Devices: where a tensor's values live.

``cpu`` values are numpy arrays; ``cuda`` values are device arrays of the cuda backend
(CuPy arrays on a GPU; see ``nova.runtime.cuda_runtime``). Asking for ``cuda`` where it
cannot run raises at once, naming why (no CuPy, no GPU), instead of computing on the
host behind the user's back. Nothing here imports CuPy: ``import nova`` stays GPU-free.
"""
from __future__ import annotations

import threading
from typing import Any

_KNOWN = ("cpu", "cuda")


class device:
    """``nv.device("cpu")`` / ``nv.device("cuda")``, mirroring ``torch.device``."""

    __slots__ = ("type", "index")

    def __init__(self, spec: Any = "cpu", index: int | None = None):
        if isinstance(spec, device):
            self.type, self.index = spec.type, spec.index
            return
        if isinstance(spec, int) and not isinstance(spec, bool):
            # an ordinal, as torch.device(0): the accelerator's device with that index
            if spec < 0:
                raise RuntimeError(f"Device index must not be negative, got {spec}")
            self.type, self.index = "cuda", spec
            return
        if not isinstance(spec, str):
            raise TypeError(f"device: expected a string like 'cpu' or 'cuda', got {spec!r}")
        kind, _, idx = spec.partition(":")
        if kind not in _KNOWN:
            raise ValueError(f"device: unknown device type {kind!r}; valid types are {_KNOWN}")
        self.type = kind
        self.index = int(idx) if idx else index

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __repr__(self) -> str:
        idx = "" if self.index is None else f", index={self.index}"
        return f"device(type='{self.type}'{idx})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __enter__(self) -> device:
        """``with nv.device("cuda"):``: factories called without ``device=`` inside the
        block use this device (this thread only), as ``torch.device``'s context."""
        _DEFAULT.stack = [*_stack(), self]
        return self

    def __exit__(self, *exc: Any) -> None:
        _DEFAULT.stack = _stack()[:-1]


CPU = device("cpu")
CUDA = device("cuda")
# A node's device is stored as its type string (or None: "follows its consumers", for
# constants and random keys); these are the device objects users see for them.
BY_TYPE = {None: CPU, "cpu": CPU, "cuda": CUDA}


# The default device of the factories: per thread, as PyTorch's (its global setting
# lives in a ``threading.local``): ``set_default_device``'s choice, under the devices
# of enclosing ``with nv.device(...)`` blocks.
_DEFAULT = threading.local()


def _stack() -> list[device]:
    return getattr(_DEFAULT, "stack", [])


_Device = device     # (``set_default_device``'s parameter, PyTorch's name, hides it)


def set_default_device(device: Any) -> None:
    """``torch.set_default_device``: factory functions (``nv.zeros``, ``nv.tensor``,
    ``nv.arange``...) called without ``device=`` put their result on ``device``
    from now on, in this thread; ``None`` restores the CPU. Whether the device can run
    is checked when a factory uses it, as in PyTorch."""
    _DEFAULT.base = None if device is None else _Device(device)


def get_default_device() -> device:
    """The device factories use without ``device=`` (``torch.get_default_device``):
    the innermost ``with nv.device(...)``, else ``set_default_device``'s, else the
    CPU."""
    stack = _stack()
    if stack:
        return stack[-1]
    base = getattr(_DEFAULT, "base", None)
    return CPU if base is None else base


def factory_device(spec: Any, op: str) -> device:
    """``check_device`` for a factory's ``device=``: None means the default device."""
    return check_device(get_default_device() if spec is None else spec, op)


def check_device(spec: Any, op: str) -> device:
    """Resolve a device argument (None means the CPU). ``cuda`` must be usable: CuPy
    installed and a GPU present (or a test backend installed); otherwise this raises
    naming which is missing. Only one GPU (index 0) is addressed."""
    d = CPU if spec is None else device(spec)
    if d.type == "cuda":
        from nova.runtime.cuda_runtime import unavailable_reason
        reason = unavailable_reason()
        if reason is not None:
            raise RuntimeError(f"{op}: CUDA is not available: {reason}")
        if d.index not in (None, 0):
            raise ValueError(f"{op}: device {d} does not exist: Nova uses one GPU, cuda:0")
        return CUDA
    return d

"""Devices: where a tensor's values live.

``cpu`` values are numpy arrays; ``cuda`` values are device arrays of the cuda backend
(CuPy arrays on a GPU; see ``nova.runtime.cuda_runtime``). Asking for ``cuda`` where it
cannot run raises at once, naming why (no CuPy, no GPU), instead of computing on the
host behind the user's back. Nothing here imports CuPy: ``import nova`` stays GPU-free.
"""
from __future__ import annotations

from typing import Any

_KNOWN = ("cpu", "cuda")


class device:
    """``nv.device("cpu")`` / ``nv.device("cuda")``, mirroring ``torch.device``."""

    __slots__ = ("type", "index")

    def __init__(self, spec: Any = "cpu", index: int | None = None):
        if isinstance(spec, device):
            self.type, self.index = spec.type, spec.index
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


CPU = device("cpu")
CUDA = device("cuda")
# A node's device is stored as its type string (or None: "follows its consumers", for
# constants and random keys); these are the device objects users see for them.
BY_TYPE = {None: CPU, "cpu": CPU, "cuda": CUDA}


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

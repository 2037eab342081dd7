"""Devices. Only ``cpu`` exists until the CUDA backend lands; asking for another device
raises a clear error instead of silently computing on the host."""
from __future__ import annotations

from typing import Any

_KNOWN = ("cpu", "cuda")


class device:
    """``nv.device("cpu")``, mirroring ``torch.device``."""

    __slots__ = ("type", "index")

    def __init__(self, spec: Any = "cpu", index: int | None = None):
        if isinstance(spec, device):
            self.type, self.index = spec.type, spec.index
            return
        if not isinstance(spec, str):
            raise TypeError(f"device: expected a string like 'cpu', got {spec!r}")
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


def check_device(spec: Any, op: str) -> device:
    """Resolve a device argument; only the CPU is usable in this build."""
    d = CPU if spec is None else device(spec)
    if d.type != "cpu":
        raise RuntimeError(f"{op}: device {d} is not available (Nova's CUDA backend is not "
                           "built yet); use device='cpu'")
    return d

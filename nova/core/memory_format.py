"""PyTorch's memory-format objects (``torch.channels_last`` and friends).

Vision code asks for a layout (``model.to(memory_format=torch.channels_last)``,
``x.contiguous(memory_format=torch.channels_last)``) as a performance hint. Nova tensors
have no strides -- the compiler picks layouts -- so these are markers with nothing to
do, but the names must exist for such code to port by changing its imports, and
``Module.to`` checks that what it is given is one of them, as PyTorch does."""
from __future__ import annotations

from typing import Any

__all__ = ["memory_format", "contiguous_format", "channels_last", "channels_last_3d",
           "preserve_format", "check_memory_format", "check_layout_rank", "is_contiguous_as"]


class memory_format:
    """A layout request: compares by identity; prints as Nova prints dtypes (``nova.X``)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"nova.{self._name}"

    def __reduce__(self) -> str:
        # Pickling/copying gives back the module-level singleton, as PyTorch's.
        return self._name


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")


def check_memory_format(op: str, value: Any) -> memory_format | None:
    """``value`` if it is None or a memory format, else the TypeError PyTorch raises."""
    if value is None or isinstance(value, memory_format):
        return value
    raise TypeError(f"{op}: memory_format must be a memory format (nova.contiguous_format, "
                    f"nova.channels_last, nova.channels_last_3d or nova.preserve_format), "
                    f"got {type(value).__name__}")


_RANKS = {"channels_last": 4, "channels_last_3d": 5}


def check_layout_rank(op: str, fmt: memory_format | None, ndim: int) -> None:
    """PyTorch's error for a channels-last format on a tensor of another rank (the
    format itself has no effect in Nova: tensors have no strides)."""
    rank = _RANKS.get(getattr(fmt, "_name", None))
    if rank is not None and ndim != rank:
        raise RuntimeError(f"{op}: required rank {rank} tensor to use {fmt._name} format")


def is_contiguous_as(fmt: Any, shape: tuple[int, ...]) -> bool:
    """``Tensor.is_contiguous(memory_format=fmt)`` for a row-major value of ``shape``:
    always in the contiguous (and preserved) format; in a channels-last format only
    when row-major strides are channels-last strides too (one channel, or one spatial
    position), as PyTorch answers for a freshly made tensor."""
    fmt = check_memory_format("is_contiguous", fmt)
    rank = _RANKS.get(getattr(fmt, "_name", None))
    if rank is None:
        return True
    if len(shape) != rank:
        return False
    spatial = 1
    for n in shape[2:]:
        spatial *= n
    return shape[1] == 1 or spatial == 1

"""``Tensor.dim_order``: the memory order of a tensor's dimensions, for code that asks.

Nova values have no observable layout: every tensor reads as row-major and contiguous
(``Tensor.stride`` gives the row-major strides), so its dim order is ``(0, 1, ...,
n-1)``; only the ambiguity check, which depends on the shape through those strides,
can refuse a tensor, as PyTorch's does.
"""
from __future__ import annotations

from typing import Any

from nova.tensor.tensor import Tensor


def _ambiguous(t: Tensor) -> bool:
    """PyTorch's ``has_multiple_dim_order``: a size-1 dimension, or two neighbouring
    dimensions with equal strides, admit another order."""
    strides = t.stride()
    return any(s == 1 for s in t.shape) or any(a == b for a, b in zip(strides, strides[1:]))


def dim_order(t: Tensor, ambiguity_check: Any = False) -> tuple[int, ...]:
    """``(0, ..., ndim - 1)``; ``ambiguity_check``: a bool, or a list of memory formats
    (every one of which a Nova tensor satisfies, so only a list of exactly one makes an
    ambiguous order unique)."""
    if isinstance(ambiguity_check, bool):
        n_formats = None
    elif isinstance(ambiguity_check, list):
        n_formats = len(ambiguity_check)
    else:
        raise TypeError("The ambiguity_check argument must be a bool or a list of memory "
                        "formats.")
    check = ambiguity_check if n_formats is None else True
    if check and _ambiguous(t) and n_formats != 1:
        raise RuntimeError(f"dim_order: The tensor does not have unique dim order, or "
                           f"cannot map to exact one of the given memory formats (shape "
                           f"{list(t.shape)}, strides {list(t.stride())})")
    return tuple(range(t.ndim))


def is_inference(input: Tensor) -> bool:
    """``torch.is_inference``: whether ``input`` is an inference tensor (False: Nova's
    ``inference_mode`` makes ordinary tensors, see ``Tensor.is_inference``)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"is_inference(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    return input.is_inference()

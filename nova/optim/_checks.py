"""Argument checks shared by the optimizers added after SGD/Adam/RMSprop (PyTorch's
conditions; the messages name the optimizer and the offending value)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def nonnegative(name: str, **values: float) -> None:
    """Each of ``values`` must be >= 0 (a NaN is refused too, as PyTorch's
    ``not 0.0 <= v`` refuses it)."""
    for k, v in values.items():
        if not 0.0 <= v:
            raise ValueError(f"{name}: invalid {k}={v} (must be >= 0)")


def betas(name: str, values: Sequence[float]) -> tuple[float, float]:
    """Two coefficients in [0, 1), returned as a tuple (the group entry)."""
    if len(values) != 2 or not all(0.0 <= b < 1.0 for b in values):
        raise ValueError(f"{name}: betas must be two values in [0, 1), got {tuple(values)}")
    return (values[0], values[1])


# Group entries that only choose among PyTorch's kernels (``Optimizer._baked`` leaves
# them out: they change nothing in Nova's step).
KERNEL_FLAGS = frozenset({"foreach", "fused", "capturable", "differentiable"})


def kernel_flags(name: str, differentiable: bool, **flags: bool | None) -> dict[str, Any]:
    """The group entries PyTorch keeps for ``foreach`` / ``fused`` / ``capturable``
    (those its optimizer ``name`` takes, in ``flags``) and ``differentiable``. The first
    three choose among PyTorch's kernels for one update; Nova compiles the whole step
    into fused kernels either way, so they are kept in ``param_groups`` as given (a
    script or a checkpoint reads them) and change nothing. ``differentiable=True``
    (autograd through the update) is another algorithm: the update is recorded under
    ``no_grad``."""
    if differentiable:
        raise NotImplementedError(f"{name}: differentiable=True is not supported (the "
                                  "update is recorded without autograd)")
    return {**flags, "differentiable": differentiable}

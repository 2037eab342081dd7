"""Argument checks shared by the optimizers added after SGD/Adam/RMSprop (PyTorch's
conditions; the messages name the optimizer and the offending value)."""
from __future__ import annotations

from collections.abc import Sequence


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


def kernel_flags(name: str, differentiable: bool) -> None:
    """``foreach`` / ``fused`` / ``capturable`` choose among PyTorch's kernels for one
    update; Nova compiles the whole step into fused kernels either way, so they are
    accepted and change nothing (the callers drop them). ``differentiable=True``
    (autograd through the update) is another algorithm: the update is recorded under
    ``no_grad``."""
    if differentiable:
        raise NotImplementedError(f"{name}: differentiable=True is not supported (the "
                                  "update is recorded without autograd)")

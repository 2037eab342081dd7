"""Argument checks shared by the optimizers: PyTorch's conditions and PyTorch's words
(``Invalid learning rate: -1``, ``Invalid beta parameter at index 0: 1.0``), after the
optimizer's name and followed by what would be valid."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# How PyTorch's messages name a hyperparameter (``Invalid <label>: <value>``); any
# other ``k`` is ``<k> value``.
_LABELS = {"lr": "learning rate", "eps": "epsilon value"}


def invalid(name: str, key: str, value: Any, valid: str) -> ValueError:
    """PyTorch's ``Invalid ...`` error for ``key=value`` of optimizer ``name``, saying
    what is ``valid``."""
    return ValueError(f"{name}: Invalid {_LABELS.get(key, key + ' value')}: {value} "
                      f"({key} must be {valid})")


def tensor_lr(name: str, lr: Any) -> None:
    """A tensor ``lr`` must hold one element (PyTorch's check)."""
    from nova.tensor.tensor import Tensor
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError(f"{name}: Tensor lr must be 1-element, got shape {tuple(lr.shape)}")


def nonnegative(name: str, **values: float) -> None:
    """Each of ``values`` must be >= 0 (a NaN is refused too, as PyTorch's
    ``not 0.0 <= v`` refuses it)."""
    for k, v in values.items():
        if not 0.0 <= v:
            raise invalid(name, k, v, ">= 0")


def positive(name: str, **values: float) -> None:
    """Each of ``values`` must be > 0 (``SparseAdam``'s ``lr`` and ``eps``)."""
    for k, v in values.items():
        if not 0.0 < v:
            raise invalid(name, k, v, "> 0")


def betas(name: str, values: Sequence[float]) -> tuple[float, float]:
    """Two coefficients in [0, 1), returned as a tuple (the group entry)."""
    values = tuple(values)
    if len(values) != 2:
        raise ValueError(f"{name}: betas must be a pair (beta1, beta2) in [0, 1), got "
                         f"{values}")
    for i, b in enumerate(values):
        if not 0.0 <= b < 1.0:
            raise ValueError(f"{name}: Invalid beta parameter at index {i}: {b} (betas "
                             "must be in [0, 1))")
    return (values[0], values[1])


# Group entries that only choose among PyTorch's kernels (``Optimizer._baked`` leaves
# them out: they change nothing in Nova's step).
KERNEL_FLAGS = frozenset({"foreach", "fused", "capturable", "differentiable"})


def kernel_flags(name: str, differentiable: bool, foreach: bool | None = None,
                 fused: bool | None = None) -> None:
    """Check PyTorch's ``foreach`` / ``fused`` / ``capturable`` / ``differentiable``.
    The first three choose among PyTorch's kernels for one update; Nova compiles the
    whole step into fused kernels either way, so they are kept in ``param_groups`` as
    given (a script or a checkpoint reads them) and change nothing -- but ``fused``
    and ``foreach`` together are refused, as PyTorch refuses them.
    ``differentiable=True`` (autograd through the update) is another algorithm: the
    update is recorded under ``no_grad``."""
    if differentiable:
        raise NotImplementedError(f"{name}: differentiable=True is not supported (the "
                                  "update is recorded without autograd)")
    if fused and foreach:
        raise RuntimeError(f"{name}: `fused` and `foreach` cannot be `True` together.")

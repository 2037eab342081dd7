"""``F.triplet_margin_with_distance_loss`` and ``F.multilabel_margin_loss`` with their
modules, PyTorch's arguments, defaults and values.

``multilabel_margin_loss``'s target holds, per sample, the indices of its classes,
ended by the first -1 (the rest ignored): per sample the hinge
``sum_{j in targets} sum_{i not in targets} max(0, 1 - (x[j] - x[i])) / C``, a class
listed twice counting twice, as in PyTorch's kernel. It is computed for all
``(j, i)`` pairs at once, ``(N, C, C)`` terms, masked.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.nn.distance import PairwiseDistance, pairwise_distance
from nova.nn.functional import _reduce
from nova.nn.loss_functions import _same_ndim, legacy_reduction
from nova.nn.losses import _LegacyLoss, _Loss
from nova.tensor import ops
from nova.tensor.autocast_state import autocast_op
from nova.tensor.scan import cumsum
from nova.tensor.tensor import Tensor

_REDUCTIONS = ("mean", "sum", "none")


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function: Callable[[Tensor, Tensor], Tensor]
                                      | None = None, margin: float = 1.0,
                                      swap: bool = False, reduction: str = "mean") -> Tensor:
    """``max(0, margin + d(a, p) - d(a, n))`` for any distance ``d``
    (``distance_function``, by default ``pairwise_distance``); with ``swap``, ``d(a, n)``
    is replaced by ``d(p, n)`` where that is smaller."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"triplet_margin_with_distance_loss: {reduction!r} is not a valid "
                         f"value for reduction ('mean', 'sum' or 'none')")
    if margin <= 0:
        raise ValueError(f"triplet_margin_with_distance_loss: margin must be greater than 0, "
                         f"got {margin}")
    _same_ndim("triplet_margin_with_distance_loss", anchor=anchor, positive=positive,
               negative=negative)
    distance = pairwise_distance if distance_function is None else distance_function
    d_pos = distance(anchor, positive)
    d_neg = distance(anchor, negative)
    if swap:
        d_neg = ops.minimum(d_neg, distance(positive, negative))
    loss = ops.clamp(ops.sub(ops.add(d_pos, margin), d_neg), min=0.0)
    return _reduce("triplet_margin_with_distance_loss", loss, reduction)


def _check_known_targets(target: Tensor, classes: int) -> None:
    """ValueError at the user's line for a target (known on the host) outside
    ``[-1, C)``, as PyTorch checks every entry, also those after the first -1. Computed
    targets are checked when the step runs, for entries at or above ``C``."""
    values = ops.known_index_values(target)
    if values is None or values.size == 0:
        return
    bad = (values < -1) | (values >= classes)
    if bad.any():
        raise ValueError(f"multilabel_margin_loss: target values must lie in [-1, {classes}) "
                         f"for {classes} classes, got {np.asarray(values)[bad].flat[0]}")


@autocast_op("multilabel_margin_loss")
def multilabel_margin_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
                           reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """The multi-label hinge loss of scores ``(C,)`` or ``(N, C)`` against ``target`` of
    the same shape: the class indices of each sample, ended by -1 (module docstring).
    ``reduction='none'`` gives one loss per sample (a 0-d one for a 1-D input)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    ops._check_tensor("multilabel_margin_loss", input)
    ops._check_tensor("multilabel_margin_loss target", target)
    if input.ndim > 2 or (input.ndim and input.shape[-1] == 0):
        raise ValueError(f"multilabel_margin_loss: expected a non-empty (C,) or (N, C) "
                         f"input, got shape {input.shape}")
    if target.shape != input.shape:
        raise ValueError(f"multilabel_margin_loss: target {target.shape} must have the "
                         f"input's shape {input.shape}")
    if target.dtype not in (dt.int32, dt.int64):
        raise DTypeError(f"multilabel_margin_loss: target must hold class indices "
                         f"(int64 or int32), got {target.dtype.name}")
    c = input.shape[-1] if input.ndim else 1
    _check_known_targets(target, c)
    x = ops._as_float("multilabel_margin_loss", input).reshape(-1, c)
    t = target.reshape(-1, c)
    n = x.shape[0]
    # the entries before each row's first negative one are its targets
    listed = ops.eq(cumsum(ops.cast(ops.lt(t, 0), dt.int64), 1), 0)
    safe = ops.where(ops.ge(t, 0), t, 0)
    hits = ops.scatter_add(ops.full_const(0, (n, c), dt.int64), 1, safe,
                           ops.cast(listed, dt.int64))
    other = ops.eq(hits, 0)                                   # (N, C): not a target
    z = ops.add(ops.sub(1.0, ops.gather(x, 1, safe).unsqueeze(2)), x.unsqueeze(1))
    counted = ops.logical_and(ops.logical_and(listed.unsqueeze(2), other.unsqueeze(1)),
                              ops.gt(z, 0.0))
    loss = ops.div(ops.sum(ops.where(counted, z, 0.0), (1, 2)), float(c))
    return _reduce("multilabel_margin_loss", loss.reshape(input.shape[:-1]), reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """``F.triplet_margin_with_distance_loss``; the default distance is a
    ``PairwiseDistance`` submodule, as PyTorch's."""

    def __init__(self, *, distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
                 margin: float = 1.0, swap: bool = False, reduction: str = "mean"):
        super().__init__(reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater "
                             f"than 0, got {margin} instead")
        self.distance_function = PairwiseDistance() if distance_function is None \
            else distance_function
        self.margin, self.swap = margin, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)


class MultiLabelMarginLoss(_LegacyLoss):
    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return multilabel_margin_loss(input, target, reduction=self.reduction)


__all__ = ["triplet_margin_with_distance_loss", "multilabel_margin_loss",
           "TripletMarginWithDistanceLoss", "MultiLabelMarginLoss"]

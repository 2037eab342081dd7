"""``F.ctc_loss`` and ``nn.CTCLoss``: the connectionist temporal classification loss
(Graves et al. 2006), with PyTorch's arguments, defaults, values and errors.

Each target ``l`` of length ``S`` is extended to ``2S + 1`` labels, blanks between and
around its classes. The forward variable alpha ``(N, 2S + 1)`` starts at time 0 on the
leading blank and the first class, and each step adds, in log space, the mass that
stays on a label, moves on by one, or skips a blank between two different classes
(PyTorch's rule: from ``s - 2`` where the extended labels at ``s`` and ``s - 2``
differ), then the step's log-probability of the label. The loss is minus the
log-sum of alpha at the last class and the trailing blank, at each sample's last
time step.

**Static structure.** The lengths fix the shapes and the time loop, so they are read
on the host: tuples or lists of ints, or integer tensors (``.tolist()``, a host read
-- a sync if they were computed). The loop over time is unrolled, one short run of
elementwise ops on ``(N, 2S + 1)`` per step; batch and labels are vectorized, and a
sample whose input has ended keeps its alpha. The recursion runs in float64 and the
loss is rounded once to ``log_probs``' dtype. The masks the lengths make are host
arrays, arguments of the step (so other lengths reuse its kernels, but ``nv.compile``
records a step that calls ``ctc_loss`` every time instead of replaying it).

**Gradients** come from autograd through the recursion: the exact derivative of the
loss (minus each label's posterior), finite where alpha is -inf (a masked
log-sum-exp). PyTorch's kernel returns ``exp(log_probs)`` plus that derivative over
each sample's input steps -- the gradient with respect to the logits, assuming
``log_probs`` is a ``log_softmax`` output -- so the two agree after a ``log_softmax``
(the usual use); for ``log_probs`` used directly Nova's is the derivative and
PyTorch's is not. Two more places where PyTorch's gradient is not the derivative of
its own loss and Nova's is: a target holding the blank class, and a -inf log-probability
(PyTorch gives NaN there, Nova the derivative, 0). An infinite loss (no alignment
fits) has NaN gradients unless ``zero_infinity``, which makes the loss and its
gradients 0.

Target values outside ``[0, C)`` are an error (ValueError at the call for values on
the host; for computed ones the step's gather fails) where PyTorch's CPU kernel reads
out of bounds. Integer targets only (PyTorch's CPU kernel also takes float ones).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.nn.losses import _Loss
from nova.tensor import movement, ops
from nova.tensor.constants import constant
from nova.tensor.autocast_state import autocast_op
from nova.tensor.tensor import Tensor

_REDUCTIONS = ("mean", "sum", "none")
_INDEX_DTYPES = (dt.int32, dt.int64)


def _host_lengths(name: str, lengths: Any, batch: int) -> np.ndarray:
    """``lengths`` (a sequence of ints, or an integer tensor, read on the host) as one
    int64 per sample."""
    if isinstance(lengths, Tensor):
        if lengths.dtype.is_floating_point or lengths.dtype == dt.bool_:
            raise RuntimeError(f"ctc_loss: {name} must be integral, got {lengths.dtype.name}")
        values = np.asarray(lengths.tolist(), dtype=np.int64)
    else:
        values = np.asarray(lengths) if isinstance(lengths, (list, tuple, np.ndarray)) \
            else None
        if values is None or values.ndim != 1 or (values.size and
                                                  values.dtype.kind not in "iu"):
            raise TypeError(f"ctc_loss: {name} must be a tuple or list of ints or an "
                            f"integer tensor, got {lengths!r}")
        values = values.astype(np.int64)
    values = values.reshape(-1)
    if values.size != batch:
        raise RuntimeError(f"ctc_loss: {name} must be of size batch_size ({batch}), got "
                           f"{values.size} values")
    return values


def _padded_targets(targets: Tensor, target_lengths: np.ndarray, batched: bool,
                    blank: int) -> Tensor:
    """The targets as ``(N, S)`` int64, ``S`` the longest target, the entries past each
    target's length set to ``blank`` (padded targets are cut; concatenated ones, 1-D
    with a batch, are gathered at host-computed positions)."""
    n, longest = target_lengths.size, int(target_lengths.max(initial=0))
    if not batched or targets.ndim == 2:
        rows = targets.reshape(1, -1) if not batched else targets
        if rows.shape[0] != n:
            raise RuntimeError(f"ctc_loss: targets of shape {targets.shape} must have "
                               f"batch size {n} in dim 0")
        if rows.shape[1] < longest:
            raise RuntimeError(f"ctc_loss: targets of shape {targets.shape} must hold at "
                               f"least {longest} entries per sample (the longest "
                               f"target_length)")
        padded = rows[:, :longest].to(dt.int64)
    else:
        total = int(target_lengths.sum())
        if targets.shape[0] != total:
            raise RuntimeError(f"ctc_loss: concatenated targets of shape {targets.shape} "
                               f"must hold sum(target_lengths) = {total} entries")
        starts = np.cumsum(target_lengths) - target_lengths
        where = starts[:, None] + np.arange(longest)
        where = np.where(np.arange(longest) < target_lengths[:, None], where, 0)
        if total == 0:
            return ops.full_const(blank, (n, longest), dt.int64)
        index = constant(where.reshape(-1), dtype=dt.int64, device=targets.device)
        padded = ops.gather(targets.to(dt.int64), 0, index).reshape(n, longest)
    inside = constant(np.arange(longest) < target_lengths[:, None], device=targets.device)
    return ops.where(inside, padded, blank)


def _check_known_targets(targets: Tensor, target_lengths: np.ndarray, batched: bool,
                         classes: int) -> None:
    """ValueError at the call for a target value (known on the host) outside
    ``[0, classes)``, among the entries the lengths count."""
    values = ops.known_index_values(targets)
    if values is None:
        return
    values = np.asarray(values)
    if batched and values.ndim == 2:
        used = values[np.arange(values.shape[1]) < target_lengths[:, None]]
    elif batched:
        used = values
    else:
        used = values[:int(target_lengths[0])]
    bad = used[(used < 0) | (used >= classes)]
    if bad.size:
        raise ValueError(f"ctc_loss: target values must lie in [0, {classes}) for "
                         f"{classes} classes, got {bad[0]}")


def _shifted(alpha: Tensor, k: int) -> Tensor:
    """``alpha`` moved ``k`` labels on, -inf entering at the start."""
    n, width = alpha.shape
    if k >= width:
        return ops.full_const(-math.inf, (n, width), alpha.dtype)
    return movement.cat([ops.full_const(-math.inf, (n, k), alpha.dtype),
                         alpha[:, :width - k]], 1)


def _log_add_exp3(a: Tensor, b: Tensor, c: Tensor) -> Tensor:
    """``log(exp(a) + exp(b) + exp(c))`` around the (detached) max, -inf where all three
    are -inf, with a zero gradient there (not 0 * inf)."""
    m = ops.maximum(ops.maximum(a, b), c).detach()
    m = ops.where(ops.eq(m, -math.inf), 0.0, m)
    s = ops.add(ops.add(ops.exp(ops.sub(a, m)), ops.exp(ops.sub(b, m))),
                ops.exp(ops.sub(c, m)))
    some = ops.gt(s, 0.0)
    return ops.where(some, ops.add(ops.log(ops.where(some, s, 1.0)), m), -math.inf)


def _ctc_nll(log_probs: Tensor, targets: Tensor, input_lengths: np.ndarray,
             target_lengths: np.ndarray, blank: int, zero_infinity: bool) -> Tensor:
    """The ``(N,)`` negative log-likelihoods of ``targets`` ``(N, S)`` (blank past each
    length) under ``log_probs`` ``(T, N, C)``: the alpha recursion (module docstring).
    An impossible target gives inf (NaN gradients, as PyTorch's), or with
    ``zero_infinity`` 0."""
    steps, n, _ = log_probs.shape
    width = 2 * targets.shape[1] + 1
    device = log_probs.device
    blanks = ops.full_const(blank, (n, targets.shape[1]), dt.int64)
    labels = movement.cat([movement.stack([blanks, targets], 2).reshape(n, width - 1),
                           ops.full_const(blank, (n, 1), dt.int64)], 1)
    emit = ops.gather(log_probs, 2, labels.unsqueeze(0).expand(steps, n, width))
    skip = movement.cat([ops.full_const(False, (n, min(2, width)), dt.bool_),
                         ops.ne(labels[:, 2:], labels[:, :-2])], 1)
    s = np.arange(width)
    start = constant((s == 0) | ((s == 1) & (target_lengths[:, None] > 0)), device=device)
    alpha = ops.where(start, emit[0], -math.inf)
    last, shortest = int(input_lengths.max()), int(input_lengths.min())
    lengths = constant(input_lengths[:, None], device=device) if shortest < last else None
    for t in range(1, last):
        moved = _log_add_exp3(alpha, _shifted(alpha, 1),
                              ops.where(skip, _shifted(alpha, 2), -math.inf))
        step = ops.add(moved, emit[t])
        if t < shortest:
            alpha = step
        else:
            alpha = ops.where(ops.gt(lengths, t), step, alpha)
    ends = 2 * target_lengths[:, None]
    final = constant((s == ends) | (s == ends - 1), device=device)
    kept = ops.where(final, alpha, -math.inf)
    # the log-sum-exp over the last class and the trailing blank
    top = ops.amax(kept, 1, keepdim=True).detach()
    top = ops.where(ops.eq(top, -math.inf), 0.0, top)
    total = ops.sum(ops.exp(ops.sub(kept, top)), 1)
    found = ops.gt(total, 0.0)
    if zero_infinity:       # no alignment: 0 and a zero gradient (not log's 0 * inf)
        total = ops.where(found, total, 1.0)
    nll = ops.neg(ops.add(ops.log(total), top.squeeze(1)))
    if zero_infinity:
        nll = ops.where(found, nll, 0.0)
    empty = input_lengths == 0     # no step at all: likely (-0.0, as PyTorch) iff no target
    if empty.any():
        at_empty = np.where(target_lengths == 0, -0.0, 0.0 if zero_infinity else math.inf)
        nll = ops.where(constant(empty, device=device),
                        constant(at_empty, dtype=nll.dtype, device=device), nll)
    return nll


@autocast_op("ctc_loss")
def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths: Any, target_lengths: Any,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """The CTC loss of ``targets`` under ``log_probs`` ``(T, N, C)`` (or ``(T, C)``
    unbatched), as ``torch.nn.functional.ctc_loss``: ``targets`` padded ``(N, S)`` or
    concatenated 1-D; the lengths tuples or lists of ints or integer tensors, read on
    the host.
    ``reduction='mean'`` divides each loss by its target length (at least 1), then
    averages over the batch. Module docstring for the computation and the gradient."""
    ops._check_tensor("ctc_loss log_probs", log_probs)
    ops._check_tensor("ctc_loss targets", targets)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"ctc_loss: {reduction} is not a valid value for reduction "
                         f"('mean', 'sum' or 'none')")
    if log_probs.ndim not in (2, 3):
        raise RuntimeError(f"ctc_loss: expected log_probs of shape (T, N, C) or (T, C), "
                           f"got {log_probs.shape}")
    if not log_probs.dtype.is_floating_point:
        raise DTypeError(f"ctc_loss: log_probs must be floating point, got "
                         f"{log_probs.dtype.name}")
    if targets.dtype not in _INDEX_DTYPES:
        raise TypeError(f"ctc_loss: targets must be int32 or int64, got "
                        f"{targets.dtype.name}")
    if log_probs.numel() == 0:
        raise RuntimeError(f"ctc_loss: log_probs tensor must not be empty, got shape "
                           f"{log_probs.shape}")
    batched = log_probs.ndim == 3
    if not batched and targets.ndim != 1:
        raise RuntimeError(f"ctc_loss: unbatched log_probs {log_probs.shape} need 1-D "
                           f"targets, got shape {targets.shape}")
    if batched and targets.ndim not in (1, 2):
        raise RuntimeError(f"ctc_loss: targets must be (N, S) or 1-D concatenated, got "
                           f"shape {targets.shape}")
    lp = log_probs if batched else log_probs.unsqueeze(1)
    steps, n, classes = lp.shape
    if not 0 <= blank < classes:
        raise RuntimeError(f"ctc_loss: blank must be in label range [0, {classes}), got "
                           f"{blank}")
    in_lens = _host_lengths("input_lengths", input_lengths, n)
    tg_lens = _host_lengths("target_lengths", target_lengths, n)
    if in_lens.size and (in_lens.min() < 0 or in_lens.max() > steps):
        raise RuntimeError(f"ctc_loss: input_lengths must lie in [0, {steps}] (the input's "
                           f"length T), got {in_lens.tolist()}")
    if tg_lens.size and tg_lens.min() < 0:
        raise RuntimeError(f"ctc_loss: target_lengths must be at least 0, got "
                           f"{tg_lens.tolist()}")
    padded = _padded_targets(targets, tg_lens, batched, blank)
    _check_known_targets(targets, tg_lens, batched, classes)
    wide = ops.cast(lp, dt.float64)
    nll = ops.cast(_ctc_nll(wide, padded, in_lens, tg_lens, blank, zero_infinity),
                   log_probs.dtype)
    if reduction == "mean":
        divisor = constant(np.maximum(tg_lens, 1), device=log_probs.device)
        return ops.mean(ops.div(nll, divisor))
    if reduction == "sum":
        return ops.sum(nll)
    return nll if batched else nll.squeeze(0)


class CTCLoss(_Loss):
    """``F.ctc_loss`` as a module (``torch.nn.CTCLoss``)."""

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        super().__init__(reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs: Tensor, targets: Tensor, input_lengths: Any,
                target_lengths: Any) -> Tensor:
        return ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                        self.reduction, self.zero_infinity)


__all__ = ["ctc_loss", "CTCLoss"]

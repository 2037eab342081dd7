"""``F.embedding_bag`` and ``nn.EmbeddingBag``: the sum, mean or max of bags of embedding
rows, with PyTorch's arguments and semantics.

A 2-D ``input`` ``(B, L)`` is ``B`` bags of ``L`` indices: its rows ``(B, L, D)`` are
reduced over dim 1. A 1-D ``input`` is cut into bags at ``offsets``, which Nova reads
on the host (a sync if they were computed): the bag boundaries fix the shapes. ``sum``
and ``mean`` then add each row into its bag through a scatter-add over a host-computed
bag id per position (no padding to the longest bag); ``max`` gathers the bags into a
``(B, longest, D)`` table, the missing entries masked, and reduces it as the 2-D case.

Entries equal to ``padding_idx`` are left out of their bag (and of its count for
``mean``); an empty bag gives zeros. With ``include_last_offset`` the last offset ends
the last bag, so entries past it belong to no bag (PyTorch documents it as the input's
length; where it is less, PyTorch's ``mean`` and ``max`` kernels and its
``padding_idx`` handling read the last bag on to the input's end, its ``sum`` does
not). ``max`` sends each feature's gradient to the bag's first maximum (NaN counting
as the largest, as ``max_pool``; PyTorch's loop keeps a NaN only when it comes first).
Indices must lie in ``[0, num_embeddings)``; a negative one is an error, as in PyTorch
(not a wrap). ``max_norm`` first renorms, in place, every row of the weight that
``input`` names (all of ``input``, as PyTorch's ``embedding_renorm_``: entries past
the last bag and ``padding_idx`` rows too), as ``F.embedding`` does; with
``scale_grad_by_freq`` each looked-up row's gradient is divided by how often its index
occurs in ``input`` (``sum`` and ``mean``). ``sparse`` is accepted (Nova's gradients
are dense, and so the same values).
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.nn.embedding_table import checked_padding_idx, given_table, init_table
from nova.nn.functional import _index_counts, _renorm_looked_up_, _ScaleGradByFreq
from nova.nn.module import Module
from nova.nn.parameter import Parameter
from nova.tensor import ops
from nova.tensor.creation import tensor, zeros
from nova.tensor.tensor import Tensor

_MODES = ("sum", "mean", "max")
_INDEX_DTYPES = (dt.int32, dt.int64)


def _rows(weight: Tensor, index: Tensor, freq: Tensor | None = None) -> Tensor:
    """``weight``'s rows at ``index`` (any shape), through a gather, which rejects an
    index outside ``[0, num_embeddings)`` (``weight[index]`` would wrap a negative one);
    their gradient divided by ``freq`` (``index.shape + (1,)``) when given."""
    d = weight.shape[1]
    flat = index.reshape(-1, 1)
    rows = ops.gather(weight, 0, flat.expand(flat.shape[0], d))
    rows = rows.reshape(index.shape + (d,))
    return rows if freq is None else _ScaleGradByFreq.apply(rows, freq)


def _reduce_bags(rows: Tensor, keep: Tensor | None, mode: str,
                 per_sample_weights: Tensor | None) -> Tensor:
    """The ``(B, D)`` reduction over dim 1 of ``rows`` ``(B, L, D)``, counting only the
    entries where ``keep`` ``(B, L)`` holds (all when None)."""
    length = rows.shape[1]
    if mode == "max":
        if length == 0:        # no entries: the (zero) sum keeps the weight in the graph
            return ops.sum(rows, 1)
        masked = rows if keep is None else ops.where(keep.unsqueeze(2), rows, -math.inf)
        first = ops.argmax(masked, 1, keepdim=True)
        best = ops.gather(masked, 1, first).squeeze(1)
        if keep is None:
            return best
        return ops.where(ops.amax(keep, 1, keepdim=True), best, 0.0)
    if per_sample_weights is not None:
        rows = ops.mul(rows, per_sample_weights.unsqueeze(2))
    if keep is not None:
        rows = ops.where(keep.unsqueeze(2), rows, 0.0)
    total = ops.sum(rows, 1)
    if mode == "sum":
        return total
    if keep is None:
        return ops.div(total, float(length)) if length else total
    count = ops.sum(ops.cast(keep, rows.dtype), 1, keepdim=True)
    return ops.div(total, ops.maximum(count, 1.0))


def _host_offsets(offsets: Tensor, length: int, include_last_offset: bool
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Each bag's start and end in the 1-D input, from ``offsets`` read on the host,
    after PyTorch's checks (first offset 0, none past the input)."""
    ops._check_tensor("embedding_bag offsets", offsets)
    if offsets.ndim != 1:
        raise ValueError(f"embedding_bag: offsets has to be a 1-D tensor, got shape "
                         f"{offsets.shape}")
    if offsets.dtype not in _INDEX_DTYPES:
        raise DTypeError(f"embedding_bag: offsets must be int32 or int64, got "
                         f"{offsets.dtype.name}")
    known = ops.known_index_values(offsets)
    offs = (known if known is not None else offsets.numpy()).astype(np.int64)
    if include_last_offset and offs.size == 0:
        raise ValueError("embedding_bag: with include_last_offset the number of offsets "
                         "should be at least 1")
    if offs.size and offs[0] != 0:
        raise ValueError(f"embedding_bag: offsets[0] has to be 0, i.e. the first bag starts "
                         f"at position 0, got {offs[0]}")
    if offs.size and offs[-1] > length:
        raise ValueError(f"embedding_bag: offsets[-1] can not be greater than the input's "
                         f"length {length}, got {offs[-1]}")
    if np.any(np.diff(offs) < 0):
        raise ValueError(f"embedding_bag: offsets must be non-decreasing, got {offs.tolist()}")
    if include_last_offset:
        return offs[:-1], offs[1:]
    return offs, np.append(offs[1:], length)


def _segment_bags(input: Tensor, weight: Tensor, starts: np.ndarray, ends: np.ndarray,
                  mode: str, per_sample_weights: Tensor | None, padding_idx: int | None,
                  freq: Tensor | None) -> Tensor:
    """``sum``/``mean`` of a 1-D input's bags: every row added into its bag by a
    scatter-add over the host-computed bag id of each position."""
    b, d = len(starts), weight.shape[1]
    used = int(ends[-1]) if b else 0
    bag = np.repeat(np.arange(b), ends - starts)
    idx = input[:used]
    rows = _rows(weight, idx, None if freq is None else freq[:used])
    if per_sample_weights is not None:
        rows = ops.mul(rows, per_sample_weights[:used].unsqueeze(1))
    keep = None if padding_idx is None else ops.ne(idx, padding_idx)
    if keep is not None:
        rows = ops.where(keep.unsqueeze(1), rows, 0.0)
    target = tensor(bag.reshape(-1, 1), dtype=dt.int64, device=weight.device)
    total = ops.scatter_add(ops.full_const(0.0, (b, d), weight.dtype), 0,
                            target.expand(used, d), rows)
    if mode == "sum":
        return total
    if keep is None:
        count = np.maximum(ends - starts, 1).astype(weight.dtype.np).reshape(-1, 1)
        return ops.div(total, tensor(count, device=weight.device))
    count = ops.scatter_add(ops.full_const(0.0, (b,), weight.dtype), 0,
                            target.reshape(-1), ops.cast(keep, weight.dtype))
    return ops.div(total, ops.maximum(count, 1.0).unsqueeze(1))


def _padded_bags(input: Tensor, weight: Tensor, starts: np.ndarray, ends: np.ndarray,
                 padding_idx: int | None) -> Tensor:
    """``max`` of a 1-D input's bags: the bags gathered into a ``(B, longest)`` table of
    indices, the entries past each bag's end masked, reduced as a 2-D input."""
    b = len(starts)
    longest = int((ends - starts).max()) if b else 0
    slots = starts[:, None] + np.arange(longest)
    present = slots < ends[:, None]
    table = tensor(np.where(present, slots, 0), dtype=dt.int64, device=weight.device)
    idx = ops.gather(input, 0, table.reshape(-1)).reshape(b, longest)
    keep = tensor(present, device=weight.device)
    if padding_idx is not None:
        keep = ops.logical_and(keep, ops.ne(idx, padding_idx))
    return _reduce_bags(_rows(weight, idx), keep, "max", None)


def _check_args(input: Tensor, weight: Tensor, offsets: Tensor | None, max_norm: Any,
                scale_grad_by_freq: bool, mode: str, sparse: bool,
                per_sample_weights: Tensor | None, padding_idx: int | None) -> int | None:
    """PyTorch's checks; the padding index made non-negative."""
    if mode not in _MODES:
        raise ValueError(f"embedding_bag: mode has to be one of sum, mean or max, got "
                         f"{mode!r}")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("embedding_bag: max mode does not support scaling the gradient by "
                         "the frequency")
    if mode == "max" and sparse:
        raise ValueError("embedding_bag: max mode does not support sparse weights")
    if weight.ndim != 2:
        raise ValueError(f"embedding_bag: weight has to be a 2-D tensor, got shape "
                         f"{weight.shape}")
    if not weight.dtype.is_floating_point:
        raise DTypeError(f"embedding_bag: weight must be a floating point tensor, got "
                         f"{weight.dtype.name}")
    if input.dtype not in _INDEX_DTYPES:
        raise DTypeError(f"embedding_bag: indices must be int32 or int64, got "
                         f"{input.dtype.name}")
    if input.ndim == 2 and offsets is not None:
        raise ValueError("embedding_bag: if input is 2-D, then offsets has to be None, as "
                         "input is treated as a mini-batch of fixed length bags")
    if input.ndim == 1 and offsets is None:
        raise ValueError("embedding_bag: offsets has to be a 1-D tensor for a 1-D input, "
                         "got None")
    if input.ndim not in (1, 2):
        raise ValueError(f"embedding_bag: input has to be a 1-D or 2-D tensor, got shape "
                         f"{input.shape}")
    if per_sample_weights is not None:
        ops._check_tensor("embedding_bag per_sample_weights", per_sample_weights)
        if per_sample_weights.shape != input.shape:
            raise ValueError(f"embedding_bag: per_sample_weights {per_sample_weights.shape} "
                             f"must have the same shape as the input {input.shape}")
        if mode != "sum":
            raise NotImplementedError(f"embedding_bag: per_sample_weights is only supported "
                                      f"for mode='sum', got mode={mode!r}")
        if per_sample_weights.dtype != weight.dtype:
            raise DTypeError(f"embedding_bag: per_sample_weights "
                             f"({per_sample_weights.dtype.name}) must have the weight's "
                             f"dtype ({weight.dtype.name})")
    n = weight.shape[0]
    known = ops.known_index_values(input)     # checked here when on the host already
    if known is not None and known.size and (known.min() < 0 or known.max() >= n):
        bad = known[(known < 0) | (known >= n)].flat[0]
        raise IndexError(f"embedding_bag: index {bad} is out of bounds for {n} embeddings "
                         f"(valid indices are [0, {n}))")
    if padding_idx is None:
        return None
    if not -n <= padding_idx < n:
        raise ValueError(f"embedding_bag: padding_idx must be within the number of "
                         f"embeddings, {-n} through {n - 1}, got {padding_idx}")
    return padding_idx % n


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None,
                  max_norm: float | None = None, norm_type: float = 2,
                  scale_grad_by_freq: bool = False, mode: str = "mean",
                  sparse: bool = False, per_sample_weights: Tensor | None = None,
                  include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """The ``(B, D)`` sums, means or maxima of bags of ``weight``'s rows
    (``torch.nn.functional.embedding_bag``): ``input`` ``(B, L)`` holds one bag per row,
    or a 1-D ``input`` is cut at ``offsets`` (the start of each bag; with
    ``include_last_offset`` the last entry ends the last bag). ``per_sample_weights``
    scales each row (``mode='sum'`` only). Module docstring for the details."""
    ops._check_tensor("embedding_bag", input)
    ops._check_tensor("embedding_bag weight", weight)
    if weight.dtype in _INDEX_DTYPES and input.dtype.is_floating_point:
        warnings.warn("Argument order of nn.functional.embedding_bag was changed. Usage "
                      "`embedding_bag(weight, input, ...)` is deprecated, and should now be "
                      "`embedding_bag(input, weight, ...)`.", stacklevel=2)
        weight, input = input, weight
    padding_idx = _check_args(input, weight, offsets, max_norm, scale_grad_by_freq, mode,
                              sparse, per_sample_weights, padding_idx)
    if max_norm is not None:
        _renorm_looked_up_(weight, input, max_norm, norm_type)
    freq = _index_counts(input, weight.shape[0], weight.dtype) if scale_grad_by_freq \
        else None
    if input.ndim == 2:
        keep = None if padding_idx is None else ops.ne(input, padding_idx)
        return _reduce_bags(_rows(weight, input, freq), keep, mode, per_sample_weights)
    starts, ends = _host_offsets(offsets, input.shape[0], include_last_offset)
    if mode == "max":
        return _padded_bags(input, weight, starts, ends, padding_idx)
    return _segment_bags(input, weight, starts, ends, mode, per_sample_weights, padding_idx,
                         freq)


class EmbeddingBag(Module):
    """A table of ``num_embeddings`` vectors whose bags are summed, averaged or maxed
    (``F.embedding_bag``); initialized N(0, 1), the ``padding_idx`` row at zero."""

    def __init__(self, num_embeddings: int, embedding_dim: int,
                 max_norm: float | None = None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                 _weight: Tensor | None = None, include_last_offset: bool = False,
                 padding_idx: int | None = None, device: Any = None, dtype: Any = None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        padding_idx = checked_padding_idx("EmbeddingBag", padding_idx, num_embeddings)
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.mode, self.sparse = scale_grad_by_freq, mode, sparse
        self.include_last_offset, self.padding_idx = include_last_offset, padding_idx
        if _weight is None:
            self.weight = Parameter(zeros(num_embeddings, embedding_dim, dtype=dtype,
                                          device=device))
            self.reset_parameters()
        else:
            self.weight = given_table("EmbeddingBag", _weight, num_embeddings, embedding_dim,
                                      requires_grad=True)

    def reset_parameters(self) -> None:
        init_table(self.weight, self.padding_idx)

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        max_norm: float | None = None, norm_type: float = 2.0,
                        scale_grad_by_freq: bool = False, mode: str = "mean",
                        sparse: bool = False, include_last_offset: bool = False,
                        padding_idx: int | None = None) -> EmbeddingBag:
        """An EmbeddingBag holding ``embeddings`` (2-D), frozen unless ``freeze=False``."""
        if embeddings.ndim != 2:
            raise ValueError(f"EmbeddingBag.from_pretrained: embeddings must be 2-D, got "
                             f"shape {tuple(embeddings.shape)}")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
                  _weight=embeddings, include_last_offset=include_last_offset,
                  padding_idx=padding_idx)
        bag.weight.requires_grad_(not freeze)
        return bag

    def forward(self, input: Tensor, offsets: Tensor | None = None,
                per_sample_weights: Tensor | None = None) -> Tensor:
        return embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                             self.scale_grad_by_freq, self.mode, self.sparse,
                             per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s


__all__ = ["embedding_bag", "EmbeddingBag"]

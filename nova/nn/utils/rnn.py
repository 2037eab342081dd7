"""``nv.nn.utils.rnn``: batches of variable-length sequences, padded or packed.

``pad_sequence`` / ``unpad_sequence`` convert between a list of ``(L_i, *)`` sequences
and one padded ``(T, B, *)`` tensor. A ``PackedSequence`` holds the same sequences
without padding: ``data`` is ``(sum L_i, *)``, the sequences sorted by decreasing
length and interleaved step by step, and ``batch_sizes[t]`` says how many of them are
still running at step t. ``nv.nn.RNN`` / ``LSTM`` / ``GRU`` take one as input and return
one, as in PyTorch.

Nova's shapes are static, so the lengths must be host values (a list or a CPU integer
tensor, read when packing): ``data``'s shape and the index that gathers it come from
them, and each distinct set of lengths is a graph of its own, compiled once and then
replayed. Packing and unpacking are single row gathers with an index computed on the
host, so they are differentiable and fuse like any other gather. Where a fixed graph
for every batch matters more than skipping the padding, pad to a fixed length and mask
instead (pick each sequence's last valid step with ``gather`` at ``lengths - 1``).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.nn.functional import pad
from nova.tensor import ops
from nova.tensor.constants import constant
from nova.tensor.creation import arange, tensor, zeros_like
from nova.tensor.movement import cat, stack
from nova.tensor.tensor import Tensor

_SORT_HINT = ("You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
              "pack_sequence to sidestep this requirement if you do not need ONNX "
              "exportability.")


class _PackedFields(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(_PackedFields):
    """Sequences of different lengths in one batch, without padding (PyTorch's
    ``PackedSequence``; make one with ``pack_padded_sequence`` or ``pack_sequence``).

    ``data`` (``(sum L_i, *)``): the sequences sorted by decreasing length, step by
    step: first every sequence's step 0, then step 1 of those at least 2 long, ...
    ``batch_sizes`` (int64, on the CPU): how many sequences run at each step.
    ``sorted_indices``: the batch position of each sorted sequence (None when the input
    was sorted already); ``unsorted_indices``: its inverse, which restores the order.
    ``PackedSequence(data, batch_sizes, sorted_indices)`` computes ``unsorted_indices``;
    ``PackedSequence((data, batch_sizes))`` is accepted too, as in PyTorch.
    """

    def __new__(cls, data: Any, batch_sizes: Tensor | None = None,
                sorted_indices: Tensor | None = None,
                unsorted_indices: Tensor | None = None) -> PackedSequence:
        if batch_sizes is None:
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise TypeError("PackedSequence: expected data and batch_sizes, or one "
                                f"(data, batch_sizes) pair, got {type(data).__name__}")
            data, batch_sizes = data
        if not isinstance(batch_sizes, Tensor) or batch_sizes.is_cuda:
            raise ValueError("PackedSequence: batch_sizes should always be a CPU tensor, "
                             f"got {_describe(batch_sizes)}. Make packed sequences with "
                             "pack_sequence or pack_padded_sequence")
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """``data.to(...)``; the indices follow data's device, ``batch_sizes`` stays on
        the CPU. ``self`` when data is unchanged."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        moved = [None if t is None else t.to(data.device)
                 for t in (self.sorted_indices, self.unsorted_indices)]
        return type(self)(data, self.batch_sizes, *moved)

    def cuda(self, device: Any = None) -> PackedSequence:
        return self.to("cuda" if device is None else device)

    def cpu(self) -> PackedSequence:
        return self.to("cpu")

    def double(self) -> PackedSequence:
        return self.to(dtype=dt.float64)

    def float(self) -> PackedSequence:
        return self.to(dtype=dt.float32)

    def half(self) -> PackedSequence:
        return self.to(dtype=dt.float16)

    def long(self) -> PackedSequence:
        return self.to(dtype=dt.int64)

    def int(self) -> PackedSequence:
        return self.to(dtype=dt.int32)

    @property
    def is_cuda(self) -> bool:
        """Whether ``data`` is on the GPU."""
        return self.data.is_cuda


def _describe(value: Any) -> str:
    if isinstance(value, Tensor):
        return f"a {value.ndim}-D {value.device.type} {value.dtype.name} tensor"
    return type(value).__name__


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of a 1-D permutation (None for None): ``out[permutation[i]] = i``."""
    if permutation is None:
        return None
    if not isinstance(permutation, Tensor) or permutation.ndim != 1 or \
            permutation.dtype not in (dt.int32, dt.int64):
        # a 1-D tensor of another dtype is PyTorch's RuntimeError; anything else its
        # TypeError (or IndexError)
        wrong_dtype = isinstance(permutation, Tensor) and permutation.ndim == 1
        raise (DTypeError if wrong_dtype else TypeError)(
            "invert_permutation: expected a 1-D int32/int64 tensor, got "
            f"{_describe(permutation)}")
    positions = arange(permutation.shape[0], dtype=permutation.dtype,
                       device=permutation.device)
    return ops.scatter(zeros_like(permutation), 0, permutation, positions)


def _host_ints(op: str, what: str, values: Any) -> np.ndarray:
    """``values`` (a list, numpy array or CPU tensor) as a 1-D int64 numpy array; a
    tensor is realized if it is pending. Floats truncate, as PyTorch's int64 cast."""
    if isinstance(values, Tensor):
        if values.is_cuda or values.ndim != 1:
            raise RuntimeError(f"{op}: '{what}' argument should be a 1D CPU int64 tensor, "
                               f"but got {_describe(values)}")
        return values.numpy().astype(np.int64)
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.dtype.kind not in "biuf":
        raise RuntimeError(f"{op}: '{what}' should be a 1-D list of integers or a 1D CPU "
                           f"int64 tensor, got {values!r}")
    return arr.astype(np.int64)


def _layout(op: str, sequence: Any) -> tuple[np.ndarray, np.ndarray]:
    """The checked ``batch_sizes`` of a PackedSequence on the host, and the lengths of
    its sorted sequences (non-increasing), both int64 numpy arrays."""
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"{op}: expected a PackedSequence, got {type(sequence).__name__}")
    sizes = _host_ints(op, "batch_sizes", sequence.batch_sizes)
    data = sequence.data
    rows = data.shape[0] if isinstance(data, Tensor) and data.ndim else -1
    if sizes.size == 0 or sizes.min() <= 0 or (np.diff(sizes) > 0).any() or \
            sizes.sum() != rows:
        raise RuntimeError(f"{op}: batch_sizes {sizes.tolist()} must be positive and "
                           f"non-increasing and add up to the {rows} rows of data "
                           f"({_describe(data)}); make packed sequences with "
                           "pack_sequence or pack_padded_sequence")
    for what, t in (("sorted_indices", sequence.sorted_indices),
                    ("unsorted_indices", sequence.unsorted_indices)):
        if t is not None and (not isinstance(t, Tensor) or t.shape != (sizes[0],)):
            raise RuntimeError(f"{op}: {what} must be a permutation of the {sizes[0]} "
                               f"sequences (shape ({sizes[0]},)), got {_describe(t)} of "
                               f"shape {getattr(t, 'shape', None)}")
    lengths = (sizes[:, None] > np.arange(sizes[0])).sum(0)
    return sizes, lengths


def _packed_positions(lengths: np.ndarray, steps: int) -> np.ndarray:
    """(steps, B): the data row of each sorted sequence's step, -1 past its end."""
    valid = np.arange(steps)[:, None] < lengths
    pos = np.full(valid.shape, -1, np.int64)
    pos[valid] = np.arange(int(valid.sum()))
    return pos


def _take(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """``index_select`` as one plain gather: the indices are ours or a permutation, in
    range and non-negative, so they need no wrapping (the kernel still checks them)."""
    shape = [1] * x.ndim
    shape[dim] = index.shape[0]
    full = x.shape[:dim] + index.shape + x.shape[dim + 1:]
    return ops.gather(x, dim, ops.broadcast_to(index.reshape(shape), full))


def _rows(x: Tensor, index: np.ndarray) -> Tensor:
    """The rows ``index`` (host int64, any shape) of ``x``'s first dim: one gather, or
    a reshape when ``index`` takes every row in order (all lengths equal)."""
    if index.size == x.shape[0] and (index.reshape(-1) == np.arange(index.size)).all():
        return x.reshape(index.shape + x.shape[1:])
    picked = _take(x, 0, tensor(index.reshape(-1), device=x.device))
    return picked.reshape(index.shape + x.shape[1:])


def pack_padded_sequence(input: Tensor, lengths: Tensor | Sequence[int],
                         batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded ``(T, B, *)`` batch (``(B, T, *)`` with ``batch_first``) whose
    sequence ``b`` has its first ``lengths[b]`` steps valid. ``enforce_sorted``: the
    lengths must be non-increasing; otherwise the batch is sorted by decreasing length
    (ties keep their order) and ``sorted_indices`` records the permutation. ``lengths``
    are read on the host (a list or a CPU tensor): each distinct set is its own graph."""
    op = "pack_padded_sequence"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected input to be a Tensor, got {type(input).__name__}")
    if input.ndim < 2:
        raise IndexError(f"{op}: input must have at least 2 dims (T, B, *), got shape "
                         f"{input.shape}")
    lens = _host_ints(op, "lengths", lengths)
    batch = input.shape[0 if batch_first else 1]
    steps = input.shape[1 if batch_first else 0]
    if lens.size != batch:
        raise RuntimeError(f"{op}: Expected `len(lengths)` to be equal to batch_size, but "
                           f"got {lens.size} (batch_size={batch})")
    if batch == 0:
        raise RuntimeError(f"{op}: Cannot pack empty tensors.")
    if enforce_sorted:
        order = None
        if (np.diff(lens) > 0).any():
            raise RuntimeError(f"{op}: `lengths` array must be sorted in decreasing order "
                               f"when `enforce_sorted` is True, got {lens.tolist()}. "
                               + _SORT_HINT)
    else:
        order = np.argsort(-lens, kind="stable")
        lens = lens[order]
    if lens.min() <= 0:
        raise RuntimeError(f"{op}: Length of all samples has to be greater than 0, but "
                           f"found an element in 'lengths' that is <= 0: {lens.tolist()}")
    if lens.max() > steps:
        raise RuntimeError(f"{op}: lengths {lens.tolist()} exceed the input's {steps} steps "
                           f"(input shape {input.shape}, batch_first={batch_first})")
    column = np.arange(batch) if order is None else order
    t, b = np.nonzero(np.arange(lens[0])[:, None] < lens)   # packed order: step, then seq
    rows = column[b] * steps + t if batch_first else t * batch + column[b]
    data = _rows(input.reshape((batch * steps,) + input.shape[2:]), rows)
    sizes = tensor((np.arange(lens[0])[:, None] < lens).sum(1), dtype=dt.int64)
    if order is None:
        return PackedSequence(data, sizes, None, None)
    return PackedSequence(data, sizes, tensor(order, device=input.device),
                          tensor(np.argsort(order), device=input.device))


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """The inverse of ``pack_padded_sequence``: ``(padded, lengths)`` with padded
    ``(T, B, *)`` (``(B, T, *)`` with ``batch_first``), ``T`` the longest length or
    ``total_length``, filled with ``padding_value``, in the batch's original order;
    ``lengths`` is an int64 CPU tensor. Differentiable with respect to ``data``."""
    op = "pad_packed_sequence"
    sizes, lengths = _layout(op, sequence)
    steps = sizes.size
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"{op}: Expected total_length to be at least the length of the "
                             f"longest sequence in input, but got total_length="
                             f"{total_length} and max sequence length being {steps}")
        steps = total_length
    pos = _packed_positions(lengths, steps)
    if sequence.unsorted_indices is not None:
        unsorted = _host_ints(op, "unsorted_indices", sequence.unsorted_indices.cpu())
        pos, lengths = pos[:, unsorted], lengths[unsorted]
    data = sequence.data
    if (pos < 0).any():   # padding reads one extra row of padding_value
        fill = ops.full_const(padding_value, (1,) + data.shape[1:], data.dtype, op)
        data = cat([data, fill])
        pos = np.where(pos < 0, data.shape[0] - 1, pos)
    return _rows(data, pos.T if batch_first else pos), tensor(lengths, dtype=dt.int64)


def pad_sequence(sequences: Iterable[Tensor] | Tensor, batch_first: bool = False,
                 padding_value: float = 0.0, padding_side: str = "right") -> Tensor:
    """Stack sequences of shapes ``(L_i, *)`` into ``(T, B, *)`` (``(B, T, *)`` with
    ``batch_first``), ``T = max L_i``, filling with ``padding_value`` after each
    sequence (``padding_side="left"``: before it). The result has the first sequence's
    dtype, as PyTorch's; it is differentiable with respect to every sequence."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"pad_sequence: expected padding_side to be one of left or right, "
                         f"but got {padding_side!r}")
    seqs = list(sequences)     # a Tensor iterates over its first dim, as in PyTorch
    if not seqs:
        raise RuntimeError("pad_sequence: received an empty list of sequences")
    for k, s in enumerate(seqs):
        if not isinstance(s, Tensor):
            raise TypeError(f"pad_sequence: expected Tensors, got {type(s).__name__} at "
                            f"position {k}")
        if s.ndim == 0:
            raise ValueError(f"pad_sequence: sequence {k} is 0-d; each sequence must have "
                             "shape (L, *)")
        if s.shape[1:] != seqs[0].shape[1:]:
            raise RuntimeError(f"pad_sequence: sequence {k} has shape {s.shape}, whose "
                               f"trailing dims do not match those of sequence 0 "
                               f"{seqs[0].shape}; each must be (L_i, *) with the same *")
    dtype = seqs[0].dtype
    longest = max(s.shape[0] for s in seqs)
    padded = []
    for s in seqs:
        missing = longest - s.shape[0]
        # F.pad's pairs run from the last dim back; the time dim is the last pair
        pads = (0, 0) * (s.ndim - 1) + ((0, missing) if padding_side == "right"
                                        else (missing, 0))
        padded.append(pad(ops.cast(s, dtype), pads, value=padding_value) if missing
                      else ops.cast(s, dtype))
    return stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences: Tensor, lengths: Tensor | Sequence[int],
                   batch_first: bool = False) -> list[Tensor]:
    """The inverse of ``pad_sequence``: sequence ``b`` is the first ``lengths[b]`` steps
    of column ``b`` of ``(T, B, *)`` (``(B, T, *)`` with ``batch_first``), as views."""
    op = "unpad_sequence"
    if not isinstance(padded_sequences, Tensor) or padded_sequences.ndim < 2:
        raise ValueError(f"{op}: expected a padded (T, B, *) tensor, got "
                         f"{_describe(padded_sequences)}")
    lens = _host_ints(op, "lengths", lengths)
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    if lens.size != x.shape[0] or (lens < 0).any() or (lens > x.shape[1]).any():
        raise ValueError(f"{op}: lengths {lens.tolist()} must give one length in "
                         f"[0, {x.shape[1]}] for each of the {x.shape[0]} sequences of the "
                         f"padded tensor of shape {padded_sequences.shape} "
                         f"(batch_first={batch_first})")
    return [x[b, :n] for b, n in enumerate(lens.tolist())]


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of ``(L_i, *)`` sequences: ``pad_sequence`` then
    ``pack_padded_sequence`` with their lengths (decreasing, unless ``enforce_sorted``
    is False)."""
    seqs = list(sequences)
    lengths = [s.shape[0] if isinstance(s, Tensor) and s.ndim else 0 for s in seqs]
    return pack_padded_sequence(pad_sequence(seqs), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The inverse of ``pack_sequence``: the ``(L_i, *)`` sequences in their original
    order, each one gather of its rows of ``data``."""
    op = "unpack_sequence"
    sizes, lengths = _layout(op, packed_sequences)
    pos = _packed_positions(lengths, sizes.size)
    order = (np.arange(lengths.size) if packed_sequences.unsorted_indices is None else
             _host_ints(op, "unsorted_indices", packed_sequences.unsorted_indices.cpu()))
    return [_rows(packed_sequences.data, pos[:lengths[b], b]) for b in order]


def _pad_for_rnn(sequence: PackedSequence, op: str) -> tuple[Tensor, list[Tensor | None],
                                                               np.ndarray]:
    """For a recurrent layer: the sequences padded with zeros to ``(T, B, *)``, in
    sorted order; for each step the (B, 1) bool mask of the sequences still running,
    None where all are; the sorted lengths."""
    sizes, lengths = _layout(op, sequence)
    pos = _packed_positions(lengths, sizes.size)
    data = sequence.data
    if sizes[-1] != sizes[0]:
        data = cat([data, ops.full_const(0, (1,) + data.shape[1:], data.dtype, op)])
        pos = np.where(pos < 0, data.shape[0] - 1, pos)
    running = constant(np.arange(sizes[0])[None, :, None] < sizes[:, None, None],
                       device=data.device)
    masks = [None if n == sizes[0] else running[t] for t, n in enumerate(sizes.tolist())]
    return _rows(data, pos), masks, lengths


def _pack_for_rnn(padded: Tensor, lengths: np.ndarray) -> Tensor:
    """The ``data`` of the packed form of ``padded`` (T, B, *), in sorted order."""
    t, b = np.nonzero(np.arange(padded.shape[0])[:, None] < lengths)
    return _rows(padded.reshape((-1,) + padded.shape[2:]), t * padded.shape[1] + b)


__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence",
           "pad_packed_sequence", "pad_sequence", "unpad_sequence", "pack_sequence",
           "unpack_sequence"]

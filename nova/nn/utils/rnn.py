"""``nv.nn.utils.rnn``: padding variable-length sequences into one batch.

``pad_sequence`` is provided. ``PackedSequence`` and ``pack_padded_sequence`` /
``pad_packed_sequence`` / ``pack_sequence`` are not: the packed data has shape
``(sum(lengths), *)`` and its ``batch_sizes`` come from the lengths' values, so every
distinct set of lengths is a different graph and would compile again, and no Nova
recurrent layer consumes a packed batch (``nv.nn.RNN``/``LSTM``/``GRU`` take padded
input). The static-shape way is to pad to a fixed length and mask: pick each
sequence's last valid output with ``gather`` at ``lengths - 1`` and weight losses by
``arange(T) < lengths[:, None]``.
"""
from __future__ import annotations

from collections.abc import Iterable

from nova.nn.functional import pad
from nova.tensor import ops
from nova.tensor.movement import stack
from nova.tensor.tensor import Tensor


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


__all__ = ["pad_sequence"]

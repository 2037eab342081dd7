"""Tensors that ops build from host arrays (index tables, interpolation weights, pooling
bins), kept per content so the same call makes the same tensor every time.

``nv.compile`` replays a step once two recorded calls agree, and a replay cannot supply
host data a call makes anew: an op that turned a fresh numpy array into a tensor on
every call (``F.interpolate``'s gather indices, ``F.pad``'s reflect indices, the
adaptive pools' bins) kept every step through it recording, with a warning. With
``constant``, equal arrays (values, dtype, shape) for one dtype and device give the one
tensor made first, as ``nova.fft`` keeps its DFT matrices. Such tensors are internal
operands, never handed to the user to write into. At most ``MAX_ENTRIES`` are kept
(least recently used dropped), each at most ``MAX_BYTES``; a larger array is made anew.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from nova.tensor.creation import tensor
from nova.tensor.tensor import Tensor

MAX_ENTRIES = 256
MAX_BYTES = 256 << 10

_KEPT: OrderedDict[tuple, Tensor] = OrderedDict()
_LOCK = threading.Lock()


def constant(values: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """``nv.tensor(values, dtype=dtype, device=device)``, the same tensor for equal
    arguments (module docstring)."""
    arr = np.ascontiguousarray(values)
    if arr.nbytes > MAX_BYTES or arr.dtype == object:
        return tensor(arr, dtype=dtype, device=device)
    key = (arr.dtype.str, arr.shape, arr.tobytes(), str(dtype), str(device))
    with _LOCK:
        found = _KEPT.get(key)
        if found is not None:
            _KEPT.move_to_end(key)
            return found
    made = tensor(arr, dtype=dtype, device=device)
    with _LOCK:
        made = _KEPT.setdefault(key, made)
        _KEPT.move_to_end(key)
        while len(_KEPT) > MAX_ENTRIES:
            _KEPT.popitem(last=False)
    return made


__all__ = ["MAX_BYTES", "MAX_ENTRIES", "constant"]

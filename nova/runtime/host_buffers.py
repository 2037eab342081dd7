"""Buffer work a step needs before it runs, on plain arrays: whether an argument's
buffer may be donated (written over by a result), and the upload of a CUDA step's host
arguments in one copy.

Realization (``nova.tensor.realize``) decides which arguments to ask about from the
trace; what is asked here concerns only the arrays, so it lives in the runtime, which
knows nothing of tensors or nodes.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from nova.core.graph import storage_dtype


def _baseline_refs() -> int:
    """References ``sys.getrefcount`` reports for an object held by one list only (the
    list's, plus getrefcount's own argument): measured once, so the checks below hold
    on any CPython."""
    probe = [np.zeros(1)]
    return sys.getrefcount(probe[0])


BASE_REFS = _baseline_refs()


def sole_host_owner(buffer: np.ndarray) -> bool:
    """Whether ``buffer`` (a node's read-only view) is the only view of writable memory
    it owns: referenced by the node and the graph's argument list only (the caller
    passes it straight from that list)."""
    if sys.getrefcount(buffer) - BASE_REFS - 2 != 0:   # + the node, the parameter
        return False
    owner = buffer.base
    return (isinstance(owner, np.ndarray) and owner.base is None and owner.flags.owndata
            and owner.flags.writeable and sys.getrefcount(owner) - BASE_REFS - 1 == 0)


def sole_device_owner(buffer: Any) -> bool:
    """The device form of ``sole_host_owner``. A device buffer is bound to its node as
    the engine made it (no read-only view: device arrays have no write flag), so it is
    donatable when only the node and the argument list hold it and it owns its memory
    — or is the one view (a reshape, from an earlier donation) of an array nobody else
    holds. CuPy and numpy arrays both keep their owner in ``base``. (Host arguments of a
    GPU step, uploaded for the run, fail the first count: their node holds the host
    array, not the upload, so they are never donated.)"""
    if sys.getrefcount(buffer) - BASE_REFS - 2 != 0:   # + the node, the parameter
        return False
    owner = getattr(buffer, "base", None)
    while owner is not None:   # (a chain, should a library not collapse view bases)
        if sys.getrefcount(owner) - BASE_REFS - 1 != 0:   # + the view's ``base``
            return False
        owner = getattr(owner, "base", None)
    return True


def upload_packed(arrays: Sequence[np.ndarray]) -> list[Any]:
    """Device copies of host ``arrays`` made with one host-to-device copy: packed into
    one host buffer, each at a 64-byte aligned offset, and returned as views of the one
    device allocation (in order, each with its array's shape and storage dtype)."""
    from nova.runtime.cuda_runtime import to_device

    offsets, end = [], 0
    for b in arrays:
        offsets.append(end)
        end += (b.nbytes + 63) // 64 * 64
    packed = np.zeros(max(end, 1), np.uint8)
    for b, off in zip(arrays, offsets):
        c = np.ascontiguousarray(b)
        packed[off:off + c.nbytes] = c.reshape(-1).view(np.uint8)
    device = to_device(packed)
    return [device[off:off + b.nbytes].view(storage_dtype(b.dtype)).reshape(b.shape)
            for b, off in zip(arrays, offsets)]

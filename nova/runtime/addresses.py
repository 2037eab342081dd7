"""The address of a numpy array's data, fast: what a kernel call passes per buffer.

``ndarray.ctypes.data`` builds a Python-level ``_ctypes`` helper object on every access
(~3 us on the bench machine); a step passes the address of every argument and result
on every replay, so for a single small kernel that was a tenth of the call. numpy's C
API lays an array out as ``PyArrayObject_fields`` (``numpy/ndarraytypes.h``): the object
header, then ``char *data``. Reading that word through ``ctypes`` costs ~0.3 us.

The offset is the size of the object header, which depends on the interpreter build
(free-threaded CPython has a larger one), so it is not assumed: at import it is checked
against ``ctypes.data`` on probe arrays (owning, a view at an offset, a transposed view),
and where it does not agree every call uses ``ctypes.data``.
"""
from __future__ import annotations

import ctypes
import sys
from collections.abc import Sequence

import numpy as np

_read_word = ctypes.c_void_p.from_address


def _header_offset() -> int | None:
    base = np.arange(64, dtype=np.float32).reshape(8, 8)
    probes = (base, base[3:, 2:], base.T, np.empty(0, dtype=np.int64))
    offset = object.__basicsize__    # PyObject_HEAD: refcount and type (and more, if any)
    if all(_read_word(id(p) + offset).value == p.ctypes.data for p in probes
           if p.ctypes.data):
        return offset
    return None


_OFFSET = _header_offset() if sys.implementation.name == "cpython" else None


def data_address(array: np.ndarray) -> int:
    """The address of ``array``'s first element (``array.ctypes.data``)."""
    return data_addresses((array,))[0]


def data_addresses(arrays: Sequence[np.ndarray]) -> list[int]:
    """``[data_address(a) for a in arrays]`` in one comprehension (a replay passes
    hundreds: the function call per array was half the cost)."""
    if _OFFSET is None:
        return [a.ctypes.data for a in arrays]
    read, offset = _read_word, _OFFSET
    return [read(id(a) + offset).value or 0 for a in arrays]


def fast_path() -> bool:
    """Whether ``data_address`` reads the array object directly (for tests)."""
    return _OFFSET is not None

"""PyTorch's legacy tensor types and ``torch.Size``, for code that still uses them:
``torch.FloatTensor(state)``, ``torch.LongTensor([a])``, ``x.type(torch.LongTensor)``,
``isinstance(x, torch.FloatTensor)``, ``x.type() == 'torch.FloatTensor'``,
``torch.Size([2, 3])``.

A legacy type is a constructor and an ``isinstance`` test for one dtype (and device:
``nv.cuda.FloatTensor``); tensors are never instances of their own class, as in
PyTorch since 0.4. ``Tensor.shape`` stays a plain tuple (it is read on every recorded
op); ``isinstance(x.shape, nv.Size)`` holds for any tuple of ints.
"""
from __future__ import annotations

import builtins
import math
from typing import Any

from nova.core import dtypes as dt
from nova.tensor.tensor import Tensor


class _LegacyType(type):
    """``isinstance(x, FloatTensor)``: a tensor of that dtype on that device."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and \
            (obj.node.device == "cuda") == cls.is_cuda

    def __repr__(cls) -> str:
        return f"<class '{cls.type_name}'>"


class _LegacyTensor(metaclass=_LegacyType):
    dtype: dt.DType = dt.float32
    is_cuda = False
    type_name = ""

    def __new__(cls, *args: Any, device: Any = None) -> Tensor:
        """``T()``: empty; ``T(2, 3)`` or ``T(nv.Size(...))``: zeros of that shape
        (PyTorch leaves them uninitialized); ``T(data)`` (a tuple is data): the data in
        this dtype (a tensor of another dtype is refused, as in PyTorch)."""
        from nova.tensor.creation import tensor, zeros
        where = "cuda" if cls.is_cuda else device
        if not args:
            return zeros(0, dtype=cls.dtype, device=where)
        if all(isinstance(a, builtins.int) and not isinstance(a, builtins.bool)
               for a in args):
            return zeros(*args, dtype=cls.dtype, device=where)
        if len(args) != 1:
            raise TypeError(f"{cls.type_name}(): expected sizes or one data argument, got "
                            f"{len(args)} arguments")
        data = args[0]
        if type(data) is Size:          # (a plain tuple is data, as in PyTorch)
            return zeros(*data, dtype=cls.dtype, device=where)
        if isinstance(data, Tensor):
            if data.dtype is not cls.dtype:
                raise TypeError(f"{cls.type_name}(): expected a {cls.dtype.name} tensor, got "
                                f"{data.dtype.name}; use .to({cls.dtype.name})")
            return data
        return tensor(data, dtype=cls.dtype, device=where)


def _legacy(name: str, dtype: dt.DType, cuda: bool) -> type:
    prefix = "torch.cuda." if cuda else "torch."
    return _LegacyType(name, (_LegacyTensor,), {"dtype": dtype, "is_cuda": cuda,
                                                "type_name": prefix + name})


_NAMES = {"FloatTensor": dt.float32, "DoubleTensor": dt.float64, "HalfTensor": dt.float16,
          "BFloat16Tensor": dt.bfloat16, "ByteTensor": dt.uint8, "CharTensor": dt.int8,
          "ShortTensor": dt.int16, "IntTensor": dt.int32, "LongTensor": dt.int64,
          "BoolTensor": dt.bool_}
CPU_TYPES = {name: _legacy(name, d, False) for name, d in _NAMES.items()}
CUDA_TYPES = {name: _legacy(name, d, True) for name, d in _NAMES.items()}
_BY_STRING = {t.type_name: t for t in list(CPU_TYPES.values()) + list(CUDA_TYPES.values())}
_BY_DTYPE = {(t.dtype, t.is_cuda): t for t in _BY_STRING.values()}


def type_string(t: Tensor) -> str:
    """``x.type()``: PyTorch's name of the tensor's type (``'torch.FloatTensor'``)."""
    return _BY_DTYPE[(t.dtype, t.node.device == "cuda")].type_name


def as_legacy_type(spec: Any) -> type | None:
    """The legacy type ``spec`` names (the class, or its string), else None."""
    if isinstance(spec, _LegacyType):
        return spec
    if isinstance(spec, str):
        return _BY_STRING.get(spec)
    return None


class _SizeType(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, tuple) and all(
            isinstance(d, builtins.int) and not isinstance(d, builtins.bool) for d in obj)


class Size(tuple, metaclass=_SizeType):
    """``torch.Size``: a tuple of ints with ``numel()``. Every tuple of ints counts as
    one for ``isinstance`` (``Tensor.shape`` is a plain tuple)."""

    def __new__(cls, sizes: Any = ()) -> Size:
        sizes = tuple(sizes)
        for d in sizes:
            if isinstance(d, builtins.bool) or not isinstance(d, builtins.int):
                raise TypeError(f"Size: expected ints, got {type(d).__name__}")
        return super().__new__(cls, sizes)

    def numel(self) -> int:
        return math.prod(self)

    def __repr__(self) -> str:
        return f"nova.Size({list(self)})"

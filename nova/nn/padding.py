"""Padding modules over ``F.pad``: ``ZeroPad``, ``ConstantPad``, ``ReflectionPad``,
``ReplicationPad`` and ``CircularPad`` in 1, 2 and 3 dims, PyTorch's names and
arguments. ``padding`` is an int (every side) or PyTorch's tuple of ``2 * nd`` ints,
(left, right) of the last dim first. The constant modes pad the trailing dims of an
input of any rank; the index modes take ``(C, *spatial)`` or ``(N, C, *spatial)``, as
PyTorch's modules do."""
from __future__ import annotations

from typing import Any

from nova.nn.functional import pad
from nova.nn.module import Module
from nova.tensor.tensor import Tensor


def _padding(cls: str, padding: Any, nd: int) -> tuple[int, ...]:
    if isinstance(padding, int) and not isinstance(padding, bool):
        return (padding,) * (2 * nd)
    pads = tuple(padding)
    if len(pads) != 2 * nd or not all(isinstance(p, int) and not isinstance(p, bool)
                                      for p in pads):
        raise ValueError(f"{cls}: padding must be an int or a tuple of {2 * nd} ints, got "
                         f"{padding!r}")
    return pads


class _PadNd(Module):
    _nd = 0
    _mode = "constant"

    def __init__(self, padding: Any):
        super().__init__()
        self.padding = _padding(type(self).__name__, padding, self._nd)

    def forward(self, input: Tensor) -> Tensor:
        if self._mode != "constant" and (not isinstance(input, Tensor) or
                                         input.ndim not in (self._nd + 1, self._nd + 2)):
            raise ValueError(f"{type(self).__name__}: expected a {self._nd + 1}-D or "
                             f"{self._nd + 2}-D input, got "
                             f"{getattr(input, 'shape', type(input).__name__)}")
        return pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding: Any, value: float):
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    _nd = 1


class ConstantPad2d(_ConstantPadNd):
    _nd = 2


class ConstantPad3d(_ConstantPadNd):
    _nd = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding: Any):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    _nd = 1


class ZeroPad2d(_ZeroPadNd):
    _nd = 2


class ZeroPad3d(_ZeroPadNd):
    _nd = 3


class ReflectionPad1d(_PadNd):
    _nd, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    _nd, _mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    _nd, _mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    _nd, _mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    _nd, _mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    _nd, _mode = 3, "replicate"


class CircularPad1d(_PadNd):
    _nd, _mode = 1, "circular"


class CircularPad2d(_PadNd):
    _nd, _mode = 2, "circular"


class CircularPad3d(_PadNd):
    _nd, _mode = 3, "circular"


__all__ = ["ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d",
           "ZeroPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
           "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d",
           "CircularPad2d", "CircularPad3d"]

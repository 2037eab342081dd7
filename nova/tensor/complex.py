"""Complex tensors (``complex64``, ``complex128``) as pairs of real tensors.

No engine computes complex numbers. A ``ComplexTensor`` holds its real and imaginary
parts, two float tensors of one shape and dtype, and every complex op is written as the
real ops on them (``(a+bi)(c+di) = (ac-bd) + (ad+bc)i``), so it records, fuses,
compiles and differentiates as any real computation: ``view_as_complex`` of a tensor
that requires grad, a complex product, ``view_as_real`` back (LLaMA's rotary
embedding) gives the real gradient PyTorch gives. A complex leaf's ``.grad`` is
``dL/dre + i dL/dim``, PyTorch's convention for a real loss.

``view_as_complex(x)`` keeps views of ``x`` as its parts, so writes through the complex
tensor reach ``x``, as PyTorch's view does; ``view_as_real(z)`` of such a tensor views
``x`` again, of any other it is a new tensor (a deviation: writes into it do not reach
``z``). ``.real`` and ``.imag`` are the parts themselves.

What is supported is listed in ``METHODS``, ``PARTWISE``, ``complex_math.METHODS`` and
``complex_creation.FUNCTIONS`` (arithmetic, ``abs``/``angle``/``conj``/``exp``/``log``/
``sqrt``/``sin``/``cos``, sums and means, matmul, movement and indexing,
``cat``/``stack``/``where``, comparisons, conversions; in ``complex_math`` the
hyperbolic and inverse functions, ``tan``/``log1p``/``expm1``/``sigmoid``, ``prod``,
``var``/``std``, ``dot``/``vdot``/``inner``/``outer`` and the vector norms;
``linalg.inv``/``solve`` in ``nova.linalg_complex``; factories in
``complex_creation``, transforms in ``nova.fft``); any other op raises
``ComplexUnsupportedError`` (a ``TypeError``) naming it rather than computing on the
parts. There is no ``complex32``: half parts compute as complex64.
"""
from __future__ import annotations

import builtins
import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.core.errors import ComplexUnsupportedError, complex_unsupported  # noqa: F401 (re-exported)
from nova.core.errors import DTypeError
from nova.tensor import creation as _creation
from nova.tensor import elementary as _elementary
from nova.tensor import movement as _movement
from nova.tensor import ops as _ops
from nova.tensor import special as _special
from nova.tensor import tensor as _tensor_module
from nova.tensor.tensor import Tensor

# Operand of a complex op: (real part, imaginary part or None for a real operand);
# either part is a Tensor or a Python number.
Parts = tuple[Any, Any]
_PyComplex = builtins.complex      # (``complex`` below is ``torch.complex``)
_COMPLEX_NUMBERS = (builtins.complex, np.complexfloating)


class ComplexTensor:
    """A complex tensor (module docstring): real part ``real``, imaginary part ``imag``."""

    __slots__ = ("_re", "_im", "_real_view", "__weakref__")
    __nova_complex__ = True

    def __init__(self, re: Tensor, im: Tensor, real_view: Tensor | None = None):
        """``re`` and ``im``: float tensors of one shape, dtype and device (``_make``
        brings operands there). ``real_view``: the ``(..., 2)`` tensor both parts view,
        when made by ``view_as_complex``."""
        self._re = re
        self._im = im
        self._real_view = real_view

    # ------------------------------------------------------------ properties

    @property
    def real(self) -> Tensor:
        return self._re

    @real.setter
    def real(self, value: Any) -> None:
        _write_part(self._re, value, "real")

    @property
    def imag(self) -> Tensor:
        return self._im

    @imag.setter
    def imag(self, value: Any) -> None:
        _write_part(self._im, value, "imag")

    @property
    def dtype(self) -> dt.ComplexDType:
        return dt.complex_of(self._re.dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._re.shape

    def size(self, dim: int | None = None) -> Any:
        return self._re.size(dim)

    @property
    def ndim(self) -> int:
        return self._re.ndim

    def dim(self) -> int:
        return self._re.ndim

    def numel(self) -> int:
        return self._re.numel()

    nelement = numel

    def __len__(self) -> int:
        return len(self._re)

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def device(self) -> Any:
        return self._re.device

    @property
    def is_cuda(self) -> bool:
        return self._re.is_cuda

    def is_complex(self) -> bool:
        return True

    def is_floating_point(self) -> bool:
        return False

    def is_conj(self) -> bool:
        """False: ``conj`` computes its result (no lazy conjugate bit)."""
        return False

    # ------------------------------------------------------------ autograd

    @property
    def requires_grad(self) -> bool:
        return self._re.requires_grad or self._im.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True) -> ComplexTensor:
        self._re.requires_grad_(requires_grad)
        self._im.requires_grad_(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        return self._re.is_leaf and self._im.is_leaf

    @property
    def grad(self) -> ComplexTensor | None:
        """``dL/dre + i dL/dim`` (PyTorch's gradient of a real loss), None before one."""
        gr, gi = self._re.grad, self._im.grad
        if gr is None and gi is None:
            return None
        return ComplexTensor(_creation.zeros_like(gi) if gr is None else gr,
                             _creation.zeros_like(gr) if gi is None else gi)

    @grad.setter
    def grad(self, value: ComplexTensor | None) -> None:
        if value is None:
            self._re.grad = self._im.grad = None
            return
        value = _as_complex("grad", value)
        self._re.grad, self._im.grad = value._re, value._im

    def backward(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("backward: grad can be implicitly created only for real scalar "
                           f"outputs, got a {self.dtype.name} tensor of shape "
                           f"{list(self.shape)}; take .abs(), .real or a real loss of it")

    def detach(self) -> ComplexTensor:
        return ComplexTensor(self._re.detach(), self._im.detach())

    @property
    def data(self) -> ComplexTensor:
        return self.detach()

    @data.setter
    def data(self, value: ComplexTensor) -> None:
        value = _as_complex("data", value)
        self._re.data, self._im.data = value._re, value._im
        self._real_view = None

    # ------------------------------------------------------------ conversion

    def numpy(self, *, force: bool = False) -> np.ndarray:
        re, im = self._re.numpy(), self._im.numpy()
        out = np.empty(re.shape, self.dtype.np)
        out.real, out.imag = re, im
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = self.numpy()
        return arr if dtype is None else arr.astype(dtype)

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def item(self) -> complex:
        if self.numel() != 1:
            raise RuntimeError(f"item: a Tensor with {self.numel()} elements cannot be "
                               "converted to Scalar")
        return _PyComplex(self.numpy().reshape(()))

    def __complex__(self) -> complex:
        return self.item()

    def __float__(self) -> float:
        raise TypeError("float(): can't convert a complex tensor to float; use .real or "
                        ".abs()")

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(f"Boolean value of Tensor with {self.numel()} elements (shape "
                               f"{self.shape}) is ambiguous")
        return self.item() != 0

    def __format__(self, spec: str) -> str:
        if self.ndim == 0:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    def __repr__(self) -> str:
        from nova.tensor.printing import tensor_text
        return tensor_text(self.numpy(), self.shape, self.dtype, self.is_cuda)

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """``to(dtype)``, ``to(device)``, ``to(other)``: a complex dtype converts both
        parts; a real dtype keeps the real part and warns, as PyTorch."""
        dtype, device = kwargs.pop("dtype", None), kwargs.pop("device", None)
        flags = []
        for a in args:
            if isinstance(a, (ComplexTensor, Tensor)):
                dtype, device = a.dtype, a.device
            elif isinstance(a, bool):
                flags.append(a)
            elif _is_dtype(a):
                dtype = a
            else:
                device = a
        re, im = self._re, self._im
        if device is not None or flags or kwargs:
            where = () if device is None else (device,)
            re, im = re.to(*where, *flags, **kwargs), im.to(*where, *flags, **kwargs)
        if dtype is not None:
            target = dt.get_complex_dtype(dtype)
            if target is None:
                return _discard_imag(ComplexTensor(re, im), "to").to(dtype)
            re, im = re.to(target.real), im.to(target.real)
        return self if (re is self._re and im is self._im) else ComplexTensor(re, im)

    def type_as(self, other: Any) -> Any:
        return self.to(other.dtype)

    def cfloat(self) -> ComplexTensor:
        return self.to(dt.complex64)

    def cdouble(self) -> ComplexTensor:
        return self.to(dt.complex128)

    def float(self) -> Tensor:
        return self.to(dt.float32)

    def double(self) -> Tensor:
        return self.to(dt.float64)

    def cpu(self) -> ComplexTensor:
        return self.to("cpu")

    def cuda(self, device: Any = None) -> ComplexTensor:
        return self.to("cuda" if device is None else device)

    def view(self, *shape: Any) -> ComplexTensor:
        if len(shape) == 1 and (isinstance(shape[0], (dt.DType, dt.ComplexDType))
                                or dt.get_complex_dtype(shape[0]) is not None):
            raise TypeError(f"view: reinterpreting a {self.dtype.name} tensor as "
                            f"{shape[0]} is not supported; use nv.view_as_real")
        return ComplexTensor(self._re.view(*shape), self._im.view(*shape))

    # ------------------------------------------------------------ operators

    def __add__(self, o: Any) -> ComplexTensor: return add(self, o)
    def __radd__(self, o: Any) -> ComplexTensor: return add(o, self)
    def __sub__(self, o: Any) -> ComplexTensor: return sub(self, o)
    def __rsub__(self, o: Any) -> ComplexTensor: return sub(o, self)
    def __mul__(self, o: Any) -> ComplexTensor: return mul(self, o)
    def __rmul__(self, o: Any) -> ComplexTensor: return mul(o, self)
    def __truediv__(self, o: Any) -> ComplexTensor: return div(self, o)
    def __rtruediv__(self, o: Any) -> ComplexTensor: return div(o, self)
    def __matmul__(self, o: Any) -> ComplexTensor: return matmul(self, o)
    def __rmatmul__(self, o: Any) -> ComplexTensor: return matmul(o, self)
    def __pow__(self, o: Any) -> ComplexTensor: return pow(self, o)
    def __rpow__(self, o: Any) -> ComplexTensor: return pow(o, self)
    def __neg__(self) -> ComplexTensor: return neg(self)
    def __pos__(self) -> ComplexTensor: return self
    def __abs__(self) -> Tensor: return abs(self)
    def __eq__(self, o: Any) -> Tensor: return eq(self, o)  # type: ignore[override]
    def __ne__(self, o: Any) -> Tensor: return ne(self, o)  # type: ignore[override]
    __hash__ = object.__hash__

    def __getitem__(self, index: Any) -> ComplexTensor:
        return ComplexTensor(self._re[index], self._im[index])

    def __setitem__(self, index: Any, value: Any) -> None:
        re, im = _parts("__setitem__", value)
        self._re[index] = re
        self._im[index] = 0.0 if im is None else im

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def copy_(self, src: Any) -> ComplexTensor:
        re, im = _parts("copy_", src)
        _write_part(self._re, re, "copy_")
        _write_part(self._im, 0.0 if im is None else im, "copy_")
        return self

    def zero_(self) -> ComplexTensor:
        return self.copy_(0.0)

    def fill_(self, value: Any) -> ComplexTensor:
        return self.copy_(value)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ComplexTensor.__slots__:
            raise AttributeError(name)
        if hasattr(Tensor, name):
            raise complex_unsupported(name, self)
        raise AttributeError(f"'ComplexTensor' object has no attribute '{name}'")


def _write_part(part: Tensor, value: Any, op: str) -> None:
    if isinstance(value, Tensor):
        part.copy_(value)
    elif isinstance(value, numbers.Real):
        part.fill_(value)
    else:
        raise TypeError(f"{op}: expected a real Tensor or number for a complex tensor's "
                        f"part, got {type(value).__name__}")


def _is_dtype(spec: Any) -> bool:
    if dt.get_complex_dtype(spec) is not None:
        return True
    if isinstance(spec, str) and spec.partition(":")[0] in ("cpu", "cuda"):
        return False
    try:
        dt.get_dtype(spec)
    except TypeError:
        return False
    return True


def _discard_imag(z: ComplexTensor, op: str) -> Tensor:
    import warnings
    warnings.warn("Casting complex values to real discards the imaginary part", UserWarning,
                  stacklevel=3)
    return z._re.clone()           # (a new tensor, as PyTorch's: not the real part itself)


# ---------------------------------------------------------------- operands

def is_complex_value(x: Any) -> bool:
    """A complex tensor or a Python/numpy complex number (what Tensor's operators and
    ``FUNCTIONS`` hand over to this module)."""
    return isinstance(x, (ComplexTensor, *_COMPLEX_NUMBERS))


def _parts(op: str, x: Any) -> Parts:
    """``x``'s real and imaginary parts (None: a real operand)."""
    if isinstance(x, ComplexTensor):
        return x._re, x._im
    if isinstance(x, _COMPLEX_NUMBERS):
        return float(x.real), float(x.imag)
    if isinstance(x, Tensor) or (isinstance(x, numbers.Real) and not isinstance(x, bool)):
        return x, None
    if isinstance(x, bool):
        return float(x), None
    raise TypeError(f"{op}: expected a tensor or a number, got {type(x).__name__}")


def _as_complex(op: str, x: Any) -> ComplexTensor:
    if isinstance(x, ComplexTensor):
        return x
    re, im = _parts(op, x)
    if not isinstance(re, Tensor):
        return _make(_creation.tensor(re), 0.0 if im is None else im)
    return _make(re, 0.0 if im is None else im)


def _make(re: Any, im: Any) -> ComplexTensor:
    """A complex tensor of ``re`` and ``im`` (tensors or numbers): broadcast to one
    shape and promoted to one floating dtype (an integer part takes the default float)."""
    given = [v for v in (re, im) if isinstance(v, Tensor)]
    ref = re if isinstance(re, Tensor) else im
    if not isinstance(ref, Tensor):
        ref = _creation.tensor(float(re))
    re = re if isinstance(re, Tensor) else _creation.full_like(ref, re, dtype=_float_of(ref))
    im = im if isinstance(im, Tensor) else _creation.full_like(ref, im, dtype=_float_of(ref))
    dtype = dt.promote_types(_float_of(re), _float_of(im))
    if dtype in (dt.float16, dt.bfloat16):
        dtype = dt.float32
    re, im = re.to(dtype), im.to(dtype)
    if re.shape != im.shape:
        re, im = _movement.broadcast_tensors(re, im)
    # Parts of their own: a part given as it is (``complex(x, y)``, ``xc + 1``'s imaginary
    # part) would be shared, and an in-place write into either tensor seen in the other.
    return ComplexTensor(_ops.unshared(re, *given), _ops.unshared(im, *given))


def _float_of(x: Tensor) -> dt.DType:
    return x.dtype if x.dtype.is_floating_point else dt.DEFAULT_FLOAT


# ---------------------------------------------------------------- arithmetic

def add(a: Any, b: Any, *, alpha: Any = 1) -> ComplexTensor:
    if alpha != 1:
        b = mul(b, alpha)
    (ar, ai), (br, bi) = _parts("add", a), _parts("add", b)
    return _make(ar + br, _sum_parts(ai, bi))


def sub(a: Any, b: Any, *, alpha: Any = 1) -> ComplexTensor:
    if alpha != 1:
        b = mul(b, alpha)
    return add(a, -b)


def _sum_parts(x: Any, y: Any) -> Any:
    if x is None:
        return 0.0 if y is None else y
    return x if y is None else x + y


def mul(a: Any, b: Any) -> ComplexTensor:
    (ar, ai), (br, bi) = _parts("mul", a), _parts("mul", b)
    if ai is None:
        return _make(ar * br, ar * bi)
    if bi is None:
        return _make(ar * br, ai * br)
    return _make(ar * br - ai * bi, ar * bi + ai * br)


def div(a: Any, b: Any, *, rounding_mode: Any = None) -> ComplexTensor:
    """``a / b``; a complex divisor by Smith's method, as PyTorch: divided through by
    its larger part, so ``|b|^2`` never overflows or underflows; a zero divisor gives
    IEEE's infinities (``(1+1j) / 0`` is ``inf+infj``)."""
    if rounding_mode is not None:
        raise RuntimeError("div: rounding_mode is not supported for complex inputs")
    (ar, ai), (br, bi) = _parts("div", a), _parts("div", b)
    ai = 0.0 if ai is None else ai
    if bi is None or (not isinstance(br, Tensor) and not isinstance(bi, Tensor) and
                      br == 0 and bi == 0):
        return _make(ar / br, ai / br)
    if not isinstance(br, Tensor) and not isinstance(bi, Tensor):
        return mul(a, 1.0 / _PyComplex(br, bi))
    br, bi = _as_tensor(br, bi), _as_tensor(bi, br)
    big_re = br.abs() >= bi.abs()
    zero = (br == 0) & (bi == 0)
    num = _ops.where(zero, 1.0, _ops.where(big_re, br, bi))     # the larger part
    rat = _ops.where(big_re, bi, br) / num                       # |rat| <= 1
    scl = 1.0 / (num + _ops.where(big_re, bi, br) * rat)
    re = _ops.where(big_re, ar + ai * rat, ar * rat + ai) * scl
    im = _ops.where(big_re, ai - ar * rat, ai * rat - ar) * scl
    return _make(_ops.where(zero, ar / br.abs(), re), _ops.where(zero, ai / bi.abs(), im))


def _as_tensor(x: Any, like: Tensor) -> Tensor:
    return x if isinstance(x, Tensor) else _creation.full_like(like, x)


def neg(z: ComplexTensor) -> ComplexTensor:
    return ComplexTensor(-z._re, -z._im)


def conj(z: Any) -> Any:
    """The complex conjugate; a real tensor itself (``torch.conj``)."""
    if isinstance(z, Tensor):
        return z
    z = _as_complex("conj", z)
    return ComplexTensor(z._re.clone(), -z._im)      # (a copy: see README, complex tensors)


def reciprocal(z: ComplexTensor) -> ComplexTensor:
    return div(1.0, z)


def square(z: ComplexTensor) -> ComplexTensor:
    return mul(z, z)


def pow(a: Any, b: Any) -> ComplexTensor:
    """``a ** b``: an integer exponent by repeated products (exact for ``z ** 2``),
    any other as ``exp(b * log(a))``, the principal value -- and 0 where ``a`` is 0
    and ``b``'s real part positive, as PyTorch's (``log(0)`` made it NaN)."""
    if isinstance(b, (int, np.integer)) and not isinstance(b, bool) and isinstance(a, ComplexTensor):
        n = int(b)
        base = a if n >= 0 else reciprocal(a)
        result: ComplexTensor | None = None
        for bit in bin(builtins.abs(n))[2:]:
            result = None if result is None else mul(result, result)
            if bit == "1":
                result = base if result is None else mul(result, base)
        if result is a:                                   # z ** 1: a new tensor
            return ComplexTensor(a._re.clone(), a._im.clone())
        return result if result is not None else _make(_creation.ones_like(a._re), 0.0)
    z = _as_complex("pow", a)
    out = exp(mul(b, log(z)))
    b_re = _parts("pow", b)[0]
    zero = _ops.logical_and(_ops.logical_and(_ops.eq(z._re, 0), _ops.eq(z._im, 0)),
                            _ops.gt(b_re, 0) if isinstance(b_re, Tensor) else b_re > 0)
    return _make(_ops.where(zero, 0.0, out._re), _ops.where(zero, 0.0, out._im))


def matmul(a: Any, b: Any) -> ComplexTensor:
    (ar, ai), (br, bi) = _parts("matmul", a), _parts("matmul", b)
    if not isinstance(ar, Tensor) or not isinstance(br, Tensor):
        raise TypeError("matmul: both arguments must be tensors")
    if ai is None:
        return _make(ar @ br, ar @ bi)
    if bi is None:
        return _make(ar @ br, ai @ br)
    return _make(ar @ br - ai @ bi, ar @ bi + ai @ br)


# ---------------------------------------------------------------- functions of z

def abs(z: ComplexTensor) -> Tensor:
    return _elementary.hypot(z._re, z._im)


def angle(input: Any) -> Tensor:
    """The argument ``atan2(imag, real)``; of a real tensor 0 or pi (NaN kept), as
    ``torch.angle``."""
    if isinstance(input, Tensor):
        x = input if input.dtype.is_floating_point else input.to(dt.DEFAULT_FLOAT)
        # NaN kept as a value, with PyTorch's zero gradient (not ``where``'s 1 into x)
        nan = _ops.add(_ops.mul(x, 0.0), math.nan)
        return _ops.where(x < 0, math.pi, _ops.where(_ops.isnan(x), nan, _creation.zeros_like(x)))
    input = _as_complex("angle", input)
    return _elementary.atan2(input._im, input._re)


def sgn(z: ComplexTensor) -> ComplexTensor:
    """``z / |z|``, 0 where ``z`` is 0 (``torch.sgn``)."""
    r = abs(z)
    safe = _ops.where(r == 0, 1.0, r)
    keep = r != 0
    zero = _creation.zeros_like(r)
    return ComplexTensor(_ops.where(keep, z._re / safe, zero),
                         _ops.where(keep, z._im / safe, zero))


def _axis_zero(part: Tensor, zero: Tensor, scale: Tensor) -> Tensor:
    """``part`` (a product ``scale * f(zero)`` with ``f(0) = 0``), except where ``zero``
    is exactly 0 and ``scale`` infinite: there the product is ``inf * 0 = NaN``, while
    the function (C99 Annex G, numpy, PyTorch) gives ``zero`` itself, a signed zero --
    ``exp(1000 + 0j)`` is ``inf + 0j``, not ``inf + nanj`` (a NaN ``scale``, likewise:
    ``exp(nan + 0j)`` is ``nan + 0j``). Only those points change, so every finite value
    and gradient is the formula's."""
    return _ops.where(_ops.logical_and(_ops.eq(zero, 0),
                                       _ops.logical_not(_elementary.isfinite(scale))),
                      zero, part)


def exp(z: ComplexTensor) -> ComplexTensor:
    """``e^x (cos y + i sin y)``, with C99's values where an infinite or NaN ``y``
    meets ``e^x = 0`` (``x = -inf``: ``0 + 0i``, not ``0 * NaN``) or ``e^x = +inf``
    (``inf + NaN i``) and the axis zeros of ``_axis_zero``."""
    m = _ops.exp(z._re)
    re = m * _ops.cos(z._im)
    im = _axis_zero(m * _ops.sin(z._im), z._im, m)
    wild = _ops.logical_not(_elementary.isfinite(z._im))
    vanished = _ops.logical_and(wild, _ops.eq(m, 0))
    return ComplexTensor(
        _ops.where(vanished, 0.0, _ops.where(_ops.logical_and(wild, _ops.isinf(m)), m, re)),
        _ops.where(vanished, 0.0, im))


def log(z: ComplexTensor) -> ComplexTensor:
    """The principal logarithm ``log|z| + i angle(z)``."""
    return ComplexTensor(_ops.log(abs(z)), angle(z))


def sqrt(z: ComplexTensor) -> ComplexTensor:
    """The principal square root (real part >= 0, imaginary part with ``imag``'s sign).
    Infinite parts take C99's values (``r - x`` would be ``inf - inf``): an infinite
    imaginary part gives ``inf + i imag``; a real part of ``+inf``, ``inf + i0`` (sign of
    ``imag``), of ``-inf``, ``0 + i inf`` (sign of ``imag``); only those points change."""
    r = abs(z)
    re = _ops.sqrt(_ops.relu((r + z._re) * 0.5))
    im = _special.copysign(_ops.sqrt(_ops.relu((r - z._re) * 0.5)), z._im)
    x, y = z._re, z._im
    inf_y, inf_x = _ops.isinf(y), _ops.logical_and(_ops.isinf(x), _ops.logical_not(_ops.isnan(y)))
    positive = _ops.gt(x, 0)
    zero, inf = _creation.zeros_like(x), _ops.abs(x)
    re = _ops.where(inf_y, _ops.abs(y), _ops.where(inf_x, _ops.where(positive, inf, zero), re))
    im = _ops.where(inf_y, y, _ops.where(inf_x, _special.copysign(
        _ops.where(positive, zero, inf), y), im))
    return ComplexTensor(re, im)


def _infinite_part(part: Tensor, growing: Tensor, turning: Tensor) -> Tensor:
    """``part`` (a hyperbolic function of ``growing`` times a trigonometric one of
    ``turning``), except where ``growing`` is infinite and ``turning`` is not finite:
    there sinh, cosh, sin and cos have an infinite part (C99: ``+-inf``, the sign
    unspecified; numpy's ``+inf``) that the formula's ``inf * NaN`` made NaN."""
    wild = _ops.logical_and(_ops.isinf(growing),
                            _ops.logical_not(_elementary.isfinite(turning)))
    return _ops.where(wild, math.inf, part)


def sin(z: ComplexTensor) -> ComplexTensor:
    ch = _elementary.cosh(z._im)
    im = _axis_zero(_ops.cos(z._re) * _elementary.sinh(z._im), z._im, z._re)
    return ComplexTensor(_axis_zero(_ops.sin(z._re) * ch, z._re, ch),
                         _infinite_part(im, z._im, z._re))


def cos(z: ComplexTensor) -> ComplexTensor:
    x, y = z._re, z._im
    sh = _elementary.sinh(y)
    im = _axis_zero(_axis_zero(-(_ops.sin(x) * sh), x, sh), y, x)
    return ComplexTensor(_infinite_part(_ops.cos(x) * _elementary.cosh(y), y, x), im)


def real(z: Any) -> Tensor:
    return z if isinstance(z, Tensor) else _as_complex("real", z)._re


def imag(z: Any) -> Tensor:
    if isinstance(z, Tensor):
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return _as_complex("imag", z)._im


def isfinite(z: ComplexTensor) -> Tensor:
    return _elementary.isfinite(z._re) & _elementary.isfinite(z._im)


def isnan(z: ComplexTensor) -> Tensor:
    return _ops.isnan(z._re) | _ops.isnan(z._im)


def isinf(z: ComplexTensor) -> Tensor:
    return _ops.isinf(z._re) | _ops.isinf(z._im)


def eq(a: Any, b: Any) -> Tensor:
    (ar, ai), (br, bi) = _parts("eq", a), _parts("eq", b)
    return (ar == br) & (_sum_parts(ai, None) == _sum_parts(bi, None))


def ne(a: Any, b: Any) -> Tensor:
    return ~eq(a, b)


def isclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Tensor:
    """``|a - b| <= atol + rtol * |b|`` with the complex modulus (``torch.isclose``)."""
    a, b = _as_complex("isclose", a), _as_complex("isclose", b)
    close = abs(sub(a, b)) <= atol + rtol * abs(b)
    close = close | eq(a, b)
    if equal_nan:
        close = close | (isnan(a) & isnan(b))
    return close


def allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    return builtins.bool(isclose(a, b, rtol, atol, equal_nan).all().item())


def equal(a: Any, b: Any) -> bool:
    a, b = _as_complex("equal", a), _as_complex("equal", b)
    return a.shape == b.shape and builtins.bool(eq(a, b).all().item())


# ---------------------------------------------------------------- reductions

def sum(z: ComplexTensor, *args: Any, dtype: Any = None, **kwargs: Any) -> ComplexTensor:
    z = _cast_for("sum", z, dtype)
    return ComplexTensor(z._re.sum(*args, **kwargs), z._im.sum(*args, **kwargs))


def mean(z: ComplexTensor, *args: Any, dtype: Any = None, **kwargs: Any) -> ComplexTensor:
    z = _cast_for("mean", z, dtype)
    return ComplexTensor(z._re.mean(*args, **kwargs), z._im.mean(*args, **kwargs))


def cumsum(z: ComplexTensor, dim: int, *, dtype: Any = None) -> ComplexTensor:
    z = _cast_for("cumsum", z, dtype)
    return ComplexTensor(z._re.cumsum(dim), z._im.cumsum(dim))


def _cast_for(op: str, z: ComplexTensor, dtype: Any) -> ComplexTensor:
    if dtype is None:
        return z
    target = dt.get_complex_dtype(dtype)
    if target is None:
        raise RuntimeError(f"{op}: dtype must be complex for a {z.dtype.name} input, got "
                           f"{dtype}")
    return z.to(target)


# ---------------------------------------------------------------- joins and selection

def _joined(op: str, fn: Callable, tensors: Sequence[Any], *args: Any, **kwargs: Any):
    zs = [_as_complex(op, t) for t in tensors]
    dtype = zs[0].dtype.real
    for z in zs[1:]:
        dtype = dt.promote_types(dtype, z.dtype.real)
    return ComplexTensor(fn([z._re.to(dtype) for z in zs], *args, **kwargs),
                         fn([z._im.to(dtype) for z in zs], *args, **kwargs))


def cat(tensors: Sequence[Any], dim: int = 0) -> ComplexTensor:
    return _joined("cat", _movement.cat, tensors, dim)


def stack(tensors: Sequence[Any], dim: int = 0) -> ComplexTensor:
    return _joined("stack", _movement.stack, tensors, dim)


def where(condition: Tensor, a: Any, b: Any) -> ComplexTensor:
    (ar, ai), (br, bi) = _parts("where", a), _parts("where", b)
    return _make(_ops.where(condition, ar, br),
                 _ops.where(condition, 0.0 if ai is None else ai, 0.0 if bi is None else bi))


# ---------------------------------------------------------------- making complex tensors

def view_as_complex(input: Tensor) -> ComplexTensor:
    """``input[..., 0] + i input[..., 1]`` with views of ``input`` as its parts
    (``torch.view_as_complex``)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"view_as_complex: expected a Tensor, got {type(input).__name__}")
    if input.dtype not in (dt.float32, dt.float64):
        raise RuntimeError("view_as_complex is only supported for float and double tensors, "
                           f"but got a tensor of scalar type: {input.dtype.name}")
    if input.ndim == 0 or input.shape[-1] != 2:
        raise RuntimeError(f"view_as_complex: Tensor must have a last dimension of size 2, "
                           f"got shape {list(input.shape)}")
    return ComplexTensor(input[..., 0], input[..., 1], real_view=input)


def view_as_real(input: ComplexTensor) -> Tensor:
    """``input`` as a real tensor with a last dimension of 2 (``torch.view_as_real``): the
    tensor ``view_as_complex`` viewed, else a new one (module docstring)."""
    if isinstance(input, Tensor):
        raise RuntimeError("view_as_real is only supported for complex tensors")
    input = _as_complex("view_as_real", input)
    base = input._real_view
    if base is not None and base.shape == tuple(input.shape) + (2,):
        return base.view(base.shape)
    return _movement.stack([input._re, input._im], -1)


def complex(real: Tensor, imag: Tensor) -> ComplexTensor:
    """``real + i imag`` (``torch.complex``): float tensors of one dtype, broadcast."""
    for name, t in (("real", real), ("imag", imag)):
        if not isinstance(t, Tensor):
            raise TypeError(f"complex(): argument '{name}' must be Tensor, not "
                            f"{type(t).__name__}")
        if t.dtype not in (dt.float32, dt.float64):
            raise RuntimeError(f"complex(): expected both inputs to be float or double "
                               f"tensors, got {name} of dtype {t.dtype.name}")
    if real.dtype != imag.dtype:
        raise RuntimeError(f"complex(): expected object of scalar type {real.dtype.name} but "
                           f"got scalar type {imag.dtype.name} for second argument")
    return _make(real, imag)


def polar(abs: Tensor, angle: Tensor) -> ComplexTensor:
    """``abs * (cos(angle) + i sin(angle))`` (``torch.polar``)."""
    for name, t in (("abs", abs), ("angle", angle)):
        if not isinstance(t, Tensor) or t.dtype not in (dt.float32, dt.float64):
            # a tensor of another dtype is PyTorch's RuntimeError, a non-tensor its TypeError
            raise (DTypeError if isinstance(t, Tensor) else TypeError)(
                f"polar(): argument '{name}' must be a float or double Tensor, "
                f"got {getattr(t, 'dtype', type(t).__name__)}")
    if abs.dtype != angle.dtype:
        raise RuntimeError(f"polar(): expected abs and angle of one dtype, got "
                           f"{abs.dtype.name} and {angle.dtype.name}")
    return _make(abs * _ops.cos(angle), abs * _ops.sin(angle))


def from_real(x: Tensor, dtype: Any = None) -> ComplexTensor:
    """A real tensor as complex (imaginary part 0): ``x.to(nv.complex64)``."""
    target = dt.complex_of(_float_of(x)) if dtype is None else dt.get_complex_dtype(dtype)
    re = _ops.unshared(x.to(target.real), x)           # (a new tensor, not ``x`` itself)
    return ComplexTensor(re, _creation.zeros_like(re))


# ---------------------------------------------------------------- dispatch tables

_tensor_module.COMPLEX_OPERAND_TYPES.add(ComplexTensor)

# Methods of ComplexTensor that apply one real method to both parts (movement,
# indexing, copies); tuple results become tuples of complex tensors.
PARTWISE = ("reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "transpose",
            "permute", "expand", "contiguous", "clone", "narrow", "flip", "roll", "movedim",
            "moveaxis", "t", "repeat", "tile", "diagonal", "tril", "triu", "select",
            "swapaxes", "swapdims", "index_select", "unbind", "chunk", "split",
            "tensor_split", "unfold", "broadcast_to", "fliplr", "flipud", "rot90",
            "repeat_interleave", "take_along_dim", "gather", "diag", "ravel", "trace",
            "diag_embed", "diagflat")


def _partwise_method(name: str) -> Callable:
    def method(self: ComplexTensor, *args: Any, **kwargs: Any) -> Any:
        re = getattr(self._re, name)(*args, **kwargs)
        im = getattr(self._im, name)(*args, **kwargs)
        if isinstance(re, (tuple, list)):
            return tuple(ComplexTensor(r, i) for r, i in zip(re, im))
        return ComplexTensor(re, im)
    method.__name__ = name
    method.__doc__ = f"``Tensor.{name}`` of the real and the imaginary part."
    return method


for _name in PARTWISE:
    setattr(ComplexTensor, _name, _partwise_method(_name))


def _partwise_property(name: str) -> property:
    return property(lambda self: ComplexTensor(getattr(self._re, name), getattr(self._im, name)))


for _name in ("T", "mT"):
    setattr(ComplexTensor, _name, _partwise_property(_name))


def _expand_as(self: ComplexTensor, other: Any) -> ComplexTensor:
    return self.expand(*other.shape)


def _view_as(self: ComplexTensor, other: Any) -> ComplexTensor:
    return self.view(*other.shape)


def _reshape_as(self: ComplexTensor, other: Any) -> ComplexTensor:
    return self.reshape(*other.shape)


def _inplace(fn: Callable, name: str) -> Callable:
    def method(self: ComplexTensor, other: Any, *args: Any, **kwargs: Any) -> ComplexTensor:
        return self.copy_(fn(self, other, *args, **kwargs))
    method.__name__ = name
    return method


# Methods that are functions of this module (``z.abs()`` is ``abs(z)``).
METHODS: dict[str, Callable] = {
    "abs": abs, "absolute": abs, "angle": angle, "conj": conj, "conj_physical": conj,
    "resolve_conj": lambda z: z, "resolve_neg": lambda z: z, "exp": exp, "log": log,
    "sqrt": sqrt, "sin": sin, "cos": cos, "sgn": sgn, "reciprocal": reciprocal,
    "square": square, "neg": neg, "negative": neg, "add": add, "sub": sub,
    "subtract": sub, "mul": mul, "multiply": mul, "div": div, "divide": div,
    "true_divide": div, "matmul": matmul, "mm": matmul, "bmm": matmul, "pow": pow,
    "sum": sum, "mean": mean, "cumsum": cumsum, "isfinite": isfinite, "isnan": isnan,
    "isinf": isinf, "eq": eq, "ne": ne, "isclose": isclose, "allclose": allclose,
    "equal": equal, "expand_as": _expand_as, "view_as": _view_as, "reshape_as": _reshape_as,
    "add_": _inplace(add, "add_"), "sub_": _inplace(sub, "sub_"),
    "mul_": _inplace(mul, "mul_"), "div_": _inplace(div, "div_"),
}
for _name, _fn in METHODS.items():
    setattr(ComplexTensor, _name, _fn)
ComplexTensor.__iadd__ = METHODS["add_"]          # type: ignore[attr-defined]
ComplexTensor.__isub__ = METHODS["sub_"]          # type: ignore[attr-defined]
ComplexTensor.__imul__ = METHODS["mul_"]          # type: ignore[attr-defined]
ComplexTensor.__itruediv__ = METHODS["div_"]      # type: ignore[attr-defined]

"""``nova.fft``: PyTorch's discrete Fourier transforms (``torch.fft``).

A transform of length ``n`` along one dimension is a product with the ``n x n`` DFT
matrix (its cosine and sine halves, real tensors built in float64 with ``k * t`` reduced
mod ``n``, then cast to the input's dtype), so it is recorded, fused and differentiated
as any matmul, on every engine, and complex results are ``ComplexTensor`` pairs
(``nova.tensor.complex``). That is O(n^2) work per transform where an FFT does
O(n log n): fine for the lengths models use along one axis (a few thousand), slow for
long signals. n-dimensional transforms apply the 1-D one along each dimension.

``norm``: ``"backward"`` (default: the inverse divides by ``n``), ``"ortho"`` (both by
``sqrt(n)``), ``"forward"`` (the forward divides by ``n``), as PyTorch.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.tensor import creation as _creation
from nova.tensor.constants import constant
from nova.tensor import movement as _movement
from nova.tensor.complex import ComplexTensor
from nova.tensor.tensor import Tensor

__all__ = ["fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "fftn", "ifftn", "rfft2",
           "irfft2", "rfftn", "irfftn", "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn", "fftfreq", "rfftfreq", "fftshift",
           "ifftshift"]

_NORMS = ("backward", "ortho", "forward")


def _scale(op: str, norm: str | None, n: int, inverse: bool) -> float:
    norm = "backward" if norm is None else norm
    if norm not in _NORMS:
        raise ValueError(f"{op}: Invalid normalization mode: {norm!r}; valid: "
                         f"{', '.join(_NORMS)} or None")
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    return 1.0 / n if (norm == "forward") != inverse else 1.0


@functools.lru_cache(maxsize=8)
def _dft(n_in: int, n_out: int, dtype: dt.DType, n: int,
         device: str = "cpu") -> tuple[Tensor, Tensor]:
    """``cos`` and ``sin`` of ``2 pi k t / n`` for ``t < n_in`` (rows) and ``k < n_out``.

    Kept (as torch keeps its FFT plans), the last few sizes: the same constants every
    call, not host data made anew, so a step through ``nv.fft`` uploads no matrix per
    call and ``nv.compile`` can replay it (a replay cannot supply host data the call
    makes). On the input's ``device`` (never the default device: a transform's
    constants follow its operand)."""
    phase = (np.arange(n_in)[:, None] * np.arange(n_out)[None, :]) % n
    angle = 2.0 * np.pi * phase / n
    cos, sin = np.cos(angle), np.sin(angle)
    # Multiples of a quarter turn exactly (np.sin(pi) is 1.2e-16): the Nyquist
    # frequency of a real signal then has an imaginary part of exactly 0, as PyTorch's.
    quarter = (4 * phase) % n == 0
    turns = (4 * phase[quarter]) // n
    cos[quarter] = np.array([1.0, 0.0, -1.0, 0.0])[turns]
    sin[quarter] = np.array([0.0, 1.0, 0.0, -1.0])[turns]
    return (_creation.tensor(cos, dtype=dtype, device=device),
            _creation.tensor(sin, dtype=dtype, device=device))


def _where(t: Tensor) -> str:
    """The device of ``t`` as a string (a constant's None is the CPU)."""
    return t.node.device or "cpu"


def _operand(op: str, x: Any) -> tuple[Tensor, Tensor | None]:
    if isinstance(x, ComplexTensor):
        return x.real, x.imag
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        x = x.to(dt.DEFAULT_FLOAT)
    elif x.dtype in (dt.float16, dt.bfloat16):
        x = x.to(dt.float32)
    return x, None


def _resized(op: str, t: Tensor, dim: int, n: int) -> Tensor:
    """``t`` zero-padded or truncated to ``n`` along ``dim`` (the signal length ``n=``)."""
    if n < 1:
        raise RuntimeError(f"{op}: Invalid number of data points ({n}) specified")
    size = t.shape[dim]
    if n < size:
        return _movement.narrow(t, dim, 0, n)
    if n > size:
        pad_shape = list(t.shape)
        pad_shape[dim] = n - size
        return _movement.cat([t, _creation.zeros(tuple(pad_shape), dtype=t.dtype,
                                                 device=t.device)], dim)
    return t


def _dim(op: str, x: Any, dim: int) -> int:
    ndim = x.ndim
    if not -ndim <= dim < ndim:
        raise IndexError(f"{op}: Dimension out of range (expected to be in range of "
                         f"[{-ndim}, {ndim - 1}], but got {dim})")
    return dim % ndim


def _along(t: Tensor, dim: int, matrix: Tensor) -> Tensor:
    """``t`` times ``matrix`` along ``dim`` (rows of ``matrix`` index ``t``'s dim)."""
    return (t.movedim(dim, -1) @ matrix).movedim(-1, dim)


def _c2c(op: str, x: Any, n: int | None, dim: int, norm: str | None,
         inverse: bool) -> ComplexTensor:
    re, im = _operand(op, x)
    dim = _dim(op, re, dim)
    n = re.shape[dim] if n is None else n
    re = _resized(op, re, dim, n)
    cos, sin = _dft(n, n, re.dtype, n, _where(re))
    sign = 1.0 if inverse else -1.0           # e^{+-i theta} = cos +- i sin
    scale = _scale(op, norm, n, inverse)
    # the sign folded into the matrix, as rfft's: a sum over a zero sin column (the
    # zero and Nyquist frequencies) is then +0, as PyTorch gives it; negated after the
    # sum it was -0, and angle() -pi for a negative real DC term
    signed = sin * sign
    if im is None:
        out_re, out_im = _along(re, dim, cos), _along(re, dim, signed)
    else:
        im = _resized(op, im, dim, n)
        out_re = _along(re, dim, cos) - _along(im, dim, signed)
        out_im = _along(im, dim, cos) + _along(re, dim, signed)
    if scale != 1.0:
        out_re, out_im = out_re * scale, out_im * scale
    return ComplexTensor(out_re, out_im)


def fft(input: Any, n: int | None = None, dim: int = -1, norm: str | None = None) -> ComplexTensor:
    """The 1-D discrete Fourier transform along ``dim`` (``torch.fft.fft``)."""
    return _c2c("fft", input, n, dim, norm, inverse=False)


def ifft(input: Any, n: int | None = None, dim: int = -1,
         norm: str | None = None) -> ComplexTensor:
    """The inverse of ``fft`` (``torch.fft.ifft``)."""
    return _c2c("ifft", input, n, dim, norm, inverse=True)


def rfft(input: Tensor, n: int | None = None, dim: int = -1,
         norm: str | None = None) -> ComplexTensor:
    """The DFT of a real signal: its ``n // 2 + 1`` non-negative frequencies."""
    if isinstance(input, ComplexTensor):
        raise RuntimeError(f"rfft expects a real input tensor, but got {input.dtype.name}")
    re, _ = _operand("rfft", input)
    dim = _dim("rfft", re, dim)
    n = re.shape[dim] if n is None else n
    re = _resized("rfft", re, dim, n)
    cos, sin = _dft(n, n // 2 + 1, re.dtype, n, _where(re))
    scale = _scale("rfft", norm, n, inverse=False)
    # (-sin, not -scale: the sum at the zero and Nyquist frequencies, whose sin column
    # is 0, is then +0 as PyTorch gives it; negated after, it was -0, and angle() -pi)
    return ComplexTensor(_along(re, dim, cos) * scale, _along(re, dim, -sin) * scale)


def irfft(input: Any, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The real signal of length ``n`` (default ``2 * (m - 1)``) whose ``rfft`` is the
    ``m`` given frequencies (``torch.fft.irfft``; the imaginary parts of the zero and,
    for even ``n``, the Nyquist frequency are ignored, as there)."""
    re, im = _operand("irfft", input)
    dim = _dim("irfft", re, dim)
    n = 2 * (re.shape[dim] - 1) if n is None else n
    m = n // 2 + 1
    re = _resized("irfft", re, dim, m)
    im = _creation.zeros_like(re) if im is None else _resized("irfft", im, dim, m)
    cos, sin = _dft(m, n, re.dtype, n, _where(re))
    weight = np.full((m, 1), 2.0)             # each k in (0, n/2) stands for k and n - k
    weight[0] = 1.0
    if n % 2 == 0:
        weight[-1] = 1.0
    w = constant(weight, dtype=re.dtype, device=_where(re))   # (kept: nv.compile replays)
    out = _along(re, dim, cos * w) - _along(im, dim, sin * w)
    scale = _scale("irfft", norm, n, inverse=True)
    return out * scale if scale != 1.0 else out


def _swapped(op: str, norm: str | None) -> str:
    """The scaling of the inverse direction: a Hermitian transform is the inverse real
    transform of the conjugate, scaled as the forward one."""
    _scale(op, norm, 1, inverse=False)                 # (refuses an unknown name)
    return {"backward": "forward", "forward": "backward", "ortho": "ortho",
            None: "forward"}[norm]


def _conjugate(op: str, x: Any) -> ComplexTensor:
    re, im = _operand(op, x)
    return ComplexTensor(re, -im if im is not None else _creation.zeros_like(re))


def hfft(input: Any, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The FFT of a Hermitian-symmetric signal given by its first half: a real result
    (``torch.fft.hfft``): ``irfft`` of the conjugate with the forward scaling."""
    return irfft(_conjugate("hfft", input), n, dim, _swapped("hfft", norm))


def ihfft(input: Tensor, n: int | None = None, dim: int = -1,
          norm: str | None = None) -> ComplexTensor:
    """The inverse of ``hfft``: the conjugate of ``rfft`` with the inverse scaling."""
    out = rfft(input, n, dim, _swapped("ihfft", norm))
    return ComplexTensor(out.real, -out.imag)


def hfftn(input: Any, s: Sequence[int] | None = None, dim: Any = None,
          norm: str | None = None) -> Tensor:
    """The n-dimensional FFT of a Hermitian-symmetric signal given by its half along the
    last of ``dim`` (``torch.fft.hfftn``): ``irfftn`` of the conjugate with the forward
    scaling, so the last dim's length is ``2 * (m - 1)`` unless ``s`` says otherwise."""
    if not _dims("hfftn", input, s, dim)[0]:
        raise RuntimeError("hfftn must transform at least one axis")
    return irfftn(_conjugate("hfftn", input), s, dim, _swapped("hfftn", norm))


def ihfftn(input: Tensor, s: Sequence[int] | None = None, dim: Any = None,
           norm: str | None = None) -> ComplexTensor:
    """The inverse of ``hfftn``: the conjugate of ``rfftn`` with the inverse scaling
    (a real input; the last of ``dim`` keeps its ``n // 2 + 1`` frequencies)."""
    if isinstance(input, ComplexTensor):
        raise RuntimeError(f"ihfftn expects a real input tensor, but got {input.dtype.name}")
    if not _dims("ihfftn", input, s, dim)[0]:
        raise RuntimeError("ihfftn must transform at least one axis")
    out = rfftn(input, s, dim, _swapped("ihfftn", norm))
    return ComplexTensor(out.real, -out.imag)


def hfft2(input: Any, s: Sequence[int] | None = None, dim: Any = (-2, -1),
          norm: str | None = None) -> Tensor:
    return hfftn(input, s, dim, norm)


def ihfft2(input: Tensor, s: Sequence[int] | None = None, dim: Any = (-2, -1),
           norm: str | None = None) -> ComplexTensor:
    return ihfftn(input, s, dim, norm)


def _dims(op: str, x: Any, s: Sequence[int] | None,
          dim: int | Sequence[int] | None) -> tuple[list[int], list[int | None]]:
    """The transformed dimensions and their lengths, as ``torch.fft.fftn`` reads them:
    a length of -1 keeps that dimension's own (None: each transform's default, as
    ``n=None``)."""
    if isinstance(dim, int):
        dim = [dim]
    if dim is None:
        dims = list(range(x.ndim)) if s is None else list(range(x.ndim - len(s), x.ndim))
    else:
        dims = [_dim(op, x, d) for d in dim]
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"{op}: dims must be unique, got {list(dim)}")
    if s is not None and len(s) != len(dims):
        raise RuntimeError(f"{op}: When given, dim and shape arguments must have the same "
                           f"length, got s={list(s)} and dim={dims}")
    return dims, ([None if n == -1 else n for n in s] if s is not None else [None] * len(dims))


def fftn(input: Any, s: Sequence[int] | None = None, dim: Any = None,
         norm: str | None = None) -> ComplexTensor:
    """``fft`` along each of ``dim`` (all dimensions by default)."""
    dims, sizes = _dims("fftn", input, s, dim)
    out = input
    for d, n in zip(dims, sizes):
        out = _c2c("fftn", out, n, d, norm, inverse=False)
    return out if dims else _complex_copy(input)


def ifftn(input: Any, s: Sequence[int] | None = None, dim: Any = None,
          norm: str | None = None) -> ComplexTensor:
    """``ifft`` along each of ``dim`` (all dimensions by default)."""
    dims, sizes = _dims("ifftn", input, s, dim)
    out = input
    for d, n in zip(dims, sizes):
        out = _c2c("ifftn", out, n, d, norm, inverse=True)
    return out if dims else _complex_copy(input)


def _complex_copy(x: Any) -> ComplexTensor:
    """A transform over no dims (of a 0-d tensor): the input as a new complex tensor,
    its parts its own (not the input's tensors)."""
    re, im = _operand("fftn", x)
    return ComplexTensor(re.clone(), _creation.zeros_like(re) if im is None else im.clone())


def rfftn(input: Tensor, s: Sequence[int] | None = None, dim: Any = None,
          norm: str | None = None) -> ComplexTensor:
    """``rfft`` along the last of ``dim``, then ``fft`` along the others."""
    dims, sizes = _dims("rfftn", input, s, dim)
    if not dims:
        raise RuntimeError("rfftn must transform at least one axis")
    out = rfft(input, sizes[-1], dims[-1], norm)
    for d, n in zip(dims[:-1], sizes[:-1]):
        out = _c2c("rfftn", out, n, d, norm, inverse=False)
    return out


def irfftn(input: Any, s: Sequence[int] | None = None, dim: Any = None,
           norm: str | None = None) -> Tensor:
    """``ifft`` along all of ``dim`` but the last, then ``irfft`` along it."""
    dims, sizes = _dims("irfftn", input, s, dim)
    if not dims:
        raise RuntimeError("irfftn must transform at least one axis")
    out = input
    for d, n in zip(dims[:-1], sizes[:-1]):
        out = _c2c("irfftn", out, n, d, norm, inverse=True)
    return irfft(out, sizes[-1], dims[-1], norm)


def fft2(input: Any, s: Sequence[int] | None = None, dim: Any = (-2, -1),
         norm: str | None = None) -> ComplexTensor:
    return fftn(input, s, dim, norm)


def ifft2(input: Any, s: Sequence[int] | None = None, dim: Any = (-2, -1),
          norm: str | None = None) -> ComplexTensor:
    return ifftn(input, s, dim, norm)


def rfft2(input: Tensor, s: Sequence[int] | None = None, dim: Any = (-2, -1),
          norm: str | None = None) -> ComplexTensor:
    return rfftn(input, s, dim, norm)


def irfft2(input: Any, s: Sequence[int] | None = None, dim: Any = (-2, -1),
           norm: str | None = None) -> Tensor:
    return irfftn(input, s, dim, norm)


def fftfreq(n: int, d: float = 1.0, *, dtype: Any = None, layout: Any = None,
            device: Any = None, pin_memory: bool = False,
            requires_grad: bool = False) -> Tensor:
    """The sample frequencies of an ``n``-point ``fft``: ``[0, 1, ..., -1] / (d * n)``."""
    _creation.check_options("fftfreq", layout)
    if n < 1:
        raise RuntimeError(f"fftfreq: n must be positive, got {n}")
    k = np.concatenate([np.arange((n + 1) // 2), np.arange(-(n // 2), 0)])
    return _creation.tensor(k / (d * n), dtype=dtype or dt.DEFAULT_FLOAT, device=device,
                            requires_grad=requires_grad, pin_memory=pin_memory)


def rfftfreq(n: int, d: float = 1.0, *, dtype: Any = None, layout: Any = None,
             device: Any = None, pin_memory: bool = False,
             requires_grad: bool = False) -> Tensor:
    """The sample frequencies of an ``n``-point ``rfft``: ``[0, ..., n // 2] / (d * n)``."""
    _creation.check_options("rfftfreq", layout)
    if n < 1:
        raise RuntimeError(f"rfftfreq: n must be positive, got {n}")
    return _creation.tensor(np.arange(n // 2 + 1) / (d * n), dtype=dtype or dt.DEFAULT_FLOAT,
                            device=device, requires_grad=requires_grad, pin_memory=pin_memory)


def _shifted(x: Any, dim: Any, sign: int) -> Any:
    dims = list(range(x.ndim)) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    shifts = [sign * (x.shape[d] // 2) for d in dims]
    return x.roll(shifts, dims)


def fftshift(input: Any, dim: Any = None) -> Any:
    """The zero frequency moved to the middle (``torch.fft.fftshift``)."""
    return _shifted(input, dim, 1)


def ifftshift(input: Any, dim: Any = None) -> Any:
    """The inverse of ``fftshift``."""
    return _shifted(input, dim, -1)

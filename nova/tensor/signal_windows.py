"""Window functions: torch's top-level factories (``hann_window``, ``hamming_window``,
``blackman_window``, ``bartlett_window``, ``kaiser_window``) and the float64 formulas
``nova.signal.windows`` (``torch.signal.windows``) shares with them.

A window is a constant, so it is computed on the host in float64 (NumPy) and rounded
once to the requested dtype, then placed like ``nv.tensor`` places data: the values
agree with PyTorch's to the dtype's rounding (PyTorch evaluates the formula in the
requested dtype, so its float16 and float32 windows can differ from these by an ulp or
two). ``requires_grad=True`` gives a leaf.

The top-level factories take ``periodic`` (default True: the window of length ``N + 1``
without its last point, for spectral analysis); ``torch.signal.windows`` takes ``sym``
(default True: the symmetric window); ``periodic`` is ``not sym``.
"""
from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.core.shapes import SizeError
from nova.tensor.creation import tensor
from nova.core.errors import ArgumentError
from nova.tensor.tensor import Tensor, strided

BLACKMAN = (0.42, 0.5, 0.08)
NUTTALL = (0.3635819, 0.4891775, 0.1365995, 0.0106411)


# ---------------------------------------------------------------- checks and placing

def check_length(op: str, length: Any) -> builtins.int:
    """``length`` as a non-negative int (a bool is refused, as PyTorch refuses it)."""
    if isinstance(length, builtins.bool) or not isinstance(length, (builtins.int, np.integer)):
        raise TypeError(f"{op}: window_length must be an int, got "
                        f"{type(length).__name__}")
    if length < 0:
        raise SizeError(f"{op}: requires a non-negative window_length, got "
                        f"window_length={length}")
    return builtins.int(length)


def check_layout(op: str, layout: Any) -> None:
    if layout is not None and layout is not strided:
        raise ArgumentError(f"{op}: is implemented for strided tensors only, got layout "
                            f"{layout!r}")


def window_dtype(op: str, dtype: Any, allowed: Sequence[dt.DType] | None = None) -> dt.DType:
    """The dtype of the window: the default float dtype unless given; a floating one
    (only those in ``allowed`` where given)."""
    d = dt.get_default_dtype() if dtype is None else dt.get_dtype(dtype)
    if allowed is not None and d not in allowed:
        names = " or ".join(a.name for a in allowed)
        raise ArgumentError(f"{op}: expects {names} dtypes, got {d.name}")
    if not d.is_floating_point:
        raise ArgumentError(f"{op}: expects a floating point dtype (float16, bfloat16, "
                            f"float32 or float64), got {d.name}")
    return d


def place(values: np.ndarray, dtype: dt.DType, device: Any, requires_grad: builtins.bool
          ) -> Tensor:
    """The float64 ``values`` as a leaf of ``dtype`` on ``device``."""
    return tensor(values, dtype=dtype, device=device, requires_grad=requires_grad)


# ---------------------------------------------------------------- float64 formulas
# ``m`` points; ``denom`` is ``m - 1`` for a symmetric window and ``m`` for a periodic
# one (the symmetric window of ``m + 1`` points without its last). Lengths 0 and 1 are
# handled by the callers (the empty window and ``[1.]``).

def general_cosine_values(m: builtins.int, coeffs: Sequence[builtins.float],
                          denom: builtins.int) -> np.ndarray:
    """``sum_i (-1)^i a_i cos(2 pi i n / denom)``."""
    n = np.arange(m, dtype=np.float64)
    out = np.zeros(m)
    for i, a in enumerate(coeffs):
        out += (-1) ** i * builtins.float(a) * np.cos(2.0 * math.pi * i * n / denom)
    return out


def hamming_values(m: builtins.int, alpha: builtins.float, beta: builtins.float,
                   denom: builtins.int) -> np.ndarray:
    """``alpha - beta cos(2 pi n / denom)`` (torch's ``hamming_window`` takes both)."""
    n = np.arange(m, dtype=np.float64)
    return builtins.float(alpha) - builtins.float(beta) * np.cos(2.0 * math.pi * n / denom)


def bartlett_values(m: builtins.int, denom: builtins.int) -> np.ndarray:
    """The triangle ``1 - |2 n / denom - 1|``."""
    n = np.arange(m, dtype=np.float64)
    return 1.0 - np.abs(2.0 * n / denom - 1.0)


def kaiser_values(m: builtins.int, beta: builtins.float, denom: builtins.int) -> np.ndarray:
    """``I0(beta sqrt(1 - ((n - c) / c)^2)) / I0(beta)`` with ``c = denom / 2``."""
    n = np.arange(m, dtype=np.float64)
    c = denom / 2.0
    inside = np.clip(1.0 - ((n - c) / c) ** 2, 0.0, None)
    return np.i0(builtins.float(beta) * np.sqrt(inside)) / np.i0(builtins.float(beta))


def gaussian_values(m: builtins.int, std: builtins.float, denom: builtins.int) -> np.ndarray:
    """``exp(-(n - denom / 2)^2 / (2 std^2))``."""
    n = np.arange(m, dtype=np.float64)
    return np.exp(-0.5 * ((n - denom / 2.0) / builtins.float(std)) ** 2)


def exponential_values(m: builtins.int, center: builtins.float,
                       tau: builtins.float) -> np.ndarray:
    """``exp(-|n - center| / tau)``."""
    n = np.arange(m, dtype=np.float64)
    return np.exp(-np.abs(n - builtins.float(center)) / builtins.float(tau))


def cosine_values(m: builtins.int, denom: builtins.int) -> np.ndarray:
    """The sine window ``sin(pi (n + 1/2) / denom)`` (``denom`` is ``m`` for a symmetric
    window and ``m + 1`` for a periodic one here)."""
    n = np.arange(m, dtype=np.float64)
    return np.sin(math.pi * (n + 0.5) / denom)


# ---------------------------------------------------------------- torch.*_window

def _top_level(op: str, window_length: Any, periodic: Any, dtype: Any, layout: Any,
               device: Any, requires_grad: builtins.bool, formula: Any) -> Tensor:
    """Checks, the trivial lengths, then ``formula(length, denom)`` placed."""
    length = check_length(op, window_length)
    if not isinstance(periodic, (builtins.bool, np.bool_)):
        raise TypeError(f"{op}: periodic must be a bool, got {type(periodic).__name__}")
    check_layout(op, layout)
    d = window_dtype(op, dtype)
    if length <= 1:
        return place(np.ones(length), d, device, requires_grad)
    values = formula(length, length if periodic else length - 1)
    return place(values, d, device, requires_grad)


def hann_window(window_length: builtins.int, periodic: builtins.bool = True, *,
                dtype: Any = None, layout: Any = None, device: Any = None,
                pin_memory: builtins.bool = False,
                requires_grad: builtins.bool = False) -> Tensor:
    """The Hann window ``1/2 - 1/2 cos(2 pi n / N)`` (``torch.hann_window``; ``N`` is
    the length if ``periodic``, else the length - 1). ``pin_memory`` is accepted and
    does nothing: there is nothing to pin (``Tensor.pin_memory``)."""
    return _top_level("hann_window", window_length, periodic, dtype, layout, device,
                      requires_grad, lambda m, n: hamming_values(m, 0.5, 0.5, n))


def hamming_window(window_length: builtins.int, periodic: builtins.bool = True,
                   alpha: builtins.float = 0.54, beta: builtins.float = 0.46, *,
                   dtype: Any = None, layout: Any = None, device: Any = None,
                   pin_memory: builtins.bool = False,
                   requires_grad: builtins.bool = False) -> Tensor:
    """The Hamming window ``alpha - beta cos(2 pi n / N)`` (``torch.hamming_window``)."""
    return _top_level("hamming_window", window_length, periodic, dtype, layout, device,
                      requires_grad, lambda m, n: hamming_values(m, alpha, beta, n))


def blackman_window(window_length: builtins.int, periodic: builtins.bool = True, *,
                    dtype: Any = None, layout: Any = None, device: Any = None,
                    pin_memory: builtins.bool = False,
                    requires_grad: builtins.bool = False) -> Tensor:
    """The Blackman window ``0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)``."""
    return _top_level("blackman_window", window_length, periodic, dtype, layout, device,
                      requires_grad, lambda m, n: general_cosine_values(m, BLACKMAN, n))


def bartlett_window(window_length: builtins.int, periodic: builtins.bool = True, *,
                    dtype: Any = None, layout: Any = None, device: Any = None,
                    pin_memory: builtins.bool = False,
                    requires_grad: builtins.bool = False) -> Tensor:
    """The triangular window ``1 - |2 n / N - 1|`` (``torch.bartlett_window``)."""
    return _top_level("bartlett_window", window_length, periodic, dtype, layout, device,
                      requires_grad, bartlett_values)


def kaiser_window(window_length: builtins.int, periodic: builtins.bool = True,
                  beta: builtins.float = 12.0, *, dtype: Any = None, layout: Any = None,
                  device: Any = None, pin_memory: builtins.bool = False,
                  requires_grad: builtins.bool = False) -> Tensor:
    """The Kaiser window ``I0(beta sqrt(1 - (2 n / N - 1)^2)) / I0(beta)``
    (``torch.kaiser_window``; I0 is even, so a negative ``beta`` acts as ``|beta|``, as
    in PyTorch's)."""
    return _top_level("kaiser_window", window_length, periodic, dtype, layout, device,
                      requires_grad, lambda m, n: kaiser_values(m, beta, n))


__all__ = ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
           "kaiser_window"]

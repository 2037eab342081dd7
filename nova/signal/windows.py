"""``nv.signal.windows`` (``torch.signal.windows``): SciPy's window functions with
PyTorch's signatures -- the length ``M``, then keywords only: ``sym=True`` (the
symmetric window; ``sym=False`` the periodic one, for spectral analysis), the shape
parameters, and ``dtype`` (float32 or float64, as PyTorch allows), ``layout``,
``device``, ``requires_grad``.

The values come from the float64 formulas of ``nova.tensor.signal_windows``, rounded
once to ``dtype`` (see there). As PyTorch's, a window of length 0 is empty and one of
length 1 is ``[1.]``. One deviation: with ``requires_grad=True`` PyTorch returns a
non-leaf (the formula applied to a ``linspace`` that requires grad); Nova returns a
leaf, whose ``.grad`` a backward pass fills.
"""
from __future__ import annotations

import builtins
from collections.abc import Iterable
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.tensor import signal_windows as sw
from nova.tensor.tensor import Tensor, strided

_FLOATS = (dt.float32, dt.float64)


def _make(op: str, M: Any, sym: Any, dtype: Any, layout: Any, device: Any,
          requires_grad: builtins.bool, formula: Any,
          check_params: Any = None) -> Tensor:
    """PyTorch's checks (length, layout, dtype, then the window's own parameters), the
    empty window, and ``formula(M, denom)`` placed (``denom``: ``M - 1`` if ``sym``,
    else ``M``; the formula gets ``M == 1`` too, as some windows compute it, and then
    ``denom`` is 0 either way: PyTorch's periodic form starts at ``M = 2``)."""
    length = sw.check_length(op, M)
    sw.check_layout(op, layout)
    d = sw.window_dtype(op, dtype, _FLOATS)
    if not isinstance(sym, (builtins.bool, np.bool_)):
        raise TypeError(f"{op}: sym must be a bool, got {type(sym).__name__}")
    if check_params is not None:
        check_params()
    if length == 0:
        return sw.place(np.zeros(0), d, device, requires_grad)
    values = formula(length, length - 1 if sym or length == 1 else length)
    return sw.place(values, d, device, requires_grad)


def _cosine_sum(op: str, M: Any, coeffs: Any, sym: Any, dtype: Any, layout: Any,
                device: Any, requires_grad: builtins.bool) -> Tensor:
    """``general_cosine``'s path (length 1 is ``[1.]`` before the coefficients are
    looked at, as in PyTorch)."""
    def formula(m: builtins.int, denom: builtins.int) -> np.ndarray:
        if m == 1:
            return np.ones(1)
        if isinstance(coeffs, (str, bytes)) or not isinstance(coeffs, Iterable):
            raise TypeError(f"{op}: coefficients a must be a list or tuple of floats, got "
                            f"{type(coeffs).__name__}")
        a = [builtins.float(c) for c in coeffs]
        if not a:
            raise ValueError(f"{op}: coefficients a cannot be empty")
        return sw.general_cosine_values(m, a, denom)

    return _make(op, M, sym, dtype, layout, device, requires_grad, formula)


def general_cosine(M: builtins.int, *, a: Iterable, sym: builtins.bool = True,
                   dtype: Any = None, layout: Any = strided, device: Any = None,
                   requires_grad: builtins.bool = False) -> Tensor:
    """``w_n = sum_i (-1)^i a_i cos(2 pi i n / (M - 1))`` (``M`` for ``sym=False``)."""
    return _cosine_sum("general_cosine", M, a, sym, dtype, layout, device, requires_grad)


def general_hamming(M: builtins.int, *, alpha: builtins.float = 0.54,
                    sym: builtins.bool = True, dtype: Any = None, layout: Any = strided,
                    device: Any = None, requires_grad: builtins.bool = False) -> Tensor:
    """``w_n = alpha - (1 - alpha) cos(2 pi n / (M - 1))``."""
    return _cosine_sum("general_hamming", M, [alpha, 1.0 - alpha], sym, dtype, layout,
                       device, requires_grad)


def hamming(M: builtins.int, *, sym: builtins.bool = True, dtype: Any = None,
            layout: Any = strided, device: Any = None,
            requires_grad: builtins.bool = False) -> Tensor:
    """``general_hamming`` with ``alpha = 0.54``."""
    return _cosine_sum("hamming", M, [0.54, 0.46], sym, dtype, layout, device,
                       requires_grad)


def hann(M: builtins.int, *, sym: builtins.bool = True, dtype: Any = None,
         layout: Any = strided, device: Any = None,
         requires_grad: builtins.bool = False) -> Tensor:
    """``w_n = sin^2(pi n / (M - 1))``: ``general_hamming`` with ``alpha = 0.5``."""
    return _cosine_sum("hann", M, [0.5, 0.5], sym, dtype, layout, device, requires_grad)


def blackman(M: builtins.int, *, sym: builtins.bool = True, dtype: Any = None,
             layout: Any = strided, device: Any = None,
             requires_grad: builtins.bool = False) -> Tensor:
    """``general_cosine`` with ``a = [0.42, 0.5, 0.08]``."""
    return _cosine_sum("blackman", M, sw.BLACKMAN, sym, dtype, layout, device,
                       requires_grad)


def nuttall(M: builtins.int, *, sym: builtins.bool = True, dtype: Any = None,
            layout: Any = strided, device: Any = None,
            requires_grad: builtins.bool = False) -> Tensor:
    """Nuttall's minimum 4-term Blackman-Harris window (``general_cosine`` with
    PyTorch's coefficients, which are SciPy's)."""
    return _cosine_sum("nuttall", M, sw.NUTTALL, sym, dtype, layout, device, requires_grad)


def bartlett(M: builtins.int, *, sym: builtins.bool = True, dtype: Any = None,
             layout: Any = strided, device: Any = None,
             requires_grad: builtins.bool = False) -> Tensor:
    """The triangle ``w_n = 1 - |2 n / (M - 1) - 1|`` (``[1.]`` for ``M = 1``)."""
    def formula(m: builtins.int, denom: builtins.int) -> np.ndarray:
        return np.ones(1) if m == 1 else sw.bartlett_values(m, denom)

    return _make("bartlett", M, sym, dtype, layout, device, requires_grad, formula)


def kaiser(M: builtins.int, *, beta: builtins.float = 12.0, sym: builtins.bool = True,
           dtype: Any = None, layout: Any = strided, device: Any = None,
           requires_grad: builtins.bool = False) -> Tensor:
    """``w_n = I0(beta sqrt(1 - (2 n / (M - 1) - 1)^2)) / I0(beta)``; ``beta >= 0``."""
    def check() -> None:
        if beta < 0:
            raise ValueError(f"kaiser: beta must be non-negative, got: {beta} instead.")

    def formula(m: builtins.int, denom: builtins.int) -> np.ndarray:
        return np.ones(1) if m == 1 else sw.kaiser_values(m, beta, denom)

    return _make("kaiser", M, sym, dtype, layout, device, requires_grad, formula, check)


def gaussian(M: builtins.int, *, std: builtins.float = 1.0, sym: builtins.bool = True,
             dtype: Any = None, layout: Any = strided, device: Any = None,
             requires_grad: builtins.bool = False) -> Tensor:
    """``w_n = exp(-(n - (M - 1) / 2)^2 / (2 std^2))`` (centred on ``M / 2`` for
    ``sym=False``); ``std > 0``."""
    def check() -> None:
        if std <= 0:
            raise ValueError(f"gaussian: standard deviation must be positive, got: {std} "
                             "instead.")

    return _make("gaussian", M, sym, dtype, layout, device, requires_grad,
                 lambda m, denom: sw.gaussian_values(m, std, denom), check)


def exponential(M: builtins.int, *, center: builtins.float | None = None,
                tau: builtins.float = 1.0, sym: builtins.bool = True, dtype: Any = None,
                layout: Any = strided, device: Any = None,
                requires_grad: builtins.bool = False) -> Tensor:
    """The Poisson window ``w_n = exp(-|n - center| / tau)``; ``center`` defaults to the
    middle, ``(M - 1) / 2`` (``M / 2`` for ``sym=False``), and may be given only for
    ``sym=False``; ``tau > 0``."""
    def check() -> None:
        if tau <= 0:
            raise ValueError(f"exponential: tau must be positive, got: {tau} instead.")
        if sym and center is not None:
            raise ValueError("exponential: center must be None for symmetric windows")

    def formula(m: builtins.int, denom: builtins.int) -> np.ndarray:
        c = denom / 2.0 if center is None else center
        return sw.exponential_values(m, c, tau)

    return _make("exponential", M, sym, dtype, layout, device, requires_grad, formula,
                 check)


def cosine(M: builtins.int, *, sym: builtins.bool = True, dtype: Any = None,
           layout: Any = strided, device: Any = None,
           requires_grad: builtins.bool = False) -> Tensor:
    """The sine window ``w_n = sin(pi (n + 1/2) / M)`` (``M + 1`` for ``sym=False``)."""
    return _make("cosine", M, sym, dtype, layout, device, requires_grad,
                 lambda m, denom: sw.cosine_values(m, m if denom == m - 1 else m + 1))


__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
           "general_hamming", "hamming", "hann", "kaiser", "nuttall"]

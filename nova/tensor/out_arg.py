"""PyTorch's ``out=`` argument for the functions of ``nv``, ``nv.linalg``,
``nv.special``, ``nv.fft`` and ``nv.nn.functional`` that take it in PyTorch
(``torch.add(a, b, out=c)``, ``torch.max(x, 1, out=(values, indices))``,
``torch.arange(5, out=t)``).

The function computes its result as usual and the result is written into ``out`` the
way an in-place op writes (``Tensor._assign``: through views, bumping the version), after
PyTorch's checks: no autograd through ``out=``, a result type ``out``'s dtype can hold
(``can_cast``), and ``out`` resized to the result's shape when they differ (with
PyTorch's warning unless ``out`` was empty). Factories without ``dtype=`` take
``out``'s dtype and device, as PyTorch's do. One wrapper installed over the exported
functions (``install``), so no op carries an ``out`` parameter of its own. A complex
result goes into a complex ``out`` of its shape (``_write_complex``).
"""
from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable
from typing import Any

from nova.core import dtypes as dt
from nova.tensor import grad_mode as _grad_mode
from nova.tensor.tensor import Tensor

# torch.* functions that take ``out=`` (those Nova has are wrapped; the list is
# PyTorch's, so a function Nova adds later gets it by being exported).
TORCH_OUT = frozenset("""
abs absolute acos acosh add addbmm addcdiv addcmul addmm addmv addr all amax amin aminmax
angle any arange arccos arccosh arcsin arcsinh arctan arctan2 arctanh argmax argmin argsort
asin asinh atan atan2 atanh baddbmm bernoulli bitwise_and bitwise_left_shift bitwise_not
bitwise_or bitwise_right_shift bitwise_xor bmm bucketize cat ceil chain_matmul cholesky
cholesky_inverse cholesky_solve clamp clamp_max clamp_min clip column_stack complex concat
concatenate conj_physical copysign cos cosh cross cummax cummin cumprod cumsum deg2rad diag
diff digamma div divide dot dstack empty eq erf erfc erfinv exp exp2 expm1 eye fix
float_power floor floor_divide fmax fmin fmod frac frexp full gather gcd ge ger greater
greater_equal gt heaviside histc histogram hstack hypot i0 igamma igammac index_add
index_copy index_reduce index_select inner inverse isin isneginf isposinf kron kthvalue lcm
ldexp le lerp less less_equal lgamma linspace log log10 log1p log2 logaddexp logaddexp2
logcumsumexp logical_and logical_not logical_or logical_xor logit logspace logsumexp lt
lu_solve lu_unpack masked_select matmul matrix_power max maximum mean median min minimum mm
mode msort mul multinomial multiply mv mvlgamma nan_to_num nanmean nanmedian nanquantile
nansum narrow_copy ne neg negative nextafter nonzero norm normal not_equal ones outer polar
polygamma pow prod qr quantile rad2deg rand randint randn randperm range reciprocal
remainder renorm round row_stack rsqrt searchsorted sgn sigmoid sign signbit sin sinc sinh
sort sqrt square stack std std_mean sub subtract sum svd take take_along_dim tan tanh
tensordot topk trapezoid triangular_solve tril triu true_divide trunc var var_mean vdot
vstack where xlogy zeros
""".split())

TORCH_LINALG_OUT = frozenset("""
cholesky cholesky_ex cond cross det eig eigh eigvals eigvalsh householder_product inv inv_ex
ldl_factor ldl_factor_ex ldl_solve lstsq lu lu_factor lu_factor_ex lu_solve matmul
matrix_exp matrix_norm matrix_power matrix_rank multi_dot norm pinv qr slogdet solve
solve_ex solve_triangular svd svdvals tensorinv tensorsolve vander vecdot vector_norm
""".split())

TORCH_SPECIAL_OUT = frozenset("""
airy_ai bessel_j0 bessel_j1 bessel_y0 bessel_y1 chebyshev_polynomial_t chebyshev_polynomial_u
chebyshev_polynomial_v chebyshev_polynomial_w digamma entr erf erfc erfcx erfinv exp2 expit
expm1 gammainc gammaincc gammaln hermite_polynomial_h hermite_polynomial_he i0 i0e i1 i1e
laguerre_polynomial_l legendre_polynomial_p log1p log_ndtr logit logsumexp
modified_bessel_i0 modified_bessel_i1 modified_bessel_k0 modified_bessel_k1 multigammaln
ndtr ndtri polygamma psi round scaled_modified_bessel_k0 scaled_modified_bessel_k1
shifted_chebyshev_polynomial_t shifted_chebyshev_polynomial_u shifted_chebyshev_polynomial_v
shifted_chebyshev_polynomial_w sinc spherical_bessel_j0 xlog1py xlogy zeta
""".split())

TORCH_FFT_OUT = frozenset("""
fft fft2 fftfreq fftn hfft hfft2 hfftn ifft ifft2 ifftn ihfft ihfft2 ihfftn irfft irfft2
irfftn rfft rfft2 rfftfreq rfftn
""".split())

TORCH_NN_FUNCTIONAL_OUT = frozenset({"normalize"})

# Factories: without ``dtype=``, the result takes ``out``'s dtype and device.
FACTORIES = frozenset("arange empty eye full linspace logspace ones rand randint randn "
                      "randperm range zeros normal fftfreq rfftfreq".split())


def write_out(op: str, result: Any, out: Any) -> Any:
    """``result`` written into ``out`` (a tensor, or a tuple of them for a tuple
    result); returns ``out``."""
    if isinstance(result, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError(f"{op}(): argument 'out' must be a tuple of {len(result)} "
                            f"tensors, got {type(out).__name__}"
                            + (f" of length {len(out)}" if isinstance(out, (tuple, list))
                               else ""))
        written = [write_out(op, r, o) for r, o in zip(result, out)]
        return type(result)(*written) if hasattr(result, "_fields") else tuple(written)
    if _is_complex(out) or _is_complex(result):
        return _write_complex(op, result, out)
    if not isinstance(out, Tensor):
        raise TypeError(f"{op}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if not isinstance(result, Tensor):
        raise TypeError(f"{op}(): out= is not supported: the result is a "
                        f"{type(result).__name__}")
    if _grad_mode.STATE.enabled and (result.requires_grad or out.requires_grad):
        raise RuntimeError(f"{op}(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    if not dt.can_cast(result.dtype, out.dtype):
        raise RuntimeError(f"{op}(): result type {result.dtype.name} can't be cast to the "
                           f"desired output type {out.dtype.name}")
    value = result if result.dtype == out.dtype else result.to(out.dtype)
    if value.shape != out.shape:
        _resize(op, out, value)
    else:
        out._assign(value, f"{op}(out=)")
    return out


def _is_complex(v: Any) -> bool:
    from nova.tensor.complex import ComplexTensor
    return isinstance(v, ComplexTensor)


def _write_complex(op: str, result: Any, out: Any) -> Any:
    """``write_out`` for a complex result or ``out`` (a ``ComplexTensor``: its parts are
    written, ``ComplexTensor.copy_``). A complex ``out`` holds any real or complex result
    of its shape (it is not resized); a real ``out`` cannot hold a complex result."""
    if not _is_complex(out):
        if isinstance(out, Tensor):
            raise RuntimeError(f"{op}(): result type {result.dtype.name} can't be cast to "
                               f"the desired output type {out.dtype.name}")
        raise TypeError(f"{op}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if not isinstance(result, Tensor) and not _is_complex(result):
        raise TypeError(f"{op}(): out= is not supported: the result is a "
                        f"{type(result).__name__}")
    if _grad_mode.STATE.enabled and (result.requires_grad or out.requires_grad):
        raise RuntimeError(f"{op}(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    if tuple(result.shape) != tuple(out.shape):
        raise RuntimeError(f"{op}(): out= of shape {tuple(out.shape)} cannot hold the result "
                           f"of shape {tuple(result.shape)} (a complex out= is not resized); "
                           "give an out= of the result's shape")
    out.copy_(result)
    return out


def _resize(op: str, out: Tensor, value: Tensor) -> None:
    """Rebind ``out`` to a value of another shape (PyTorch resizes ``out``; it warns
    unless ``out`` held no elements). A view, or a tensor with live views, cannot be
    resized: what they share would no longer be one storage."""
    from nova.tensor.tensor import live_views
    if out._view is not None or live_views(out):
        raise RuntimeError(f"{op}(): out= of shape {tuple(out.shape)} must be resized to "
                           f"{tuple(value.shape)}, but it is a view or has views; give an "
                           "out= of the result's shape")
    if out.numel() != 0:
        warnings.warn(f"{op}(): an output with one or more elements was resized since it had "
                      f"shape {list(out.shape)}, which does not match the required output "
                      f"shape {list(value.shape)}. This behavior is deprecated, and in a "
                      "future PyTorch release outputs will not be resized unless they have "
                      "zero elements. You can explicitly reuse an out tensor t by resizing "
                      "it, inplace, to zero elements with t.resize_(0).", UserWarning,
                      stacklevel=4)
    out._restride(lambda _: value, lambda v: v, f"{op}(out=)")


def with_out(fn: Callable, name: str) -> Callable:
    """``fn`` taking ``out=`` (module docstring)."""
    factory = name in FACTORIES

    @functools.wraps(fn)
    def call(*args: Any, out: Any = None, **kwargs: Any) -> Any:
        if out is None:
            return fn(*args, **kwargs)
        if factory and isinstance(out, Tensor):
            kwargs.setdefault("dtype", out.dtype)
            if out.device is not None and "device" not in kwargs:
                kwargs["device"] = out.device
        return write_out(name, fn(*args, **kwargs), out)
    call.__nova_out__ = True
    call.__signature__ = _signature(fn)
    return call


def _signature(fn: Callable) -> inspect.Signature | None:
    """``fn``'s signature with ``out=None`` (keyword-only) added, so that
    ``inspect.signature`` shows every keyword the wrapper takes (None: ``fn`` has none)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    if "out" in sig.parameters:
        return sig
    tail = [p for p in params if p.kind is p.VAR_KEYWORD]
    head = [p for p in params if p.kind is not p.VAR_KEYWORD]
    out = inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None)
    return sig.replace(parameters=head + [out] + tail)


_WRAPPED: dict[int, Callable] = {}     # id(function) -> its wrapper, shared by its names


def install(namespace: dict[str, Any], names: frozenset[str]) -> None:
    """Wrap every function of ``namespace`` named in ``names`` (once). A function
    exported under several names (``nv.lgamma`` is ``nv.special.gammaln``) gets one
    wrapper, so the aliases stay the same object."""
    for name in names:
        fn = namespace.get(name)
        if callable(fn) and not isinstance(fn, type) and not getattr(fn, "__nova_out__", False):
            if id(fn) not in _WRAPPED:
                wrapper = with_out(fn, getattr(fn, "__name__", name))
                # pickled by reference to where it is exported (the wrapped function's
                # own module holds the unwrapped one, which pickle would refuse)
                wrapper.__module__ = namespace.get("__name__", wrapper.__module__)
                wrapper.__qualname__ = name
                _WRAPPED[id(fn)] = wrapper
            namespace[name] = _WRAPPED[id(fn)]

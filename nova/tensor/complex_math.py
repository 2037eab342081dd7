"""Complex transcendental functions, products and norms, as real ops on the parts.

``nova.tensor.complex`` has the arithmetic and the first functions of ``z``; this module
adds the rest of what ``torch`` computes for complex tensors: the hyperbolic functions,
``tan``, the inverse trigonometric and hyperbolic functions (principal values, as
numpy's and PyTorch's), ``log1p``/``expm1``/``log2``/``log10``/``rsqrt``/``sigmoid``,
the product reduction, ``var``/``std`` (real, as PyTorch's), ``dot``/``vdot``/
``inner``/``outer`` and the vector norms (real). Each is written so that it neither
overflows nor cancels where the function itself is well scaled: ``tanh`` of a large real
part is its limit, not ``inf / inf``; ``log1p``, ``expm1`` and ``asinh`` of small
arguments keep their relative accuracy; ``sinh``/``cosh`` keep C99's exact zeros on the
axes (``nova.tensor.complex._axis_zero``). Values on a branch cut follow the formulas'
signed-zero behaviour and may differ from C99's there. Infinite arguments take C99's
limits (``atanh(inf) = 0 + i pi/2``, ``acosh(-inf) = inf + i pi``, ``tanh(inf + i inf)
= 1 + 0i``), not the NaN that ``inf - inf`` or ``inf * 0`` in the formula would give;
NaN arguments give NaN parts except where C99 keeps an exact zero.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from nova.core import dtypes as dt
from nova.tensor import creation as _creation
from nova.tensor import elementary as _elementary
from nova.tensor import ops as _ops
from nova.tensor import special as _special
from nova.core.shapes import normalize_dim
from nova.tensor.complex import (
    ComplexTensor, _as_complex, _axis_zero, _cast_for, _infinite_part, cat, div, exp, log,
    mul, reciprocal, sqrt, where,
)
from nova.tensor.complex import abs as _cabs
from nova.tensor.tensor import Tensor

# Past this real part, float32's tanh is its limit +-1 (float64's past ~19): the limit
# form is taken from here on, which keeps sinh(2x) and cosh(2x) finite.
_TANH_SATURATION = 20.0
# From this modulus on, asinh is log(2w) (the next term, 1 / (4 w^2), is below 1e-18).
_ASINH_LARGE = 1e9


def _rotate_in(z: ComplexTensor) -> ComplexTensor:
    """``i z``."""
    return ComplexTensor(-z._im, z._re)


def _rotate_out(z: ComplexTensor) -> ComplexTensor:
    """``-i z``: ``f(z) = -i g(i z)`` relates tan/tanh, asin/asinh and atan/atanh."""
    return ComplexTensor(z._im, -z._re)


def sinh(z: Any) -> ComplexTensor:
    z = _as_complex("sinh", z)
    sh, ch = _elementary.sinh(z._re), _elementary.cosh(z._re)
    re = _axis_zero(sh * _ops.cos(z._im), z._re, _ops.cos(z._im))
    return ComplexTensor(_infinite_part(re, z._re, z._im),
                         _axis_zero(ch * _ops.sin(z._im), z._im, ch))


def cosh(z: Any) -> ComplexTensor:
    z = _as_complex("cosh", z)
    sh, ch = _elementary.sinh(z._re), _elementary.cosh(z._re)
    x, y = z._re, z._im
    im = _axis_zero(_axis_zero(sh * _ops.sin(y), y, sh), x, y)
    return ComplexTensor(_infinite_part(ch * _ops.cos(y), x, y), im)


def tanh(z: Any) -> ComplexTensor:
    """``(sinh 2x + i sin 2y) / (cosh 2x + cos 2y)``; past ``_TANH_SATURATION`` the
    limit ``sign(x) + 2i sin(2y) e^(-2|x|)`` (the clamped real part keeps the unused
    branch, and its gradient, finite)."""
    z = _as_complex("tanh", z)
    x, y = z._re, z._im
    far = _ops.abs(x) > _TANH_SATURATION
    xc = _ops.clamp(x, -_TANH_SATURATION, _TANH_SATURATION)
    den = _elementary.cosh(xc * 2.0) + _ops.cos(y * 2.0)
    near_re = _elementary.sinh(xc * 2.0) / den
    near_im = _ops.sin(y * 2.0) / den
    far_re = _special.copysign(_creation.ones_like(x), x)
    far_im = _ops.sin(y * 2.0) * _ops.exp(_ops.abs(x) * -2.0) * 2.0
    # C99: an infinite x gives 1 + 0i whatever y is (sin 2y may be NaN); on the axes
    # the exact zeros stay (tanh(0 + i inf) = 0 + NaN i, tanh(NaN + 0i) = NaN + 0i).
    far_im = _ops.where(_ops.isinf(x), _special.copysign(_creation.zeros_like(y), y), far_im)
    near_re, near_im = _axis_zero(near_re, x, den), _axis_zero(near_im, y, den)
    return ComplexTensor(_ops.where(far, far_re, near_re), _ops.where(far, far_im, near_im))


def tan(z: Any) -> ComplexTensor:
    return _rotate_out(tanh(_rotate_in(_as_complex("tan", z))))


def sigmoid(z: Any) -> ComplexTensor:
    return reciprocal(exp(_as_complex("sigmoid", z) * -1.0) + 1.0)


def rsqrt(z: Any) -> ComplexTensor:
    return reciprocal(sqrt(_as_complex("rsqrt", z)))


def _scaled_log(name: str, base: float) -> Callable[[Any], ComplexTensor]:
    def fn(z: Any) -> ComplexTensor:
        w = log(_as_complex(name, z))
        return ComplexTensor(w._re * (1.0 / math.log(base)), w._im * (1.0 / math.log(base)))
    fn.__name__ = name
    fn.__doc__ = f"``log(z) / log({base:g})``."
    return fn


log2 = _scaled_log("log2", 2.0)
log10 = _scaled_log("log10", 10.0)


def log1p(z: Any) -> ComplexTensor:
    """``log(1 + z)``: near 0 the modulus' log is ``log1p(2x + x^2 + y^2) / 2``, exact
    to the last bits where ``1 + z`` would have rounded ``z`` away."""
    z = _as_complex("log1p", z)
    x, y = z._re, z._im
    small = _cabs(z) < 0.5
    xs, ys = _ops.where(small, x, 0.0), _ops.where(small, y, 0.0)
    near = _ops.log1p(xs * (xs + 2.0) + ys * ys) * 0.5
    far = _ops.log(_elementary.hypot(x + 1.0, y))
    return ComplexTensor(_ops.where(small, near, far), _elementary.atan2(y, x + 1.0))


def expm1(z: Any) -> ComplexTensor:
    """``exp(z) - 1`` as ``expm1(x) cos y - 2 sin^2(y/2) + i e^x sin y`` (no cancellation
    near 0)."""
    z = _as_complex("expm1", z)
    x, y = z._re, z._im
    half = _ops.sin(y * 0.5)
    return ComplexTensor(_ops.expm1(x) * _ops.cos(y) - half * half * 2.0,
                         _ops.exp(x) * _ops.sin(y))


def asinh(z: Any) -> ComplexTensor:
    """``log(w + sqrt(w^2 + 1))`` for ``w = +-z`` with a nonnegative real part (asinh is
    odd; the sign bit decides, so ``-0 + 3i`` takes C99's side of the cut), written
    ``log1p(w + w^2 / (sqrt(w^2 + 1) + 1))`` so small ``w`` keeps its relative
    accuracy, and ``log(2w)`` past ``_ASINH_LARGE``."""
    z = _as_complex("asinh", z)
    sign = _special.copysign(_creation.ones_like(z._re), z._re)   # (-0 flips: C99's cut)
    w = ComplexTensor(z._re * sign, z._im * sign)
    # Past |w| = 1e9, w^2 would overflow float32 soon after; there asinh(w) is
    # log(2w) to far below an ulp. Each branch sees safe inputs (finite gradients).
    big = _cabs(w) > _ASINH_LARGE
    small_w = ComplexTensor(_ops.where(big, 0.0, w._re), _ops.where(big, 0.0, w._im))
    w2 = mul(small_w, small_w)
    near = log1p(small_w + div(w2, sqrt(w2 + 1.0) + 1.0))
    far = log(ComplexTensor(_ops.where(big, w._re, 1.0), _ops.where(big, w._im, 0.0)))
    re = _ops.where(big, far._re + math.log(2.0), near._re)
    im = _ops.where(big, far._im, near._im) * sign
    # C99: asinh(NaN +- 0i) = NaN +- 0i (and so asin(+-0 + NaN i) keeps its zero)
    im = _ops.where(_ops.logical_and(_ops.isnan(z._re), _ops.eq(z._im, 0)), z._im, im)
    return ComplexTensor(re * sign, im)


def asin(z: Any) -> ComplexTensor:
    return _rotate_out(asinh(_rotate_in(_as_complex("asin", z))))


def acos(z: Any) -> ComplexTensor:
    w = asin(_as_complex("acos", z))
    return ComplexTensor(math.pi / 2 - w._re, -w._im)


def _split_large(z: ComplexTensor, limit: float
                 ) -> tuple[Tensor, ComplexTensor, ComplexTensor]:
    """``(big, near, far)``: where ``max(|x|, |y|) > limit`` or a part is infinite (a
    NaN beside it included), and ``z`` with the other side's points replaced by safe
    values (0 for the near branch, 2 * limit for the far one), so neither branch, nor
    its gradient, meets what it was not written for."""
    big = _ops.logical_or(_ops.maximum(_ops.abs(z._re), _ops.abs(z._im)) > limit,
                          _ops.logical_or(_ops.isinf(z._re), _ops.isinf(z._im)))
    near = ComplexTensor(_ops.where(big, 0.0, z._re), _ops.where(big, 0.0, z._im))
    far = ComplexTensor(_ops.where(big, z._re, 2.0 * limit), _ops.where(big, z._im, 0.0))
    return big, near, far


def acosh(z: Any) -> ComplexTensor:
    """The principal ``log(z + sqrt(z + 1) sqrt(z - 1))``; past ``_ASINH_LARGE``,
    ``log(2z)`` (the product of the roots tends to ``z``; the next term, ``-1 / (4z^2)``,
    is below float64's rounding), which also gives C99's limits at infinity
    (``acosh(-inf + 0i) = inf + i pi``) where the formula's ``inf * 0`` was NaN."""
    z = _as_complex("acosh", z)
    big, near, far = _split_large(z, _ASINH_LARGE)
    near_w = log(near + mul(sqrt(near + 1.0), sqrt(near - 1.0)))
    far_w = log(far)
    w = where(big, ComplexTensor(far_w._re + math.log(2.0), far_w._im), near_w)
    # C99: acosh(+-0 + NaN i) = NaN + i pi/2
    axis = _ops.logical_and(_ops.eq(z._re, 0), _ops.isnan(z._im))
    return ComplexTensor(w._re, _ops.where(axis, math.pi / 2, w._im))


def atanh(z: Any) -> ComplexTensor:
    """``(log1p(z) - log1p(-z)) / 2``; past ``_ASINH_LARGE``, ``1/z + i pi/2
    sign(y)`` (the next term, ``1 / (3 z^3)``, is below float64's rounding), so an
    infinite argument gives C99's ``+-0 + i pi/2`` instead of ``inf - inf``."""
    z = _as_complex("atanh", z)
    big, near, far = _split_large(z, _ASINH_LARGE)
    w = log1p(near) - log1p(near * -1.0)
    # 1/z as (x/m) / m / ((x/m)^2 + (y/m)^2), m = max(|x|, |y|): no overflow; at an
    # infinite m its real part is a zero with x's sign
    m = _ops.maximum(_ops.abs(far._re), _ops.abs(far._im))
    finite = _elementary.isfinite(m)
    ms = _ops.where(finite, m, 1.0)
    xs, ys = _ops.where(finite, far._re, 0.0) / ms, _ops.where(finite, far._im, 0.0) / ms
    scale = ms * (xs * xs + ys * ys)
    zero = _special.copysign(_creation.zeros_like(far._re), far._re)
    inv_re = _ops.where(finite, xs / scale, zero)
    inv_im = _ops.where(finite, ys / scale * -1.0, _creation.zeros_like(far._im))
    half_pi = _special.copysign(_creation.full_like(far._im, math.pi / 2), far._im)
    far_im = _ops.where(_ops.isnan(far._im), far._im, half_pi + inv_im)   # (inf + NaN i)
    w = where(big, ComplexTensor(inv_re, far_im), ComplexTensor(w._re * 0.5, w._im * 0.5))
    # C99: atanh(+-0 + NaN i) = +-0 + NaN i (and so atan(NaN +- 0i) keeps its zero)
    axis = _ops.logical_and(_ops.eq(z._re, 0), _ops.isnan(z._im))
    return ComplexTensor(_ops.where(axis, z._re, w._re), w._im)


def atan(z: Any) -> ComplexTensor:
    return _rotate_out(atanh(_rotate_in(_as_complex("atan", z))))


# ---------------------------------------------------------------- reductions

def prod(z: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> ComplexTensor:
    """The product over ``dim`` (all elements for None) as a tree of complex products:
    halves multiplied pairwise (an odd one out padded with 1) until one is left."""
    z = _cast_for("prod", _as_complex("prod", z), dtype)
    if dim is None:
        w, axis = z.reshape(-1), 0
    else:
        axis = normalize_dim("prod", dim, z.ndim, z.shape)
        w = z.movedim(axis, -1) if z.ndim else z.reshape(1)
    while w.shape[-1] > 1:
        n = w.shape[-1]
        if n % 2:
            one = ComplexTensor(_creation.ones_like(w._re[..., :1]),
                                _creation.zeros_like(w._im[..., :1]))
            w, n = cat([w, one], -1), n + 1
        w = mul(w[..., : n // 2], w[..., n // 2:])
    if w.shape[-1] == 0:
        w = ComplexTensor(_creation.ones(w.shape[:-1] + (1,), dtype=w._re.dtype),
                          _creation.zeros(w.shape[:-1] + (1,), dtype=w._re.dtype))
    out = w[..., 0]
    if dim is None:
        return out
    if keepdim:
        return out.unsqueeze(axis)
    return out


def var(z: Any, *args: Any, **kwargs: Any) -> Tensor:
    """The real variance ``E|z - E z|^2``: the real part's variance plus the imaginary
    part's, with ``var``'s arguments (``dim``, ``correction``/``unbiased``, ``keepdim``)."""
    z = _as_complex("var", z)
    return z._re.var(*args, **kwargs) + z._im.var(*args, **kwargs)


def std(z: Any, *args: Any, **kwargs: Any) -> Tensor:
    return _ops.sqrt(var(_as_complex("std", z), *args, **kwargs))


# ---------------------------------------------------------------- products and norms

def _vectors(op: str, a: Any, b: Any) -> tuple[ComplexTensor, ComplexTensor]:
    a, b = _as_complex(op, a), _as_complex(op, b)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"{op}: expected 1-D tensors, got shapes {list(a.shape)} and "
                         f"{list(b.shape)}")
    if a.shape != b.shape and op != "outer":
        raise ValueError(f"{op}: 1-D tensors must have the same size, got {a.shape[0]} "
                         f"and {b.shape[0]}")
    return a, b


def dot(a: Any, b: Any) -> ComplexTensor:
    """``sum(a * b)``, no conjugate (``torch.dot``)."""
    a, b = _vectors("dot", a, b)
    return mul(a, b).sum()


def vdot(a: Any, b: Any) -> ComplexTensor:
    """``sum(conj(a) * b)`` (``torch.vdot``)."""
    a, b = _vectors("vdot", a, b)
    return mul(ComplexTensor(a._re, -a._im), b).sum()


def outer(a: Any, b: Any) -> ComplexTensor:
    a, b = _vectors("outer", a, b)
    return mul(a.reshape(-1, 1), b.reshape(1, -1))


def inner(a: Any, b: Any) -> ComplexTensor:
    """The sum of products over the last dims, no conjugate (``torch.inner``)."""
    from nova.tensor.complex_creation import _part_products
    from nova.tensor.products import inner as real_inner
    return _part_products(lambda parts: real_inner(parts[0], parts[1]), [a, b])


def vector_norm(z: Any, ord: Any = 2, dim: Any = None, keepdim: bool = False, *,
                dtype: Any = None) -> Tensor:
    """The vector norm of the moduli ``|z|`` (real, as ``torch.linalg.vector_norm``)."""
    from nova.tensor.numeric import vector_norm as real_norm
    z = _as_complex("vector_norm", z)
    if dtype is not None:
        target = dt.get_complex_dtype(dtype)
        if target is None:
            raise RuntimeError(f"vector_norm: dtype must be complex for a {z.dtype.name} "
                               f"input, got {dtype}")
        z = z.to(target)
    return real_norm(_cabs(z), ord, dim, keepdim)


def norm(z: Any, p: Any = "fro", dim: Any = None, keepdim: bool = False,
         dtype: Any = None) -> Tensor:
    """``torch.norm`` of a complex tensor: the vector norms of ``|z|`` (``"fro"`` over
    at most two dims is the 2-norm); the spectral and nuclear matrix norms need a
    complex SVD, which Nova does not have."""
    if isinstance(dim, int) and not isinstance(dim, bool):
        dim = (dim,)
    if isinstance(p, str) and not (p == "fro" and (dim is None or len(dim) <= 2)):
        raise TypeError(f"norm: p={p!r} is not supported for complex tensors (it needs a "
                        "complex SVD); the vector norms and 'fro' are")
    return vector_norm(z, 2 if p in (None, "fro") else p, dim, keepdim, dtype=dtype)


def vecdot(x: Any, y: Any, *, dim: int = -1) -> ComplexTensor:
    """``sum(conj(x) * y, dim)`` over broadcast operands (``torch.linalg.vecdot``)."""
    x, y = _as_complex("vecdot", x), _as_complex("vecdot", y)
    return mul(ComplexTensor(x._re, -x._im), y).sum(dim)


def linalg_norm(z: Any, ord: Any = None, dim: Any = None, keepdim: bool = False, *,
                dtype: Any = None) -> Tensor:
    """``torch.linalg.norm`` of a complex tensor: ``ord=None`` is the 2-norm of all
    elements (or of ``dim``), a number a vector norm over one dim; matrix orders other
    than ``'fro'`` need a complex SVD and are refused."""
    z = _as_complex("linalg.norm", z)
    if isinstance(ord, str):
        if ord != "fro":
            raise TypeError(f"linalg.norm: ord={ord!r} is not supported for complex tensors "
                            "(it needs a complex SVD); 'fro' and the vector norms are")
        return vector_norm(z, 2, (-2, -1) if dim is None else dim, keepdim, dtype=dtype)
    if ord is None:
        return vector_norm(z, 2, dim, keepdim, dtype=dtype)
    if dim is None and z.ndim != 1 or (isinstance(dim, (tuple, list)) and len(dim) == 2):
        raise TypeError(f"linalg.norm: ord={ord!r} over a matrix is not supported for "
                        "complex tensors (it needs a complex SVD); pass a single dim")
    return vector_norm(z, ord, dim, keepdim, dtype=dtype)


# ``z.<name>()`` and ``nv.<name>(z)``: ``complex_creation`` installs these as well.
METHODS: dict[str, Callable] = {
    "sinh": sinh, "cosh": cosh, "tanh": tanh, "tan": tan, "sigmoid": sigmoid,
    "rsqrt": rsqrt, "log2": log2, "log10": log10, "log1p": log1p, "expm1": expm1,
    "asinh": asinh, "arcsinh": asinh, "asin": asin, "arcsin": asin, "acos": acos,
    "arccos": acos, "acosh": acosh, "arccosh": acosh, "atanh": atanh, "arctanh": atanh,
    "atan": atan, "arctan": atan, "prod": prod, "var": var, "std": std, "dot": dot,
    "vdot": vdot, "outer": outer, "ger": outer, "inner": inner, "norm": norm,
}
for _name, _fn in METHODS.items():
    setattr(ComplexTensor, _name, _fn)

# ``nv.linalg.<name>(z)``.
LINALG_FUNCTIONS: dict[str, Callable] = {"vector_norm": vector_norm, "norm": linalg_norm,
                                         "vecdot": vecdot}

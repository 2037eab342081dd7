"""Products and distances with PyTorch's names: ``tensordot``, ``inner``, ``vdot``,
``addr``, ``addbmm``, ``matrix_power``, ``cdist``, ``dist``, ``renorm``, ``diag_embed``
and ``diagflat``.

Each is written over ``matmul`` and elementwise ops, so the compiler fuses them like
any other graph: a contraction is a transpose and a reshape around one matmul, a
distance a broadcast difference reduced by ``vector_norm`` (whose gradient is 0, as
PyTorch's, where two points coincide).
"""
from __future__ import annotations

import builtins
import math
from typing import Any

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.core.shapes import normalize_dim
from nova.tensor import grad_mode, movement, numeric, ops
from nova.tensor.autocast_state import autocast_op
from nova.tensor.tensor import Tensor, unaliased_detach


def _dims_list(op: str, dims: Any, ndim: builtins.int, shape: tuple) -> list[builtins.int]:
    if isinstance(dims, builtins.int):
        dims = [dims]
    return [normalize_dim(op, d, ndim, shape) for d in dims]


def tensordot(a: Tensor, b: Tensor, dims: Any = 2) -> Tensor:
    """Contract ``a``'s dims with ``b``'s (``torch.tensordot``): ``dims=k`` pairs
    ``a``'s last ``k`` with ``b``'s first ``k``; a pair of lists names them. The result
    has ``a``'s free dims, then ``b``'s."""
    ops._check_tensor("tensordot", a)
    ops._check_tensor("tensordot", b)
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, builtins.int):
        if not 0 <= dims <= builtins.min(a.ndim, b.ndim):
            raise ValueError(f"tensordot: dims={dims} must be in [0, {builtins.min(a.ndim, b.ndim)}] "
                             f"for shapes {a.shape} and {b.shape}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        if len(dims) != 2:
            raise ValueError(f"tensordot: dims must be an int or a pair of dim lists, got {dims!r}")
        da = _dims_list("tensordot", dims[0], a.ndim, a.shape)
        db = _dims_list("tensordot", dims[1], b.ndim, b.shape)
    if len(da) != len(db):
        raise ValueError(f"tensordot: both sides must contract as many dims, got {da} and {db}")
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise ValueError(f"tensordot: contracted dims differ in size: {a.shape} dim {i} "
                             f"({a.shape[i]}) against {b.shape} dim {j} ({b.shape[j]})")
    free_a = [d for d in range(a.ndim) if d not in da]
    free_b = [d for d in range(b.ndim) if d not in db]
    k = 1
    for d in da:
        k *= a.shape[d]
    rows = math.prod(a.shape[d] for d in free_a)
    cols = math.prod(b.shape[d] for d in free_b)
    left = movement.reshape(movement.permute(a, *(free_a + da)), (rows, k))
    right = movement.reshape(movement.permute(b, *(db + free_b)), (k, cols))
    out_shape = tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b)
    return movement.reshape(ops.matmul(left, right), out_shape)


def inner(input: Tensor, other: Tensor) -> Tensor:
    """The sum of products over the last dims (``torch.inner``); a 0-d operand scales."""
    ops._check_tensor("inner", input)
    ops._check_tensor("inner", other)
    if input.ndim == 0 or other.ndim == 0:
        return ops.mul(input, other)
    return tensordot(input, other, ([-1], [-1]))


@autocast_op("vdot")
def vdot(input: Tensor, other: Tensor) -> Tensor:
    """The dot product of two 1-D tensors (``torch.vdot``; Nova has no complex
    dtypes, so nothing is conjugated)."""
    from nova.tensor.arrays import dot
    return dot(input, other)


@autocast_op("addr")
def addr(input: Any, vec1: Tensor, vec2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """``beta * input + alpha * outer(vec1, vec2)`` (``torch.addr``)."""
    from nova.tensor.arrays import _scaled_sum, outer
    return _scaled_sum(input, outer(vec1, vec2), beta, alpha)


@autocast_op("addbmm")
def addbmm(input: Any, batch1: Tensor, batch2: Tensor, *, beta: Any = 1,
           alpha: Any = 1) -> Tensor:
    """``beta * input + alpha * sum_i batch1[i] @ batch2[i]`` (``torch.addbmm``): the
    batch folded into the contraction, one matmul."""
    from nova.tensor.arrays import _scaled_sum
    for name, t in (("batch1", batch1), ("batch2", batch2)):
        if not isinstance(t, Tensor) or t.ndim != 3:
            raise ValueError(f"addbmm: {name} must be a 3-D tensor, got "
                             f"{getattr(t, 'shape', type(t).__name__)}")
    if batch1.shape[0] != batch2.shape[0] or batch1.shape[2] != batch2.shape[1]:
        raise ValueError(f"addbmm: batch1 {batch1.shape} and batch2 {batch2.shape} cannot be "
                         "multiplied (need (b, n, m) and (b, m, p))")
    b, n, m = batch1.shape
    p = batch2.shape[2]
    left = movement.reshape(movement.permute(batch1, 1, 0, 2), (n, b * m))
    product = ops.matmul(left, movement.reshape(batch2, (b * m, p)))
    return _scaled_sum(input, product, beta, alpha)


def matrix_power(input: Tensor, n: builtins.int) -> Tensor:
    """``input`` multiplied by itself ``n`` times (``torch.linalg.matrix_power``) by
    repeated squaring; ``n = 0`` is the identity. A negative ``n`` needs the inverse,
    which ``nova.decompositions.matrix_power`` -- the exported one (``nv.matrix_power``,
    ``nv.linalg.matrix_power``, the method) -- takes first; here it raises."""
    from nova.tensor.creation import eye
    ops._check_tensor("matrix_power", input)
    if isinstance(n, builtins.bool) or not isinstance(n, builtins.int):
        raise TypeError(f"matrix_power: n must be an int, got {n!r}")
    if input.ndim < 2 or input.shape[-1] != input.shape[-2]:
        raise ValueError(f"matrix_power: expects a (batch of) square matrices, got shape "
                         f"{input.shape}")
    if n < 0:
        raise ValueError(f"matrix_power: n = {n} < 0 needs the inverse: call "
                         f"nova.linalg.matrix_power")
    if n == 0:         # (a tensor of its own, as every result here: never a view)
        identity = eye(input.shape[-1], dtype=input.dtype, device=input.device)
        # the identity depends on ``input`` with derivative zero: its gradient is zeros,
        # as PyTorch's, not None
        return ops.zero_gradient_to(movement.expand(identity, *input.shape).clone(), input)
    if n == 1:
        return input.clone()
    result, square = None, input
    while True:
        if n & 1:
            result = square if result is None else ops.matmul(result, square)
        n >>= 1
        if not n:
            return result
        square = ops.matmul(square, square)


@autocast_op("cdist")
def cdist(x1: Tensor, x2: Tensor, p: Any = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The ``p``-norm distance between each row of ``x1`` (``..., P, M``) and each row
    of ``x2`` (``..., R, M``): ``(..., P, R)`` (``torch.cdist``), from the differences
    themselves -- exact where the ``|x|^2 + |y|^2 - 2xy`` expansion PyTorch's matmul mode
    may use cancels (``compute_mode`` is accepted for that reason and changes
    nothing)."""
    ops._check_tensor("cdist", x1)
    ops._check_tensor("cdist", x2)
    if x1.ndim < 2 or x2.ndim < 2:
        raise ValueError(f"cdist: x1 and x2 must have at least 2 dims, got {x1.shape} and "
                         f"{x2.shape}")
    if x1.shape[-1] != x2.shape[-1]:
        raise ValueError(f"cdist: x1 and x2 must have the same number of columns, got "
                         f"{x1.shape[-1]} and {x2.shape[-1]}")
    if not x1.dtype.is_floating_point or not x2.dtype.is_floating_point:
        raise DTypeError(f"cdist: only floating point inputs, got {x1.dtype.name} and "
                         f"{x2.dtype.name}")
    if p < 0:
        raise ValueError(f"cdist: p must be >= 0, got {p}")
    diff = ops.sub(movement.unsqueeze(x1, -2), movement.unsqueeze(x2, -3))
    if x1.shape[-1] == 0:         # no coordinates: every distance is 0 (amax would refuse)
        return ops.sum(diff, -1)
    if p == math.inf:
        return _chebyshev(diff)
    dist = numeric.vector_norm(diff, p, -1)
    if p == 0:                   # a count, with PyTorch's zero gradient to x1 and x2
        return ops.zero_gradient_to(dist, ops.sum(diff, -1))
    return dist


def _chebyshev(diff: Tensor) -> Tensor:
    """``max |diff|`` over the last dim with PyTorch's ``cdist`` gradient: the whole of
    it to every coordinate at the maximum (``vector_norm``'s, as ``amax``'s, shares it
    among them). A finite distance is the maximum minus a zero made of ``a - a`` at the
    tied coordinates; an infinite or NaN one keeps ``vector_norm``'s gradient (PyTorch's
    is NaN there)."""
    dist = numeric.vector_norm(diff, math.inf, -1)
    if not (grad_mode.STATE.enabled and diff.requires_grad):
        return dist
    a = ops.abs(diff)
    d, ad = unaliased_detach(dist), unaliased_detach(a)
    tied = ops.eq(ad, movement.unsqueeze(d, -1))
    zero = ops.sum(ops.where(tied, ops.sub(ad, a), 0.0), -1)
    return ops.where(ops.lt(ops.abs(d), math.inf), ops.sub(d, zero), dist)


def dist(input: Tensor, other: Tensor, p: Any = 2) -> Tensor:
    """The ``p``-norm of ``input - other`` (``torch.dist``)."""
    return numeric.vector_norm(ops.sub(input, other), p)


def renorm(input: Tensor, p: Any, dim: builtins.int, maxnorm: Any) -> Tensor:
    """Each slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` scaled down to it
    (``torch.renorm``: by ``maxnorm / (norm + 1e-7)``, the norm taken in float64)."""
    ops._check_tensor("renorm", input)
    if not input.dtype.is_floating_point:
        raise DTypeError(f"renorm: expects a floating point input, got {input.dtype.name}")
    if p <= 0:
        raise ValueError(f"renorm: p must be > 0, got {p}")
    if maxnorm < 0:
        raise ValueError(f"renorm: maxnorm must be >= 0, got {maxnorm}")
    d = normalize_dim("renorm", dim, input.ndim, input.shape)
    others = [k for k in range(input.ndim) if k != d]
    wide = ops.cast(input, dt.float64)       # (as PyTorch: 1e30's norm does not overflow)
    norms = numeric.vector_norm(wide, p, others, keepdim=True) if others else ops.abs(wide)
    scale = ops.where(ops.gt(norms, maxnorm), ops.div(maxnorm, ops.add(norms, 1e-7)), 1.0)
    return ops.mul(input, ops.cast(scale, input.dtype))


def diag_embed(input: Tensor, offset: builtins.int = 0, dim1: builtins.int = -2,
               dim2: builtins.int = -1) -> Tensor:
    """Matrices whose ``offset`` diagonal (in dims ``dim1``, ``dim2`` of the result) is
    ``input``'s last dim (``torch.diag_embed``)."""
    from nova.tensor.creation import arange, zeros
    ops._check_tensor("diag_embed", input)
    out_ndim = input.ndim + 1
    d1 = normalize_dim("diag_embed", dim1, out_ndim)
    d2 = normalize_dim("diag_embed", dim2, out_ndim)
    if d1 == d2:
        raise ValueError(f"diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2}")
    k, shift = input.shape[-1], builtins.abs(offset)
    n = k + shift
    # the diagonal's values along the dim that indexes them (rows for offset >= 0,
    # columns below), zero-padded to n; the other dim broadcasts, the mask keeps one
    padded = movement.cat([input, zeros(input.shape[:-1] + (shift,), dtype=input.dtype,
                                        device=input.device)], -1)
    values = movement.unsqueeze(padded, -1 if offset >= 0 else -2)
    on = ops.eq(ops.sub(movement.reshape(arange(n), (1, n)),
                        movement.reshape(arange(n), (n, 1))), offset)
    mats = ops.where(on, values, ops.full_const(0, (), input.dtype))  # (..., n, n): rows, cols
    rest = iter(range(input.ndim - 1))
    rows, cols = input.ndim - 1, input.ndim
    order = [rows if i == d1 else cols if i == d2 else next(rest) for i in range(out_ndim)]
    return movement.permute(mats, *order)


def diagflat(input: Tensor, offset: builtins.int = 0) -> Tensor:
    """A 2-D matrix with the flattened ``input`` on its ``offset`` diagonal
    (``torch.diagflat``)."""
    from nova.tensor.arrays import diag
    ops._check_tensor("diagflat", input)
    return diag(movement.reshape(input, -1), offset)


TENSOR_METHODS = ("tensordot", "inner", "vdot", "addr", "addbmm", "matrix_power", "dist",
                  "renorm", "diag_embed", "diagflat")

__all__ = list(TENSOR_METHODS) + ["cdist"]

"""The rest of ``torch.linalg``'s names: products (``multi_dot``, ``vecdot``, ``matmul``),
``diagonal``, ``vander``, the tensor forms of ``inv`` and ``solve`` (``tensorinv``,
``tensorsolve``), ``householder_product``, and the eigendecomposition of a general
square matrix (``eig``, ``eigvals``), whose results are complex.

All but ``eig``/``eigvals`` are compositions of Nova's ops (lazy, batched,
differentiable through them). ``householder_product`` is ``nova.decompositions_spectral``'s
accumulation of ``Q`` (LAPACK's ``org2r``) on the given reflectors.

**eig.** The eigenvalues of a general real matrix come in conjugate pairs, found by
the Hessenberg QR algorithm with implicit double shifts and data-dependent deflation
(LAPACK's ``geev``): which eigenvalues split off, and when, depends on the values, which
a fixed graph of Nova's primitives cannot express (the symmetric ``eigh`` uses Jacobi
rounds instead, which a general matrix does not converge under). So ``eig`` and
``eigvals`` realize ``A`` and call LAPACK's ``geev`` on the host (through NumPy), as
PyTorch's CUDA ``eig`` does (MAGMA's ``geev`` runs on the CPU): a sync, like the plain
forms' error checks in ``nova.decompositions``, which inside ``nv.compile`` makes the call
run recorded every time. The results are LAPACK's, so PyTorch's: eigenvectors of unit
norm with their largest component real, eigenvalues in ``geev``'s order.
The gradient is PyTorch's ``linalg_eig_backward`` (computed lazily from the saved
factors; the conjugation by ``V^-H`` is one real solve of twice the size), and, as
there, it is defined only for losses that do not depend on the eigenvectors' phases
(not checked here: PyTorch's check reads the values).
"""
from __future__ import annotations

import builtins
import math
from collections import namedtuple
from collections.abc import Sequence
from typing import Any

import numpy as np

from nova.autograd.function import Function, FunctionCtx
from nova.core import dtypes as dt
from nova.core.shapes import broadcast_shapes
from nova.decompositions import _check_matrices, _iota, inv, solve, solve_ex
from nova.decompositions_spectral import _form_q
from nova.tensor import complex as _complex
from nova.tensor import movement, ops
from nova.tensor.arrays import diagonal as _diagonal
from nova.tensor.creation import tensor as _tensor
from nova.tensor.scan import cumprod
from nova.tensor.tensor import Tensor

__all__ = ["diagonal", "eig", "eigvals", "householder_product", "matmul", "multi_dot",
           "tensorinv", "tensorsolve", "vander", "vecdot"]

EigResult = namedtuple("linalg_eig", ["eigenvalues", "eigenvectors"])

_ComplexTensor = _complex.ComplexTensor


def _is_complex(x: Any) -> bool:
    return isinstance(x, _ComplexTensor)


# ---------------------------------------------------------------- products


def matmul(input: Any, other: Any) -> Any:
    """``torch.linalg.matmul``: ``torch.matmul`` (complex operands included)."""
    if _is_complex(input) or _is_complex(other):
        return _complex.matmul(input, other)
    return ops.matmul(input, other)


def _chain_order(dims: list[int]) -> list[list[int]]:
    """The split points of the cheapest parenthesization of matrices of shapes
    ``dims[i] x dims[i + 1]`` (the classic dynamic program over chain lengths)."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain_product(mats: list[Any], split: list[list[int]], i: int, j: int) -> Any:
    if i == j:
        return mats[i]
    k = split[i][j]
    return matmul(_chain_product(mats, split, i, k), _chain_product(mats, split, k + 1, j))


def _check_multi_dot(tensors: Sequence[Any]) -> None:
    n = len(tensors)
    if n < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {n}")
    for i, t in enumerate(tensors):
        if not isinstance(t, (Tensor, _ComplexTensor)):
            raise TypeError(f"multi_dot(): tensor {i} must be a Tensor, got "
                            f"{type(t).__name__}")
    for i, t in enumerate(tensors):
        if i in (0, n - 1):
            if t.ndim not in (1, 2):
                which = "first" if i == 0 else "last"
                raise RuntimeError(f"multi_dot(): the {which} tensor must be 1D or 2D but got "
                                   f"{t.ndim}D")
        elif t.ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
        if t.dtype != tensors[0].dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but "
                               f"tensor 0 is {tensors[0].dtype.name} and tensor {i} "
                               f"{t.dtype.name}")


def multi_dot(tensors: Sequence[Any]) -> Any:
    """The product of a chain of matrices in the order of fewest multiplications
    (``torch.linalg.multi_dot``): the first may be a 1-D row vector and the last a 1-D
    column vector (their dims are dropped from the result); the others are 2-D."""
    tensors = list(tensors)
    _check_multi_dot(tensors)
    first_vec, last_vec = tensors[0].ndim == 1, tensors[-1].ndim == 1
    mats = list(tensors)
    if first_vec:
        mats[0] = mats[0].unsqueeze(0)
    if last_vec:
        mats[-1] = mats[-1].unsqueeze(-1)
    for i in range(len(mats) - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes "
                               f"{list(tensors[i].shape)} and {list(tensors[i + 1].shape)} "
                               f"cannot be multiplied")
    dims = [m.shape[0] for m in mats] + [mats[-1].shape[1]]
    out = _chain_product(mats, _chain_order(dims), 0, len(mats) - 1)
    if first_vec:
        out = out.squeeze(0)
    if last_vec:
        out = out.squeeze(-1)
    return out


def vecdot(x: Any, y: Any, *, dim: int = -1) -> Any:
    """``sum(conj(x) * y, dim)`` (``torch.linalg.vecdot``), ``x`` and ``y`` broadcast;
    the conjugate is of the first argument, as PyTorch's."""
    op = "linalg.vecdot"
    for name, t in (("x", x), ("y", y)):
        if not isinstance(t, (Tensor, _ComplexTensor)):
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
    if x.dtype != y.dtype:
        raise RuntimeError(f"{op}: Expected x and y to have the same dtype, but found x of "
                           f"type {x.dtype.name} and y of type {y.dtype.name} instead")
    shape = broadcast_shapes(op, tuple(x.shape), tuple(y.shape))
    if not -len(shape) <= dim < max(len(shape), 1):
        raise IndexError(f"{op}: Dimension out of range (expected to be in range of "
                         f"[{-len(shape)}, {len(shape) - 1}], but got {dim})")
    if _is_complex(x) or _is_complex(y):
        return _complex.sum(_complex.mul(_complex.conj(x), y), dim)
    return ops.mul(x, y).sum(dim)


def diagonal(A: Any, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Any:
    """``torch.linalg.diagonal``: ``torch.diagonal`` with the last two dims as defaults
    (a view)."""
    if _is_complex(A):
        return A.diagonal(offset, dim1, dim2)
    ops._check_tensor("linalg.diagonal", A)
    return _diagonal(A, offset, dim1, dim2)


def vander(x: Tensor, *, N: int | None = None) -> Tensor:
    """The Vandermonde matrix ``[1, x, x^2, ..., x^(N-1)]`` along a new last dim
    (``torch.linalg.vander``: increasing powers, unlike NumPy's default), ``N``
    defaulting to ``x``'s last dim; the powers are running products, as PyTorch's."""
    op = "linalg.vander"
    ops._check_tensor(op, x)
    if x.dtype == dt.bool_ or (x.dtype.is_floating_point and
                               x.dtype not in (dt.float32, dt.float64)):
        raise RuntimeError(f"{op} supports floating point, complex, and integer tensors, but "
                           f"got {x.dtype.name}")
    x_ = x.unsqueeze(-1) if x.ndim == 0 else x
    n = x_.shape[-1] if N is None else N
    if isinstance(n, builtins.bool) or not isinstance(n, builtins.int):
        raise TypeError(f"{op}: N must be an int, got {N!r}")
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    powers = cumprod(movement.expand(x_.unsqueeze(-1), x_.shape + (n - 1,)), -1)
    ones = ops.full_const(1, x_.shape + (1,), x.dtype)
    return movement.cat([ones, powers], -1)


# ---------------------------------------------------------------- tensor inverse, solve


def _prod(shape: Sequence[int]) -> int:
    out = 1
    for s in shape:
        out *= s
    return out


def tensorinv(A: Tensor, ind: int = 2) -> Tensor:
    """The inverse of ``A`` for ``tensordot`` over ``ind`` dims
    (``torch.linalg.tensorinv``): ``A`` read as a ``prod(A.shape[:ind]) x
    prod(A.shape[ind:])`` square matrix, inverted (a singular one raises, as
    ``linalg.inv``), and shaped ``A.shape[ind:] + A.shape[:ind]``."""
    ops._check_tensor("linalg.tensorinv", A)
    if isinstance(ind, builtins.bool) or not isinstance(ind, builtins.int) or ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    head, tail = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    if _prod(tail) != _prod(head):
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) "
                           f"== prod(self.shape[:ind]), but got {_prod(tail)} != "
                           f"{_prod(head)}")
    n = _prod(head)
    return inv(A.reshape(n, n)).reshape(tail + head)


def tensorsolve(A: Tensor, B: Tensor, dims: Sequence[int] | None = None) -> Tensor:
    """``X`` with ``tensordot(A, X, X.ndim) = B`` (``torch.linalg.tensorsolve``): the
    ``dims`` of ``A`` (if given) move to the end, and ``A`` is read as a square matrix of
    ``prod(B.shape)`` rows; ``X`` has the shape ``A.shape[B.ndim:]``."""
    op = "linalg.tensorsolve"
    ops._check_tensor(op, A)
    ops._check_tensor(op, B)
    if dims is not None:
        dims = [d % A.ndim for d in dims]
        A = A.movedim(dims, list(range(A.ndim - len(dims), A.ndim)))
    result_shape = tuple(A.shape[B.ndim:])
    rows, cols = _prod(A.shape[:B.ndim]), _prod(result_shape)
    if rows != cols:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape["
                           f"other.ndim:]) == prod(self.shape[:other.ndim]), but got "
                           f"{cols} != {rows}")
    if B.numel() != rows:
        raise RuntimeError(f"{op}: B of shape {B.shape} must have the shape A.shape[:B.ndim] = "
                           f"{tuple(A.shape[:B.ndim])}")
    return solve(A.reshape(rows, cols), B.reshape(rows)).reshape(result_shape)


# ---------------------------------------------------------------- householder_product


def householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """The first ``n`` columns of ``H_1 ... H_k``, ``H_i = I - tau_i v_i v_i^T`` with
    ``v_i`` 1 at row ``i``, 0 above it and ``A[i+1:, i]`` below
    (``torch.linalg.householder_product``, LAPACK's ``orgqr``): ``A`` (*, m, n), ``m >=
    n >= k``, ``tau`` (*, k). Differentiable in ``A`` and ``tau`` through its ops."""
    op = "torch.linalg.householder_product"
    _check_matrices(op, A, "input", square=False)
    ops._check_tensor(op, tau)
    m, n = A.shape[-2:]
    if m < n:
        raise RuntimeError(f"{op}: input.shape[-2] must be greater than or equal to "
                           f"input.shape[-1]")
    if tau.ndim != A.ndim - 1:
        raise RuntimeError(f"{op}: Expected tau to have one dimension less than input, but "
                           f"got tau.ndim equal to {tau.ndim} and input.ndim is equal to "
                           f"{A.ndim}")
    k = tau.shape[-1]
    if n < k:
        raise RuntimeError(f"{op}: input.shape[-1] must be greater than or equal to "
                           f"tau.shape[-1]")
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise RuntimeError(f"{op}: Expected batch dimensions of tau to be equal to "
                           f"input.shape[:-2], but got {tuple(tau.shape[:-1])}")
    if tau.dtype != A.dtype:
        raise RuntimeError(f"{op}: tau dtype {tau.dtype.name} does not match input dtype "
                           f"{A.dtype.name}")
    rows, cols = _iota((m, k), 0), _iota((m, k), 1)
    H = ops.where(rows > cols, A[..., :, :k],
                  ops.where(rows == cols, tau.unsqueeze(-2), 0.0))
    return _form_q(H, m, n)


# ---------------------------------------------------------------- eig, eigvals


def _check_eig(op: str, A: Any) -> None:
    if _is_complex(A):
        if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
            raise RuntimeError(f"{op}: A must be batches of square matrices, but they are "
                               f"{A.shape[-2] if A.ndim >= 2 else A.ndim}-dim tensor of "
                               f"shape {tuple(A.shape)}")
        return
    ops._check_tensor(op, A)
    if A.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor A must have at least 2 dimensions.")
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a float32, float64 or complex A, got "
                           f"{A.dtype.name} (PyTorch: Unknown Complex ScalarType)")
    if A.dtype not in (dt.float32, dt.float64):
        raise NotImplementedError(f'"linalg_eig_out_cpu" not implemented for '
                                  f"'{A.dtype.name}'")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{op}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")


def _geev(op: str, re: np.ndarray, im: np.ndarray | None, values_only: bool
          ) -> tuple[np.ndarray, np.ndarray | None]:
    """LAPACK's ``geev`` through NumPy on the host values; infs and NaNs raise, as
    PyTorch's."""
    a = re if im is None else re + 1j * im
    if not np.all(np.isfinite(a)):
        raise RuntimeError(f"torch.{op}: input tensor should not contain infs or NaNs.")
    complex_dtype = np.complex64 if re.dtype == np.float32 else np.complex128
    n = a.shape[-1]
    if a.size == 0:
        return (np.zeros(a.shape[:-1], complex_dtype),
                None if values_only else np.zeros(a.shape, complex_dtype))
    if values_only:
        return np.linalg.eigvals(a).astype(complex_dtype), None
    w, v = np.linalg.eig(a)
    return w.astype(complex_dtype), v.astype(complex_dtype).reshape(a.shape[:-2] + (n, n))


def _cmatmul(ar: Tensor, ai: Tensor, br: Tensor, bi: Tensor) -> tuple[Tensor, Tensor]:
    return ar @ br - ai @ bi, ar @ bi + ai @ br


def _solve_adjoint(Vr: Tensor, Vi: Tensor, Rr: Tensor, Ri: Tensor) -> tuple[Tensor, Tensor]:
    """``Z`` with ``V^H Z = R`` (complex, as parts), as the real system ``[[M_r, -M_i],
    [M_i, M_r]] [Z_r; Z_i] = [R_r; R_i]`` of ``M = V^H``."""
    Mr, Mi = Vr.mT, ops.neg(Vi.mT)
    big = movement.cat([movement.cat([Mr, ops.neg(Mi)], -1), movement.cat([Mi, Mr], -1)], -2)
    Z = solve_ex(big, movement.cat([Rr, Ri], -2)).result
    n = Vr.shape[-1]
    return Z[..., :n, :], Z[..., n:, :]


def _eig_grad(Lr: Tensor, Li: Tensor, Vr: Tensor, Vi: Tensor, gLr: Tensor, gLi: Tensor,
              gVr: Tensor, gVi: Tensor) -> tuple[Tensor, Tensor]:
    """PyTorch's ``linalg_eig_backward`` on real and imaginary parts: ``gA = V^-H
    (diag(gL) + (V^H gV - V^H V diag(re(V^H gV))) / conj(E)) V^H``, ``E_ij = L_j -
    L_i`` (1 on the diagonal, which ``gL`` replaces)."""
    Hr, Hi = Vr.mT, ops.neg(Vi.mT)                                     # V^H
    Pr, Pi = _cmatmul(Hr, Hi, gVr, gVi)                                # V^H gV
    d = Pr.diagonal(0, -2, -1).unsqueeze(-2)                           # re diag, (.., 1, n)
    Qr, Qi = _cmatmul(Hr, Hi, Vr * d, Vi * d)
    Pr, Pi = Pr - Qr, Pi - Qi
    Er = Lr.unsqueeze(-2) - Lr.unsqueeze(-1)                           # conj(E): (Er, -Ei)
    Ei = ops.neg(Li.unsqueeze(-2) - Li.unsqueeze(-1))
    n = Lr.shape[-1]
    on_diag = _iota((n, n), 0) == _iota((n, n), 1)
    Er = ops.where(on_diag, 1.0, Er)
    Ei = ops.where(on_diag, 0.0, Ei)
    den = Er * Er + Ei * Ei
    Gr, Gi = (Pr * Er + Pi * Ei) / den, (Pi * Er - Pr * Ei) / den
    Gr = ops.where(on_diag, movement.expand(gLr.unsqueeze(-1), Gr.shape), Gr)
    Gi = ops.where(on_diag, movement.expand(gLi.unsqueeze(-1), Gi.shape), Gi)
    Rr, Ri = _cmatmul(Gr, Gi, Hr, Hi)
    return _solve_adjoint(Vr, Vi, Rr, Ri)


def _eigvals_grad(Vr: Tensor, Vi: Tensor, gLr: Tensor, gLi: Tensor) -> tuple[Tensor, Tensor]:
    """``V^-H diag(gL) V^H`` (PyTorch's shortcut when only the eigenvalues are used)."""
    Hr, Hi = Vr.mT, ops.neg(Vi.mT)
    gr, gi = gLr.unsqueeze(-1), gLi.unsqueeze(-1)
    return _solve_adjoint(Vr, Vi, gr * Hr - gi * Hi, gr * Hi + gi * Hr)


def _from_host(values: np.ndarray, like: Tensor) -> Tensor:
    return _tensor(np.ascontiguousarray(values), dtype=like.dtype, device=like.device)


class _Eig(Function):
    """``(L_r, L_i, V_r, V_i)`` of ``A = A_r + i A_i`` (``A_i`` None for a real ``A``),
    from ``geev`` on the host; the backward is ``_eig_grad``, its real part for a real
    ``A``."""

    pure_backward = True

    @staticmethod
    def forward(ctx: FunctionCtx, Ar: Tensor, Ai: Tensor | None, op: str
                ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        w, v = _geev(op, Ar.numpy(), None if Ai is None else Ai.numpy(), False)
        outs = (_from_host(w.real, Ar), _from_host(w.imag, Ar), _from_host(v.real, Ar),
                _from_host(v.imag, Ar))
        ctx.save_for_backward(*outs)
        return outs

    @staticmethod
    def backward(ctx: FunctionCtx, gLr: Tensor, gLi: Tensor, gVr: Tensor, gVi: Tensor
                 ) -> tuple[Tensor | None, Tensor | None, None]:
        Lr, Li, Vr, Vi = ctx.saved_tensors
        gr, gi = _eig_grad(Lr, Li, Vr, Vi, gLr, gLi, gVr, gVi)
        return gr, (gi if ctx.needs_input_grad[1] else None), None


class _Eigvals(Function):
    """``(L_r, L_i)`` of ``A``: ``geev``'s eigenvalues (the vectors are computed and
    saved for the backward, ``_eigvals_grad``)."""

    pure_backward = True

    @staticmethod
    def forward(ctx: FunctionCtx, Ar: Tensor, Ai: Tensor | None, op: str
                ) -> tuple[Tensor, Tensor]:
        needs = any(ctx.needs_input_grad[:2])
        w, v = _geev(op, Ar.numpy(), None if Ai is None else Ai.numpy(), not needs)
        if needs:
            ctx.save_for_backward(_from_host(v.real, Ar), _from_host(v.imag, Ar))
        return _from_host(w.real, Ar), _from_host(w.imag, Ar)

    @staticmethod
    def backward(ctx: FunctionCtx, gLr: Tensor, gLi: Tensor
                 ) -> tuple[Tensor | None, Tensor | None, None]:
        Vr, Vi = ctx.saved_tensors
        gr, gi = _eigvals_grad(Vr, Vi, gLr, gLi)
        return gr, (gi if ctx.needs_input_grad[1] else None), None


def _parts(A: Any) -> tuple[Tensor, Tensor | None]:
    if _is_complex(A):
        return A.real, A.imag
    return A, None


def eig(A: Any) -> EigResult:
    """``(eigenvalues, eigenvectors)`` of a square ``A`` (*, n, n), complex, with ``A V
    = V diag(L)`` (``torch.linalg.eig``); computed on the host by LAPACK's ``geev`` (see
    the module docstring: a sync). infs and NaNs raise ``RuntimeError``, as PyTorch's.
    Differentiable (PyTorch's formula) for losses invariant to the eigenvectors'
    phases; repeated eigenvalues make the gradient inf/NaN, as there."""
    _check_eig("linalg.eig", A)
    Ar, Ai = _parts(A)
    Lr, Li, Vr, Vi = _Eig.apply(Ar, Ai, "linalg.eig")
    return EigResult(_complex.complex(Lr, Li), _complex.complex(Vr, Vi))


def eigvals(A: Any) -> Any:
    """The eigenvalues of a square ``A`` (*, n, n), complex (``torch.linalg.eigvals``),
    as ``eig``'s (LAPACK's ``geev`` on the host); differentiable, the gradient ``V^-H
    diag(gL) V^H``."""
    _check_eig("linalg.eigvals", A)
    Ar, Ai = _parts(A)
    Lr, Li = _Eigvals.apply(Ar, Ai, "linalg.eigvals")
    return _complex.complex(Lr, Li)

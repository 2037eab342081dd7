"""PyTorch's pre-``torch.linalg`` names for the triangular factorizations and solvers
(``torch.cholesky``, ``cholesky_solve``, ``cholesky_inverse``, ``lu``, ``lu_solve``,
``lu_unpack``, ``triangular_solve``, ``chain_matmul``), with their argument orders
(the right-hand side first), defaults (``triangular_solve``'s ``upper=True``) and
results, so code written against them ports by changing the import. Each is a
composition of ``nova.decompositions``' factorizations and solvers, so it is lazy,
batched, and differentiable through them.

The functions PyTorch removed in 1.9 (``matrix_rank``, ``lstsq``, ``solve``, ``eig``,
``symeig``) are still names there that raise a ``RuntimeError`` saying what replaces
them; they are here too, with PyTorch's messages, so a port fails with the same advice.

The tensor methods PyTorch has for them (``A.cholesky()``, ``b.lu_solve(LU, piv)``,
``A.lu()``, ``b.triangular_solve(A)`` ...) are attached to ``Tensor`` here, as
``nova.decompositions`` attaches ``det``.
"""
from __future__ import annotations

import warnings
from collections import namedtuple
from typing import Any

from nova.core import dtypes as dt
from nova.core.shapes import broadcast_shapes
from nova.decompositions import (
    _check_matrices, _check_same_dtype, _expand_batch, _pivots_to_perm, cholesky as _cholesky,
    lu_factor_ex, lu_solve as _linalg_lu_solve, solve_triangular,
)
from nova.tensor import ops
from nova.tensor.creation import eye
from nova.core.errors import ArgumentError
from nova.tensor.tensor import Tensor

__all__ = ["chain_matmul", "cholesky", "cholesky_inverse", "cholesky_solve", "eig", "lstsq",
           "lu", "lu_solve", "lu_unpack", "matrix_rank", "solve", "symeig", "triangular_solve"]

TriangularSolveResult = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])
LUUnpackResult = namedtuple("lu_unpack", ["P", "L", "U"])
LUWithInfoResult = namedtuple("_lu_with_info", ["LU", "pivots", "info"])


def _deprecated(message: str) -> None:
    """PyTorch's deprecation warning (a ``UserWarning``, shown once per call site)."""
    warnings.warn(message, UserWarning, stacklevel=3)


def cholesky(input: Tensor, upper: bool = False) -> Tensor:
    """``torch.cholesky`` (deprecated there in favour of ``torch.linalg.cholesky``):
    the lower Cholesky factor, or the upper one ``L^T`` with ``upper``; a matrix that is
    not positive-definite raises ``LinAlgError``, as ``linalg.cholesky``."""
    _deprecated("torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be "
                "removed in a future PyTorch release.\nL = torch.cholesky(A)\nshould be "
                "replaced with\nL = torch.linalg.cholesky(A)\nand\nU = torch.cholesky(A, "
                "upper=True)\nshould be replaced with\nU = torch.linalg.cholesky(A).mH")
    return _cholesky(input, upper=bool(upper))


def _check_factor(op: str, B: Tensor, L: Tensor) -> None:
    _check_matrices(op, L, "L")
    _check_matrices(op, B, "B", square=False)
    _check_same_dtype(op, L, B)
    if B.shape[-2] != L.shape[-1]:
        raise ArgumentError(f"{op}: Incompatible matrix sizes for the equation A X = B: A is "
                            f"{L.shape[-1]} by {L.shape[-1]} (from the factor of shape "
                            f"{L.shape}) but B has {B.shape[-2]} rows (shape {B.shape})")


def cholesky_solve(B: Tensor, input2: Tensor, upper: bool = False) -> Tensor:
    """``X`` with ``A X = B`` for ``A = L L^T`` (``U^T U`` with ``upper``), given the
    Cholesky factor (``torch.cholesky_solve(B, L, upper=False)``): two triangular
    solves. Batch dims broadcast; only the factor's triangle is read."""
    op = "cholesky_solve"
    _check_factor(op, B, input2)
    lower = input2.mT if upper else input2
    Y = solve_triangular(lower, _expand_batch(op, input2, B), upper=False)
    return solve_triangular(lower.mT, Y, upper=True)


def cholesky_inverse(L: Tensor, upper: bool = False) -> Tensor:
    """``(L L^T)^-1`` (``(U^T U)^-1`` with ``upper``) from a Cholesky factor
    (``torch.cholesky_inverse``): ``cholesky_solve`` of the identity."""
    _check_matrices("cholesky_inverse", L, "L")
    n = L.shape[-1]
    return cholesky_solve(ops.broadcast_to(eye(n, dtype=L.dtype), L.shape), L, upper)


def lu(A: Tensor, pivot: bool = True, get_infos: bool = False) -> tuple[Tensor, ...]:
    """``(LU, pivots)``, and ``info`` with ``get_infos`` (``torch.lu``, deprecated there
    in favour of ``torch.linalg.lu_factor``/``lu_factor_ex``): ``lu_factor_ex``'s
    values. Never raises on a singular matrix (PyTorch's only checks LAPACK's argument
    errors): ``info`` says where ``U``'s diagonal has its first zero."""
    _deprecated("torch.lu is deprecated in favor of torch.linalg.lu_factor / "
                "torch.linalg.lu_factor_ex and will be removed in a future PyTorch release.")
    LU, pivots, info = lu_factor_ex(A, pivot=pivot)
    return LUWithInfoResult(LU, pivots, info) if get_infos else (LU, pivots)


def lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:
    """``X`` with ``A X = b`` from ``torch.lu``'s (or ``linalg.lu_factor``'s) factors
    (``torch.lu_solve(b, LU_data, LU_pivots)``: ``linalg.lu_solve`` with the right-hand
    side first)."""
    return _linalg_lu_solve(LU_data, LU_pivots, b)


def _empty_like(A: Tensor) -> Tensor:
    return ops.full_const(0, (0,), A.dtype)


def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True,
              unpack_pivots: bool = True) -> LUUnpackResult:
    """``(P, L, U)`` with ``A = P L U`` from packed LU factors of ``A`` (*, m, n)
    (``torch.lu_unpack``): ``P`` (*, m, m) from the pivots' row swaps, ``L`` (*, m, k)
    unit lower-triangular, ``U`` (*, k, n), ``k = min(m, n)``. What is not unpacked
    (``unpack_data=False``: ``L`` and ``U``; ``unpack_pivots=False``: ``P``) is an
    empty tensor, as PyTorch's."""
    op = "lu_unpack"
    _check_matrices(op, LU_data, "LU_data", square=False)
    ops._check_tensor(op, LU_pivots)
    m, n = LU_data.shape[-2:]
    k = min(m, n)
    if LU_pivots.dtype not in (dt.int32, dt.int64) or LU_pivots.shape != LU_data.shape[:-2] + (k,):
        raise ArgumentError(f"{op}: LU_pivots must be an integer tensor of shape "
                            f"{LU_data.shape[:-2] + (k,)} (LU_data's batch dims and "
                            f"min(m, n) = {k}), got {LU_pivots.dtype.name} of shape "
                            f"{LU_pivots.shape}")
    P = L = U = _empty_like(LU_data)
    if unpack_pivots:
        perm = _pivots_to_perm(LU_pivots, m)
        P = ops.cast(ops.one_hot(perm, m), LU_data.dtype).mT        # P[perm[i], i] = 1
    if unpack_data:
        L = LU_data[..., :, :k].tril(-1) + eye(m, k, dtype=LU_data.dtype)
        U = LU_data[..., :k, :].triu()
    return LUUnpackResult(P, L, U)


def triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False) -> TriangularSolveResult:
    """``(X, A.clone())`` with ``A X = b`` (``A^T X = b`` with ``transpose``) for
    triangular ``A`` (``torch.triangular_solve``, deprecated there in favour of
    ``linalg.solve_triangular``; note its ``upper=True`` default). Batch dims
    broadcast, and the returned copy of ``A`` has the broadcast batch dims too."""
    op = "triangular_solve"
    _check_matrices(op, A, "A")
    _check_matrices(op, b, "b", square=False)
    _check_same_dtype(op, A, b)
    batch = broadcast_shapes(op, A.shape[:-2], b.shape[:-2])
    A_b = ops.broadcast_to(A, batch + A.shape[-2:])
    T = A_b.mT if transpose else A_b
    X = solve_triangular(T, ops.broadcast_to(b, batch + b.shape[-2:]),
                         upper=bool(upper) != bool(transpose), unitriangular=bool(unitriangular))
    return TriangularSolveResult(X, A_b.clone())


def chain_matmul(*matrices: Tensor) -> Tensor:
    """The product of two-dimensional matrices in the cheapest order
    (``torch.chain_matmul``, deprecated there in favour of ``linalg.multi_dot``, which
    takes a list and also 1-D ends)."""
    _deprecated("torch.chain_matmul is deprecated and will be removed in a future PyTorch "
                "release. Use torch.linalg.multi_dot instead, which accepts a list of two "
                "or more tensors rather than multiple parameters.")
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for i, t in enumerate(matrices):
        ops._check_tensor("chain_matmul", t)
        if t.ndim != 2:
            raise RuntimeError(f"chain_matmul(): Tensor {i} must be 2D, but got {t.ndim}D "
                               f"(shape {t.shape})")
    if len(matrices) == 1:
        return matrices[0].clone()
    from nova.linalg_more import multi_dot
    return multi_dot(list(matrices))


# ---------------------------------------------------------------- removed in PyTorch 1.9

_REMOVED = "This function was deprecated since version 1.9 and is now removed."

_MATRIX_RANK = (_REMOVED + "\nPlease use the `torch.linalg.matrix_rank` function instead. The "
                "parameter 'symmetric' was renamed in `torch.linalg.matrix_rank()` to "
                "'hermitian'.")
_LSTSQ = (_REMOVED + " `torch.lstsq` is deprecated in favor of `torch.linalg.lstsq`.\n"
          "`torch.linalg.lstsq` has reversed arguments and does not return the QR "
          "decomposition in the returned tuple (although it returns other information about "
          "the problem).\n\nTo get the QR decomposition consider using `torch.linalg.qr`.\n\n"
          "The returned solution in `torch.lstsq` stored the residuals of the solution in "
          "the last m - n columns of the returned value whenever m > n. In "
          "torch.linalg.lstsq, the residuals are in the field 'residuals' of the returned "
          "named tuple.\n\nThe unpacking of the solution, as in\nX, _ = torch.lstsq(B, A)."
          "solution[:A.size(1)]\nshould be replaced with:\nX = torch.linalg.lstsq(A, B)."
          "solution")
_SOLVE = (_REMOVED + " `torch.solve` is deprecated in favor of `torch.linalg.solve`. "
          "`torch.linalg.solve` has its arguments reversed and does not return the LU "
          "factorization.\n\nTo get the LU factorization see `torch.lu`, which can be used "
          "with `torch.lu_solve` or `torch.lu_unpack`.\nX = torch.solve(B, A).solution "
          "should be replaced with:\nX = torch.linalg.solve(A, B)")
_EIG = (_REMOVED + " `torch.linalg.eig` returns complex tensors of dtype `cfloat` or "
        "`cdouble` rather than real tensors mimicking complex tensors.\n\nL, _ = torch.eig(A) "
        "should be replaced with:\nL_complex = torch.linalg.eigvals(A)\n\nand\n\nL, V = "
        "torch.eig(A, eigenvectors=True) should be replaced with:\nL_complex, V_complex = "
        "torch.linalg.eig(A)")
_SYMEIG = (_REMOVED + " The default behavior has changed from using the upper triangular "
           "portion of the matrix by default to using the lower triangular portion.\n\n"
           "L, _ = torch.symeig(A, upper=upper) should be replaced with:\nL = "
           "torch.linalg.eigvalsh(A, UPLO='U' if upper else 'L')\n\nand\n\nL, V = "
           "torch.symeig(A, eigenvectors=True) should be replaced with:\nL, V = "
           "torch.linalg.eigh(A, UPLO='U' if upper else 'L')")


def matrix_rank(*args: Any, **kwargs: Any) -> Tensor:
    """Removed from PyTorch in 1.9: raises its ``RuntimeError`` (use
    ``linalg.matrix_rank``)."""
    raise RuntimeError(_MATRIX_RANK)


def lstsq(*args: Any, **kwargs: Any) -> Any:
    """Removed from PyTorch in 1.9: raises its ``RuntimeError`` (use ``linalg.lstsq``)."""
    raise RuntimeError(_LSTSQ)


def solve(*args: Any, **kwargs: Any) -> Any:
    """Removed from PyTorch in 1.9: raises its ``RuntimeError`` (use ``linalg.solve``)."""
    raise RuntimeError(_SOLVE)


def eig(*args: Any, **kwargs: Any) -> Any:
    """Removed from PyTorch in 1.9: raises its ``RuntimeError`` (use ``linalg.eig``)."""
    raise RuntimeError(_EIG)


def symeig(*args: Any, **kwargs: Any) -> Any:
    """Removed from PyTorch in 1.9: raises its ``RuntimeError`` (use ``linalg.eigh``)."""
    raise RuntimeError(_SYMEIG)


def _lu_method(self: Tensor, pivot: bool = True, get_infos: bool = False) -> tuple[Tensor, ...]:
    return lu(self, pivot, get_infos)


# PyTorch's tensor methods (the tensor is the first argument of each function)
Tensor.cholesky = cholesky
Tensor.cholesky_solve = cholesky_solve
Tensor.cholesky_inverse = cholesky_inverse
Tensor.lu = _lu_method
Tensor.lu_solve = lu_solve
Tensor.triangular_solve = triangular_solve
Tensor.lstsq = lstsq
Tensor.solve = solve
Tensor.eig = eig
Tensor.symeig = symeig

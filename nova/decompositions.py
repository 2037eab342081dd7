"""Matrix decompositions and solvers under ``torch.linalg``'s names (``nv.linalg``; a
package part above ``autograd``, whose ``Function`` gives them closed-form gradients): ``cholesky``,
``solve_triangular``, ``lu_factor``, ``lu``, ``lu_solve``, ``solve``, ``inv``, ``det``,
``slogdet`` and ``logdet`` (with their ``_ex`` forms), batched over leading dims, in
float32 and float64.

**How.** Nova's primitive op set is closed (DESIGN.md) and a step is recorded before
it runs, so each algorithm is the textbook unblocked one -- Cholesky-Crout, LAPACK's
``getf2`` LU with partial pivoting, row-by-row substitution -- unrolled into its n
steps, written so that every step records the same ops on the same shapes: the step's
position is data carried from step to step (a one-hot row selector, or a rotation that
brings the next column to position 0), never an op's attribute. The compiler's kernels
for one step are then those of every other, and a factorization compiles about 10-20
kernels whatever n is. (A recursive blocked algorithm, halving the matrix as
MultivariateNormal's earlier ``solve_lower`` did, gives every block shape kernels of
its own: Toledo's recursive LU of one 17 x 17 matrix compiled 245 kernels, 17 s on a
2-core machine, against 19 kernels here.) The cost: each step reads and writes the
whole working matrix (O(n^3) memory traffic, elementwise and reductions rather than
matmuls) and records 30-65 nodes: n = 64 records about 3,000 nodes for ``cholesky``,
4,200 for ``lu_factor`` and 7,800 for ``inv``, whose first realization spends a few
seconds compiling the step (later ones reuse it). Suited to matrices up to a hundred
or two rows (covariances, small Gaussian processes, Jacobians); larger ones work but
are slow to record and compile.

**Errors need the values.** Nova is lazy, and a matrix's definiteness or singularity
is only known once it is computed. The ``_ex`` forms (``cholesky_ex``,
``lu_factor_ex``, ``inv_ex``, ``solve_ex``) stay lazy and return ``info`` (int32 per
matrix, 0 when the factorization succeeded, as LAPACK's); their results for a failed
matrix hold inf/NaN. The plain forms (``cholesky``, ``lu_factor``, ``inv``, ``solve``)
are those plus one host read of ``info``: they realize the pending work (one step) and
raise ``LinAlgError`` naming the batch element, as PyTorch's, so inside an
``nv.compile`` function they prevent replay -- use the ``_ex`` form there (with
``check_errors=False``). ``det``/``slogdet`` never raise: a singular matrix has
determinant 0, ``slogdet`` (0, -inf).

**Gradients** are closed forms through ``nv.autograd.Function`` (their backwards only
build ops from saved tensors, ``pure_backward``): ``inv``: ``-X^T g X^T``; ``det``:
``g det A^-T``; ``slogdet``: ``g A^-T``; ``solve``: ``gB = A^-T g``, ``gA = -gB X^T``;
``solve_triangular``: the same, restricted to ``A``'s triangle; ``cholesky``: Murray's
``L^-T Phi(L^T gL) L^-1``, symmetrized (as PyTorch's: the gradient of a function of
the symmetric ``A``). Under ``create_graph`` a backward recomputes the outputs from
the inputs with differentiable ops, so higher derivatives are exact. ``lu_factor``,
``lu`` and ``lu_solve`` are differentiated through their composite ops. The gradient
of ``det`` at a singular matrix (where ``A^-T`` does not exist) is not provided: it
is inf/NaN.

Not provided here: complex matrices, ``lu_factor(pivot=False)``. The orthogonal and
spectral decompositions (``qr``, ``eigh``, ``svd`` and what is built on them: ``pinv``,
``lstsq``, ``matrix_rank``, spectral norms, ``cond``) are in
``nova.decompositions_spectral``.
"""
from __future__ import annotations

import math
from collections import namedtuple
from typing import Any

import numpy as np

from nova.autograd.function import Function, FunctionCtx
from nova.core import dtypes as dt
from nova.core.errors import ArgumentError, DTypeError
from nova.core.shapes import broadcast_shapes
from nova.tensor import grad_mode, movement, ops
from nova.tensor import products as _products
from nova.tensor.autocast_state import autocast_op
from nova.tensor.creation import eye
from nova.tensor.numeric import flip
from nova.tensor.tensor import Tensor

__all__ = ["LinAlgError", "cholesky", "cholesky_ex", "det", "inv", "inv_ex", "logdet", "lu",
           "lu_factor", "lu_factor_ex", "lu_solve", "slogdet", "solve", "solve_ex",
           "solve_triangular"]

CholeskyResult = namedtuple("linalg_cholesky_ex", ["L", "info"])
LUFactorResult = namedtuple("linalg_lu_factor", ["LU", "pivots"])
LUFactorExResult = namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])
LUResult = namedtuple("linalg_lu", ["P", "L", "U"])
SlogdetResult = namedtuple("linalg_slogdet", ["sign", "logabsdet"])
InvExResult = namedtuple("linalg_inv_ex", ["inverse", "info"])
SolveExResult = namedtuple("linalg_solve_ex", ["result", "info"])


class LinAlgError(RuntimeError):
    """A matrix the factorization cannot handle (not positive-definite, singular): a
    ``RuntimeError``, as ``torch.linalg.LinAlgError``. The message names the batch
    element (flattened over the batch dims) and the failing order."""


# ---------------------------------------------------------------- argument checks


def _check_matrices(op: str, A: Any, name: str = "A", square: bool = True) -> None:
    """``A`` is a float32/float64 tensor of (batches of) matrices, square if asked."""
    ops._check_tensor(op, A)
    if A.ndim < 2:
        raise ArgumentError(f"{op}: The input tensor {name} must have at least 2 dimensions, "
                            f"got shape {A.shape}")
    if A.dtype not in (dt.float32, dt.float64):
        raise DTypeError(f"{op}: expected {name} of dtype float32 or float64, got "
                         f"{A.dtype.name}")
    if square and A.shape[-1] != A.shape[-2]:
        raise ArgumentError(f"{op}: {name} must be batches of square matrices, but they are "
                            f"{A.shape[-2]} by {A.shape[-1]} matrices (shape {A.shape})")


def _check_same_dtype(op: str, A: Tensor, B: Tensor) -> None:
    if A.dtype != B.dtype:
        raise DTypeError(f"{op}: Expected A and B to have the same dtype, but found A of type "
                         f"{A.dtype.name} and B of type {B.dtype.name} instead")


def _raise_on_info(op: str, info: Tensor, message: Any,
                   error: type[RuntimeError] = LinAlgError) -> None:
    """Realize ``info`` (one host read: the pending work runs as one step) and raise
    ``error`` for the first nonzero entry, naming its batch element when batched;
    ``message(k)`` says what order ``k`` means."""
    if info.numel() == 0:
        return
    values = info.numpy().reshape(-1)
    bad = np.flatnonzero(values)
    if bad.size:
        where = f"(Batch element {bad[0]}): " if info.ndim else ""
        raise error(f"{op}: {where}{message(int(values[bad[0]]))}")


# ---------------------------------------------------------------- the step kernels
#
# Each algorithm is the textbook unblocked one, unrolled into its steps, and every step
# records the same ops on the same shapes: the step's position is data, never an op's
# attribute (see the module docstring). Two devices keep it so: a one-hot column ``e``
# carried in a state ``[values | e]`` marks the current row and moves down one row per
# step (the substitution, Cholesky, the pivots' permutation), and the LU rotates its
# working matrix so that the current column is always column 0. Each step reads its
# state in reductions (a selected row, an argmax) and in its update, so the compiler
# stores the state once per step rather than fusing the whole elimination into one
# kernel -- and the kernels of one step are those of every other.
#
# The kernels take checked float matrices with ``B``'s batch dims already broadcast
# against the factor's (a factor may have fewer batch dims).


def _iota(shape: tuple[int, ...], dim: int = -1) -> Tensor:
    """0, 1, ... along ``dim`` of ``shape`` (int64)."""
    return ops.prim("iota", [], {"dim": dim % len(shape)}, shape, dt.int64)


def _roll(X: Tensor, dim: int, down: bool) -> Tensor:
    """``X`` rotated one place along ``dim``: toward the end (the last slice wraps to
    the front) when ``down``, else toward the start."""
    n = X.shape[dim]
    if down:
        return movement.cat([movement.narrow(X, dim, n - 1, 1),
                             movement.narrow(X, dim, 0, n - 1)], dim)
    return movement.cat([movement.narrow(X, dim, 1, n - 1), movement.narrow(X, dim, 0, 1)],
                        dim)


def _pick(sel: Tensor, X: Tensor, dim: int) -> Tensor:
    """The entries of ``X`` where the one-hot ``sel`` is True, along ``dim`` (kept):
    a row or column selected by ``where`` and a sum, so an inf or NaN elsewhere in
    ``X`` stays out (a product with the one-hot would give 0 * inf = NaN)."""
    return ops.where(sel, X, 0).sum(dim, keepdim=True)


def _first_matrix(X: Tensor) -> Tensor:
    """The first matrix of a batch: the selector, the same in every batch element."""
    return X[(0,) * (X.ndim - 2)]


def _stepper(state: Tensor, columns: int) -> Any:
    """The function from a step's ``update`` (the new values of the first ``columns``
    columns; the last column is the selector) to the next state, the selector moved
    one row down: one elementwise op over the whole state."""
    last = _iota((state.shape[-1],)) >= columns
    return lambda state, update: ops.where(last, _roll(state, -2, True), update)


def _start_state(values: Tensor, row: int) -> Tensor:
    """``[values | e]`` with ``e`` marking ``row``."""
    start = ops.cast(_iota((values.shape[-2], 1), 0) == row, values.dtype)
    return movement.cat([values, movement.expand(start, values.shape[:-1] + (1,))], -1)


def _substitute(T: Tensor, B: Tensor, upper: bool, unit: bool) -> Tensor:
    """``T^-1 B`` for triangular ``T`` (..., n, n), by forward substitution row after
    row (``x_j = (b_j - T[j, :j] x[:j]) / T[j, j]``). An upper ``T`` is solved as the
    lower ``J T J`` (``J`` reverses the rows: ``x = J (J T J)^-1 J b``), so both share
    one set of kernels. Reads only ``T``'s triangle, and its diagonal unless ``unit``."""
    n, k = B.shape[-2:]
    batch = B.shape[:-2]
    if n == 0 or k == 0 or 0 in batch:
        return ops.full_const(0, B.shape, B.dtype)
    if upper:
        return flip(_substitute(flip(T, (-2, -1)), flip(B, -2), False, unit), -2)
    strict = T.tril(-1)
    diag = T.diagonal(0, -2, -1).unsqueeze(-1)
    state = _start_state(ops.full_const(0, B.shape, B.dtype), 0)    # [X | e]: row j
    step = _stepper(state, k)
    pad = ops.full_const(0, batch + (1, 1), B.dtype)
    for _ in range(n):
        e = _first_matrix(state)[:, k:] > 0.5
        x = _pick(e, B, -2) - _pick(e, strict, -2) @ state[..., :k]    # X's rows >= j are 0
        if not unit:
            x = x / _pick(e, diag, -2)
        state = step(state, ops.where(e, movement.cat([x, pad], -1), state))
    return state[..., :k]


def _cholesky_lower(A: Tensor) -> Tensor:
    """The lower Cholesky factor of ``A`` (..., n, n), reading its lower triangle, column
    after column (Cholesky-Crout: ``v = A[j:, j] - L[j:, :j] L[j, :j]^T``, ``L[j, j] =
    sqrt(v_j)``, ``L[j+1:, j] = v / L[j, j]``). A leading minor that is not
    positive-definite gives a diagonal entry that is NaN (the square root of a negative)
    or 0, and NaN/inf after it."""
    n = A.shape[-1]
    if n == 0 or 0 in A.shape:
        return ops.full_const(0, A.shape, A.dtype)
    lower = A.tril()
    state = _start_state(ops.full_const(0, A.shape, A.dtype), 0)    # [L | e]
    step = _stepper(state, n)
    no = ops.full_const(False, (1, 1), dt.bool_)
    for _ in range(n):
        e = _first_matrix(state)[:, n:] > 0.5                         # (n, 1): row j
        below = ops.cast(ops.cast(e, dt.int32).cumsum(0), dt.bool_)    # rows >= j
        L = state[..., :n]
        v = ops.where(below, _pick(e.mT, lower, -1) - L @ _pick(e, L, -2).mT, 0.0)
        root = _pick(e, v, -2).sqrt()
        column = ops.where(e, root, ops.where(below, v / root, 0.0))
        in_column = movement.cat([e.mT, no], -1)                       # (1, n + 1): column j
        state = step(state, ops.where(in_column, column, state))
    return state[..., :n]


def _permute_rows(X: Tensor, perm: Tensor) -> Tensor:
    """Rows ``X[..., perm[i], :]``; ``perm`` (..., m, 1) broadcasts against ``X``."""
    return ops.gather(X, X.ndim - 2, movement.expand(perm, X.shape))


def _unrotate(X: Tensor, dim: int, k: int) -> Tensor:
    """Undo ``k`` rotations of ``X`` one place toward the start along ``dim``."""
    n = X.shape[dim]
    k %= n
    if k == 0:
        return X
    return movement.cat([movement.narrow(X, dim, n - k, k), movement.narrow(X, dim, 0, n - k)],
                        dim)


def _lu(A: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """LU with partial pivoting of ``A`` (..., m, n), LAPACK's ``getf2`` step by step:
    the row with the largest ``|a|`` in the current column (the first of ties, as
    ``idamax``) is swapped into place, the rows below are divided by the pivot (by 1 if
    it is 0: the column is then all zeros, and LAPACK skips the scaling) and the rank-1
    update is subtracted. The working matrix is ``[S | F | origin]``: ``S`` the Schur
    complement still to factor, ``F`` the finished rows of ``U`` and columns of ``L``,
    ``origin`` each row's row in ``A`` (exact in float32 up to 2^24 rows); after each
    step it is rotated one row and one column toward the start, so the next pivot
    column is column 0 and the finished rows and columns wrap to the end, where ``S``
    is 0 (ties at 0 thus pick an unfinished row, as LAPACK's). Returns ``LU`` (``L``'s
    unit diagonal implied), the row order ``perm`` (int64, ``A[perm] = L U``) and
    LAPACK's 1-based pivots (int64)."""
    m, n = A.shape[-2:]
    batch = A.shape[:-2]
    k = min(m, n)
    if k == 0 or 0 in batch:
        return (ops.full_const(0, A.shape, A.dtype), movement.expand(_iota((m,)), batch + (m,)),
                ops.full_const(0, batch + (k,), dt.int64))
    top = _iota((m, 1), 0) == 0
    left = _iota((n,)) == 0
    keep = ops.logical_not(top | left)
    rows = _iota(batch + (m, 1), -2)
    origin = movement.expand(ops.cast(rows, A.dtype), batch + (m, 1))
    M = movement.cat([A, ops.full_const(0, A.shape, A.dtype), origin], -1)
    offsets = []
    for _ in range(k):
        p = M[..., :, :1].abs().argmax(-2, keepdim=True)                  # (..., 1, 1)
        M = _permute_rows(M, ops.where(rows == 0, p, ops.where(rows == p, 0, rows)))
        S, F = M[..., :n], M[..., n:2 * n]
        pivot = S[..., :1, :1]
        l = ops.where(top, 0.0, S[..., :1] / ops.where(pivot == 0, 1.0, pivot))
        u = S[..., :1, :]
        F = F + ops.where(top, u, 0.0) + ops.where(left, l, 0.0)
        S = ops.where(keep, S - l * u, 0.0)
        M = _roll(movement.cat([_roll(S, -1, False), _roll(F, -1, False), M[..., 2 * n:]], -1),
                  -2, False)
        offsets.append(p)
    M = _unrotate(M, -2, k)
    LU = _unrotate(M[..., n:2 * n], -1, k)
    perm = ops.cast(M[..., 2 * n], dt.int64)
    pivots = movement.reshape(movement.cat(offsets, -1), batch + (k,)) + _iota((k,)) + 1
    return LU, perm, pivots


def _pivots_to_perm(pivots: Tensor, m: int) -> Tensor:
    """The row order (int64, ``A[perm] = L U``) that LAPACK's sequential swaps make:
    ``perm[j]`` and ``perm[pivots[j] - 1]`` exchanged for j = 0, 1, ... in turn (the
    state ``[perm | target | e]`` carries row j's swap target and the selector)."""
    batch, k = pivots.shape[:-1], pivots.shape[-1]
    if k == 0 or 0 in batch:
        return movement.expand(_iota((m,)), batch + (m,))
    rows = _iota(batch + (m, 1), -2)
    targets = ops.cast(pivots, dt.int64).unsqueeze(-1) - 1
    if k < m:
        targets = movement.cat([targets, rows[..., k:, :]], -2)         # no swap
    state = _start_state(movement.cat([rows, targets], -1), 0)
    step = _stepper(state, 2)
    for _ in range(k):
        e = _first_matrix(state)[:, 2:] > 0
        perm = state[..., :1]
        target = _pick(e, state[..., 1:2], -2)
        at_target = rows == target
        swapped = ops.where(e, _pick(at_target, perm, -2),
                            ops.where(at_target, _pick(e, perm, -2), perm))
        state = step(state, movement.cat([swapped, state[..., 1:]], -1))
    return state[..., 0]


def _zero_pivot_info(LU: Tensor) -> Tensor:
    """LAPACK's ``getrf`` info: the 1-based order of the first exactly zero ``U[k, k]``,
    0 if none (int32, one per matrix)."""
    return _first_true(LU.diagonal(0, -2, -1) == 0)


def _first_true(bad: Tensor) -> Tensor:
    """1 + the index of the first True along the last dim, 0 where there is none."""
    if bad.shape[-1] == 0:
        return ops.full_const(0, bad.shape[:-1], dt.int32)
    first = ops.cast(bad, dt.int32).argmax(-1) + 1
    return ops.cast(ops.where(bad.any(-1), first, 0), dt.int32)


def _lu_solve(LU: Tensor, perm: Tensor, B: Tensor, adjoint: bool = False) -> Tensor:
    """``A^-1 B`` (``A^-T B`` with ``adjoint``) from ``A[perm] = L U``; ``B``'s batch
    dims broadcast already."""
    if not adjoint:
        y = _substitute(LU, _permute_rows(B, perm.unsqueeze(-1)), False, True)
        return _substitute(LU, y, True, False)
    # A^T = U^T L^T P^T: solve with U^T (lower), then L^T (unit upper), then undo P^T
    z = _substitute(LU.mT, _substitute(LU.mT, B, False, False), True, True)
    index = movement.expand(perm.unsqueeze(-1), z.shape)
    return ops.scatter(ops.full_const(0, z.shape, z.dtype), z.ndim - 2, index, z)


def _perm_sign(pivots: Tensor, dtype: dt.DType) -> Tensor:
    """+-1: the parity of the row swaps ``pivots`` (1-based, LAPACK's) make."""
    swaps = (pivots != _iota(pivots.shape) + 1).sum(-1)
    return ops.cast(1 - 2 * (swaps % 2), dtype)


def _expand_batch(op: str, A: Tensor, B: Tensor) -> Tensor:
    """``B`` expanded to the batch dims it and ``A`` broadcast to."""
    batch = broadcast_shapes(op, A.shape[:-2], B.shape[:-2])
    return movement.expand(B, batch + B.shape[-2:])


def _eye_like(A: Tensor) -> Tensor:
    return eye(A.shape[-1], dtype=A.dtype)


def _recomputing() -> bool:
    """Whether a backward is being recorded under ``create_graph``: then it recomputes
    its forward's outputs with differentiable ops (the saved ones were computed under
    ``no_grad``, so their dependence on the inputs would be missing)."""
    return grad_mode.STATE.enabled


# ---------------------------------------------------------------- triangular solve


class _SolveTriangular(Function):
    """``X = A^-1 B`` for triangular ``A``: ``gB = A^-T g``, ``gA = -gB X^T`` on
    ``A``'s triangle (off the diagonal when ``unit``)."""

    pure_backward = True

    @staticmethod
    def forward(ctx: FunctionCtx, A: Tensor, B: Tensor, upper: bool, unit: bool) -> Tensor:
        X = _substitute(A, B, upper, unit)
        ctx.save_for_backward(A, B, X)
        ctx.flags = (upper, unit)
        return X

    @staticmethod
    def backward(ctx: FunctionCtx, g: Tensor) -> tuple[Any, ...]:
        A, B, X = ctx.saved_tensors
        upper, unit = ctx.flags
        if _recomputing():
            X = _SolveTriangular.apply(A, B, upper, unit)
            gB = _SolveTriangular.apply(A.mT, g, not upper, unit)
        else:
            gB = _substitute(A.mT, g, not upper, unit)
        gA = None
        if ctx.needs_input_grad[0]:
            gA = -(gB @ X.mT)
            gA = gA.triu(1 if unit else 0) if upper else gA.tril(-1 if unit else 0)
        return gA, gB, None, None


@autocast_op("linalg.solve_triangular")
def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True,
                     unitriangular: bool = False) -> Tensor:
    """``X`` with ``A X = B`` (``X A = B`` when not ``left``) for triangular ``A``
    (``torch.linalg.solve_triangular``): only ``A``'s upper or lower triangle is read,
    and not its diagonal when ``unitriangular`` (taken as ones). ``A`` (*, n, n), ``B``
    (*, n, k) (``left``) or (*, k, n), batch dims broadcast. A zero on the diagonal
    gives inf/NaN, as PyTorch's."""
    op = "linalg.solve_triangular"
    _check_matrices(op, A)
    _check_matrices(op, B, "B", square=False)
    _check_same_dtype(op, A, B)
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise ArgumentError(f"{op}: Incompatible shapes of A and B for the equation "
                            f"{'AX = B' if left else 'XA = B'} ({n}x{n} and "
                            f"{B.shape[-2]}x{B.shape[-1]})")
    if not left:    # X A = B  <=>  A^T X^T = B^T
        return solve_triangular(A.mT, B.mT, upper=not upper, left=True,
                                unitriangular=unitriangular).mT
    return _SolveTriangular.apply(A, _expand_batch(op, A, B), bool(upper), bool(unitriangular))


# ---------------------------------------------------------------- Cholesky


class _Cholesky(Function):
    """``L = chol(A)`` and its ``info``; the gradient (Murray 2016, PyTorch's form)
    ``L^-T S L^-1`` with ``S = (M + tril(M, -1)^T) / 2``, ``M = tril(L^T gL)``: the
    symmetric gradient, for ``A`` seen as a symmetric matrix."""

    pure_backward = True

    @staticmethod
    def forward(ctx: FunctionCtx, A: Tensor) -> tuple[Tensor, Tensor]:
        L = _cholesky_lower(A)
        ctx.save_for_backward(A, L)
        return L, _first_true(ops.logical_not(L.diagonal(0, -2, -1) > 0))

    @staticmethod
    def backward(ctx: FunctionCtx, gL: Tensor, _info: Any) -> Tensor:
        A, L = ctx.saved_tensors
        if _recomputing():
            L = _Cholesky.apply(A)[0]
        M = (L.mT @ gL).tril()
        S = 0.5 * (M + M.tril(-1).mT)
        if _recomputing():
            return solve_triangular(L, solve_triangular(L.mT, S, upper=True), upper=False,
                                    left=False)
        return _substitute(L.mT, _substitute(L.mT, S, True, False).mT, True, False).mT  # S = S^T


def _cholesky(op: str, A: Tensor, upper: bool, check_errors: bool) -> CholeskyResult:
    _check_matrices(op, A)
    # the upper factor reads the upper triangle, as LAPACK's uplo='U': U = chol(A^T)^T
    L, info = _Cholesky.apply(A.mT if upper else A)
    if check_errors:
        _raise_on_info(op, info, lambda k: f"The factorization could not be completed "
                                           f"because the input is not positive-definite "
                                           f"(the leading minor of order {k} is not "
                                           f"positive-definite).")
    return CholeskyResult(L.mT if upper else L, info)


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False) -> CholeskyResult:
    """``(L, info)`` (``torch.linalg.cholesky_ex``): ``cholesky``'s factor and per
    matrix ``info`` (int32): 0, or the order of the first leading minor that is not
    positive-definite -- ``L`` then holds NaN or inf from that column on (LAPACK's is
    a partial factor). Lazy, unless ``check_errors``."""
    return _cholesky("linalg.cholesky_ex", A, upper, check_errors)


@autocast_op("linalg.cholesky")
def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """The Cholesky factor ``L`` (lower-triangular with a positive diagonal, ``A = L
    L^T``) of the symmetric positive-definite ``A`` (*, n, n), read from its lower
    triangle (``torch.linalg.cholesky``); with ``upper``, ``U`` (``A = U^T U``) read
    from the upper triangle. A matrix that is not positive-definite raises
    ``LinAlgError`` naming the batch element and the leading minor, which needs the
    values: this realizes the pending work (see the module docstring; ``cholesky_ex``
    is the lazy form)."""
    return _cholesky("linalg.cholesky", A, upper, True).L


# ---------------------------------------------------------------- LU


def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False
                 ) -> LUFactorExResult:
    """``(LU, pivots, info)`` (``torch.linalg.lu_factor_ex``): the LU factorization
    with partial pivoting of ``A`` (*, m, n), ``L`` (unit diagonal, not stored) and
    ``U`` packed in ``LU``; ``pivots`` (*, min(m, n), int32) in LAPACK's form: row
    ``k`` was swapped with row ``pivots[k] - 1``, for k = 0, 1, ... in turn; ``info``
    (int32): 0, or the 1-based order of the first zero on ``U``'s diagonal. Lazy,
    unless ``check_errors``."""
    op = "linalg.lu_factor_ex"
    _check_matrices(op, A, square=False)
    _check_pivot(op, pivot)
    LU, _, pivots = _lu(A)
    info = _zero_pivot_info(LU)
    if check_errors:
        _raise_on_info(op, info, _zero_pivot, RuntimeError)
    return LUFactorExResult(LU, ops.cast(pivots, dt.int32), info)


def _check_pivot(op: str, pivot: bool) -> None:
    if not pivot:
        raise NotImplementedError(f"{op}: LU without pivoting is not implemented (as "
                                  "PyTorch's on the CPU); use pivot=True")


def _zero_pivot(k: int) -> str:
    return (f"U[{k - 1},{k - 1}] is zero and using it on lu_solve would result in a "
            f"division by zero. If you still want to perform the factorization, consider "
            f"calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")


def lu_factor(A: Tensor, *, pivot: bool = True) -> LUFactorResult:
    """``(LU, pivots)`` of ``lu_factor_ex``; a zero on ``U``'s diagonal raises a
    ``RuntimeError``, as PyTorch's, which realizes the pending work (see the module
    docstring)."""
    LU, pivots, info = lu_factor_ex(A, pivot=pivot)
    _raise_on_info("linalg.lu_factor", info, _zero_pivot, RuntimeError)
    return LUFactorResult(LU, pivots)


def lu(A: Tensor, *, pivot: bool = True) -> LUResult:
    """``(P, L, U)`` with ``A = P L U`` (``torch.linalg.lu``): ``P`` a permutation
    matrix, ``L`` (*, m, k) unit lower-triangular, ``U`` (*, k, n) upper-triangular,
    ``k = min(m, n)``. Never raises (a singular ``A`` has zeros on ``U``'s diagonal)."""
    op = "linalg.lu"
    _check_matrices(op, A, square=False)
    _check_pivot(op, pivot)
    m, n = A.shape[-2:]
    k = min(m, n)
    LU, perm, _ = _lu(A)
    P = ops.cast(ops.one_hot(perm, m), A.dtype).mT      # P[perm[i], i] = 1
    L = LU[..., :, :k].tril(-1) + eye(m, k, dtype=A.dtype)
    return LUResult(P, L, LU[..., :k, :].triu())


@autocast_op("linalg.lu_solve")
def lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True,
             adjoint: bool = False) -> Tensor:
    """``X`` with ``A X = B`` from ``lu_factor``'s ``(LU, pivots)`` of a square ``A``
    (``torch.linalg.lu_solve``): ``X A = B`` when not ``left``, ``A^T`` for ``A``
    with ``adjoint``. ``B`` (*, n, k) (*, k, n when not ``left``), batch dims
    broadcast. Differentiable in ``LU`` and ``B`` through its ops."""
    op = "linalg.lu_solve"
    _check_matrices(op, LU, "LU")
    _check_matrices(op, B, "B", square=False)
    _check_same_dtype(op, LU, B)
    n = LU.shape[-1]
    ops._check_tensor(op, pivots)
    if pivots.dtype not in (dt.int32, dt.int64) or pivots.shape != LU.shape[:-1]:
        raise ArgumentError(f"{op}: pivots must be an int32 tensor of shape {LU.shape[:-1]} "
                            f"(LU's shape without its last dim), got {pivots.dtype.name} "
                            f"of shape {pivots.shape}")
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise ArgumentError(f"{op}: Incompatible shapes of A and B for the equation "
                            f"{'AX = B' if left else 'XA = B'} ({n}x{n} and "
                            f"{B.shape[-2]}x{B.shape[-1]})")
    if not left:    # X A = B  <=>  A^T X^T = B^T
        return lu_solve(LU, pivots, B.mT, adjoint=not adjoint).mT
    return _lu_solve(LU, _pivots_to_perm(pivots, n), _expand_batch(op, LU, B), adjoint)


# ---------------------------------------------------------------- solve, inv


class _Solve(Function):
    """``X = A^-1 B`` and ``info`` by LU: ``gB = A^-T g`` (from the saved factors),
    ``gA = -gB X^T``."""

    pure_backward = True

    @staticmethod
    def forward(ctx: FunctionCtx, A: Tensor, B: Tensor) -> tuple[Tensor, Tensor]:
        LU, perm, _ = _lu(A)
        X = _lu_solve(LU, perm, B)
        ctx.save_for_backward(A, B, LU, perm, X)
        return X, _zero_pivot_info(LU)

    @staticmethod
    def backward(ctx: FunctionCtx, g: Tensor, _info: Any) -> tuple[Any, ...]:
        A, B, LU, perm, X = ctx.saved_tensors
        if _recomputing():
            X = _Solve.apply(A, B)[0]
            gB = _Solve.apply(A.mT, g)[0]
        else:
            gB = _lu_solve(LU, perm, g, adjoint=True)
        return (-(gB @ X.mT) if ctx.needs_input_grad[0] else None), gB


def _solve_args(op: str, A: Tensor, B: Tensor, left: bool) -> tuple[Tensor, bool]:
    """``B`` as (*, n, k) for ``A X = B`` (transposed when not ``left``, a column when
    it is a batch of vectors), and whether it was a vector."""
    _check_matrices(op, A)
    ops._check_tensor(op, B)
    _check_same_dtype(op, A, B)
    n = A.shape[-1]
    # PyTorch's rule: B is a (batch of) vector(s) when 1-d or of shape A.shape[:-1]
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])
    if vector:
        B = B.unsqueeze(-1) if left else B.unsqueeze(-2)
    if B.ndim < 2 or (B.shape[-2] if left else B.shape[-1]) != n:
        shape = f"{B.shape[-2]}x{B.shape[-1]}" if B.ndim >= 2 else f"{B.shape}"
        raise ArgumentError(f"{op}: Incompatible shapes of A and B for the equation "
                            f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {shape})")
    return (B if left else B.mT), vector


def _solve(op: str, A: Tensor, B: Tensor, left: bool, check_errors: bool) -> SolveExResult:
    B, vector = _solve_args(op, A, B, left)
    M = A if left else A.mT        # X A = B  <=>  A^T X^T = B^T
    X, info = _Solve.apply(M, _expand_batch(op, M, B))
    if check_errors:
        _raise_on_info(op, info, lambda k: "The solver failed because the input matrix "
                                           "is singular.")
    if vector:
        X = X.squeeze(-1)
    elif not left:
        X = X.mT
    return SolveExResult(X, info)


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False
             ) -> SolveExResult:
    """``(X, info)`` (``torch.linalg.solve_ex``): ``solve``'s ``X`` and ``lu_factor``'s
    ``info`` (0, or the order of the first zero pivot: ``A`` singular, ``X`` inf/NaN).
    Lazy, unless ``check_errors``."""
    return _solve("linalg.solve_ex", A, B, left, check_errors)


@autocast_op("linalg.solve")
def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """``X`` with ``A X = B`` (``X A = B`` when not ``left``) for square ``A`` (*, n,
    n) (``torch.linalg.solve``), by LU with partial pivoting. ``B`` (*, n, k), or a
    batch of vectors (*, n) when 1-d or of shape ``A.shape[:-1]`` (PyTorch's rule);
    batch dims broadcast. A singular ``A`` (a zero pivot) raises ``LinAlgError``, which
    realizes the pending work (see the module docstring; ``solve_ex`` is lazy)."""
    return _solve("linalg.solve", A, B, left, True).result


class _Inv(Function):
    """``X = A^-1`` and ``info``; ``gA = -X^T g X^T``."""

    pure_backward = True

    @staticmethod
    def forward(ctx: FunctionCtx, A: Tensor) -> tuple[Tensor, Tensor]:
        LU, perm, _ = _lu(A)
        X = _lu_solve(LU, perm, movement.expand(_eye_like(A), A.shape))
        ctx.save_for_backward(A, X)
        return X, _zero_pivot_info(LU)

    @staticmethod
    def backward(ctx: FunctionCtx, g: Tensor, _info: Any) -> Tensor:
        A, X = ctx.saved_tensors
        if _recomputing():
            X = _Inv.apply(A)[0]
        return -(X.mT @ g @ X.mT)


def _inv(op: str, A: Tensor, check_errors: bool) -> InvExResult:
    _check_matrices(op, A)
    X, info = _Inv.apply(A)
    if check_errors:
        _raise_on_info(op, info, lambda k: f"The diagonal element {k} is zero, the inversion "
                                           f"could not be completed because the input "
                                           f"matrix is singular.")
    return InvExResult(X, info)


def inv_ex(A: Tensor, *, check_errors: bool = False) -> InvExResult:
    """``(A^-1, info)`` (``torch.linalg.inv_ex``): ``info`` as ``solve_ex``'s. Lazy,
    unless ``check_errors``."""
    return _inv("linalg.inv_ex", A, check_errors)


@autocast_op("linalg.inv")
def inv(A: Tensor) -> Tensor:
    """The inverse of the square ``A`` (*, n, n) (``torch.linalg.inv``), by LU with
    partial pivoting. A singular ``A`` raises ``LinAlgError``, which realizes the
    pending work (see the module docstring; ``inv_ex`` is lazy)."""
    return _inv("linalg.inv", A, True).inverse


# ---------------------------------------------------------------- determinants


class _Det(Function):
    """``det A`` = the product of ``U``'s diagonal times the swaps' sign; ``gA = g
    adj(A)^T``, the cofactors (``_cofactors``: finite where ``A`` is singular too)."""

    pure_backward = True

    @staticmethod
    def forward(ctx: FunctionCtx, A: Tensor) -> Tensor:
        LU, perm, pivots = _lu(A)
        sign = _perm_sign(pivots, A.dtype)
        ctx.save_for_backward(A, LU, perm, sign)
        return LU.diagonal(0, -2, -1).prod(-1) * sign

    @staticmethod
    def backward(ctx: FunctionCtx, g: Tensor) -> Tensor:
        A, LU, perm, sign = ctx.saved_tensors
        if _recomputing():
            return (g * _Det.apply(A))[..., None, None] * _Inv.apply(A)[0].mT
        return g[..., None, None] * _cofactors(LU, perm, sign)


def _cofactors(LU: Tensor, perm: Tensor, sign: Tensor) -> Tensor:
    """``adj(A)^T`` (the gradient of ``det A``) from ``A[perm] = L U``, exact when one
    pivot is 0 -- a singular ``A`` of rank n - 1, where ``det A A^-T`` is 0 * inf.

    ``adj(A) = adj(U) L^-1 sign P``, and ``adj(U)`` is linear in each diagonal entry,
    so with ``d_k`` the smallest pivot and ``U_c`` its copy with ``d_k`` replaced by
    ``c`` (``d_k``'s sign times the largest |pivot|: invertible unless a second pivot
    is 0), interpolating between ``d_k = 0`` (where ``adj(U)`` is the rank-1 ``p c^2
    (U_c^-1 e_k)(e_k^T U_c^-1)``) and ``d_k = c`` gives ``adj(A)^T = sign p (c (c - d_k)
    y x^T + d_k A_c^-T)`` with ``p`` the other pivots' product, ``x = U_c^-1 e_k`` and
    ``y = A_c^-T e_k``. For an invertible ``A`` this is ``det A A^-T``. Two or more
    zero pivots (rank n - 2 or less) leave ``U_c`` singular, but there every (n-1)-minor
    of ``A`` vanishes: the cofactors are exactly 0."""
    n = LU.shape[-1]
    if n == 0 or 0 in LU.shape:
        return ops.full_const(0, LU.shape, LU.dtype)
    diag = LU.diagonal(0, -2, -1)                                   # (..., n)
    size = diag.abs()
    at_k = _iota(diag.shape) == size.argmin(-1, keepdim=True)       # the smallest pivot
    d_k = _pick(at_k, diag, -1).unsqueeze(-1)                       # (..., 1, 1)
    largest = size.amax(-1, keepdim=True).unsqueeze(-1)
    c = ops.where(d_k < 0, -1.0, 1.0) * ops.where(largest == 0, 1.0, largest)
    p = ops.where(at_k, 1.0, diag).prod(-1, keepdim=True).unsqueeze(-1)
    on_k = ops.logical_and(_iota((n, n), 0) == _iota((n, n), 1), at_k.unsqueeze(-2))
    LU_c = ops.where(on_k, c, LU)
    inv_T = _lu_solve(LU_c, perm, movement.expand(_eye_like(LU), LU.shape), adjoint=True)
    y = _pick(at_k.unsqueeze(-2), inv_T, -1)                        # (..., n, 1)
    x = _substitute(LU_c, ops.cast(at_k, LU.dtype).unsqueeze(-1), True, False)
    cof = (sign[..., None, None] * p) * (c * (c - d_k) * (y @ x.mT) + d_k * inv_T)
    rank_n_2 = ((diag == 0).sum(-1) >= 2)[..., None, None]
    return ops.where(rank_n_2, 0.0, cof)


def _inverse_transposed(A: Tensor, LU: Tensor, perm: Tensor) -> Tensor:
    """``A^-T`` in a backward: from the saved factors, or differentiably under
    ``create_graph``."""
    if _recomputing():
        return _Inv.apply(A)[0].mT
    return _lu_solve(LU, perm, movement.expand(_eye_like(A), A.shape), adjoint=True)


class _Slogdet(Function):
    """``(sign, log|det A|)``; ``gA = g A^-T`` (``sign`` has no gradient)."""

    pure_backward = True

    @staticmethod
    def forward(ctx: FunctionCtx, A: Tensor) -> tuple[Tensor, Tensor]:
        LU, perm, pivots = _lu(A)
        diag = LU.diagonal(0, -2, -1)
        sign = diag.sign().prod(-1) * _perm_sign(pivots, A.dtype)
        ctx.save_for_backward(A, LU, perm)
        ctx.mark_non_differentiable(sign)
        return sign, diag.abs().log().sum(-1)

    @staticmethod
    def backward(ctx: FunctionCtx, _sign: Any, g: Tensor) -> Tensor:
        A, LU, perm = ctx.saved_tensors
        return g[..., None, None] * _inverse_transposed(A, LU, perm)


def det(A: Tensor) -> Tensor:
    """The determinant of the square ``A`` (*, n, n) (``torch.linalg.det``), by LU
    with partial pivoting: 0 for a singular matrix (never raises), 1 for 0 x 0."""
    _check_matrices("linalg.det", A)
    return _Det.apply(A)


def slogdet(A: Tensor) -> SlogdetResult:
    """``(sign, logabsdet)`` with ``det A = sign * exp(logabsdet)``
    (``torch.linalg.slogdet``): no overflow for large determinants; a singular matrix
    gives (0, -inf)."""
    _check_matrices("linalg.slogdet", A)
    return SlogdetResult(*_Slogdet.apply(A))


def logdet(input: Tensor) -> Tensor:
    """``log(det A)`` (``torch.logdet``): NaN where the determinant is negative, -inf
    where it is 0."""
    _check_matrices("logdet", input)
    sign, logabs = _Slogdet.apply(input)
    return ops.where(sign < 0, math.nan, logabs)


def matrix_power(input: Tensor, n: int) -> Tensor:
    """``input`` multiplied by itself ``n`` times (``torch.linalg.matrix_power``), by
    repeated squaring (``tensor.products.matrix_power``); a negative ``n`` is the power
    ``-n`` of ``inv(A)``, as PyTorch's (a singular matrix raises ``LinAlgError``)."""
    if isinstance(n, int) and not isinstance(n, bool) and n < 0:
        return _products.matrix_power(inv(input), -n)
    return _products.matrix_power(input, n)


# torch.det, torch.slogdet and torch.inverse: the linalg functions under PyTorch's
# top-level name for their argument (``input``; torch.linalg's is ``A``)
def legacy_det(input: Tensor) -> Tensor:
    """``torch.det``: ``linalg.det`` of ``input``."""
    return det(input)


def legacy_slogdet(input: Tensor) -> SlogdetResult:
    """``torch.slogdet``: ``linalg.slogdet`` of ``input``."""
    return slogdet(input)


def legacy_inverse(input: Tensor) -> Tensor:
    """``torch.inverse``: ``linalg.inv`` of ``input``."""
    return inv(input)


# PyTorch's tensor methods and top-level names for four of them (attached here, as
# nova.autograd attaches ``register_hook``: the tensor layer does not import this one)
Tensor.det = legacy_det
Tensor.logdet = logdet
Tensor.slogdet = legacy_slogdet
Tensor.inverse = legacy_inverse
Tensor.matrix_power = matrix_power

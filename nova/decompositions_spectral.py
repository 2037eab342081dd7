"""The orthogonal and spectral decompositions under ``torch.linalg``'s names (``nv.linalg``):
``qr``, ``eigh``, ``eigvalsh``, ``svd``, ``svdvals``, and what is built on them --
``pinv``, ``matrix_rank``, ``lstsq``, ``matrix_norm``/``norm`` with ord 2, -2 and
'nuc', ``cond`` -- batched over leading dims, in float32 and float64, with PyTorch's
output conventions and closed-form gradients. (``nova.decompositions`` holds the
triangular factorizations and explains the approach this module shares.)

**How.** As there, each algorithm is unrolled into steps that record the same ops on
the same shapes -- the step's position is data (the step number carried in the loop's
state), or the steps are identical by construction -- so a decomposition compiles a
few dozen kernels whatever n is:

* ``qr``: Householder QR, LAPACK's ``geqr2`` (``beta = -sign(alpha) ||x||``, no
  reflection where the column below the diagonal is already zero, so ``R``'s diagonal
  has LAPACK's -- and PyTorch's -- signs), then ``Q`` accumulated from the reflectors
  last to first, as ``org2r`` (only ``Q``'s first ``k`` columns in reduced mode).
* ``eigh``: one step of pivoted QR (``A P = Q R``, ``M = Q^T A Q``: one iteration of
  the QR algorithm, which orders a graded spectrum along ``M``'s diagonal) followed by
  cyclic Jacobi in the parallel (round-robin) order: each round rotates n/2 disjoint
  pairs at once, as one orthogonal ``J`` (the pairs' rotations with the round-robin
  permutation folded in: ``M <- J^T M J``, ``V <- V J``), and n - 1 rounds make a sweep
  that meets every pair once. Jacobi rather than tridiagonalization + implicit QR: its
  rounds are identical (QR's bulge chases are n sequential dependent rotations per
  iteration, and its deflation is data-dependent, neither expressible as a fixed graph
  of a few distinct steps), and it is accurate (the eigenvalues to ``eps ||A||``, the
  vectors orthonormal to ``n eps``). The sweeps are fixed, ``sweeps(n) = max(6,
  ceil(log2 n) + 4)`` (7 at n = 8, 9 at 32, 10 at 64; 1 for n <= 2): measured in
  float64 (a prototype of these steps) on random symmetric matrices, RBF kernel
  matrices (eigenvalues decaying to the jitter) and graded indefinite ones
  (|eigenvalues| from 1e-10 to 1e5), eigenvalues, residuals and orthogonality within
  ``10 n eps`` (relative to ``||A||``) of LAPACK's at n = 8 to 64 (at n = 128, one
  graded matrix of six was 7e-11 off: the count is measured, not a bound). Without
  the QR step the kernel and graded matrices needed 12-15 sweeps (random ones 8).
* ``svd``: pivoted QR ``A P = Q R`` (the Drmac-Veselic preconditioner: without it
  one-sided Jacobi had not converged after 8 sweeps on the same kernel and graded
  matrices), then one-sided Jacobi (Hestenes) on ``R^T`` in the same parallel order
  (the pair's Gram entries give the rotation that makes its columns orthogonal),
  ``sweeps(n)`` sweeps, ``n = min`` dimension. With ``R^T W = Y`` (orthogonal columns
  of norms ``S``): ``U = Q W`` (orthonormal by construction, complete with
  ``full_matrices``) and ``V = P Y S^-1``, orthonormalized by a Householder QR that
  also completes the columns of zero singular values (rank-deficient ``A``). Wide
  matrices are decomposed transposed.

Every decomposition first divides the matrix by a power of two near its largest
entry (exact), so the squares the steps sum neither overflow nor underflow.

Costs (``NOVA_CACHE_DIR=$(mktemp -d) python -m benchmarks.linalg_graph_size --timed 8
32 64``, on a shared 2-core machine): a Householder step records about 75 nodes (110
pivoting), a step of ``Q``'s accumulation 20, a Jacobi round 32 (one-sided 34), and
there are ``sweeps(n) (n - 1)`` rounds: eigh records 2,774 nodes at n = 8, 13,278 at 32
and 28,702 at 64 (svd 2,860, 13,824, 29,950; qr 808, 3,040, 6,016). The kernels
compiled stay flat (eigh 42, 39, 39; qr 34, 30, 27; svd 9 more than eigh's), the
launches grow with the rounds (3,427 at n = 32). First realization (record, compile,
run) and replay of the cached step: eigh 5.2 s / 0.05 s at n = 8, 11.8 s / 0.23 s at
32, 21.7 s / 0.55 s at 64; svd about the same; qr 4.7 s / 0.06 s at 32. Each round is
three n x n matmuls (O(n^3)): suited to n up to a hundred or so, and to batches of
small matrices.

**Conventions.** Eigenvalues ascending, singular values descending, as PyTorch;
eigenvector and singular vector signs are not LAPACK's (any sign is a valid
decomposition: compare sign-invariant quantities). ``Q`` and ``R`` are LAPACK's up to
rounding. Jacobi reads a fixed number of sweeps, never the values, so everything stays
lazy; no op here raises on the values (PyTorch's eigh/svd raise when LAPACK fails to
converge, which Jacobi cannot). ``lstsq`` solves by the SVD whatever the driver (see
its docstring for what it returns per driver).

Not provided: ``eig``/``eigvals`` (non-symmetric matrices), complex matrices, svd's
``driver=`` (cuSOLVER's), ``householder_product``, ``ldl_factor``.

**Gradients** (``nv.autograd.Function``, ``pure_backward``; under ``create_graph``
the backward recomputes the forward differentiably, so higher derivatives are exact):
``eigh``: ``V (diag(gL) + F o skew(V^T gV)) V^T`` with ``F_ij = 1/(l_j - l_i)``,
symmetric (PyTorch's; ``UPLO`` only says which triangle is read); ``eigvalsh``: ``V
diag(gL) V^T``; ``svd``: PyTorch's ``svd_backward`` (the reduced factors; with
``full_matrices`` the extra columns get no gradient, as PyTorch narrows them);
``svdvals``: ``U diag(gS) V^T``; ``qr``: the closed form for ``m >= n`` (and its
extension to wide matrices), as PyTorch's, which raises for ``mode='r'`` and for
``mode='complete'`` with more rows than columns; ``pinv``: PyTorch's ``pinv_backward``
(valid where the rank does not change); ``lstsq``: through ``pinv``'s, as PyTorch's.
Repeated eigenvalues (singular values) make ``F`` infinite: a loss that reads the
vectors gets an inf/NaN gradient there (and at a zero singular value of a non-square
matrix), as in PyTorch; one that reads only the values (``eigh(A).eigenvalues``,
``svd(A).S``) gets the values' gradient, as from ``eigvalsh``/``svdvals`` (the
vectors' term is skipped when they receive no gradient, as PyTorch skips it).
"""
from __future__ import annotations

import math
from collections import namedtuple
from typing import Any

from nova.autograd.function import Function, FunctionCtx
from nova.autograd.grad_mode import no_grad
from nova.core import dtypes as dt
from nova.core.errors import ArgumentError, DTypeError
from nova.core.shapes import broadcast_shapes, normalize_dim
from nova.decompositions import (
    _check_matrices, _check_same_dtype, _first_matrix, _iota, _recomputing, inv_ex,
    solve_triangular,
)
from nova.tensor import movement, ops
from nova.tensor.autocast_state import autocast_op
from nova.tensor.creation import eye
from nova.tensor.numeric import flip, vector_norm
from nova.tensor.tensor import Tensor

__all__ = ["cond", "eigh", "eigvalsh", "lstsq", "matrix_norm", "matrix_rank", "norm", "pinv",
           "qr", "svd", "svdvals"]

QRResult = namedtuple("linalg_qr", ["Q", "R"])
LegacyQRResult = namedtuple("qr", ["Q", "R"])
EighResult = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
SVDResult = namedtuple("linalg_svd", ["U", "S", "Vh"])
LegacySVDResult = namedtuple("svd", ["U", "S", "V"])
LstsqResult = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])

_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def sweeps(n: int) -> int:
    """Jacobi sweeps for n x n (see the module docstring for the measurements); one for
    n <= 2, whose single rotation diagonalizes it."""
    return 1 if n <= 2 else max(6, math.ceil(math.log2(n)) + 4)


# ---------------------------------------------------------------- shared pieces


def _zeros(shape: tuple[int, ...], dtype: dt.DType) -> Tensor:
    return ops.full_const(0, shape, dtype)


def _eye(m: int, n: int, batch: tuple[int, ...], dtype: dt.DType) -> Tensor:
    return movement.expand(eye(m, n, dtype=dtype), batch + (m, n))


def _empty(shape: tuple[int, ...]) -> bool:
    return 0 in shape


def _pow2_scale(A: Tensor) -> Tensor:
    """A power of two near each matrix's largest ``|a|`` (1 for a zero matrix), (..., 1,
    1): dividing by it is exact, and keeps the squares the algorithms sum (column
    norms, ``alpha^2 + ||x||^2``) from overflowing or underflowing, as LAPACK's scaled
    norms do."""
    big = A.abs().amax((-2, -1), keepdim=True)
    return ops.where(big == 0, 1.0, big.log2().floor().exp2())


class _Loop:
    """A loop whose steps record the same ops: its state is ``[values | j]``, the step
    number j in a last column (materialized with the values every step, so step j
    reads it as data, never as an op's attribute), and the step's masks compare
    constant index grids with it."""

    def __init__(self, values: Tensor):
        self.width = values.shape[-1]
        self.state = movement.cat([values, _zeros(values.shape[:-1] + (1,), values.dtype)], -1)

    def count(self) -> Tensor:
        """j, (1, 1), read from the first matrix of the batch."""
        return _first_matrix(self.state)[:1, self.width:]

    def values(self) -> Tensor:
        return self.state[..., :self.width]

    def advance(self, values: Tensor) -> None:
        self.state = movement.cat([values, self.state[..., self.width:] + 1.0], -1)


def _grid(shape: tuple[int, int], dim: int, dtype: dt.DType) -> Tensor:
    """Row (dim 0) or column (dim 1) numbers of ``shape``, as ``dtype`` (exact below
    2^24 in float32)."""
    return ops.cast(_iota(shape, dim), dtype)


def _pivot_column(W: Tensor, below: Tensor, cols: Tensor, j: Tensor) -> Tensor:
    """``W`` with column j swapped with the column at or after j whose rows at or below
    j have the largest norm (the first of ties, as LAPACK's ``idamax``)."""
    part = ops.where(below, W, 0.0)
    norms = (part * part).sum(-2, keepdim=True)                       # (..., 1, n)
    p = ops.cast(ops.where(cols >= j, norms, -1.0).argmax(-1, keepdim=True), W.dtype)
    index = ops.where(cols == j, p, ops.where(cols == p, j, cols))
    return ops.gather(W, W.ndim - 1, movement.expand(ops.cast(index, dt.int64), W.shape))


def _reflect(W: Tensor, e: Tensor, below: Tensor, column: Tensor
             ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The Householder reflector of column j (LAPACK's ``dlarfg``): ``I - tau v v^T``
    (``v_j = 1``, zero above j) mapping ``x = W[j:, j]`` to ``beta e_j``, ``beta =
    -sign(alpha) ||x||``, ``alpha = x_j``; none (``tau = 0``, ``beta = alpha``) where
    ``x`` is zero below ``alpha``. Returns ``(W - tau v (v^T W), v, tau, beta)``."""
    x = ops.where(below, W @ column, 0.0)                            # (..., rows, 1)
    alpha = ops.where(e, x, 0.0).sum(-2, keepdim=True)                # (..., 1, 1)
    rest = ops.where(e, 0.0, x)
    rest2 = (rest * rest).sum(-2, keepdim=True)
    norm = (alpha * alpha + rest2).sqrt()
    keep = rest2 == 0
    beta = ops.where(keep, alpha, ops.where(alpha >= 0, -norm, norm))
    tau = ops.where(keep, 0.0, (beta - alpha) / beta)
    v = ops.where(e, 1.0, rest / ops.where(keep, 1.0, alpha - beta))
    return W - (tau * v) * (v.mT @ W), v, tau, beta


def _householder(A: Tensor, pivot: bool) -> tuple[Tensor, Tensor, Tensor | None]:
    """Householder QR of ``A`` (..., m, n), k = min(m, n) steps, with column pivoting
    (the remaining column of largest norm first, as ``geqp3``) when ``pivot``. Returns
    ``W`` (``R`` in its upper triangle, exact zeros below), ``H`` (..., m, k: reflector
    j below the diagonal of column j, ``tau_j`` on it) and the columns' order ``perm``
    (..., n) int64 (``A[:, perm] = Q R``) or None. The loop's values are ``[W | H]``,
    ``W`` with a last row holding each column's origin when pivoting (the swaps move
    it, the reflections never touch it)."""
    m, n = A.shape[-2:]
    k = min(m, n)
    batch = A.shape[:-2]
    rows = m + 1 if pivot else m
    W = A
    if pivot:
        W = movement.cat([A, movement.expand(_grid((1, n), 1, A.dtype), batch + (1, n))], -2)
    loop = _Loop(movement.cat([W, _zeros(batch + (rows, k), A.dtype)], -1))
    row_numbers = _grid((rows, 1), 0, A.dtype)
    cols, cols_k = _grid((1, n), 1, A.dtype), _grid((1, k), 1, A.dtype)
    real = row_numbers < m
    for _ in range(k):
        j = loop.count()
        e, below = row_numbers == j, row_numbers >= j
        if pivot:
            below = below & real
        state = loop.values()
        W, H = state[..., :n], state[..., n:]
        if pivot:
            W = _pivot_column(W, below, cols, j)
        in_column = cols == j
        reflected, v, tau, beta = _reflect(W, e, below, ops.cast(in_column, A.dtype).mT)
        # the origins' row keeps its values (v is 0 there, but 0 * inf would be NaN)
        W = ops.where(real, reflected, W) if pivot else reflected
        W = ops.where(in_column & below, ops.where(e, beta, 0.0), W)
        H = ops.where(cols_k == j, ops.where(e, tau, v), H)
        loop.advance(movement.cat([W, H], -1))
    state = loop.values()
    perm = ops.cast(state[..., m, :n], dt.int64) if pivot else None
    return state[..., :m, :n], state[..., :m, n:], perm


def _form_q(H: Tensor, m: int, cols: int) -> Tensor:
    """``Q[:, :cols]`` of the reflectors in ``H`` (..., m, k): ``H_0 H_1 ... H_{k-1}``
    applied to the identity's first ``cols`` columns, the last reflector first (LAPACK's
    ``org2r``; the reflectors are read from flipped copies, so step j takes column j)."""
    k = H.shape[-1]
    batch = H.shape[:-2]
    Q0 = _eye(m, cols, batch, H.dtype)
    if k == 0:
        return Q0
    taus = flip(H.diagonal(0, -2, -1), -1).unsqueeze(-2)              # (..., 1, k)
    V = flip(ops.where(_iota((m, k), 0) == _iota((m, k), 1), 1.0, H), -1)
    loop = _Loop(Q0)
    cols_k = _grid((1, k), 1, H.dtype)
    for _ in range(k):
        pick = ops.cast(cols_k == loop.count(), H.dtype).mT             # (k, 1)
        v, tau = V @ pick, taus @ pick
        Q = loop.values()
        loop.advance(Q - (tau * v) * (v.mT @ Q))
    return loop.values()


def _qr_values(A: Tensor, mode: str) -> tuple[Tensor | None, Tensor]:
    """``(Q, R)`` of ``A`` (``Q`` None for mode 'r'); ``A`` is scaled by a power of two
    (exact) for the factorization and ``R`` scaled back."""
    m, n = A.shape[-2:]
    k = min(m, n)
    batch = A.shape[:-2]
    rows_r = m if mode == "complete" else k
    if _empty(A.shape):
        Q = _eye(m, m if mode == "complete" else k, batch, A.dtype)
        return (None if mode == "r" else Q), _zeros(batch + (rows_r, n), A.dtype)
    scale = _pow2_scale(A)
    W, H, _ = _householder(A / scale, pivot=False)
    R = W[..., :rows_r, :] * scale
    return (None if mode == "r" else _form_q(H, m, rows_r)), R


def _solve_rt(X: Tensor, R: Tensor) -> Tensor:
    """``X R^-T`` for upper-triangular ``R`` (differentiable: used under create_graph)."""
    return solve_triangular(R.mT, X, upper=False, left=False)


def _qr_grad_tall(Q: Tensor, R: Tensor, gQ: Tensor, gR: Tensor) -> Tensor:
    """The gradient of ``A = Q R`` for ``m >= n`` (square ``R``), TensorFlow's and
    PyTorch's closed form: ``Q (gR + tril(Q^T gQ - gQ^T Q + R gR^T - gR R^T) R^-T) +
    (gQ - Q Q^T gQ) R^-T``."""
    qdq = Q.mT @ gQ
    rdr = R @ gR.mT
    M = (qdq - qdq.mT + rdr - rdr.mT).tril()
    return Q @ (gR + _solve_rt(M, R)) + _solve_rt(gQ - Q @ qdq, R)


class _QR(Function):
    """``(Q, R)`` (``R`` only for mode 'r'); the gradient as PyTorch's ``linalg_qr_backward``
    (see the module docstring), which it also refuses where PyTorch does."""

    pure_backward = True

    @staticmethod
    def forward(ctx: FunctionCtx, A: Tensor, mode: str) -> Any:
        Q, R = _qr_values(A, mode)
        ctx.mode = mode
        if mode == "r":
            ctx.save_for_backward(A)
            return R
        ctx.save_for_backward(A, Q, R)
        return Q, R

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Tensor) -> tuple[Any, None]:
        mode = ctx.mode
        if mode == "r":
            raise RuntimeError("linalg.qr: The derivative of linalg.qr depends on Q, which is "
                               "not computed when mode='r'. Please use linalg.qr(A, "
                               "mode='reduced') if you are going to differentiate through "
                               "linalg.qr.")
        A, Q, R = ctx.saved_tensors
        m, n = A.shape[-2:]
        if mode == "complete" and m > n:
            raise RuntimeError("linalg.qr: The QR decomposition is not differentiable when "
                               f"mode='complete' and nrows > ncols (A is {m} x {n}).")
        if _recomputing():
            Q, R = _QR.apply(A, mode)
        gQ, gR = grads
        if m >= n:
            return _qr_grad_tall(Q, R, gQ, gR), None
        # wide: A = [X | Y] with X = Q R[:, :m] square and Y = Q R[:, m:]
        gY = gR[..., m:]
        gX = _qr_grad_tall(Q, R[..., :m], gQ + A[..., m:] @ gY.mT, gR[..., :m])
        return movement.cat([gX, Q @ gY], -1), None


def _qr(op: str, A: Tensor, mode: str) -> tuple[Tensor, Tensor]:
    _check_matrices(op, A, square=False)
    if mode not in ("reduced", "complete", "r"):
        raise ArgumentError(f"{op}: qr received unrecognized mode {mode!r} but expected one "
                            "of 'reduced' (default), 'r', or 'complete'")
    if mode == "r":
        return _zeros((0,), A.dtype), _QR.apply(A, mode)
    return tuple(_QR.apply(A, mode))


@autocast_op("linalg.qr")
def qr(A: Tensor, mode: str = "reduced") -> QRResult:
    """``(Q, R)`` with ``A = Q R`` (``torch.linalg.qr``), ``A`` (*, m, n), k = min(m, n):
    'reduced' gives ``Q`` (*, m, k) with orthonormal columns and upper-triangular ``R``
    (*, k, n); 'complete' an orthogonal ``Q`` (*, m, m) and ``R`` (*, m, n); 'r' only
    ``R`` (``Q`` is an empty tensor). By Householder reflections, as LAPACK's
    ``geqrf``/``orgqr``: ``R``'s diagonal has LAPACK's (and PyTorch's) signs."""
    return QRResult(*_qr("linalg.qr", A, mode))


def legacy_qr(input: Tensor, some: bool = True) -> LegacyQRResult:
    """``torch.qr`` / ``Tensor.qr``: ``linalg.qr`` with ``some`` for 'reduced' (else
    'complete')."""
    return LegacyQRResult(*_qr("qr", input, "reduced" if some else "complete"))


# ---------------------------------------------------------------- parallel Jacobi
#
# Round-robin ("circle") order on n (even) indices: the pairs are always (0, 1), (2, 3),
# ...; between rounds the indices move one place along the cycle 2 -> 4 -> ... -> n-2 ->
# n-1 -> n-3 -> ... -> 1 -> 2 (index 0 stays), so n - 1 rounds meet every pair once.
# The move is a permutation folded into the round's rotation matrix, so every round
# records the same ops.


class _Rounds:
    """What every parallel Jacobi round on n (even) indices shares: the index that builds
    the round's ``J P`` from its pairs' cosines and sines, for ``batch``."""

    def __init__(self, n: int, batch: tuple[int, ...], dtype: dt.DType):
        h = n // 2
        i = _iota((n,))
        odd = ops.bitwise_and(i, 1) == 1
        partner = ops.bitwise_xor(i, 1)
        if n == 2:
            src = i
        else:       # new position b holds the index that was at src[b]
            src = ops.where(i == 0, 0, ops.where(i == 2, 1, ops.where(
                i == n - 1, n - 2, ops.where(odd, i + 2, i - 2))))
        # (J P)[a, b] = J[a, src[b]]: J[a, a] = c, J[p, q] = s, J[q, p] = -s for the pair
        # (p, q) = (2i, 2i + 1) of a; read from the table [c | s | -s | 0]
        rows = _iota((n, 1), 0)
        pair = rows // 2
        index = ops.where(src.unsqueeze(0) == rows, pair, ops.where(
            src.unsqueeze(0) == partner.unsqueeze(-1),
            pair + ops.where(odd.unsqueeze(-1), 2 * h, h), 3 * h))
        self.index = movement.expand(movement.reshape(index, (n * n,)), batch + (n * n,))
        self.zero = _zeros(batch + (1,), dtype)
        self.tiny = dt.finfo(dtype).tiny
        self.n = n

    def rotation(self, app: Tensor, aqq: Tensor, apq: Tensor) -> Tensor:
        """The round's ``J P`` (..., n, n) from the pairs' 2 x 2 problems (..., n/2): the
        rotation by the angle that zeroes ``apq`` (the smaller one, Rutishauser's ``t =
        sign(d) 2 apq / (|d| + sqrt(d^2 + 4 apq^2))``, ``d = aqq - app``), then the
        round-robin move."""
        d = aqq - app
        two = apq + apq
        u = ops.where(d < 0, -two, two)
        t = u / (d.abs() + (d * d + u * u).sqrt() + self.tiny)    # 0 where d = apq = 0
        c = (t * t + 1.0).rsqrt()
        s = t * c
        table = movement.cat([c, s, -s, self.zero], -1)
        J = ops.gather(table, table.ndim - 1, self.index)
        return movement.reshape(J, J.shape[:-1] + (self.n, self.n))


def _pad_odd(M: Tensor, V: Tensor, square: bool) -> tuple[Tensor, Tensor]:
    """``M`` (..., r, n) with one more, zero, column (and row when ``square``) and ``V``
    (..., n, n) with a unit row and column under and beside it, when n is odd: the
    pad's rotations are all by 0, so it stays apart (its column of ``V`` stays exactly a
    unit vector, which marks where the rounds moved it)."""
    n = V.shape[-1]
    batch = V.shape[:-2]
    if n % 2 == 0:
        return M, V
    M = movement.cat([M, _zeros(M.shape[:-1] + (1,), M.dtype)], -1)
    if square:
        M = movement.cat([M, _zeros(M.shape[:-2] + (1, n + 1), M.dtype)], -2)
    unit = movement.expand(ops.cast(_iota((1, n + 1)) == n, V.dtype), batch + (1, n + 1))
    V = movement.cat([movement.cat([V, _zeros(batch + (n, 1), V.dtype)], -1), unit], -2)
    return M, V


def _jacobi_eigen(M: Tensor, V: Tensor, count: int) -> tuple[Tensor, Tensor]:
    """Two-sided parallel Jacobi on the symmetric ``M`` (..., n, n), n even, for
    ``count`` sweeps; ``V`` accumulates the rotations. Returns the final ``M`` (its
    diagonal: the eigenvalues) and ``V``. A pair's three entries are read as strided
    slices of the flattened ``M`` (its ``(p, p)``, ``(q, q)`` and upper ``(p, q)``), so a
    round computes each rotation once, from the upper triangle, even where rounding
    left ``M`` slightly asymmetric."""
    n = M.shape[-1]
    rounds = _Rounds(n, M.shape[:-2], M.dtype)
    stride = 2 * (n + 1)
    for _ in range(count * (n - 1)):
        flat = movement.reshape(M, M.shape[:-2] + (n * n,))
        J = rounds.rotation(flat[..., ::stride], flat[..., n + 1::stride], flat[..., 1::stride])
        M = J.mT @ M @ J
        V = V @ J
    return M, V


def _jacobi_columns(X: Tensor, V: Tensor, count: int) -> tuple[Tensor, Tensor]:
    """One-sided parallel Jacobi (Hestenes) on the columns of ``X`` (..., r, n), n even:
    each pair is rotated by the angle that makes its two columns orthogonal (the
    two-sided rotation of their Gram matrix); ``V`` accumulates the rotations (one
    matmul: ``[X; V] J``). Returns ``X V`` (orthogonal columns) and ``V``."""
    r, n = X.shape[-2:]
    rounds = _Rounds(n, X.shape[:-2], X.dtype)
    S = movement.cat([X, V], -2)
    for _ in range(count * (n - 1)):
        X = S[..., :r, :]
        first, second = X[..., 0::2], X[..., 1::2]
        J = rounds.rotation((first * first).sum(-2), (second * second).sum(-2),
                            (first * second).sum(-2))
        S = S @ J
    return S[..., :r, :], S[..., r:, :]


def _pad_marker(V: Tensor, n: int) -> Tensor | None:
    """Where the pad index went (..., n + 1) when n is odd (its ``V`` row is 1 there)."""
    return V[..., n, :] > 0.5 if n % 2 else None


# ---------------------------------------------------------------- eigh


def _symmetric(A: Tensor, upper: bool) -> Tensor:
    """The symmetric matrix of ``A``'s lower (upper) triangle."""
    if upper:
        return A.triu() + A.triu(1).mT
    return A.tril() + A.tril(-1).mT


def _eigh_values(A: Tensor) -> tuple[Tensor, Tensor]:
    """Eigenvalues (ascending) and eigenvectors of the symmetric ``A`` (see the module
    docstring: one step of pivoted QR, then parallel Jacobi)."""
    n = A.shape[-1]
    batch = A.shape[:-2]
    if _empty(A.shape):
        return _zeros(batch + (n,), A.dtype), _zeros(A.shape, A.dtype)
    scale = _pow2_scale(A)
    A = A / scale
    _, H, _ = _householder(A, pivot=True)
    Q = _form_q(H, n, n)
    M = Q.mT @ A @ Q
    M, V = _pad_odd(0.5 * (M + M.mT), Q, square=True)
    M, V = _jacobi_eigen(M, V, sweeps(n))
    values = M.diagonal(0, -2, -1)
    pad = _pad_marker(V, n)
    if pad is not None:
        values = ops.where(pad, math.inf, values)          # sorts last, then dropped
    order = values.argsort(-1)
    values = ops.gather(values, values.ndim - 1, order)[..., :n] * scale.squeeze(-1)
    V = ops.gather(V, V.ndim - 1, movement.expand(order.unsqueeze(-2), V.shape))
    return values, V[..., :n, :n]


def _eigh_grad(L: Tensor, V: Tensor, gL: Tensor, gV: Tensor) -> Tensor:
    """``V (diag(gL) + F o skew(V^T gV)) V^T``, ``F_ij = 1/(l_j - l_i)`` off the
    diagonal (PyTorch's ``linalg_eig_backward`` for Hermitian input)."""
    K = V.mT @ gV
    K = 0.5 * (K - K.mT)
    n = L.shape[-1]
    diag = _iota((n, n), 0) == _iota((n, n), 1)
    gaps = L.unsqueeze(-2) - L.unsqueeze(-1)
    inner = ops.where(diag, gL.unsqueeze(-1), K / ops.where(diag, 1.0, gaps))
    return V @ inner @ V.mT


class _Eigh(Function):
    """``(L, V)`` of the symmetric matrix read from one triangle; the symmetric gradient."""

    pure_backward = True

    @staticmethod
    def forward(ctx: FunctionCtx, A: Tensor, upper: bool) -> tuple[Tensor, Tensor]:
        L, V = _eigh_values(_symmetric(A, upper))
        ctx.save_for_backward(A, L, V)
        ctx.upper = upper
        ctx.set_materialize_grads(False)     # (backward must know what got no gradient)
        return L, V

    @staticmethod
    def backward(ctx: FunctionCtx, gL: Tensor | None, gV: Tensor | None
                 ) -> tuple[Tensor, None]:
        """A loss that does not read the vectors gets ``V diag(gL) V^T``, finite at
        repeated eigenvalues too (PyTorch skips the vectors' term when they have no
        gradient); one that reads them divides by the eigenvalue gaps."""
        A, L, V = ctx.saved_tensors
        if _recomputing():
            L, V = _Eigh.apply(A, ctx.upper)
        if gL is None:
            gL = ops.full_const(0, L.shape, L.dtype)
        if gV is None:
            return (V * gL.unsqueeze(-2)) @ V.mT, None
        return _eigh_grad(L, V, gL, gV), None


class _Eigvalsh(Function):
    """The eigenvalues; gradient ``V diag(gL) V^T``."""

    pure_backward = True

    @staticmethod
    def forward(ctx: FunctionCtx, A: Tensor, upper: bool) -> Tensor:
        L, V = _eigh_values(_symmetric(A, upper))
        ctx.save_for_backward(A, V)
        ctx.upper = upper
        return L

    @staticmethod
    def backward(ctx: FunctionCtx, gL: Tensor) -> tuple[Tensor, None]:
        A, V = ctx.saved_tensors
        if _recomputing():
            V = _Eigh.apply(A, ctx.upper)[1]
        return (V * gL.unsqueeze(-2)) @ V.mT, None


def _check_uplo(op: str, UPLO: Any) -> bool:
    if UPLO not in ("L", "U", "l", "u"):
        raise ArgumentError(f"{op}: Expected UPLO argument to be 'L' or 'U', but got {UPLO!r}")
    return UPLO in ("U", "u")


@autocast_op("linalg.eigh")
def eigh(A: Tensor, UPLO: str = "L") -> EighResult:
    """``(eigenvalues, eigenvectors)`` of the symmetric ``A`` (*, n, n)
    (``torch.linalg.eigh``): eigenvalues ascending (*, n), orthonormal eigenvectors as
    the columns of (*, n, n), ``A = V diag(L) V^T``. Only the lower triangle (``UPLO='U'``:
    the upper) is read. Eigenvector signs are not LAPACK's. By Jacobi (see the module
    docstring); never raises on the values."""
    op = "linalg.eigh"
    _check_matrices(op, A)
    return EighResult(*_Eigh.apply(A, _check_uplo(op, UPLO)))


@autocast_op("linalg.eigvalsh")
def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
    """The eigenvalues (ascending) of the symmetric ``A`` (``torch.linalg.eigvalsh``),
    read from its lower (``UPLO='U'``: upper) triangle."""
    op = "linalg.eigvalsh"
    _check_matrices(op, A)
    return _Eigvalsh.apply(A, _check_uplo(op, UPLO))


# ---------------------------------------------------------------- SVD


def _orthonormal_columns(Y: Tensor) -> Tensor:
    """The n x n orthogonal matrix whose columns are those of ``Y``'s that are unit
    vectors (orthonormal up to rounding), the zero ones completed: a Householder QR,
    its ``Q``'s columns signed as ``R``'s diagonal (``R ~ diag(+-1, 0)``)."""
    n = Y.shape[-1]
    W, H, _ = _householder(Y, pivot=False)
    signs = ops.where(W.diagonal(0, -2, -1) < 0, -1.0, 1.0)
    return _form_q(H, Y.shape[-2], n) * signs.unsqueeze(-2)


def _svd_tall(A: Tensor, full: bool) -> tuple[Tensor, Tensor, Tensor]:
    """``(U, S, V)`` of ``A`` (..., m, n), m >= n >= 1 (see the module docstring)."""
    m, n = A.shape[-2:]
    batch = A.shape[:-2]
    scale = _pow2_scale(A)
    W, H, perm = _householder(A / scale, pivot=True)
    Q = _form_q(H, m, m if full else n)
    X, Wr = _pad_odd(W[..., :n, :].mT, _eye(n, n, batch, A.dtype), square=False)
    X, Wr = _jacobi_columns(X, Wr, sweeps(n))
    S = (X * X).sum(-2).sqrt()
    pad = _pad_marker(Wr, n)
    order = (ops.where(pad, -1.0, S) if pad is not None else S).argsort(-1, descending=True)
    order = order[..., :n]
    S = ops.gather(S, S.ndim - 1, order)
    X = ops.gather(X, X.ndim - 1, movement.expand(order.unsqueeze(-2), X.shape[:-1] + (n,)))
    Wr = ops.gather(Wr, Wr.ndim - 1, movement.expand(order.unsqueeze(-2), Wr.shape[:-1] + (n,)))
    Wr = Wr[..., :n, :]
    Y = X / ops.where(S == 0, 1.0, S).unsqueeze(-2)
    Ux = _orthonormal_columns(Y)
    # A P = Q R, R^T Wr = Ux S  =>  A = (Q Wr) S (P Ux)^T; P[perm[j], j] = 1
    P = ops.cast(_iota((n, 1), 0) == perm.unsqueeze(-2), A.dtype)
    U = Q[..., :n] @ Wr
    if full and m > n:
        U = movement.cat([U, Q[..., n:]], -1)
    return U, S * scale.squeeze(-1), P @ Ux


def _svd_values(A: Tensor, full: bool) -> tuple[Tensor, Tensor, Tensor]:
    """``(U, S, V)`` with ``A = U diag(S) V^T``; wide matrices transposed."""
    m, n = A.shape[-2:]
    k = min(m, n)
    batch = A.shape[:-2]
    if _empty(A.shape):
        return (_eye(m, m if full else k, batch, A.dtype), _zeros(batch + (k,), A.dtype),
                _eye(n, n if full else k, batch, A.dtype))
    if m < n:
        V, S, U = _svd_tall(A.mT, full)
        return U, S, V
    return _svd_tall(A, full)


def _svd_grad(shape: tuple[int, ...], U: Tensor, S: Tensor, V: Tensor, gU: Tensor,
              gS: Tensor, gV: Tensor) -> Tensor:
    """PyTorch's ``svd_backward`` for the reduced ``A = U diag(S) V^T`` (real case)."""
    m, n = shape[-2:]
    k = S.shape[-1]
    diag = _iota((k, k), 0) == _iota((k, k), 1)
    UgU = U.mT @ gU
    VgV = V.mT @ gV
    S2 = S * S
    gaps = ops.where(diag, 1.0, S2.unsqueeze(-2) - S2.unsqueeze(-1))   # S_j^2 - S_i^2 at [i, j]
    inner = ((UgU - UgU.mT) * S.unsqueeze(-2) + S.unsqueeze(-1) * (VgV - VgV.mT)) / gaps
    inner = ops.where(diag, gS.unsqueeze(-1), inner)
    if m > n:
        gUS = gU / S.unsqueeze(-2)
        return (U @ inner + gUS - U @ (U.mT @ gUS)) @ V.mT
    if m < n:
        SgV = gV.mT / S.unsqueeze(-1)
        return U @ (inner @ V.mT + SgV - (SgV @ V) @ V.mT)
    return U @ inner @ V.mT


class _Svd(Function):
    """``(U, S, V)``; PyTorch's gradient, through the reduced factors."""

    pure_backward = True

    @staticmethod
    def forward(ctx: FunctionCtx, A: Tensor, full: bool) -> tuple[Tensor, Tensor, Tensor]:
        U, S, V = _svd_values(A, full)
        ctx.save_for_backward(A, U, S, V)
        ctx.full = full
        ctx.set_materialize_grads(False)     # (backward must know what got no gradient)
        return U, S, V

    @staticmethod
    def backward(ctx: FunctionCtx, gU: Tensor | None, gS: Tensor | None,
                 gV: Tensor | None) -> tuple[Tensor, None]:
        """A loss that reads neither ``U`` nor ``V`` gets ``U diag(gS) V^T``, finite at
        repeated or zero singular values too (PyTorch's ``svd_backward`` returns just
        that when the vectors have no gradient); otherwise the full formula, with
        zeros for the factor that got none."""
        A, U, S, V = ctx.saved_tensors
        if _recomputing():
            U, S, V = _Svd.apply(A, ctx.full)
        k = S.shape[-1]
        if ctx.full:
            U, V = U[..., :k], V[..., :k]
        if gS is None:
            gS = ops.full_const(0, S.shape, S.dtype)
        if gU is None and gV is None:
            return (U * gS.unsqueeze(-2)) @ V.mT, None
        gU = ops.full_const(0, U.shape, U.dtype) if gU is None else gU[..., :k]
        gV = ops.full_const(0, V.shape, V.dtype) if gV is None else gV[..., :k]
        return _svd_grad(A.shape, U, S, V, gU, gS, gV), None


class _Svdvals(Function):
    """The singular values; gradient ``U diag(gS) V^T``."""

    pure_backward = True

    @staticmethod
    def forward(ctx: FunctionCtx, A: Tensor) -> Tensor:
        U, S, V = _svd_values(A, False)
        ctx.save_for_backward(A, U, V)
        return S

    @staticmethod
    def backward(ctx: FunctionCtx, gS: Tensor) -> Tensor:
        A, U, V = ctx.saved_tensors
        if _recomputing():
            U, _, V = _Svd.apply(A, False)
        return (U * gS.unsqueeze(-2)) @ V.mT


def _check_driver(op: str, driver: Any) -> None:
    if driver is not None:
        raise ArgumentError(f"{op}: driver= chooses a CUDA (cuSOLVER) algorithm, which Nova "
                            f"does not have; got {driver!r}, expected None")


@autocast_op("linalg.svd")
def svd(A: Tensor, full_matrices: bool = True, *, driver: Any = None) -> SVDResult:
    """``(U, S, Vh)`` with ``A = U diag(S) Vh`` (``torch.linalg.svd``), ``A`` (*, m, n),
    k = min(m, n): singular values descending (*, k); ``U`` (*, m, m) and ``Vh`` (*, n,
    n) orthogonal with ``full_matrices`` (the default), else (*, m, k) and (*, k, n).
    Singular vector signs are not LAPACK's (a pair ``u_i, v_i`` may both be negated).
    By one-sided Jacobi (see the module docstring)."""
    op = "linalg.svd"
    _check_matrices(op, A, square=False)
    _check_driver(op, driver)
    U, S, V = _Svd.apply(A, bool(full_matrices))
    return SVDResult(U, S, V.mT)


@autocast_op("linalg.svdvals")
def svdvals(A: Tensor, *, driver: Any = None) -> Tensor:
    """The singular values of ``A`` (*, m, n), descending (``torch.linalg.svdvals``)."""
    op = "linalg.svdvals"
    _check_matrices(op, A, square=False)
    _check_driver(op, driver)
    return _Svdvals.apply(A)


def legacy_svd(input: Tensor, some: bool = True, compute_uv: bool = True) -> LegacySVDResult:
    """``torch.svd`` / ``Tensor.svd``: ``(U, S, V)`` -- ``V``, not ``Vh`` -- reduced when
    ``some`` (the default), else complete; without ``compute_uv``, ``U`` and ``V`` are
    zero-filled (*, m, m) and (*, n, n), as PyTorch's."""
    _check_matrices("svd", input, square=False)
    m, n = input.shape[-2:]
    if not compute_uv:
        batch = input.shape[:-2]
        return LegacySVDResult(_zeros(batch + (m, m), input.dtype), _Svdvals.apply(input),
                               _zeros(batch + (n, n), input.dtype))
    return LegacySVDResult(*_Svd.apply(input, not some))


# ---------------------------------------------------------------- pinv, rank


def _tolerance(op: str, A: Tensor, atol: Any, rtol: Any) -> tuple[Any, Any]:
    """PyTorch's ``(atol, rtol)``: rtol defaults to ``eps max(m, n)`` where no positive
    atol is given, else 0; either may be a number or a tensor (broadcast over the
    batch)."""
    for name, value in (("atol", atol), ("rtol", rtol)):
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if value is not None and not number and not isinstance(value, Tensor):
            raise TypeError(f"{op}: {name} must be a number or a tensor, got {value!r}")
        if isinstance(value, Tensor) and not value.dtype.is_floating_point:
            raise TypeError(f"{op}: {name} must be a floating-point tensor, got "
                            f"{value.dtype.name}")
    default = dt.finfo(A.dtype).eps * max(A.shape[-2:])
    if rtol is None:
        if atol is None:
            rtol = default
        elif isinstance(atol, Tensor):
            rtol = ops.where(atol > 0, 0.0, default)
        else:
            rtol = 0.0 if atol > 0 else default
    return (0.0 if atol is None else atol), rtol


def _threshold(values: Tensor, atol: Any, rtol: Any) -> Tensor:
    """``max(atol, rtol * max(values))`` per matrix (..., 1), ``values`` >= 0."""
    largest = values.amax(-1, keepdim=True) if values.shape[-1] else _zeros(
        values.shape[:-1] + (1,), values.dtype)
    def column(x: Any) -> Any:
        return ops.cast(x, values.dtype).unsqueeze(-1) if isinstance(x, Tensor) else x
    return ops.maximum(ops.mul(column(rtol), largest), column(atol))


def _pinv_values(A: Tensor, atol: Any, rtol: Any, hermitian: bool) -> Tensor:
    m, n = A.shape[-2:]
    if _empty(A.shape):
        return _zeros(A.shape[:-2] + (n, m), A.dtype)
    if hermitian:
        L, V = _eigh_values(_symmetric(A, False))
        kept = L.abs() > _threshold(L.abs(), atol, rtol)
        inverse = ops.where(kept, 1.0 / ops.where(kept, L, 1.0), 0.0)
        return (V * inverse.unsqueeze(-2)) @ V.mT
    U, S, V = _svd_values(A, False)
    kept = S > _threshold(S, atol, rtol)
    inverse = ops.where(kept, 1.0 / ops.where(kept, S, 1.0), 0.0)
    return (V * inverse.unsqueeze(-2)) @ U.mT


def _pinv_grad(g: Tensor, P: Tensor, A: Tensor) -> Tensor:
    """PyTorch's ``pinv_backward`` (Golub and Pereyra's derivative of the
    pseudo-inverse ``P`` of ``A``, for a constant rank), its products arranged around
    the smaller dimension."""
    m, n = A.shape[-2:]
    Ph, gh = P.mT, g.mT
    if m <= n:
        K = gh @ P
        KPh = K @ Ph
        return -(P @ K).mT + KPh - (A @ P) @ KPh + (Ph @ P) @ (gh - K @ A)
    K = P @ gh
    PhK = Ph @ K
    return -(K @ P).mT + (gh - A @ K) @ P @ Ph + PhK - PhK @ P @ A


class _Pinv(Function):
    """The pseudo-inverse; PyTorch's closed-form gradient (not through the SVD's)."""

    pure_backward = True

    @staticmethod
    def forward(ctx: FunctionCtx, A: Tensor, atol: Any, rtol: Any, hermitian: bool) -> Tensor:
        P = _pinv_values(A, atol, rtol, hermitian)
        ctx.save_for_backward(A, P)
        ctx.args = (atol, rtol, hermitian)
        return P

    @staticmethod
    def backward(ctx: FunctionCtx, g: Tensor) -> tuple[Any, ...]:
        A, P = ctx.saved_tensors
        if _recomputing():
            P = _Pinv.apply(A, *ctx.args)
        return _pinv_grad(g, P, A), None, None, None


def _legacy_tolerance(op: str, old: Any, name: str, atol: Any, rtol: Any) -> None:
    if old is not None and (atol is not None or rtol is not None):
        raise ArgumentError(f"{op}: give {name} or atol/rtol, not both")


def pinv(A: Tensor, rcond: Any = None, hermitian: bool = False, *, atol: Any = None,
         rtol: Any = None) -> Tensor:
    """The pseudo-inverse of ``A`` (*, m, n) -> (*, n, m) (``torch.linalg.pinv``): from
    the SVD, singular values at most ``max(atol, rtol * S[0])`` taken as zero (rtol
    defaults to ``eps max(m, n)`` unless a positive atol is given); with ``hermitian``,
    from ``eigh`` of the symmetric ``A`` (lower triangle) with ``|eigenvalues|``.
    ``rcond`` is the older name of ``rtol`` (PyTorch's positional overload)."""
    op = "linalg.pinv"
    _check_matrices(op, A, square=hermitian)
    _legacy_tolerance(op, rcond, "rcond", atol, rtol)
    if rcond is not None:
        rtol, atol = rcond, 0.0
    atol, rtol = _tolerance(op, A, atol, rtol)
    return _Pinv.apply(A, atol, rtol, bool(hermitian))


def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """``torch.pinverse`` / ``Tensor.pinverse``: ``pinv`` with ``rtol=rcond``."""
    return pinv(input, rtol=rcond)


@autocast_op("linalg.matrix_rank")
def matrix_rank(A: Tensor, tol: Any = None, hermitian: bool = False, *, atol: Any = None,
                rtol: Any = None) -> Tensor:
    """The numerical rank of ``A`` (*, m, n) (``torch.linalg.matrix_rank``), int64 (*):
    the number of singular values (``|eigenvalues|`` of the symmetric ``A`` with
    ``hermitian``) greater than ``max(atol, rtol * largest)``, with ``pinv``'s defaults;
    ``tol`` (PyTorch's positional overload) is ``atol`` with ``rtol = 0``."""
    op = "linalg.matrix_rank"
    _check_matrices(op, A, square=hermitian)
    _legacy_tolerance(op, tol, "tol", atol, rtol)
    if tol is not None:
        atol, rtol = tol, 0.0
    atol, rtol = _tolerance(op, A, atol, rtol)
    if _empty(A.shape):
        return _zeros(A.shape[:-2], dt.int64)
    with no_grad():
        values = (_eigh_values(_symmetric(A, False))[0].abs() if hermitian
                  else _svd_values(A, False)[1])
    return (values > _threshold(values, atol, rtol)).sum(-1)


# ---------------------------------------------------------------- lstsq


@autocast_op("linalg.lstsq")
def lstsq(A: Tensor, B: Tensor, rcond: Any = None, *, driver: str | None = None) -> LstsqResult:
    """``(solution, residuals, rank, singular_values)`` (``torch.linalg.lstsq``): the
    least-squares (minimum-norm) solution ``X`` (*, n, k) of ``A X = B``, ``A`` (*, m,
    n), ``B`` (*, m, k) or (*, m) (one dim fewer than ``A``: a batch of vectors, as
    PyTorch's rule), batch dims broadcast; singular values at most ``rcond * S[0]``
    (default ``eps max(m, n)``) are taken as zero. Computed from the SVD whatever the
    driver, so every driver gives the minimum-norm solution (LAPACK's 'gels' assumes
    full rank); the other outputs follow PyTorch's shapes per driver: ``rank`` (*)
    int64 for 'gelsy' (the default), 'gelsd' and 'gelss', else empty; ``singular_values``
    (*, min(m, n)) for 'gelsd' and 'gelss', else empty; ``residuals`` (*, k), the
    squared residual norms ``||A X - B||^2`` per column, when m > n and the driver is
    not 'gelsy', else empty -- also for a rank-deficient ``A``, where PyTorch returns
    an empty tensor (that needs the rank's value to decide a shape). Differentiable in
    ``A`` and ``B`` through ``pinv`` (PyTorch's gradient)."""
    op = "torch.linalg.lstsq"
    _check_matrices(op, A, square=False)
    ops._check_tensor(op, B)
    _check_same_dtype(op, A, B)
    if driver is None:
        driver = "gelsy"
    if driver not in _LSTSQ_DRIVERS:
        raise ArgumentError(f"{op}: parameter `driver` should be one of (gels, gelsy, gelsd, "
                            f"gelss), got {driver!r}")
    if not 0 <= A.ndim - B.ndim <= 1:
        raise ArgumentError(f"{op}: input.dim() must be greater or equal to other.dim() and "
                            f"(input.dim() - other.dim()) <= 1 (A has shape {A.shape}, B "
                            f"{B.shape})")
    vector = B.ndim == A.ndim - 1
    B2 = B.unsqueeze(-1) if vector else B
    m, n = A.shape[-2:]
    if B2.shape[-2] != m:
        raise ArgumentError(f"{op}: input.size(-2) should match other.size(-2) (A has shape "
                            f"{A.shape}, B {B.shape})")
    batch = broadcast_shapes(op, A.shape[:-2], B2.shape[:-2])
    A = movement.expand(A, batch + A.shape[-2:])
    B2 = movement.expand(B2, batch + B2.shape[-2:])
    rtol = dt.finfo(A.dtype).eps * max(m, n) if rcond is None or rcond < 0 else float(rcond)
    if driver == "gels":        # LAPACK's QR solver assumes full rank: no truncation
        rtol = 0.0
    X, S = _Lstsq.apply(A, B2, rtol)
    empty = _zeros((0,), A.dtype)
    residuals = empty
    if m > n and driver != "gelsy":
        residuals = ((A @ X - B2) ** 2).sum(-2)
    rank = _zeros((0,), dt.int64) if driver == "gels" else (
        S > _threshold(S, 0.0, rtol)).sum(-1)
    values = S if driver in ("gelsd", "gelss") else empty
    return LstsqResult(X.squeeze(-1) if vector else X, residuals, rank, values)


class _Lstsq(Function):
    """``(X, S)``: ``X = pinv(A) B`` from one SVD, and the singular values (not
    differentiable); the gradient through ``pinv``'s closed form, as PyTorch's
    ``linalg_lstsq_backward``: ``gB = pinv(A)^T gX``, ``gA = pinv_backward(gX B^T)``."""

    pure_backward = True

    @staticmethod
    def forward(ctx: FunctionCtx, A: Tensor, B: Tensor, rtol: float) -> tuple[Tensor, Tensor]:
        m, n = A.shape[-2:]
        if _empty(A.shape):
            P = _zeros(A.shape[:-2] + (n, m), A.dtype)
            S = _zeros(A.shape[:-2] + (min(m, n),), A.dtype)
        else:
            U, S, V = _svd_values(A, False)
            kept = S > _threshold(S, 0.0, rtol)
            inverse = ops.where(kept, 1.0 / ops.where(kept, S, 1.0), 0.0)
            P = (V * inverse.unsqueeze(-2)) @ U.mT
        ctx.save_for_backward(A, B, P)
        ctx.rtol = rtol
        ctx.mark_non_differentiable(S)
        return P @ B, S

    @staticmethod
    def backward(ctx: FunctionCtx, gX: Tensor, _gS: Any) -> tuple[Any, ...]:
        A, B, P = ctx.saved_tensors
        if _recomputing():
            P = _Pinv.apply(A, 0.0, ctx.rtol, False)
        gA = _pinv_grad(gX @ B.mT, P, A) if ctx.needs_input_grad[0] else None
        return gA, P.mT @ gX, None


# ---------------------------------------------------------------- norms, cond


def _norm_dims(op: str, A: Tensor, dim: Any) -> tuple[int, int]:
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise ArgumentError(f"{op}: dim must be a 2-tuple. Got {dim!r}")
    d0, d1 = (normalize_dim(op, d, A.ndim, A.shape) for d in dim)
    if d0 == d1:
        raise ArgumentError(f"{op}: dims must be different. Got ({dim[0]}, {dim[1]})")
    return d0, d1


_MATRIX_ORDS = ("fro", "nuc", math.inf, -math.inf, 1, -1, 2, -2)


def matrix_norm(A: Tensor, ord: Any = "fro", dim: Any = (-2, -1), keepdim: bool = False, *,
                dtype: Any = None) -> Tensor:
    """``torch.linalg.matrix_norm``: 'fro' (the default), 'nuc' (the sum of the
    singular values), 2 / -2 (the largest / smallest singular value), 1 / -1 (the
    largest / smallest column sum of ``|a|``), inf / -inf (row sums) over the two
    ``dim`` of ``A`` (float32/float64, after ``dtype``)."""
    op = "linalg.matrix_norm"
    ops._check_tensor(op, A)
    if A.ndim < 2:
        raise ArgumentError(f"{op}: The input tensor A must have at least 2 dimensions.")
    if dtype is not None:
        A = ops.cast(A, dt.get_dtype(dtype))
    if A.dtype not in (dt.float32, dt.float64, dt.float16, dt.bfloat16):
        raise DTypeError(f"{op}: Expected a floating point tensor as input. Got "
                         f"{A.dtype.name}")
    if isinstance(ord, bool) or ord not in _MATRIX_ORDS:
        raise ArgumentError(f"{op}: Order {ord} not supported.")
    d0, d1 = _norm_dims(op, A, dim)
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        if A.dtype not in (dt.float32, dt.float64):
            raise DTypeError(f"{op}: ord={ord!r} needs the singular values, computed in "
                             f"float32 or float64; got {A.dtype.name}")
        moved = movement.permute(A, *[i for i in range(A.ndim) if i not in (d0, d1)], d0, d1)
        S = svdvals(moved)
        out = S.sum(-1) if ord == "nuc" else S[..., 0] if ord == 2 else S[..., -1]
        if keepdim:
            for d in sorted((d0, d1)):
                out = out.unsqueeze(d)
        return out
    # 1, -1: column sums (over d0), extreme over d1; inf, -inf: the transpose
    over, across = (d0, d1) if ord in (1, -1) else (d1, d0)
    sums = A.abs().sum(over, keepdim=True)
    out = sums.amax(across, keepdim=True) if ord in (1, math.inf) else \
        sums.amin(across, keepdim=True)
    return out if keepdim else out.squeeze(max(d0, d1)).squeeze(min(d0, d1))


def norm(input: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False, *,
         dtype: Any = None) -> Tensor:
    """``torch.linalg.norm``: a vector norm when ``dim`` is an int (or a 1-tuple), or
    when ``dim`` is None and ``input`` is 1-D (or ``ord`` is None: the 2-norm of all
    elements); a matrix norm (``matrix_norm``) when ``dim`` is a 2-tuple, or None with a
    2-D ``input``."""
    op = "linalg.norm"
    ops._check_tensor(op, input)
    if isinstance(dim, int) and not isinstance(dim, bool):
        dim = (dim,)
    if dim is not None and len(dim) not in (1, 2):
        raise ArgumentError(f"{op}: If dim is specified, it must be of length 1 or 2. Got "
                            f"{dim!r}")
    if dim is None:
        if ord is None:
            return vector_norm(input, 2, None, keepdim, dtype=dtype)
        if input.ndim not in (1, 2):
            raise ArgumentError(f"{op}: If dim is not specified but ord is, the input must be "
                                f"1D or 2D. Got {input.ndim}D.")
        dim = tuple(range(input.ndim))
    if len(dim) == 2:
        return matrix_norm(input, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    if isinstance(ord, str):
        raise ArgumentError(f"{op}: order {ord!r} is a matrix norm; a vector norm (dim "
                            f"{dim!r}) needs a number")
    return vector_norm(input, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


@autocast_op("linalg.cond")
def cond(A: Tensor, p: Any = None) -> Tensor:
    """The condition number of ``A`` in the matrix norm ``p`` (``torch.linalg.cond``):
    ``S[0] / S[-1]`` for None and 2 (any m x n), ``S[-1] / S[0]`` for -2, else
    ``||A|| ||A^-1||`` ('fro', 'nuc', inf, -inf, 1, -1; square ``A``), inf where ``A``
    is singular."""
    op = f"linalg.cond(ord={p})" if p is not None else "linalg.cond"
    _check_matrices(op, A, square=p not in (None, 2, -2))
    if isinstance(p, bool) or p not in (None,) + _MATRIX_ORDS:
        raise ArgumentError(f"linalg.cond: Order {p} not supported.")
    if p in (None, 2, -2):
        if _empty(A.shape):
            return _zeros(A.shape[:-2], A.dtype)
        S = svdvals(A)
        return S[..., 0] / S[..., -1] if p != -2 else S[..., -1] / S[..., 0]
    if _empty(A.shape):
        return _zeros(A.shape[:-2], A.dtype)
    inverse, info = inv_ex(A)
    value = matrix_norm(A, p) * matrix_norm(ops.where(
        (info != 0).unsqueeze(-1).unsqueeze(-1), 0.0, inverse), p)
    return ops.where(info != 0, math.inf, value)


# PyTorch's tensor methods and top-level names (attached here, as nova.decompositions
# attaches det/inverse: the tensor layer does not import this one)
Tensor.qr = legacy_qr
Tensor.svd = legacy_svd
Tensor.pinverse = pinverse

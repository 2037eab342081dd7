"""``nv.linalg``'s decompositions and solvers against numpy/scipy in float64 (batched
sizes 1, 2, 5 and 17), float32 within a condition-scaled bound of the float64
reference, LAPACK's pivots and info, the errors (not positive-definite, singular, bad
shapes and dtypes), special values (0 x 0, empty batches, NaN outside the triangle
read), gradients by finite differences (second derivatives too), and the recorded
graph growing linearly with n."""
import math

import numpy as np
import pytest
import scipy.linalg as sl

import nova as nv
from benchmarks.linalg_graph_size import recorded_nodes
from nova.autograd.gradcheck import gradcheck
from nova.linalg import LinAlgError

LA = nv.linalg


def f64(a):
    return nv.tensor(np.asarray(a, dtype=np.float64), dtype=nv.float64)


def close(got, ref, tol):
    """Agreement to ``tol`` relative to the largest reference entry (at least 1)."""
    ref = np.asarray(ref)
    scale = max(1.0, float(np.abs(ref).max())) if ref.size else 1.0
    np.testing.assert_allclose(got, ref, rtol=0, atol=tol * scale)


def problem(n, batch=(2, 3), seed=0):
    """Well-conditioned matrices: a general one (pivoting still swaps rows), an SPD one,
    right-hand sides."""
    rng = np.random.default_rng(seed + n)
    A = rng.normal(size=batch + (n, n)) + 2 * math.sqrt(n) * np.eye(n) * rng.choice([-1, 1], n)
    S = A @ np.swapaxes(A, -1, -2) / n + np.eye(n)
    B = rng.normal(size=batch + (n, 2))
    return A, S, B


def per_matrix(fn, *arrays):
    """``fn`` applied to each matrix of the batch, stacked."""
    batch = arrays[0].shape[:-2]
    return np.stack([fn(*(a[i] for a in arrays)) for i in np.ndindex(batch)]).reshape(
        batch + np.shape(fn(*(a[(0,) * len(batch)] for a in arrays))))


@pytest.mark.parametrize("n", [1, 5, 17])
def test_float64_against_numpy(n):
    """Sizes 1 (one step), 5 and 17, batched (n = 2 in ``test_variants_against_numpy``;
    ``det``/``slogdet`` at 17 in float32). The triangular solve takes ``U``, as
    ``solve``'s back substitution does (one set of kernels for both)."""
    A, S, B = problem(n)
    tA, tS, tB = f64(A), f64(S), f64(B)
    L = np.linalg.cholesky(S)
    outs = [*LA.cholesky_ex(tS), *LA.lu_factor_ex(tA), *LA.solve_ex(tA, tB),
            LA.solve_triangular(f64(L).mT, tB, upper=True)]
    if n < 17:
        outs += [LA.det(tA), *LA.slogdet(tA)]
    nv.realize(*outs)
    got = [o.numpy() for o in outs]
    tol = 1e-13 * n
    close(got[0], L, tol)
    close(got[2], per_matrix(lambda a: sl.lu_factor(a)[0], A), tol)
    assert got[3].dtype == np.int32 and got[4].dtype == np.int32
    np.testing.assert_array_equal(got[3], per_matrix(lambda a: sl.lu_factor(a)[1], A) + 1)
    for info in (got[1], got[4], got[6]):
        np.testing.assert_array_equal(info, np.zeros(A.shape[:-2], np.int32))
    close(got[5], np.linalg.solve(A, B), tol)
    close(got[7], np.linalg.solve(np.swapaxes(L, -1, -2), B), tol)
    if n < 17:
        np.testing.assert_allclose(got[8], np.linalg.det(A), rtol=tol)
        sign, logabs = np.linalg.slogdet(A)
        np.testing.assert_array_equal(got[9], sign)
        close(got[10], logabs, tol)


def test_variants_against_numpy():
    """The other forms at n = 2: the upper Cholesky factor, ``inv``, ``logdet``, ``solve``
    of a vector and from the right, ``lu``'s ``P, L, U``, ``lu_solve`` (also adjoint
    and from the right), lower/unit/right triangular solves."""
    A, S, B = problem(2, batch=(2,))
    tA, tS, tB = f64(A), f64(S), f64(B)
    L = np.linalg.cholesky(S)
    LU, piv = LA.lu_factor(tA)
    outs = [LA.cholesky(tS, upper=True), LA.inv(tA), LA.logdet(tS), LA.solve(tA, tB[..., 0]),
            LA.solve(tA, tB.mT, left=False), *LA.lu(tA), LA.lu_solve(LU, piv, tB),
            LA.lu_solve(LU, piv, tB, adjoint=True), LA.lu_solve(LU, piv, tB.mT, left=False),
            LA.solve_triangular(f64(L), tB, upper=False),
            LA.solve_triangular(f64(L).mT, tB, upper=True, unitriangular=True),
            LA.solve_triangular(f64(L), tB.mT, upper=False, left=False)]
    nv.realize(*outs)
    got = [o.numpy() for o in outs]
    tol = 1e-13
    At = np.swapaxes(A, -1, -2)
    close(got[0], np.swapaxes(L, -1, -2), tol)
    close(got[1], np.linalg.inv(A), tol)
    close(got[2], np.linalg.slogdet(S)[1], tol)
    close(got[3], np.linalg.solve(A, B[..., :1])[..., 0], tol)
    close(got[4], np.swapaxes(np.linalg.solve(At, B), -1, -2), tol)
    P, Lf, U = got[5:8]
    np.testing.assert_array_equal(P, per_matrix(lambda a: sl.lu(a)[0], A))
    close(Lf, per_matrix(lambda a: sl.lu(a)[1], A), tol)
    close(U, per_matrix(lambda a: sl.lu(a)[2], A), tol)
    close(got[8], np.linalg.solve(A, B), tol)
    close(got[9], np.linalg.solve(At, B), tol)
    close(got[10], np.swapaxes(np.linalg.solve(At, B), -1, -2), tol)
    close(got[11], np.linalg.solve(L, B), tol)
    unit_upper = np.swapaxes(np.tril(L, -1), -1, -2) + np.eye(2)
    close(got[12], np.linalg.solve(unit_upper, B), tol)
    close(got[13], np.swapaxes(np.linalg.solve(np.swapaxes(L, -1, -2), B), -1, -2), tol)


def test_float32_within_a_condition_scaled_bound():
    """float32 results against the float64 reference: within ``16 eps cond(A)`` of the
    largest entry (PyTorch's own float32 error on these matrices is 1-2 eps cond, and
    Nova's the same)."""
    A, S, B = problem(17, seed=5)
    A32, S32, B32 = (x.astype(np.float32) for x in (A, S, B))
    A, S, B = (x.astype(np.float64) for x in (A32, S32, B32))
    t = [nv.tensor(x) for x in (A32, S32, B32)]
    outs = [LA.cholesky_ex(t[1]).L, LA.solve_ex(t[0], t[2]).result, LA.det(t[0])]
    nv.realize(*outs)
    refs = [np.linalg.cholesky(S), np.linalg.solve(A, B), np.linalg.det(A)]
    conds = [np.linalg.cond(S), np.linalg.cond(A), np.linalg.cond(A)]
    eps = np.finfo(np.float32).eps
    for out, ref, cond in zip(outs, refs, conds):
        assert out.dtype == nv.float32
        bound = 16 * eps * cond.max() * np.abs(ref).max()
        assert np.abs(out.numpy() - ref).max() <= bound


def test_not_positive_definite_and_singular():
    """``cholesky``/``inv``/``solve``/``lu_factor`` realize and raise naming the batch
    element and the order (PyTorch's messages); the ``_ex`` forms return LAPACK's info
    lazily; ``det``/``slogdet``/``logdet`` give 0, (0, -inf), -inf/NaN."""
    spd = np.array([[4.0, 2.0, 0.0], [2.0, 5.0, 1.0], [0.0, 1.0, 3.0]])
    indefinite = np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    singular = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    zero = np.zeros((3, 3))
    both = f64(np.stack([spd, indefinite, singular, zero]))
    assert issubclass(LinAlgError, RuntimeError)
    with pytest.raises(LinAlgError, match=r"^linalg.cholesky: The factorization could not be "
                                          r"completed because the input is not positive-"
                                          r"definite \(the leading minor of order 2 is not"):
        LA.cholesky(f64(indefinite))
    with pytest.raises(LinAlgError, match=r"^linalg.cholesky: \(Batch element 1\): .*order 2"):
        LA.cholesky(both)
    with pytest.raises(LinAlgError, match=r"^linalg.cholesky_ex: \(Batch element 1\)"):
        LA.cholesky_ex(both, check_errors=True)
    with pytest.raises(LinAlgError, match=r"^linalg.inv: \(Batch element 2\): The diagonal "
                                          r"element 3 is zero, the inversion could not"):
        LA.inv(both)
    with pytest.raises(LinAlgError, match=r"^linalg.solve: \(Batch element 2\): The solver "
                                          r"failed because the input matrix is singular"):
        LA.solve(both, both)
    with pytest.raises(RuntimeError, match=r"^linalg.lu_factor: \(Batch element 2\): U\[2,2\] "
                                           r"is zero"):
        LA.lu_factor(both)
    outs = [LA.cholesky_ex(both).info, LA.inv_ex(both).info, LA.solve_ex(both, both).info,
            LA.lu_factor_ex(both).info, LA.det(both), *LA.slogdet(both), LA.logdet(both),
            LA.lu_factor_ex(both).pivots]
    nv.realize(*outs)
    got = [o.numpy() for o in outs]
    np.testing.assert_array_equal(got[0], [0, 2, 2, 1])
    for info in got[1:4]:
        np.testing.assert_array_equal(info, [0, 0, 3, 1])
    np.testing.assert_allclose(got[4], [np.linalg.det(spd), -3.0, 0.0, 0.0], rtol=1e-15)
    np.testing.assert_array_equal(got[5], [1.0, -1.0, 0.0, 0.0])
    np.testing.assert_allclose(got[6], [np.log(np.linalg.det(spd)), np.log(3.0), -np.inf,
                                        -np.inf], rtol=1e-15)
    assert np.isnan(got[7][1]) and np.isneginf(got[7][2:]).all()
    np.testing.assert_array_equal(got[8][2], [2, 3, 3])     # as LAPACK's (and PyTorch's)
    np.testing.assert_array_equal(got[8][3], [1, 2, 3])     # no swap at a zero column


def test_empty_and_nan_outside_the_triangle():
    """0 x 0 matrices (det 1, slogdet (1, 0)) and empty batches keep their shapes;
    ``cholesky`` and ``solve_triangular`` never read the other triangle (NaN there stays
    out), nor the diagonal when ``unitriangular``."""
    e = f64(np.zeros((2, 0, 0)))
    b = f64(np.zeros((0, 3, 3)))
    outs = [LA.det(e), *LA.slogdet(e), LA.inv(e), LA.cholesky(e),
            LA.solve(e, f64(np.zeros((2, 0)))), LA.det(b), LA.inv(b), LA.cholesky(b),
            LA.lu_factor(b).pivots, LA.solve(b, b)]
    nv.realize(*outs)
    np.testing.assert_array_equal(outs[0].numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(outs[1].numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(outs[2].numpy(), [0.0, 0.0])
    assert [o.shape for o in outs[3:]] == [(2, 0, 0), (2, 0, 0), (2, 0), (0,), (0, 3, 3),
                                           (0, 3, 3), (0, 3), (0, 3, 3)]
    S = np.array([[4.0, np.nan, np.nan], [2.0, 5.0, np.nan], [0.0, 1.0, 3.0]])
    B = np.array([[1.0], [2.0], [3.0]])
    unit = np.array([[np.nan, 0.0, 0.0], [0.5, np.nan, 0.0], [1.0, 2.0, np.inf]])
    outs = [LA.cholesky(f64(S)), LA.cholesky(f64(S.T), upper=True),
            LA.solve_triangular(f64(S), f64(B), upper=False),
            LA.solve_triangular(f64(unit), f64(B), upper=False, unitriangular=True)]
    nv.realize(*outs)
    full = np.tril(S) + np.tril(S, -1).T
    np.testing.assert_allclose(outs[0].numpy(), np.linalg.cholesky(full), rtol=1e-15)
    np.testing.assert_allclose(outs[1].numpy(), np.linalg.cholesky(full).T, rtol=1e-15)
    np.testing.assert_allclose(outs[2].numpy(), np.linalg.solve(np.tril(S), B), rtol=1e-15)
    ones = np.tril(np.nan_to_num(unit, posinf=0.0), -1) + np.eye(3)
    np.testing.assert_allclose(outs[3].numpy(), np.linalg.solve(ones, B), rtol=1e-15)


def test_argument_errors():
    sq = f64(np.eye(3))
    with pytest.raises(ValueError, match=r"linalg.cholesky: A must be batches of square "
                                         r"matrices, but they are 2 by 3 matrices"):
        LA.cholesky(f64(np.ones((2, 3))))
    with pytest.raises(RuntimeError, match="linalg.det: The input tensor A must have at least 2"):
        LA.det(f64(np.ones(3)))
    with pytest.raises(TypeError, match="linalg.inv: expected A of dtype float32 or float64, "
                                        "got int64"):
        LA.inv(nv.tensor(np.eye(3, dtype=np.int64)))
    with pytest.raises(TypeError, match="linalg.solve: Expected A and B to have the same dtype"):
        LA.solve(sq, nv.ones(3))
    with pytest.raises(ValueError, match=r"linalg.solve: Incompatible shapes of A and B for "
                                         r"the equation AX = B \(3x3 and 2x1\)"):
        LA.solve(sq, f64(np.ones((2, 1))))
    with pytest.raises(ValueError, match=r"linalg.solve_triangular: Incompatible shapes of A "
                                         r"and B for the equation XA = B \(3x3 and 3x2\)"):
        LA.solve_triangular(sq, f64(np.ones((3, 2))), upper=True, left=False)
    with pytest.raises(ValueError, match="The input tensor B must have at least 2 dimensions"):
        LA.solve_triangular(sq, f64(np.ones(3)), upper=True)
    with pytest.raises(ValueError, match="linalg.solve: Shapes .* cannot be broadcast|"
                                         "broadcast"):
        LA.solve(f64(np.ones((2, 3, 3))), f64(np.ones((4, 3, 1))))
    with pytest.raises(NotImplementedError, match="LU without pivoting"):
        LA.lu_factor(sq, pivot=False)
    with pytest.raises(ValueError, match=r"linalg.lu_solve: pivots must be an int32 tensor of "
                                         r"shape \(3,\)"):
        LA.lu_solve(sq, nv.ones(3), sq)
    with pytest.raises(TypeError, match="upper"):
        LA.solve_triangular(sq, sq)


def test_gradients():
    """Closed-form backwards against central differences in float64: inv, det, slogdet,
    solve, cholesky (of a symmetrized input, as PyTorch's checks: its gradient is the
    symmetric one), solve_triangular (lower; upper with a unit diagonal); lu_factor and
    lu_solve through their ops; second derivatives (create_graph recomputes). The other
    forms (upper, ``left=False``, vectors, ``logdet``) are transposes and reshapes
    around these. The lazy ``_ex`` forms (the same Functions) keep each evaluation one
    step; 2 x 2 and 3 x 3 matrices keep the evaluations few."""
    rng = np.random.default_rng(7)
    A = rng.normal(size=(2, 2)) + 2 * np.eye(2)
    B = rng.normal(size=(2, 1))

    def general(a, b):
        LU, piv, _ = LA.lu_factor_ex(a)
        return (LA.inv_ex(a).inverse, LA.det(a), LA.slogdet(a).logabsdet,
                LA.solve_ex(a, b).result, LU, LA.lu_solve(LU, piv, b, adjoint=True))

    assert gradcheck(general, [A, B])

    S = rng.normal(size=(3, 3))
    S = S @ S.T / 2 + np.eye(3)

    def triangular(s, b):
        return (LA.cholesky_ex(s + s.mT).L, LA.solve_triangular(s, b, upper=False),
                LA.solve_triangular(s.mT, b, upper=True, unitriangular=True))

    assert gradcheck(triangular, [S, rng.normal(size=(3, 1))])

    def first_derivatives(a):
        total = LA.inv_ex(a).inverse.sum() + LA.cholesky_ex(a @ a.mT).L.pow(2).sum() + LA.det(a)
        return nv.autograd.grad(total, [a], create_graph=True)[0]

    assert gradcheck(first_derivatives, [A])


def _cofactor_matrix(M):
    """adj(M)^T from its definition: signed minors, in float64."""
    n = len(M)
    minors = [[np.linalg.det(np.delete(np.delete(M, i, 0), j, 1)) if n > 1 else 1.0
               for j in range(n)] for i in range(n)]
    return np.array(minors) * (-1.0) ** np.add.outer(np.arange(n), np.arange(n))


def test_det_gradient_is_the_cofactor_matrix_also_at_rank_n_minus_1():
    """The gradient of det is adj(A)^T, a polynomial: finite and exact where A is
    singular of rank n - 1 (one zero pivot), where det A A^-T is 0 * inf = NaN (and
    PyTorch returns zeros); for invertible A it is det A A^-T. Batched, both dtypes."""
    rng = np.random.default_rng(3)
    singular = np.array([[[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]],
                         [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 1.0]],
                         [[0.0, 1.0, 1.0], [0.0, 2.0, 3.0], [0.0, 5.0, 1.0]],
                         rng.normal(size=(3, 3)) * 4])
    for dtype, tol in ((nv.float64, 1e-13), (nv.float32, 1e-5)):
        a = nv.tensor(singular, dtype=dtype, requires_grad=True)
        (LA.det(a) * nv.tensor([1.0, 2.0, -1.0, 0.5], dtype=dtype)).sum().backward()
        want = [w * _cofactor_matrix(m) for w, m in zip([1.0, 2.0, -1.0, 0.5], singular)]
        close(a.grad.numpy(), np.array(want), tol)
    for M in ([[1.0, 2.0], [2.0, 4.0]], [[0.0]], [[-3.0]]):
        a = f64(M).requires_grad_()
        LA.det(a).backward()
        close(a.grad.numpy(), _cofactor_matrix(np.array(M)), 1e-15)


def test_det_gradient_is_zero_at_rank_n_minus_2_and_below():
    """Rank n - 2 or less: every (n-1)-minor vanishes, so the cofactor matrix is 0 (as
    PyTorch's gradient); two zero pivots made the interpolation's solve singular and
    the gradient NaN, also for a batch member whose loss weight was 0."""
    cases = [np.diag([1.0, 0.0, 0.0]), np.zeros((3, 3)), np.outer([1, 2, 3], [1, -1, 2]),
             np.zeros((2, 2))]
    for dtype in (nv.float64, nv.float32):
        for M in cases:
            a = nv.tensor(M, dtype=dtype, requires_grad=True)
            LA.det(a).backward()
            np.testing.assert_array_equal(a.grad.numpy(), np.zeros_like(M))
        a = nv.tensor(np.stack([np.eye(3), np.zeros((3, 3))]), dtype=dtype, requires_grad=True)
        (LA.det(a) * nv.tensor([2.0, 0.0], dtype=dtype)).sum().backward()
        np.testing.assert_array_equal(a.grad.numpy(), np.stack([2 * np.eye(3), np.zeros((3, 3))]))


def test_recorded_graph_grows_linearly():
    """Each step records the same ops, so doubling n doubles the graph (recorded, never
    run here); n = 64 records about 3,000 nodes for cholesky and 4,200 for lu_factor."""
    def sizes(n):
        S = nv.tensor(np.eye(n) * 2.0)
        nv.realize(S)
        return [recorded_nodes(LA.cholesky_ex(S).L), recorded_nodes(LA.lu_factor_ex(S).LU),
                recorded_nodes(LA.solve_triangular(S, S, upper=True))]

    small, large = sizes(32), sizes(64)
    for a, b in zip(small, large):
        assert 1.9 * a < b < 2.1 * a
    assert large[0] < 60 * 64 and large[1] < 80 * 64

"""The rest of ``torch.linalg`` (``multi_dot``, ``vecdot``, ``matmul``, ``diagonal``,
``vander``, ``tensorinv``, ``tensorsolve``, ``householder_product``, ``eig``,
``eigvals``) and PyTorch's legacy top-level solvers (``cholesky``, ``cholesky_solve``,
``cholesky_inverse``, ``lu``, ``lu_solve``, ``lu_unpack``, ``triangular_solve``,
``chain_matmul``, and the removed ones that raise) against numpy/scipy, with their
errors and gradients (finite differences in float64)."""
import math

import numpy as np
import pytest
import scipy.linalg as sl
import scipy.linalg.lapack as lapack

import nova as nv
from nova import linalg_legacy as legacy
from nova.autograd.gradcheck import gradcheck

LA = nv.linalg


def t(a, dtype=nv.float64, requires_grad=False):
    return nv.tensor(np.asarray(a), dtype=dtype, requires_grad=requires_grad)


def rng(seed=0):
    return np.random.default_rng(seed)


# ---------------------------------------------------------------- products


def test_multi_dot_orders_and_vector_ends():
    r = rng()
    a, b, c, d = r.normal(size=5), r.normal(size=(5, 2)), r.normal(size=(2, 7)), r.normal(size=7)
    np.testing.assert_allclose(LA.multi_dot([t(a), t(b), t(c), t(d)]).numpy(), a @ b @ c @ d,
                               rtol=1e-12)
    m = [r.normal(size=s) for s in ((10, 100), (100, 5), (5, 50))]
    np.testing.assert_allclose(LA.multi_dot([t(x) for x in m]).numpy(),
                               np.linalg.multi_dot(m), rtol=1e-12)
    out = LA.multi_dot([t(a), t(r.normal(size=(5, 3)))])
    assert out.shape == (3,)
    assert LA.multi_dot([t(a), t(a)]).shape == ()
    # the cheapest order: (A B) C for (10x100)(100x5)(5x50)
    assert legacy.chain_matmul is not None
    assert nv.linalg_more._chain_order([10, 100, 5, 50])[0][2] == 1


def test_multi_dot_errors():
    with pytest.raises(RuntimeError, match="expected at least 2 tensors but got 1"):
        LA.multi_dot([t(np.ones(3))])
    with pytest.raises(RuntimeError, match="the first tensor must be 1D or 2D but got 3D"):
        LA.multi_dot([t(np.ones((2, 3, 3))), t(np.ones((3, 3)))])
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        LA.multi_dot([t(np.ones((3, 2))), t(np.ones((3, 2)))])
    with pytest.raises(RuntimeError, match="same dtype"):
        LA.multi_dot([t(np.ones(3), nv.float32), t(np.ones((3, 2)))])


def test_multi_dot_gradient():
    r = rng(1)
    mats = [t(r.normal(size=s), requires_grad=True) for s in ((3,), (3, 4), (4, 2))]
    assert gradcheck(lambda a, b, c: LA.multi_dot([a, b, c]), mats)


def test_vecdot_matmul_diagonal():
    r = rng(2)
    x, y = r.normal(size=(3, 4)), r.normal(size=(4,))
    np.testing.assert_allclose(LA.vecdot(t(x), t(y)).numpy(), x @ y, rtol=1e-12)
    np.testing.assert_allclose(LA.vecdot(t(x), t(x), dim=0).numpy(), (x * x).sum(0), rtol=1e-12)
    z = x + 1j * r.normal(size=(3, 4))
    w = y + 1j * r.normal(size=4)
    got = LA.vecdot(nv.tensor(z), nv.tensor(w))
    np.testing.assert_allclose(got.numpy(), (np.conj(z) * w).sum(-1), rtol=1e-12)
    with pytest.raises(RuntimeError, match="same dtype"):
        LA.vecdot(t(x, nv.float32), t(y))
    np.testing.assert_allclose(LA.matmul(t(x), t(y)).numpy(), x @ y, rtol=1e-12)
    A = r.normal(size=(2, 3, 3))
    np.testing.assert_allclose(LA.diagonal(t(A)).numpy(), np.diagonal(A, 0, -2, -1))
    np.testing.assert_allclose(LA.diagonal(t(A), offset=1, dim1=0, dim2=2).numpy(),
                               np.diagonal(A, 1, 0, 2))


def test_vander():
    x = np.array([1.5, -2.0, 0.0, 3.0])
    np.testing.assert_allclose(LA.vander(t(x)).numpy(), np.vander(x, increasing=True))
    np.testing.assert_allclose(LA.vander(t(x), N=6).numpy(), np.vander(x, 6, increasing=True))
    got = LA.vander(nv.tensor([1, 2, 3]), N=2)
    assert got.dtype == nv.int64 and got.tolist() == [[1, 1], [1, 2], [1, 3]]
    batch = np.arange(6.0).reshape(2, 3)
    assert LA.vander(t(batch)).shape == (2, 3, 3)
    with pytest.raises(RuntimeError, match="N must be greater than 1"):
        LA.vander(t(x), N=1)
    with pytest.raises(RuntimeError, match="supports floating point, complex, and integer"):
        LA.vander(nv.tensor([True, False]))


@pytest.mark.slow
def test_tensorinv_tensorsolve():
    r = rng(3)
    a = r.normal(size=(4, 6, 8, 3)) + 0.0
    a = a.reshape(24, 24) + 6 * np.eye(24)
    a = a.reshape(4, 6, 8, 3)
    np.testing.assert_allclose(LA.tensorinv(t(a), ind=2).numpy(), np.linalg.tensorinv(a, 2),
                               rtol=1e-10, atol=1e-12)
    b = r.normal(size=(4, 6))
    np.testing.assert_allclose(LA.tensorsolve(t(a), t(b)).numpy(), np.linalg.tensorsolve(a, b),
                               rtol=1e-10, atol=1e-12)
    moved = np.moveaxis(a, 0, -1)                       # (6, 8, 3, 4)
    bb = r.normal(size=(8, 3))
    np.testing.assert_allclose(LA.tensorsolve(t(moved), t(bb), dims=(0,)).numpy(),
                               np.linalg.tensorsolve(moved, bb, axes=(0,)), rtol=1e-10,
                               atol=1e-12)
    with pytest.raises(RuntimeError, match="strictly positive integer for 'ind'"):
        LA.tensorinv(t(a), ind=0)
    with pytest.raises(RuntimeError, match=r"prod\(self.shape\[ind:\]\)"):
        LA.tensorinv(t(np.ones((4, 3, 2))))


def test_householder_product_matches_lapack_orgqr():
    r = rng(4)
    for shape in ((5, 3), (4, 4)):
        qr, tau, _, _ = lapack.dgeqrf(r.normal(size=shape))
        ref = lapack.dorgqr(qr, tau)[0]
        np.testing.assert_allclose(LA.householder_product(t(qr), t(tau)).numpy(), ref,
                                   atol=1e-13)
    qr, tau, _, _ = lapack.dgeqrf(r.normal(size=(5, 3)))
    # fewer reflectors than columns: the product of the first two
    got = LA.householder_product(t(qr), t(tau[:2])).numpy()
    ref = lapack.dorgqr(qr, np.concatenate([tau[:2], [0.0]]))[0]
    np.testing.assert_allclose(got, ref, atol=1e-13)
    with pytest.raises(RuntimeError, match=r"input.shape\[-2\] must be greater"):
        LA.householder_product(t(np.ones((2, 3))), t(np.ones(2)))
    with pytest.raises(RuntimeError, match=r"input.shape\[-1\] must be greater"):
        LA.householder_product(t(np.ones((3, 2))), t(np.ones(3)))
    A, tau_t = t(qr, requires_grad=True), t(tau, requires_grad=True)
    assert gradcheck(LA.householder_product, (A, tau_t))


# ---------------------------------------------------------------- eig


def _eig_problem(seed=5, batch=(2,), n=4):
    return rng(seed).normal(size=batch + (n, n))


@pytest.mark.parametrize("dtype,tol", [(nv.float64, 1e-12), (nv.float32, 2e-5)])
def test_eig_matches_lapack(dtype, tol):
    a = _eig_problem()
    w, v = LA.eig(t(a, dtype))
    assert w.dtype == (nv.complex128 if dtype == nv.float64 else nv.complex64)
    assert w.shape == (2, 4) and v.shape == (2, 4, 4)
    wn, vn = w.numpy(), v.numpy()
    # A V = V diag(w), unit-norm columns with the largest component real (geev's)
    np.testing.assert_allclose(a @ vn, vn * wn[..., None, :], atol=tol * 10)
    np.testing.assert_allclose(np.linalg.norm(vn, axis=-2), 1.0, atol=tol)
    ref = np.linalg.eigvals(a.astype(np.float64))
    for i in range(2):
        np.testing.assert_allclose(np.sort_complex(wn[i]), np.sort_complex(ref[i]),
                                   atol=tol * 10)
    np.testing.assert_allclose(np.sort_complex(LA.eigvals(t(a, dtype)).numpy()[0]),
                               np.sort_complex(ref[0]), atol=tol * 10)


def test_eig_complex_input_and_errors():
    r = rng(6)
    c = r.normal(size=(3, 3)) + 1j * r.normal(size=(3, 3))
    got = LA.eigvals(nv.tensor(c)).numpy()
    np.testing.assert_allclose(np.sort_complex(got), np.sort_complex(np.linalg.eigvals(c)),
                               atol=1e-12)
    with pytest.raises(RuntimeError, match="should not contain infs or NaNs"):
        LA.eig(t([[1.0, math.nan], [0.0, 1.0]]))
    with pytest.raises(RuntimeError, match="square matrices"):
        LA.eig(t(np.ones((2, 3))))
    empty_w, empty_v = LA.eig(t(np.ones((0, 0))))
    assert empty_w.shape == (0,) and empty_v.shape == (0, 0)


@pytest.mark.slow
def test_eig_gradients_by_finite_differences():
    """Real losses invariant to the eigenvectors' phases: sums of functions of the
    eigenvalues, and of the eigenvectors' moduli."""
    a = _eig_problem(7, batch=(), n=3)

    def loss(A):
        w, v = LA.eig(A)
        return (w.real * w.real).sum() + (w.imag * w.imag).sum() * 0.5 + (v.abs() ** 2 *
                                                                          t([1.0, 2.0, 3.0])).sum()

    assert gradcheck(loss, (t(a, requires_grad=True),))
    assert gradcheck(lambda A: (LA.eigvals(A).real * 1.5).sum() + LA.eigvals(A).imag.abs().sum(),
                     (t(a, requires_grad=True),))


# ---------------------------------------------------------------- legacy solvers


def _spd(n=4, seed=8):
    m = rng(seed).normal(size=(n, n))
    return m @ m.T + n * np.eye(n)


def test_cholesky_legacy_and_solves():
    s = _spd()
    with pytest.warns(UserWarning, match="torch.cholesky is deprecated"):
        L = legacy.cholesky(t(s))
    np.testing.assert_allclose(L.numpy(), np.linalg.cholesky(s), atol=1e-12)
    with pytest.warns(UserWarning):
        U = t(s).cholesky(upper=True)
    np.testing.assert_allclose(U.numpy(), np.linalg.cholesky(s).T, atol=1e-12)
    b = rng(9).normal(size=(2, 4, 3))
    lo = np.linalg.cholesky(s)
    np.testing.assert_allclose(legacy.cholesky_solve(t(b), t(lo)).numpy(),
                               np.linalg.solve(s, b), atol=1e-12)
    np.testing.assert_allclose(t(b).cholesky_solve(t(lo.T), upper=True).numpy(),
                               np.linalg.solve(s, b), atol=1e-12)
    np.testing.assert_allclose(legacy.cholesky_inverse(t(lo)).numpy(), np.linalg.inv(s),
                               atol=1e-12)
    np.testing.assert_allclose(t(lo.T).cholesky_inverse(upper=True).numpy(), np.linalg.inv(s),
                               atol=1e-12)
    with pytest.raises(ValueError, match="Incompatible"):
        legacy.cholesky_solve(t(np.ones((3, 1))), t(lo))
    assert gradcheck(lambda B, L: legacy.cholesky_solve(B, L),
                     (t(b[0], requires_grad=True), t(lo, requires_grad=True)))


@pytest.mark.slow
def test_lu_lu_solve_lu_unpack():
    a = rng(10).normal(size=(2, 4, 4))
    with pytest.warns(UserWarning, match="torch.lu is deprecated"):
        LU, piv = legacy.lu(t(a))
    ref_lu, ref_piv = sl.lu_factor(a[0])
    np.testing.assert_allclose(LU.numpy()[0], ref_lu, atol=1e-12)
    assert piv.dtype == nv.int32 and piv.numpy()[0].tolist() == (ref_piv + 1).tolist()
    with pytest.warns(UserWarning):
        LU2, piv2, info = t(np.zeros((3, 3))).lu(get_infos=True)
    assert info.item() == 1          # singular: no error, info says where
    b = rng(11).normal(size=(2, 4, 2))
    np.testing.assert_allclose(legacy.lu_solve(t(b), LU, piv).numpy(), np.linalg.solve(a, b),
                               atol=1e-12)
    np.testing.assert_allclose(t(b).lu_solve(LU, piv).numpy(), np.linalg.solve(a, b),
                               atol=1e-12)
    P, L, U = legacy.lu_unpack(LU, piv)
    p, l, u = sl.lu(a[1])
    np.testing.assert_allclose(P.numpy()[1], p)
    np.testing.assert_allclose(L.numpy()[1], l, atol=1e-12)
    np.testing.assert_allclose(U.numpy()[1], u, atol=1e-12)
    # rectangular, and what is not unpacked is empty
    r = rng(12).normal(size=(5, 3))
    lu_r, piv_r = LA.lu_factor(t(r))
    P, L, U = legacy.lu_unpack(lu_r, piv_r)
    np.testing.assert_allclose((P @ L @ U).numpy(), r, atol=1e-12)
    assert P.shape == (5, 5) and L.shape == (5, 3) and U.shape == (3, 3)
    P, L, U = legacy.lu_unpack(lu_r, piv_r, unpack_data=False)
    assert L.numel() == 0 and U.numel() == 0 and P.shape == (5, 5)
    P, L, U = legacy.lu_unpack(lu_r, piv_r, unpack_pivots=False)
    assert P.numel() == 0 and L.shape == (5, 3)


def test_triangular_solve():
    r = rng(13)
    a = np.triu(r.normal(size=(4, 4))) + 4 * np.eye(4)
    b = r.normal(size=(3, 4, 2))
    X, C = legacy.triangular_solve(t(b), t(a))
    np.testing.assert_allclose(X.numpy(), np.stack([sl.solve_triangular(a, bi) for bi in b]),
                               atol=1e-12)
    assert C.shape == (3, 4, 4)
    np.testing.assert_array_equal(C.numpy()[2], a)
    lo = a.T
    X, _ = t(b[0]).triangular_solve(t(lo), upper=False, transpose=True, unitriangular=True)
    np.testing.assert_allclose(X.numpy(), sl.solve_triangular(lo, b[0], lower=True, trans=1,
                                                              unit_diagonal=True), atol=1e-12)
    assert type(X).__name__ == "Tensor"
    res = legacy.triangular_solve(t(b[0]), t(a))
    assert res._fields == ("solution", "cloned_coefficient")


def test_chain_matmul_and_removed_functions():
    r = rng(14)
    m = [r.normal(size=s) for s in ((2, 3), (3, 4), (4, 2))]
    with pytest.warns(UserWarning, match="chain_matmul is deprecated"):
        got = legacy.chain_matmul(*[t(x) for x in m])
    np.testing.assert_allclose(got.numpy(), m[0] @ m[1] @ m[2], rtol=1e-12)
    with pytest.warns(UserWarning):
        np.testing.assert_array_equal(legacy.chain_matmul(t(m[0])).numpy(), m[0])
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="must be 2D"):
        legacy.chain_matmul(t(m[0]), t(np.ones(2)))
    A = t(np.eye(2))
    for fn, hint in ((legacy.matrix_rank, "torch.linalg.matrix_rank"),
                     (legacy.lstsq, "torch.linalg.lstsq"), (A.lstsq, "torch.linalg.lstsq"),
                     (legacy.solve, "torch.linalg.solve"), (A.solve, "torch.linalg.solve"),
                     (legacy.eig, "torch.linalg.eigvals"), (A.eig, "torch.linalg.eig"),
                     (legacy.symeig, "torch.linalg.eigh"), (A.symeig, "torch.linalg.eigh")):
        with pytest.raises(RuntimeError, match="deprecated since version 1.9 and is now "
                                               "removed") as info:
            fn(A)
        assert hint in str(info.value)


def test_removed_messages_match_torch():
    torch = pytest.importorskip("torch")
    A = torch.eye(2)
    for name in ("matrix_rank", "lstsq", "solve", "eig", "symeig"):
        with pytest.raises(RuntimeError) as theirs:
            getattr(torch, name)(A, A) if name in ("lstsq", "solve") else getattr(torch, name)(A)
        with pytest.raises(RuntimeError) as ours:
            getattr(legacy, name)(t(np.eye(2)))
        assert str(ours.value) == str(theirs.value)

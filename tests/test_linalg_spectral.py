"""``nv.linalg``'s orthogonal and spectral decompositions (``nova/decompositions_spectral.py``)
against numpy and PyTorch in float64 (float32 within a few eps): QR with LAPACK's signs,
eigh/svd through sign-invariant quantities (reconstruction, orthogonality,
``|V^T V_ref|``), pinv, matrix_rank, lstsq (its per-driver outputs), the matrix norms and
condition numbers; gradients by finite differences and against PyTorch's; the errors;
empty shapes; the recorded graph's size. Each test realizes its outputs in one step (a
compile each: the shapes are small and shared)."""
import math

import numpy as np
import pytest

import nova as nv
from benchmarks.linalg_graph_size import recorded_nodes
from nova.autograd.gradcheck import gradcheck

LA = nv.linalg


def f64(a):
    return nv.tensor(np.asarray(a, dtype=np.float64), dtype=nv.float64)


def realized(*outs):
    nv.realize(*outs)
    return [o.numpy() for o in outs]


@pytest.fixture
def interp():
    """The reference interpreter: these graphs (thousands of nodes: every Jacobi round is
    recorded) would compile for tens of seconds each; the compiled kernels are checked by
    ``test_compiled_forward_and_gradients``, which shares their ops."""
    with nv.engine("interp"):
        yield


def T(a):
    return np.swapaxes(a, -1, -2)


def orthonormal(M, tol=1e-14):
    """``M``'s columns are orthonormal."""
    k = M.shape[-1]
    np.testing.assert_allclose(T(M) @ M, np.broadcast_to(np.eye(k), M.shape[:-2] + (k, k)),
                               rtol=0, atol=tol * max(4, M.shape[-2]))


def same_columns_up_to_sign(M, ref, tol):
    """``|M^T ref| = I``: the same unit columns, each possibly negated."""
    k = M.shape[-1]
    eye = np.broadcast_to(np.eye(k), M.shape[:-2] + (k, k))
    np.testing.assert_allclose(np.abs(T(M) @ ref), eye, rtol=0, atol=tol)


def distinct_symmetric(n, batch=(), seed=0):
    """Symmetric matrices with eigenvalues 1 apart at least."""
    rng = np.random.default_rng(seed)
    Q = np.linalg.qr(rng.normal(size=batch + (n, n)))[0]
    values = rng.permutation(np.arange(n) * 1.5 - n / 2) + rng.uniform(-0.2, 0.2, n)
    return (Q * values[..., None, :]) @ T(Q)


def test_qr_matches_torch_signs_included(interp):
    """Householder QR: ``Q`` and ``R`` as LAPACK's (PyTorch's) up to rounding, every mode,
    tall, square and wide, batched; float32 too; ``Tensor.qr`` (``some``)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    arrays = [rng.normal(size=(2, 5, 3)), rng.normal(size=(3, 3)), rng.normal(size=(2, 3, 4))]
    outs, refs = [], []
    for a in arrays:
        for mode in ("reduced", "complete", "r"):
            Q, R = LA.qr(f64(a), mode=mode)
            Qt, Rt = torch.linalg.qr(torch.tensor(a), mode=mode)
            outs += [Q, R]
            refs += [Qt.numpy(), Rt.numpy()]
    a32 = rng.normal(size=(4, 4)).astype(np.float32)
    outs += [*LA.qr(nv.tensor(a32)), *f64(arrays[0]).qr(some=False), *nv.linalg.qr(f64(arrays[0]))]
    refs += [t.numpy() for t in torch.linalg.qr(torch.tensor(a32))]
    refs += [t.numpy() for t in torch.linalg.qr(torch.tensor(arrays[0]), mode="complete")]
    refs += [t.numpy() for t in torch.linalg.qr(torch.tensor(arrays[0]))]
    got = realized(*outs)
    for g, r, out in zip(got, refs, outs):
        assert g.shape == r.shape
        assert out.dtype == (nv.float32 if r.dtype == np.float32 else nv.float64)
        np.testing.assert_allclose(g, r, rtol=0, atol=(2e-6 if r.dtype == np.float32 else 1e-14))
    assert type(f64(arrays[1]).qr()).__name__ == "qr"
    assert type(LA.qr(f64(arrays[1]))).__name__ == "linalg_qr"


def test_eigh_and_eigvalsh_against_numpy(interp):
    """Eigenvalues ascending as LAPACK's, eigenvectors orthonormal, ``A V = V diag(L)``, the
    same vectors up to sign; only the triangle ``UPLO`` names is read (NaN in the other);
    batched; sizes 1, 2 and 5 (5 is odd: padded by one index); float32 within a few eps."""
    A5 = distinct_symmetric(5, (2,), seed=2)
    A2 = distinct_symmetric(2, seed=3)
    lower = np.tril(A5) + np.triu(np.full((5, 5), np.nan), 1)
    upper = np.triu(A5) + np.tril(np.full((5, 5), np.nan), -1)
    A32 = distinct_symmetric(4, seed=4).astype(np.float32)
    outs = [*LA.eigh(f64(lower)), *LA.eigh(f64(upper), UPLO="U"), LA.eigvalsh(f64(upper), "U"),
            *LA.eigh(f64(A2)), *LA.eigh(f64([[3.0]])), *LA.eigh(nv.tensor(A32)),
            LA.eigvalsh(nv.tensor(A32))]
    got = realized(*outs)
    ref_values, ref_vectors = np.linalg.eigh(A5)
    for L, V in (got[0:2], got[2:4]):
        np.testing.assert_allclose(L, ref_values, rtol=0, atol=1e-14 * 5)
        orthonormal(V)
        np.testing.assert_allclose(A5 @ V, V * L[..., None, :], rtol=0, atol=1e-13)
        same_columns_up_to_sign(V, ref_vectors, 1e-13)
    np.testing.assert_allclose(got[4], ref_values, rtol=0, atol=1e-14 * 5)
    np.testing.assert_allclose(got[5], np.linalg.eigvalsh(A2), rtol=0, atol=1e-15)
    same_columns_up_to_sign(got[6], np.linalg.eigh(A2)[1], 1e-15)
    assert got[7].tolist() == [3.0] and got[8].tolist() == [[1.0]]
    eps32 = np.finfo(np.float32).eps
    ref32 = np.linalg.eigvalsh(A32.astype(np.float64))
    scale = np.abs(ref32).max()
    np.testing.assert_allclose(got[9], ref32, rtol=0, atol=8 * eps32 * scale)
    np.testing.assert_allclose(got[11], ref32, rtol=0, atol=8 * eps32 * scale)
    orthonormal(got[10].astype(np.float64), 8 * eps32)
    assert outs[9].dtype == nv.float32 and outs[10].dtype == nv.float32


def test_svd_against_numpy(interp):
    """Singular values descending as LAPACK's; ``U``, ``V`` orthonormal (complete with
    ``full_matrices``), ``A = U S Vh``, the same vectors up to sign (a pair negated
    together); tall, wide (decomposed transposed), batched, rank-deficient (the null
    space's vectors completed); ``svdvals``; ``torch.svd``'s ``Tensor.svd`` (V, ``some``,
    ``compute_uv``)."""
    rng = np.random.default_rng(5)
    tall = rng.normal(size=(2, 5, 3))
    wide = rng.normal(size=(3, 4))
    deficient = rng.normal(size=(4, 2)) @ rng.normal(size=(2, 4))
    outs = [*LA.svd(f64(tall), full_matrices=False), *LA.svd(f64(tall)),
            *LA.svd(f64(wide), full_matrices=False), *LA.svd(f64(wide)), *LA.svd(f64(deficient)),
            LA.svdvals(f64(tall)), *f64(wide).svd(), *f64(wide).svd(some=False),
            *f64(wide).svd(compute_uv=False)]
    got = realized(*outs)
    for A, (U, S, Vh), full in ((tall, got[0:3], False), (tall, got[3:6], True),
                                (wide, got[6:9], False), (wide, got[9:12], True),
                                (deficient, got[12:15], True)):
        m, n = A.shape[-2:]
        k = min(m, n)
        Ur, Sr, Vhr = np.linalg.svd(A, full_matrices=full)
        assert U.shape == Ur.shape and S.shape == Sr.shape and Vh.shape == Vhr.shape
        np.testing.assert_allclose(S, Sr, rtol=0, atol=1e-14 * 5)
        orthonormal(U)
        orthonormal(T(Vh) if full or n <= m else Vh.T)
        np.testing.assert_allclose((U[..., :k] * S[..., None, :]) @ Vh[..., :k, :], A, rtol=0,
                                   atol=1e-14 * 5)
        rank = int((Sr > 1e-10).sum(-1).min())
        same_columns_up_to_sign(U[..., :rank], Ur[..., :rank], 1e-12)
        # u_i and v_i are negated together
        np.testing.assert_allclose(np.abs(np.diagonal(T(U[..., :rank]) @ Ur[..., :rank], 0, -2, -1)
                                          - np.diagonal(Vh[..., :rank, :] @ T(Vhr[..., :rank, :]),
                                                        0, -2, -1)), 0, atol=1e-12)
    np.testing.assert_allclose(got[15], np.linalg.svd(tall, compute_uv=False), rtol=0, atol=5e-14)
    U, S, V = got[16:19]
    assert U.shape == (3, 3) and V.shape == (4, 3)
    np.testing.assert_allclose((U * S) @ V.T, wide, rtol=0, atol=5e-14)
    assert got[19].shape == (3, 3) and got[21].shape == (4, 4)
    np.testing.assert_allclose((got[19] * got[20]) @ got[21][:, :3].T, wide, rtol=0, atol=5e-14)
    assert not got[22].any() and not got[24].any() and got[22].shape == (3, 3)
    np.testing.assert_allclose(got[23], np.linalg.svd(wide, compute_uv=False), rtol=0, atol=5e-14)


def test_pinv_rank_lstsq_norms_cond_against_torch(interp):
    """On a batch holding a rank-1 matrix: ``pinv`` (default, atol, rtol, the ``rcond``
    overload, hermitian), ``matrix_rank`` (defaults, atol/rtol, ``tol``, hermitian),
    ``lstsq`` with every driver (the outputs each returns, vector ``B``, batch
    broadcasting), the matrix norms (every ord), ``linalg.norm``, ``cond`` (every p) and
    ``Tensor.pinverse``."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    A = rng.normal(size=(2, 3, 2))
    A[1, :, 1] = -2 * A[1, :, 0]
    B = rng.normal(size=(2, 3, 2))
    S = A[:, :2, :] + T(A[:, :2, :])
    square = A[0, :2, :] + 3 * np.eye(2)
    nA, nB, nS, nQ = f64(A), f64(B), f64(S), f64(square)
    tA, tB, tS, tQ = (torch.tensor(x) for x in (A, B, S, square))
    cases = [
        (LA.pinv(nA), torch.linalg.pinv(tA)),
        (LA.pinv(nA, atol=0.5), torch.linalg.pinv(tA, atol=0.5)),
        (LA.pinv(nA, rtol=0.5), torch.linalg.pinv(tA, rtol=0.5)),
        (LA.pinv(nA, 0.5), torch.linalg.pinv(tA, 0.5)),
        (LA.pinv(nS, hermitian=True), torch.linalg.pinv(tS, hermitian=True)),
        (nA.pinverse(), tA.pinverse()),
        (LA.matrix_rank(nA), torch.linalg.matrix_rank(tA)),
        (LA.matrix_rank(nA, atol=1.5), torch.linalg.matrix_rank(tA, atol=1.5)),
        (LA.matrix_rank(nA, rtol=0.5), torch.linalg.matrix_rank(tA, rtol=0.5)),
        (LA.matrix_rank(nA, 1.5), torch.linalg.matrix_rank(tA, 1.5)),
        (LA.matrix_rank(nS, hermitian=True), torch.linalg.matrix_rank(tS, hermitian=True)),
        (LA.lstsq(nA, nB[..., 0]).solution, torch.linalg.lstsq(tA, tB[..., 0]).solution),
        (LA.lstsq(nA[:1], nB).solution, torch.linalg.lstsq(tA[:1], tB).solution),
    ]
    for driver in (None, "gelsy", "gelsd", "gelss", "gels"):
        full_rank = slice(0, 1)     # PyTorch's residuals are empty for rank-deficient A
        got, ref = LA.lstsq(nA[full_rank], nB[full_rank], driver=driver), torch.linalg.lstsq(
            tA[full_rank], tB[full_rank], driver=driver)
        cases += list(zip(got, ref))
    for ord in ("fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf):
        cases.append((LA.matrix_norm(nA, ord), torch.linalg.matrix_norm(tA, ord)))
        cases.append((LA.cond(nQ, ord), torch.linalg.cond(tQ, ord)))
    cases += [(LA.matrix_norm(nA, 2, dim=(0, 2), keepdim=True),
               torch.linalg.matrix_norm(tA, 2, dim=(0, 2), keepdim=True)),
              (LA.norm(nA), torch.linalg.norm(tA)),
              (LA.norm(nA[0], 1), torch.linalg.norm(tA[0], 1)),
              (LA.norm(nA[0], "nuc"), torch.linalg.norm(tA[0], "nuc")),
              (LA.norm(nA, 3, dim=1), torch.linalg.norm(tA, 3, dim=1)),
              (LA.norm(nA, -2, dim=(2, 1)), torch.linalg.norm(tA, -2, dim=(2, 1))),
              (LA.matrix_rank(nA), torch.tensor([2, 1])),
              (LA.cond(nQ), torch.linalg.cond(tQ)), (LA.cond(nA[0]), torch.linalg.cond(tA[0]))]
    got = realized(*(c[0] for c in cases))
    for g, (out, ref) in zip(got, cases):
        ref = ref.numpy()
        assert g.shape == ref.shape and g.dtype == ref.dtype, (out, ref)
        np.testing.assert_allclose(g, ref, rtol=1e-12, atol=1e-12)


def test_lstsq_rank_deficient_gives_the_minimum_norm_solution(interp):
    """Every driver solves by the SVD: the minimum-norm least-squares solution (PyTorch's
    'gelsy' gives it too); ``gelsd`` reports rank 2 and, unlike PyTorch (which returns an
    empty tensor when the rank is deficient), the residuals of that solution."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    A = rng.normal(size=(5, 2)) @ rng.normal(size=(2, 3))
    B = rng.normal(size=(5, 2))
    outs = [LA.lstsq(f64(A), f64(B)).solution, *LA.lstsq(f64(A), f64(B), driver="gelsd")]
    got = realized(*outs)
    ref = torch.linalg.lstsq(torch.tensor(A), torch.tensor(B)).solution.numpy()
    np.testing.assert_allclose(got[0], ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got[1], np.linalg.pinv(A) @ B, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got[2], ((A @ got[1] - B) ** 2).sum(0), rtol=1e-12)
    assert got[3].tolist() == 2 and got[4].shape == (3,)


def test_compiled_gradients_by_finite_differences():
    """Compiled (the other tests run on the interpreter, whose ops these kernels must
    match): the closed-form backwards against central differences of the compiled
    forward, in float64: eigh (eigenvalues and the sign-invariant squares of the vectors,
    of a symmetrized input as PyTorch's checks: the gradient is the symmetric one),
    eigvalsh, svd (S and ``U diag(w) Vh``: sign-invariant), svdvals of the wide transpose,
    qr, pinv, lstsq's solution and residuals. (The wide QR and the other branches are
    checked against PyTorch's gradients in ``test_gradients_match_torch``.)"""
    rng = np.random.default_rng(8)
    A = rng.normal(size=(3, 2))
    B = rng.normal(size=(3, 1))
    S = distinct_symmetric(3, seed=9)
    w = f64([1.0, 0.5])

    def spectral(s, a, b):
        L, V = LA.eigh(s + s.mT)
        U, sv, Vh = LA.svd(a, full_matrices=False)
        x = LA.lstsq(a, b, driver="gelsd")
        return (L, V * V, LA.eigvalsh(s + s.mT, UPLO="U"), sv, (U * w) @ Vh, LA.svdvals(a.mT),
                *LA.qr(a), LA.pinv(a), x.solution, x.residuals)

    assert gradcheck(spectral, [S / 2, A, B])


def test_gradients_match_torch(interp):
    """Sign-invariant losses, analytic gradients against PyTorch's: eigh's (the symmetric
    gradient of the triangle read), svd with ``full_matrices`` (the extra columns get
    none, as PyTorch narrows them), ``qr`` complete of a square and wide matrix, pinv
    hermitian, lstsq of a wide matrix; and a second derivative by finite differences."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(10)
    S = distinct_symmetric(3, seed=11)
    A = rng.normal(size=(3, 4))
    Wt = rng.uniform(0.5, 1.5, size=(3, 3))
    B = rng.normal(size=(3, 2))

    def losses(la, s, a, b, wt):
        L, V = la.eigh(s)
        U, sv, Vh = la.svd(a)       # full_matrices: Vh is 4 x 4
        Q, R = la.qr(a, mode="complete")
        polar = U @ Vh[:3]
        return [(V * V * wt).sum() + (L * L).sum(), (polar * polar * a).sum() + (sv ** 3).sum(),
                (Q * Q * a[:, :3]).sum() + (R * R).sum(), (la.pinv(s, hermitian=True) ** 2).sum(),
                (la.lstsq(a, b).solution ** 3).sum()]

    mine = [f64(x).requires_grad_() for x in (S, A, B)]
    total = sum(losses(LA, *mine, f64(Wt)))
    grads = realized(*nv.autograd.grad(total, mine))
    theirs = [torch.tensor(x, requires_grad=True) for x in (S, A, B)]
    sum(losses(torch.linalg, *theirs, torch.tensor(Wt))).backward()
    for g, t in zip(grads, theirs):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-10, atol=1e-10)

    def first(s):
        return nv.autograd.grad((LA.eigh(s + s.mT)[1] ** 2 * f64(Wt)).sum(), [s],
                                create_graph=True)[0]

    assert gradcheck(first, [S / 2])


def test_values_only_losses_have_finite_gradients_at_repeated_values(interp):
    """``eigh(A).eigenvalues`` and ``svd(A).S`` alone: the vectors get no gradient, so
    their term (which divides by the gaps between values) is skipped, as PyTorch
    skips it -- at repeated eigenvalues (the identity, ``diag(2, 2, 1)``, zero) and
    repeated or zero singular values the gradient is the values' (``eigvalsh``'s,
    ``svdvals``'s), not NaN. A loss reading the vectors still divides by the gaps."""
    mats = [np.eye(3), np.diag([2.0, 2.0, 1.0]), np.zeros((3, 3))]
    for M in mats:
        a, b = f64(M).requires_grad_(), f64(M).requires_grad_()
        (LA.eigh(a).eigenvalues * f64([1.0, 2.0, 3.0])).sum().backward()
        (LA.eigvalsh(b) * f64([1.0, 2.0, 3.0])).sum().backward()
        assert np.isfinite(a.grad.numpy()).all()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=0, atol=1e-14)
    for M in mats + [np.outer([1.0, 2.0, 0.0], [1.0, 1.0])]:
        for full in (True, False):
            a, b = f64(M).requires_grad_(), f64(M).requires_grad_()
            weights = f64(np.arange(1.0, min(M.shape) + 1))
            (LA.svd(a, full_matrices=full).S * weights).sum().backward()
            (LA.svdvals(b) * weights).sum().backward()
            assert np.isfinite(a.grad.numpy()).all()
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=0, atol=1e-14)
    a = f64(np.eye(3)).requires_grad_()
    LA.eigh(a).eigenvectors[..., 0].sum().backward()          # reads the vectors
    assert not np.isfinite(a.grad.numpy()).all()


def test_argument_errors_name_the_op_and_shapes():
    sq = f64(np.eye(3))
    rect = f64(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"linalg.eigh: A must be batches of square matrices, "
                                         r"but they are 2 by 3 matrices \(shape \(2, 3\)\)"):
        LA.eigh(rect)
    with pytest.raises(ValueError, match=r"linalg.eigvalsh: A must be batches of square"):
        LA.eigvalsh(rect)
    with pytest.raises(TypeError, match="linalg.svd: expected A of dtype float32 or float64, "
                                        "got int64"):
        LA.svd(nv.tensor(np.eye(3, dtype=np.int64)))
    with pytest.raises(RuntimeError, match="linalg.qr: The input tensor A must have at least 2"):
        LA.qr(f64(np.ones(3)))
    with pytest.raises(ValueError, match="linalg.qr: qr received unrecognized mode 'x' but "
                                         "expected one of 'reduced'"):
        LA.qr(sq, mode="x")
    with pytest.raises(ValueError, match="Expected UPLO argument to be 'L' or 'U', but got 'X'"):
        LA.eigh(sq, UPLO="X")
    with pytest.raises(ValueError, match="linalg.svd: driver="):
        LA.svd(sq, driver="gesvd")
    with pytest.raises(ValueError, match=r"linalg.pinv: A must be batches of square matrices"):
        LA.pinv(rect, hermitian=True)
    with pytest.raises(ValueError, match="give rcond or atol/rtol, not both"):
        LA.pinv(sq, 0.1, atol=0.1)
    with pytest.raises(TypeError, match="linalg.matrix_rank: atol must be a number or a tensor"):
        LA.matrix_rank(sq, atol="big")
    with pytest.raises(ValueError, match="lstsq: parameter `driver` should be one of"):
        LA.lstsq(sq, sq, driver="gesv")
    with pytest.raises(ValueError, match=r"lstsq: input.size\(-2\) should match other.size\(-2\) "
                                         r"\(A has shape \(2, 3\), B \(3, 3\)\)"):
        LA.lstsq(rect, sq)
    with pytest.raises(ValueError, match=r"lstsq: input.dim\(\) must be greater or equal"):
        LA.lstsq(rect, f64(np.ones((1, 2, 3))))
    with pytest.raises(TypeError, match="lstsq: Expected A and B to have the same dtype"):
        LA.lstsq(sq, nv.ones(3, 3))
    with pytest.raises(ValueError, match="linalg.matrix_norm: Order 3 not supported"):
        LA.matrix_norm(sq, 3)
    with pytest.raises(ValueError, match=r"linalg.cond\(ord=fro\): A must be batches of square"):
        LA.cond(rect, "fro")
    with pytest.raises(ValueError, match="linalg.norm: If dim is not specified but ord is, the "
                                         "input must be 1D or 2D. Got 3D"):
        LA.norm(f64(np.ones((2, 2, 2))), 2)
    a = f64(np.ones((3, 2)) + np.eye(3, 2)).requires_grad_()
    with pytest.raises(RuntimeError, match="depends on Q, which is not computed when mode='r'"):
        LA.qr(a, mode="r").R.sum().backward()
    with pytest.raises(RuntimeError, match=r"not differentiable when mode='complete' and nrows "
                                           r"> ncols \(A is 3 x 2\)"):
        LA.qr(a, mode="complete").Q.sum().backward()


def test_empty_shapes(interp):
    """0 x 0, 3 x 0 and empty batches keep PyTorch's shapes (identity ``Q``/``U`` where
    PyTorch gives one)."""
    e = f64(np.zeros((3, 0)))
    z = f64(np.zeros((0, 2, 2)))
    outs = [*LA.qr(e, mode="complete"), *LA.qr(e), *LA.eigh(f64(np.zeros((0, 0)))),
            *LA.svd(e), LA.pinv(e), LA.matrix_rank(e), *LA.eigh(z), LA.svdvals(z),
            LA.lstsq(z, z).solution]
    got = realized(*outs)
    assert [g.shape for g in got] == [(3, 3), (3, 0), (3, 0), (0, 0), (0,), (0, 0), (3, 3), (0,),
                                      (0, 0), (0, 3), (), (0, 2), (0, 2, 2), (0, 2), (0, 2, 2)]
    np.testing.assert_array_equal(got[0], np.eye(3))
    np.testing.assert_array_equal(got[6], np.eye(3))
    assert got[10] == 0


def test_recorded_graph_size():
    """Recorded, never run: QR's steps record the same ops whatever n (so it grows
    linearly), and eigh/svd record a fixed number of nodes per Jacobi round (sweeps(n) (n
    - 1) rounds) on top of the QR steps: at n = 16, 32 nodes a round or fewer."""
    from nova.decompositions_spectral import sweeps

    def sizes(n):
        a = nv.tensor(np.eye(n) * 2.0)
        nv.realize(a)
        return recorded_nodes(LA.qr(a).R), recorded_nodes(LA.eigvalsh(a)), recorded_nodes(LA.svdvals(a))

    (qr8, *spectral8), (qr16, *spectral16) = sizes(8), sizes(16)
    assert 1.9 * qr8 < qr16 < 2.1 * qr8 and qr16 < 80 * 16
    for n, (eig, svd) in ((8, spectral8), (16, spectral16)):
        rounds = sweeps(n) * (n - 1)
        assert eig < 35 * rounds + 170 * n and svd < 37 * rounds + 220 * n


@pytest.mark.slow
def test_jacobi_converges_on_graded_and_kernel_matrices():
    """float64 at n = 24 (sweeps(24) = 9): an RBF kernel matrix (eigenvalues decaying to
    the 1e-6 jitter) and a graded indefinite one (|eigenvalues| from 1e-10 to 1e5), the
    matrices Jacobi converges slowest on without the QR preconditioning step: eigenvalues
    within 20 n eps of LAPACK's (relative to the largest), residuals as small, the
    singular values likewise."""
    rng = np.random.default_rng(12)
    n = 24
    x = rng.uniform(0, 10, n)
    rbf = np.exp(-(x[:, None] - x[None]) ** 2 / 2) + 1e-6 * np.eye(n)
    Q = np.linalg.qr(rng.normal(size=(n, n)))[0]
    graded = (Q * (np.logspace(-10, 5, n) * rng.choice([-1, 1], n))) @ Q.T
    A = np.stack([rbf, graded])
    L, V = LA.eigh(f64(A))
    S = LA.svdvals(f64(A))
    L, V, S = realized(L, V, S)
    scale = np.abs(np.linalg.eigvalsh(A)).max(-1)[:, None]
    tol = 20 * n * np.finfo(np.float64).eps
    assert (np.abs(L - np.linalg.eigvalsh(A)) <= tol * scale).all()
    assert (np.abs(A @ V - V * L[..., None, :]).max(-2) <= tol * scale).all()
    orthonormal(V, tol)
    assert (np.abs(S - np.linalg.svd(A, compute_uv=False)) <= tol * scale).all()

"""Complex tensors (``nova.tensor.complex``): pairs of real tensors, checked against
numpy's complex arithmetic. The ops are compositions of real ops every engine already
runs, so most tests use the reference interpreter; the rotary-embedding test runs the
compiled cpu engine too."""
import copy
import io
import pickle
import warnings

import numpy as np
import pytest

import nova as nv


@pytest.fixture(autouse=True)
def engine():
    with nv.engine("interp"):
        yield


def _c(rng, *shape, dtype=np.complex64):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _close(got, ref, tol=1e-5):
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
    assert got.shape == np.shape(ref)
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)


def test_arithmetic_and_functions_match_numpy():
    rng = np.random.default_rng(0)
    a, b = _c(rng, 3, 4), _c(rng, 3, 4)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    A, B, X = nv.tensor(a), nv.tensor(b), nv.tensor(x)
    assert A.dtype == nv.complex64 and A.shape == (3, 4)
    for got, ref in [(A + B, a + b), (A - B, a - b), (A * B, a * b), (A / B, a / b),
                     (A + X, a + x), (X - A, x - a), (X * A, x * a), (X / A, x / a),
                     (A / X, a / x), (2 * A, 2 * a), (A * (1 - 2j), a * (1 - 2j)),
                     ((0.5 + 1j) / A, (0.5 + 1j) / a), (-A, -a), (A.conj(), a.conj()),
                     (A ** 3, a ** 3), (A ** -2, a ** -2.0), (A ** 0.5, a ** 0.5),
                     (A.exp(), np.exp(a)), (A.log(), np.log(a)), (A.sqrt(), np.sqrt(a)),
                     (A.sin(), np.sin(a)), (A.cos(), np.cos(a)), (A.reciprocal(), 1 / a),
                     (nv.sgn(A), a / np.abs(a)), (A.square(), a * a)]:
        _close(got, ref, 2e-5)
    _close(A.abs(), np.abs(a))
    _close(abs(A), np.abs(a))
    _close(nv.angle(A), np.angle(a))
    _close(A.real, a.real)
    _close(nv.imag(A), a.imag)


def test_type_promotion_follows_pytorch():
    c64 = nv.zeros(2, dtype=nv.complex64)
    assert (c64 + nv.ones(2, dtype=nv.float64)).dtype == nv.complex128
    assert (c64 + nv.tensor(1.0, dtype=nv.float64)).dtype == nv.complex64      # 0-d
    assert (nv.zeros((), dtype=nv.complex64) + nv.ones(2, dtype=nv.float64)).dtype \
        == nv.complex128
    assert (nv.ones(2, dtype=nv.int64) * 1j).dtype == nv.complex64
    assert (nv.ones(2, dtype=nv.float64) * 1j).dtype == nv.complex128
    _close(nv.ones(2) * 1j, np.array([1j, 1j]))
    _close(1j * nv.arange(3), 1j * np.arange(3))
    assert nv.tensor([1 + 2j, 3]).dtype == nv.complex64
    assert nv.tensor(np.array([1j]), dtype=nv.complex128).dtype == nv.complex128
    assert nv.from_numpy(np.array([1j], np.complex128)).dtype == nv.complex128
    # a numpy scalar keeps its precision as a 0-d array does (was complex64: np.complex128
    # is also a Python complex, whose default it took)
    assert nv.tensor(np.complex128(1 + 2j)).dtype == nv.complex128
    assert nv.tensor(np.complex64(1j)).dtype == nv.complex64 == nv.tensor(1j).dtype


def test_smith_division_and_a_zero_divisor():
    big = nv.tensor([1e30 + 1e30j, 3e-30 - 1e-30j])
    _close(nv.tensor([1 + 1j, 2 + 0j]) / big,
           np.array([1 + 1j, 2 + 0j], np.complex64) / np.array([1e30 + 1e30j, 3e-30 - 1e-30j],
                                                                np.complex64), 1e-5)
    z = nv.tensor([1 + 1j])
    for zero in (0, 0j, nv.zeros(1, dtype=nv.complex64)):
        got = (z / zero).numpy()
        assert np.isinf(got.real).all() and np.isinf(got.imag).all()


def test_zero_to_a_power_with_a_positive_real_part_is_zero():
    """``0 ** w`` for Re(w) > 0 is 0, as PyTorch's (``exp(w log 0)`` was NaN); other
    bases keep the principal value."""
    z = nv.tensor([0j, 1j, 0j], dtype=nv.complex64)
    zn = np.array([0j, 1j, 0j], np.complex64)
    got = [z ** (1 + 1j), z ** 0.5, z ** nv.tensor([2 + 0j, 2 + 0j, 0.5 + 3j])]
    want = [zn ** (1 + 1j), np.array([0, np.sqrt(1j), 0], np.complex64),
            np.array([0, -1, 0], np.complex64)]
    for g, w in zip(got, want):
        _close(g, w, 1e-6)
    assert not np.isfinite((z ** nv.tensor([-1 + 0j] * 3)).numpy()[0])   # 0 ** -1


def test_rotary_embedding_llama_style_forward_and_gradient():
    """Meta's LLaMA ``apply_rotary_emb``: view_as_complex, a product with polar
    frequencies, view_as_real, flatten; the gradient reaches the real input."""
    rng = np.random.default_rng(1)
    b, t, h, d = 2, 5, 3, 8
    xq = rng.standard_normal((b, t, h, d)).astype(np.float32)
    g = rng.standard_normal((b, t, h, d)).astype(np.float32)
    freqs = 1.0 / (10000.0 ** (np.arange(0, d, 2)[: d // 2].astype(np.float32) / d))
    ang = np.outer(np.arange(t), freqs).astype(np.float32)
    cos, sin = np.cos(ang)[None, :, None], np.sin(ang)[None, :, None]
    xe, xo = xq[..., 0::2], xq[..., 1::2]
    ref = np.stack([xe * cos - xo * sin, xe * sin + xo * cos], -1).reshape(b, t, h, d)
    ge, go = g[..., 0::2], g[..., 1::2]
    ref_grad = np.stack([ge * cos + go * sin, -ge * sin + go * cos], -1).reshape(b, t, h, d)
    for engine in ("interp", "cpu"):
        with nv.engine(engine):
            freqs_cis = nv.polar(nv.ones(t, d // 2), nv.outer(nv.arange(t).float(),
                                                               nv.tensor(freqs)))
            assert freqs_cis.dtype == nv.complex64
            x = nv.tensor(xq, requires_grad=True)
            xq_ = nv.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
            fc = freqs_cis.view(1, t, 1, d // 2)
            out = nv.view_as_real(xq_ * fc).flatten(3).type_as(x)
            (out * nv.tensor(g)).sum().backward()
            _close(out, ref, 1e-5)
            _close(x.grad, ref_grad, 1e-5)


def test_view_as_complex_is_a_view_and_view_as_real_returns_to_it():
    x = nv.tensor(np.arange(8, dtype=np.float32).reshape(2, 2, 2))
    z = nv.view_as_complex(x)
    _close(z, np.array([[0 + 1j, 2 + 3j], [4 + 5j, 6 + 7j]]))
    z[0, 1] = 10 - 1j                 # writes through to x, as PyTorch's view
    z.imag[1] = 0.5
    np.testing.assert_array_equal(x.numpy(), [[[0, 1], [10, -1]], [[4, 0.5], [6, 0.5]]])
    r = nv.view_as_real(z)
    np.testing.assert_array_equal(r.numpy(), x.numpy())
    w = z * 2                          # not a view: a new tensor
    np.testing.assert_array_equal(nv.view_as_real(w).numpy(), 2 * x.numpy())
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        nv.view_as_complex(nv.ones(3, 3))
    with pytest.raises(RuntimeError, match="float and double"):
        nv.view_as_complex(nv.ones(3, 2, dtype=nv.int32))
    with pytest.raises(RuntimeError, match="complex tensors"):
        nv.view_as_real(nv.ones(3))


def test_a_complex_leaf_gets_pytorchs_gradient_of_a_real_loss():
    rng = np.random.default_rng(2)
    a = _c(rng, 4)
    z = nv.tensor(a, requires_grad=True)
    assert z.requires_grad and z.is_leaf and z.grad is None
    (z.abs() ** 2).sum().backward()
    _close(z.grad, 2 * a)                       # d/dre + i d/dim of |z|^2
    z.grad = None
    (z * z).real.sum().backward()
    _close(z.grad, 2 * a.conj())
    with pytest.raises(RuntimeError, match="real scalar outputs"):
        (z * z).sum().backward()


def test_reductions_joins_selection_and_products():
    rng = np.random.default_rng(3)
    a, b = _c(rng, 3, 4), _c(rng, 4, 2)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    A, B, X = nv.tensor(a), nv.tensor(b), nv.tensor(x)
    _close(A.sum(), a.sum())
    _close(A.sum(1, keepdim=True), a.sum(1, keepdims=True))
    _close(nv.mean(A, 0), a.mean(0))
    _close(A.cumsum(1), a.cumsum(1), 2e-5)
    _close(A @ B, a @ b, 2e-5)
    _close(X @ A, x @ a, 2e-5)
    _close(nv.matmul(A, nv.tensor(b.real)), a @ b.real, 2e-5)
    _close(nv.cat([A, nv.tensor(x.T)], 1), np.concatenate([a, x.T], 1))
    _close(nv.stack([A, A.conj()]), np.stack([a, a.conj()]))
    cond = nv.tensor(a.real > 0)
    _close(nv.where(cond, A, 0.0), np.where(a.real > 0, a, 0))
    _close(A[1:, ::2].transpose(0, 1).reshape(-1), a[1:, ::2].T.reshape(-1))
    _close(A.flip(0).unsqueeze(0).squeeze(0), a[::-1])
    parts = A.chunk(2, dim=1)
    assert len(parts) == 2 and parts[1].dtype == nv.complex64
    _close(parts[1], a[:, 2:])
    assert [v.shape for v in A] == [(4,)] * 3
    eq = (A == nv.tensor(a)).numpy()
    assert eq.all() and not (A != A).numpy().any()
    assert nv.allclose(A, nv.tensor(a + 1e-9)) and not nv.allclose(A, A * 1.1)


def test_factories_conversions_and_printing():
    z = nv.zeros(2, 3, dtype=nv.complex64)
    assert z.shape == (2, 3) and (z.numpy() == 0).all()
    assert nv.ones(2, dtype=nv.cdouble).dtype == nv.complex128
    _close(nv.full((2,), 1 - 2j), np.array([1 - 2j, 1 - 2j]))
    _close(nv.zeros_like(z), np.zeros((2, 3)))
    nv.manual_seed(0)
    r = nv.randn(4000, dtype=nv.complex64).numpy()
    assert abs(np.mean(np.abs(r) ** 2) - 1) < 0.08        # E|z|^2 = 1, parts N(0, 1/2)
    assert abs(np.var(r.real) - 0.5) < 0.05
    x = nv.tensor([1.0, -2.0])
    c = x.to(nv.complex64)
    _close(c, np.array([1, -2], np.complex64))
    assert x.to(nv.complex128).dtype == nv.complex128 and c.cdouble().dtype == nv.complex128
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        back = (c * 1j).to(nv.float32)
    assert back.dtype == nv.float32
    np.testing.assert_array_equal(back.numpy(), [0.0, 0.0])
    assert repr(nv.tensor([1 + 2j, 3])) == "tensor([1.+2.j, 3.+0.j])"
    assert repr(nv.tensor([1j], dtype=nv.complex128)) == \
        "tensor([0.+1.j], dtype=nova.complex128)"
    # PyTorch's format: each part's numbers in the format their values pick
    assert repr(nv.tensor([1.5 + 2.25j, 3 - 1j])) == "tensor([1.5000+2.2500j, 3.0000-1.0000j])"
    assert repr(nv.tensor([1e-5 + 1j, 2j])) == "tensor([1.0000e-05+1.j, 0.0000e+00+2.j])"
    assert f"{nv.tensor(1.5 - 2j):.1f}" == "1.5-2.0j"
    assert nv.tensor([1 + 2j]).tolist() == [1 + 2j] and nv.tensor(2j).item() == 2j
    assert nv.is_complex(z) and z.is_complex() and not nv.is_complex(x)
    assert nv.is_tensor(z) and not nv.is_tensor(1j)
    assert not z.is_floating_point()


def test_unsupported_ops_raise_naming_the_op():
    z = nv.zeros(3, dtype=nv.complex64)
    with pytest.raises(TypeError, match="erf: not supported for complex tensors"):
        z.erf()
    assert not hasattr(z, "erf")
    with pytest.raises(TypeError, match=r"erf: not supported for complex tensors \(a "
                                        r"complex64 tensor of shape \[3\]\)"):
        nv.erf(z)       # (was "erf: expected a Tensor, got ComplexTensor")
    with pytest.raises(TypeError, match="nuc"):
        nv.linalg.norm(nv.zeros(2, 2, dtype=nv.complex64), "nuc")
    with pytest.raises(RuntimeError, match="result type complex64 can't be cast to the "
                                           "desired output type float32"):
        nv.add(z, z, out=nv.zeros(3))   # (as PyTorch's; a complex out= takes it)
    out = nv.zeros(3, dtype=nv.complex64)
    assert nv.add(z + 1j, z, out=out) is out
    np.testing.assert_allclose(out.numpy(), [1j, 1j, 1j])
    with pytest.raises(TypeError):
        float(nv.tensor(1j))
    with pytest.raises(TypeError, match="view_as_real"):
        z.view(nv.float32)


def test_a_module_holds_a_complex_buffer():
    class Rotary(nv.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nv.nn.Linear(4, 4)
            self.register_buffer("freqs_cis", nv.polar(nv.ones(3), nv.arange(3.0)),
                                 persistent=False)

    m = Rotary()
    m.to("cpu").half().float()
    assert m.freqs_cis.dtype == nv.complex64                  # floating casts skip it
    assert "freqs_cis" not in m.state_dict()
    assert [n for n, _ in m.named_buffers()] == ["freqs_cis"]
    _close(m.freqs_cis, np.exp(1j * np.arange(3)))
    m.register_buffer("kept", nv.tensor([1j, 2 - 1j]))
    f = io.BytesIO()
    nv.save(m.state_dict(), f)
    f.seek(0)
    m2 = Rotary()
    m2.register_buffer("kept", nv.zeros(2, dtype=nv.complex64))
    assert str(m2.load_state_dict(nv.load(f))) == "<All keys matched successfully>"
    _close(m2.kept, np.array([1j, 2 - 1j]))
    with pytest.raises(RuntimeError, match="dtype mismatch for kept"):
        m2.load_state_dict({**m2.state_dict(), "kept": nv.ones(2)})


def test_checkpoints_hold_complex_tensors_as_real_pairs():
    import safetensors.numpy
    z = nv.tensor(np.array([1 + 2j, -3j], np.complex128), requires_grad=True)
    f = io.BytesIO()
    nv.save({"z": z, "tied": z, "dtype": nv.complex64}, f)
    raw = f.getvalue()
    assert safetensors.numpy.load(raw)["z"].shape == (2, 2)       # what other readers see
    back = nv.load(io.BytesIO(raw))
    assert back["tied"] is back["z"] and back["dtype"] is nv.complex64
    assert back["z"].dtype == nv.complex128 and back["z"].requires_grad
    _close(back["z"], np.array([1 + 2j, -3j]))



def test_a_forged_complex_flag_is_refused(tmp_path):
    from tests.test_checkpoint_faults import _nova_file, _rejected
    entry = {"x": {"dtype": "I32", "shape": [2, 2], "data_offsets": [0, 16]}}
    for flag, why in (("true", "is not a float32/float64 tensor"),
                      ("1", "non-bool parameter/requires_grad/complex")):
        structure = '{"__tensor__": "x", "complex": %s}' % flag
        assert why in _rejected(tmp_path, _nova_file(entry, structure, bytes(16)))


def test_in_place_updates_write_both_parts():
    z = nv.tensor([1 + 1j, 2 - 1j])
    z.mul_(1j)
    z += 1
    _close(z, (np.array([1 + 1j, 2 - 1j]) * 1j) + 1)
    z.zero_()
    _close(z, np.zeros(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        z.copy_(nv.tensor([3.0, 4.0]))         # a real source: imaginary parts 0
    _close(z, np.array([3, 4]))


def test_transcendental_functions_match_numpy_and_keep_their_limits():
    """The hyperbolic, inverse and log/exp-near-zero functions (``complex_math``) at
    random points in both precisions, and where naive formulas fail: tanh of a large
    real part is its limit (sinh/cosh were inf / inf), log1p, expm1 and asinh of tiny
    arguments keep their relative accuracy."""
    rng = np.random.default_rng(5)
    for dtype, tol in ((np.complex64, 3e-5), (np.complex128, 1e-12)):
        a = _c(rng, 40, dtype=dtype)
        A = nv.tensor(a)
        inside = nv.tensor((a / (2 * np.abs(a).max())).astype(dtype))   # |z| < 1/2
        for name, ref in [("sinh", np.sinh), ("cosh", np.cosh), ("tanh", np.tanh),
                          ("tan", np.tan), ("sigmoid", lambda v: 1 / (1 + np.exp(-v))),
                          ("rsqrt", lambda v: 1 / np.sqrt(v)), ("log2", np.log2),
                          ("log10", np.log10), ("log1p", np.log1p), ("expm1", np.expm1),
                          ("asinh", np.arcsinh), ("asin", np.arcsin),
                          ("acos", np.arccos), ("acosh", np.arccosh),
                          ("atanh", np.arctanh), ("atan", np.arctan)]:
            got = getattr(A, name)()
            assert got.dtype == A.dtype, name
            _close(got, ref(a.astype(np.complex128)), tol)
            _close(getattr(nv, name)(inside), ref(inside.numpy().astype(np.complex128)), tol)
    big = nv.tensor(np.array([50 + 1j, -50 + 0.5j, 1e4 - 2j, 0.5 + 40j], np.complex64))
    _close(big.tanh(), np.tanh(big.numpy().astype(np.complex128)), 1e-6)
    # asinh/asin of large moduli (w^2 overflowed float32 past ~1e19: NaN), and both
    # sides of the cuts, signed zeros deciding as in C99 (numpy)
    huge = np.array([1e20, -3e25 + 1e25j, 2e9 - 1e9j, 3, complex(3, -0.0), -3,
                     complex(-0.0, 3), complex(0.0, -3), 1e20 * 1j], np.complex128)
    for dtype, tol in ((np.complex64, 1e-6), (np.complex128, 1e-12)):
        H = nv.tensor(huge.astype(dtype))
        _close(H.asinh(), np.arcsinh(huge), tol)
        _close(H.asin(), np.arcsin(huge), tol)
    tiny = np.array([1e-6 + 2e-6j, -3e-7 + 1e-8j, 1e-20 - 1e-20j], np.complex128)
    T = nv.tensor(tiny.astype(np.complex64))
    # (numpy's complex log1p is log(1 + z): 0 for the real part of log1p(1e-20 - 1e-20j);
    # the references are Taylor series, exact to float64 at these sizes)
    for name, ref in (("log1p", lambda v: v - v * v / 2 + v ** 3 / 3),
                      ("expm1", lambda v: v + v * v / 2 + v ** 3 / 6),
                      ("asinh", lambda v: v - v ** 3 / 6)):
        got = getattr(T, name)().numpy()
        want = ref(tiny)
        rel = np.abs(got - want) / np.abs(want)
        assert rel.max() < 1e-6, (name, got, want)


def test_complex_products_norms_and_linear_systems_match_numpy():
    rng = np.random.default_rng(6)
    a, b = _c(rng, 5), _c(rng, 5)
    m, rhs = (_c(rng, 2, 4, 4) + 3 * np.eye(4)).astype(np.complex64), _c(rng, 2, 4, 3)
    x = _c(rng, 3, 7)
    A, B, M, R, X = map(nv.tensor, (a, b, m, rhs, x))
    _close(nv.dot(A, B), np.dot(a, b), 2e-5)
    _close(A.vdot(B), np.vdot(a, b), 2e-5)
    _close(nv.outer(A, B[:3]), np.outer(a, b[:3]))
    _close(nv.inner(X, X), np.inner(x, x), 3e-5)
    _close(X.prod(), x.prod(), 2e-4)            # 21 elements: an odd one out per level
    _close(X.prod(1), x.prod(1), 2e-5)
    _close(nv.prod(X, 0, keepdim=True), x.prod(0, keepdims=True), 2e-5)
    _close(X[:, :1].prod(1), x[:, 0])
    _close(X.var(1), x.var(1, ddof=1), 2e-5)
    _close(X.std(correction=0), x.std(), 2e-5)
    assert X.var().dtype == nv.float32
    _close(nv.linalg.vector_norm(X, 3, dim=1), (np.abs(x) ** 3).sum(1) ** (1 / 3), 2e-5)
    _close(X.norm(), np.linalg.norm(x), 2e-5)
    _close(nv.linalg.norm(A, 1), np.linalg.norm(a, 1), 2e-5)
    _close(nv.linalg.norm(X), np.linalg.norm(x), 2e-5)
    _close(nv.linalg.vecdot(X, X), (x.conj() * x).sum(-1), 2e-5)
    _close(nv.linalg.inv(M), np.linalg.inv(m), 1e-4)
    _close(nv.linalg.solve(M, R), np.linalg.solve(m, rhs), 1e-4)
    _close(nv.linalg.solve(M[0], A[:4]), np.linalg.solve(m[0], a[:4]), 1e-4)
    _close(nv.linalg.solve(M, R.mT, left=False),
           np.swapaxes(np.linalg.solve(np.swapaxes(m, -1, -2), rhs), -1, -2), 1e-4)
    _close(nv.eye(3, dtype=nv.complex64), np.eye(3))
    _close(nv.kron(M[0], X[:2, :2]), np.kron(m[0], x[:2, :2]), 2e-5)
    _close(M[1].trace(), np.trace(m[1]), 2e-5)
    _close(nv.diag_embed(A), np.stack([np.diag(a)]).reshape(5, 5))
    u, v = _c(rng, 2, 3), _c(rng, 2, 3)
    _close(nv.linalg.cross(nv.tensor(u), nv.tensor(v)), np.cross(u, v), 2e-5)
    _close(nv.cross(nv.tensor(u), nv.tensor(v), dim=1), np.cross(u, v), 2e-5)
    with pytest.raises(ValueError, match="dot: 1-D tensors must have the same size"):
        nv.dot(A, B[:4])
    with pytest.raises(ValueError, match=r"outer: expected 1-D tensors, got shapes \[3, 7\]"):
        nv.outer(X, A)
    with pytest.raises(ValueError, match="linalg.inv: A must be a batch of square"):
        nv.linalg.inv(X)


def test_gradients_through_complex_functions_match_finite_differences():
    """A real loss of complex functions differentiates as its real ops (float64, central
    differences of the real and imaginary parts)."""
    rng = np.random.default_rng(7)
    z0 = _c(rng, 4, dtype=np.complex128) * 0.7

    def loss(z):
        w = z.tanh() * z.asinh() + z.prod() * z.log1p() + nv.linalg.inv(
            nv.outer(z, z.conj()) + 3 * nv.eye(4, dtype=nv.complex128)).sum(0)
        return w.abs().sum()

    re, im = nv.tensor(z0.real, requires_grad=True), nv.tensor(z0.imag, requires_grad=True)
    loss(nv.complex(re, im)).backward()
    eps = 1e-6
    for part, grad in ((0, re.grad.numpy()), (1, im.grad.numpy())):
        for i in range(4):
            d = np.zeros(4, np.complex128)
            d[i] = eps if part == 0 else 1j * eps
            up = loss(nv.tensor(z0 + d)).item()
            down = loss(nv.tensor(z0 - d)).item()
            np.testing.assert_allclose(grad[i], (up - down) / (2 * eps), rtol=1e-5, atol=1e-7)


def test_exp_sqrt_and_trig_keep_c99s_zeros_and_infinities_on_the_axes():
    """An infinite or NaN factor times an exact zero made the part NaN: exp(1000 + 0j)
    was inf + nanj (numpy, C99: inf + 0j), sqrt(inf + 0j) inf + nanj, sin(nan + 0j)
    nan + nanj. Values off these points, and all gradients at finite points, are the
    formulas' (the finite-difference test above)."""
    inf, nan = np.inf, np.nan
    vals = np.array([complex(inf, 0), complex(-inf, 0), complex(nan, 0), complex(0, inf),
                     complex(0, 0), complex(-0.0, 0.0), complex(1000, 0), complex(1, -inf),
                     complex(-inf, 1), complex(-1, 0), complex(0.5, -2)], np.complex128)
    z = nv.tensor(vals)
    with np.errstate(all="ignore"):
        for name, ref in (("exp", np.exp), ("sqrt", np.sqrt), ("sin", np.sin),
                          ("cos", np.cos), ("sinh", np.sinh), ("cosh", np.cosh)):
            got, want = getattr(z, name)().numpy(), ref(vals)
            for part in ("real", "imag"):
                g, w = getattr(got, part), getattr(want, part)
                np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=name)
                finite = ~np.isnan(w)
                np.testing.assert_allclose(g[finite], w[finite], rtol=1e-12, err_msg=name)


class _Spectral(nv.nn.Module):
    """An FNO-style layer: complex weights applied to the first modes of an rfft."""

    def __init__(self, pair=False):
        super().__init__()
        w = (0.1 * nv.randn(4, 4, 3, dtype=nv.cfloat))
        self.pair = pair
        self.w = nv.nn.Parameter(nv.view_as_real(w).clone() if pair else w)
        self.b = nv.nn.Parameter(nv.zeros(4))

    def weight(self):
        return nv.view_as_complex(self.w) if self.pair else self.w

    def forward(self, x):
        modes = nv.fft.rfft(x)[:, :, :3]
        out = nv.einsum("bix,iox->box", modes, self.weight())
        return nv.fft.irfft(out, n=x.shape[-1]) + self.b.reshape(1, 4, 1)


def test_a_complex_parameter_trains_as_its_real_pair():
    """nn.Parameter of a complex tensor (FNO's spectral weights; was a TypeError): the
    module registers its (..., 2) real pair -- what parameters() yields and optimizers
    update, as PyTorch's optimizers update complex parameters -- and the attribute is
    the complex view; training equals the hand-written real-pair form step by step."""
    nv.manual_seed(3)
    m = _Spectral()
    nv.manual_seed(3)
    ref = _Spectral(pair=True)
    assert type(m.w).__name__ == "ComplexParameter" and m.w is m.w
    assert m.w.dtype == nv.complex64 and m.w.shape == (4, 4, 3) and m.w.requires_grad
    assert [(n, p.shape) for n, p in m.named_parameters()] == [("w", (4, 4, 3, 2)),
                                                              ("b", (4,))]
    x = nv.tensor(np.random.default_rng(0).standard_normal((2, 4, 8)).astype(np.float32))
    opts = [nv.optim.AdamW(mod.parameters(), lr=0.05, weight_decay=0.1) for mod in (m, ref)]
    for _ in range(3):
        for mod, opt in zip((m, ref), opts):
            opt.zero_grad()
            mod(x).pow(2).mean().backward()
            opt.step()
        np.testing.assert_array_equal(nv.view_as_real(m.w).numpy(), ref.w.numpy())
    assert m.w.grad.dtype == nv.complex64 and m.w.grad.shape == (4, 4, 3)
    np.testing.assert_array_equal(nv.view_as_real(m.w.grad).numpy(), ref.w.grad.numpy())
    direct = nv.optim.SGD([m.w], lr=0.1)          # the complex parameter itself: its pair
    assert direct.param_groups[0]["params"][0] is dict(m.named_parameters())["w"]


def test_a_complex_parameter_in_state_dicts_copies_and_conversions():
    """The state_dict holds the complex value (PyTorch's key and dtype), which loads
    back by copy or assign, through nv.save/nv.load too; deepcopy and pickle keep the
    attribute and the registered pair one; double() makes it complex128; in-place
    writes through the attribute reach the pair."""
    nv.manual_seed(4)
    m = _Spectral()
    sd = m.state_dict()
    assert list(sd) == ["w", "b"] and sd["w"].dtype == nv.complex64
    want = m.w.numpy()
    nv.manual_seed(5)
    other = _Spectral()
    other.load_state_dict(sd)
    np.testing.assert_array_equal(other.w.numpy(), want)
    f = io.BytesIO()
    nv.save(sd, f)
    f.seek(0)
    nv.manual_seed(5)
    third = _Spectral()
    third.load_state_dict(nv.load(f), assign=True)
    assert type(third.w).__name__ == "ComplexParameter"
    np.testing.assert_array_equal(third.w.numpy(), want)
    for copied in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert copied.w._pair is dict(copied.named_parameters())["w"]
        assert copied.w._pair is not m.w._pair
        np.testing.assert_array_equal(copied.w.numpy(), want)
    with nv.no_grad():
        m.w.mul_(2j)
    np.testing.assert_allclose(m.w.numpy(), want * 2j, rtol=1e-6)
    np.testing.assert_allclose(nv.view_as_complex(dict(m.named_parameters())["w"]).numpy(),
                               want * 2j, rtol=1e-6)
    m.w.data = nv.tensor(want)                 # rebinds the pair, as a real .data does
    np.testing.assert_array_equal(dict(m.named_parameters())["w"].numpy(),
                                  nv.view_as_real(nv.tensor(want)).numpy())
    m.double()
    assert m.w.dtype == nv.complex128 and m.b.dtype == nv.float64


_SPECIAL = [complex(a, b) for a in (np.inf, -np.inf, 0.0, 1.5, -2.0, np.nan)
            for b in (0.0, -0.0, np.inf, -np.inf, 0.75, np.nan)] + [
    complex(1e30, 1e30), complex(-1e30, 1e-30), complex(3e9, -2e9), complex(0.25, 1e10)]


# C99 leaves the sign of these functions' infinite part unspecified at some points
# (sinh(inf + i inf), asinh(NaN + i inf) = +-inf + NaN i); numpy's and Nova's may
# differ there.
_UNSIGNED_INFINITY = {"sin", "cos", "sinh", "cosh", "exp", "asin", "asinh", "acos"}


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("on", ["interp", "cpu"])
def test_every_function_takes_c99s_values_at_infinities_and_nans(on, dtype):
    """Infinite and NaN arguments give numpy's (C99 Annex G) values: atanh(inf) was
    nan + i pi/2 (C99: 0 + i pi/2), acosh(-inf) inf + nanj (inf + i pi), atan(inf)
    pi/2 + nanj, tanh(inf + i inf) 1 + nanj (1 + 0i), exp(-inf + i inf) nan + nanj
    (0), sinh/cosh/sin/cos a NaN where C99 has an infinite part, and the exact zeros
    of asinh(NaN + 0i), atanh(0 + NaN i), tanh(NaN + 0i). A zero's sign, and an
    infinity's where C99 leaves it unspecified, are not compared; large finite
    arguments (the limit forms past 1e9) agree to float64 rounding."""
    vals = np.array(_SPECIAL, dtype)
    names = {"asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
             "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh}
    with nv.engine(on):
        z = nv.tensor(vals)
        for name in ("exp", "log", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh",
                     "asin", "acos", "atan", "asinh", "acosh", "atanh", "log1p", "expm1",
                     "sigmoid"):
            got = getattr(nv, name)(z).numpy()
            with np.errstate(all="ignore"):
                wide = vals.astype(np.complex128)
                want = (1 / (1 + np.exp(-wide)) if name == "sigmoid"
                        else names.get(name, getattr(np, name, None))(wide)).astype(dtype)
            for part in ("real", "imag"):
                g, w = getattr(got, part), getattr(want, part)
                np.testing.assert_array_equal(np.isnan(g), np.isnan(w),
                                              err_msg=f"{name} {part} at {vals}")
                np.testing.assert_array_equal(np.isinf(g), np.isinf(w),
                                              err_msg=f"{name} {part} at {vals}")
                finite = np.isfinite(w)
                scale = np.abs(np.where(np.isfinite(want), want, 0))[finite]   # |f(z)|
                eps = 1e-5 if dtype == np.complex64 else 1e-12
                assert np.all(np.abs(g[finite] - w[finite]) <= eps * scale + 1e-30), \
                    f"{name} {part} at {vals[finite]}: {g[finite]} != {w[finite]}"
                assert np.array_equal(np.sign(g[np.isinf(w)]), np.sign(w[np.isinf(w)])) \
                    or name in _UNSIGNED_INFINITY, f"{name} {part}: infinities' signs"



def _parts_of(t):
    if t.dtype.is_complex:
        return [t.real.numpy().copy(), t.imag.numpy().copy()]
    return [t.numpy().copy()]


@pytest.mark.parametrize("name", ["to", "cfloat", "complex", "add", "add_zero", "sub", "pow_1",
                                  "conj_physical", "resolve_conj", "float"])
def test_complex_results_do_not_share_a_part_with_their_input(name):
    """A complex result held its input (or one of the input's parts) as its own real or
    imaginary part: ``x.to(complex64)``'s real part was ``x``, ``xc + 1``'s imaginary
    part ``xc``'s; a write into either showed in the other (fuzz_alias)."""
    real = lambda: nv.tensor([[0.5, -1.25, 2.0]])                  # noqa: E731
    cplx = lambda: nv.tensor([[1 + 2j, 3 - 1j]])                    # noqa: E731
    make, f = {"to": (real, lambda x: x.to(nv.complex64)), "cfloat": (real, lambda x: x.cfloat()),
               "complex": (real, lambda x: nv.complex(x, x * 2)), "add": (cplx, lambda x: x + 1),
               "add_zero": (cplx, lambda x: x + 0), "sub": (cplx, lambda x: x.sub(1)),
               "pow_1": (cplx, lambda x: x.pow(1)),
               "conj_physical": (cplx, lambda x: x.conj_physical()),
               "resolve_conj": (cplx, lambda x: nv.resolve_conj(x.conj())),
               "float": (cplx, lambda x: x.float())}[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # (float() of complex discards imag)
        x = make()
        before = _parts_of(x)
        r = f(x)
        r.fill_(9)
        for a, b in zip(_parts_of(x), before):
            np.testing.assert_array_equal(a, b)
        x = make()
        r = f(x)
        expected = _parts_of(r)
        x.add_(1)
        for a, b in zip(_parts_of(r), expected):
            np.testing.assert_array_equal(a, b)


def test_a_complex_copy_of_a_real_tensor_survives_its_transpose_in_place():
    """``r = x.to(complex64); x.t_()``: reading ``r`` raised "could not broadcast (2, 3)
    into (3, 2)" -- its real part was ``x``, whose shape the in-place transpose changed."""
    x = nv.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    r = x.to(nv.complex64)
    x.t_()
    np.testing.assert_array_equal(r.real.numpy(), [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])

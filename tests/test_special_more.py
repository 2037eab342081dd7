"""``nv.special``'s Bessel functions (``i1``, ``i1e``, ``bessel_j0/j1/y0/y1``,
``modified_bessel_i0/i1/k0/k1``, the scaled ``k``, ``spherical_bessel_j0``), the Hurwitz
``zeta`` and the orthogonal polynomials against SciPy in float64 and float32, their
values at 0, negative arguments, +-inf and NaN (by the functions' definitions), and
their gradients: ``i1``/``i1e`` and ``zeta`` in ``q`` by finite differences, ``zeta`` in
``x`` raising as PyTorch's, none for the others."""
import math

import numpy as np
import pytest
import scipy.special as sp

import nova as nv
from nova.autograd.gradcheck import gradcheck

S = nv.special

X = np.array([1e-300, 1e-5, 0.3, 1.0, 2.0, 3.7, 4.99, 5.0, 5.01, 8.0, 12.5, 30.0, 99.0,
              700.0, 1e4])

BESSEL = {
    "bessel_j0": sp.j0, "bessel_j1": sp.j1, "bessel_y0": sp.y0, "bessel_y1": sp.y1,
    "i1": sp.i1, "i1e": sp.i1e, "modified_bessel_i0": sp.i0, "modified_bessel_i1": sp.i1,
    "modified_bessel_k0": sp.k0, "modified_bessel_k1": sp.k1,
    "scaled_modified_bessel_k0": sp.k0e, "scaled_modified_bessel_k1": sp.k1e,
    "spherical_bessel_j0": lambda x: sp.spherical_jn(0, x),
}
ODD = {"bessel_j1", "i1", "i1e", "modified_bessel_i1"}
EVEN = {"bessel_j0", "modified_bessel_i0", "spherical_bessel_j0"}


def f64(a, requires_grad=False):
    return nv.tensor(np.asarray(a, dtype=np.float64), dtype=nv.float64,
                     requires_grad=requires_grad)


def near_zero_abs(ref):
    """Absolute slack where an oscillating function crosses 0 (its zeros are computed
    as differences of O(1) terms, as in Cephes)."""
    return 4e-16 * np.maximum(1.0, np.abs(ref).max())


@pytest.mark.parametrize("name", sorted(BESSEL))
def test_bessel_float64_against_scipy(name):
    xs = np.concatenate([X, -X]) if name in ODD | EVEN else X
    got = getattr(S, name)(f64(xs)).numpy()
    ref = BESSEL[name](xs)
    np.testing.assert_allclose(got, ref, rtol=2e-15, atol=near_zero_abs(ref) if
                               name.startswith(("bessel", "spherical")) else 0)


def test_bessel_float32_rounds_the_float64_value():
    xs = X[X < 80].astype(np.float32)
    for name in ("i1", "i1e", "bessel_j0", "bessel_y1", "modified_bessel_k0"):
        got = getattr(S, name)(nv.tensor(xs)).numpy()
        assert got.dtype == np.float32
        ref = BESSEL[name](xs.astype(np.float64))
        np.testing.assert_allclose(got, ref, rtol=1.2e-7, atol=1e-45 + 1e-7 *
                                   (name.startswith("bessel")))


def test_bessel_edge_values_by_definition():
    inf, nan = math.inf, math.nan
    x = f64([0.0, -0.0, inf, -inf, nan, -2.0])
    want = {
        # J_n(x) -> 0 as |x| -> inf (PyTorch's kernels give NaN there: cos(inf))
        "bessel_j0": [1, 1, 0, 0, nan, sp.j0(2.0)],
        "bessel_j1": [0, 0, 0, 0, nan, -sp.j1(2.0)],
        # Y_n: -inf at 0, undefined (NaN) below, -> 0 at +inf
        "bessel_y0": [-inf, -inf, 0, nan, nan, nan],
        "bessel_y1": [-inf, -inf, 0, nan, nan, nan],
        "i1": [0, 0, inf, -inf, nan, -sp.i1(2.0)],
        "i1e": [0, 0, 0, 0, nan, -sp.i1e(2.0)],
        "modified_bessel_i0": [1, 1, inf, inf, nan, sp.i0(2.0)],
        "modified_bessel_k0": [inf, inf, 0, nan, nan, nan],
        "modified_bessel_k1": [inf, inf, 0, nan, nan, nan],
        "scaled_modified_bessel_k0": [inf, inf, 0, nan, nan, nan],
        "spherical_bessel_j0": [1, 1, 0, 0, nan, math.sin(2.0) / 2.0],
    }
    for name, values in want.items():
        np.testing.assert_allclose(getattr(S, name)(x).numpy(), values, rtol=1e-15,
                                   err_msg=name)
    # odd functions keep the sign of zero
    assert math.copysign(1.0, S.i1(f64([-0.0])).item()) == -1.0


def test_bessel_integer_input_gives_float32():
    out = S.bessel_j0(nv.tensor([0, 1, 2]))
    assert out.dtype == nv.float32
    np.testing.assert_allclose(out.numpy(), sp.j0([0.0, 1.0, 2.0]), rtol=1e-7)


@pytest.mark.slow
def test_i1_i1e_gradients():
    xs = f64([-3.0, -0.4, 0.0, 0.7, 6.0], requires_grad=True)
    assert gradcheck(S.i1, (xs,))
    assert gradcheck(S.i1e, (xs,))
    v = np.array([0.0, 2.0, 30.0, -40.0])
    x = f64(v, requires_grad=True)
    S.i1(x).sum().backward()
    # i1'(x) = i0(x) - i1(x)/x, 1/2 at 0 (the asymptotic branch too, where finite
    # differences lose the digits)
    safe = np.where(v == 0, 1.0, v)
    want = sp.i0(v) - np.where(v == 0, -0.5, sp.i1(v) / safe) * (v != 0) + 0.5 * (v == 0)
    want[0] = 0.5
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-14)
    x.grad = None
    S.i1e(x).sum().backward()
    # i1e'(x) = i0e(x) - i1e(x) (sign(x) + 1/x)
    want = sp.i0e(v) - sp.i1e(v) * (np.sign(v) + 1 / safe)
    want[0] = 0.5
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-13)


def test_non_differentiable_ones_have_no_gradient():
    x = f64([0.5, 2.0], requires_grad=True)
    for name in ("bessel_j0", "bessel_y1", "modified_bessel_i0", "modified_bessel_k1",
                 "spherical_bessel_j0", "chebyshev_polynomial_t"):
        fn = getattr(S, name)
        out = fn(x, 3) if name.startswith("chebyshev") else fn(x)
        assert not out.requires_grad, name


def test_airy_ai_against_scipy():
    x = np.array([-50.0, -10.0, -3.0, -2.09, -1.0, 0.0, 0.5, 2.0, 2.09, 3.0, 8.0, 50.0, 103.0])
    np.testing.assert_allclose(S.airy_ai(f64(x)).numpy(), sp.airy(x)[0], rtol=5e-14)
    np.testing.assert_allclose(S.airy_ai(f64([0.0])).item(), 1 / (3 ** (2 / 3) * sp.gamma(2 / 3)),
                               rtol=1e-15)
    # Ai -> 0 at +-inf (PyTorch's kernel gives NaN), underflows to 0 from 103.892
    np.testing.assert_array_equal(S.airy_ai(f64([math.inf, -math.inf, 104.0])).numpy(), 0.0)
    assert math.isnan(S.airy_ai(f64([math.nan])).item())
    assert S.airy_ai(nv.tensor([1.0])).dtype == nv.float32


# ---------------------------------------------------------------- zeta


def test_zeta_against_scipy():
    x = np.array([2.0, 1.5, 3.0, 4.5, 10.0, 30.0, 200.0, 1.0001, 2.0, 3.0, 3.0, 2.0, 6.0])
    q = np.array([1.0, 0.3, 2.5, 7.0, 1e-3, 1.0, 20.0, 1.0, 1e5, -1.5, -7.25, -0.5, -3.7])
    np.testing.assert_allclose(S.zeta(f64(x), f64(q)).numpy(), sp.zeta(x, q), rtol=5e-14)
    got32 = S.zeta(nv.tensor(x[:6].astype(np.float32)), nv.tensor(q[:6].astype(np.float32)))
    assert got32.dtype == nv.float32
    np.testing.assert_allclose(got32.numpy(), sp.zeta(x[:6].astype(np.float32).astype(float),
                                                      q[:6].astype(np.float32).astype(float)),
                               rtol=2e-7)
    # a Python number for either argument; zeta(2, 1) = pi^2 / 6
    assert S.zeta(2.0, f64([1.0])).item() == pytest.approx(math.pi ** 2 / 6, rel=1e-15)
    assert S.zeta(f64([2.0]), 1.0).item() == pytest.approx(math.pi ** 2 / 6, rel=1e-15)


def test_zeta_edge_values():
    inf, nan = math.inf, math.nan
    x = f64([1.0, 0.5, 2.0, 2.5, inf, inf, inf, 2.0, 2.0, nan, 2.0])
    q = f64([1.0, 1.0, -2.0, -1.5, 1.0, 2.0, 0.5, inf, -inf, 1.0, nan])
    # pole at x = 1 and at q = 0, -1, ...; x < 1 undefined; a non-integer x with a
    # negative q undefined; q^-x's limits at x = inf; 0 at q = inf
    np.testing.assert_array_equal(S.zeta(x, q).numpy(),
                                  [inf, nan, inf, nan, 1.0, 0.0, inf, 0.0, nan, nan, nan])


def test_zeta_gradients():
    q = f64([0.5, 2.0, 3.5], requires_grad=True)
    assert gradcheck(lambda t: S.zeta(f64([3.0, 2.5, 6.0]), t), (q,))
    out = S.zeta(3.0, q)
    out.sum().backward()
    np.testing.assert_allclose(q.grad.numpy(), -3.0 * sp.zeta(4.0, [0.5, 2.0, 3.5]),
                               rtol=1e-12)
    x = f64([2.0, 3.0], requires_grad=True)
    with pytest.raises(NotImplementedError, match="the derivative for 'zeta' is not "
                                                  "implemented"):
        S.zeta(x, 2.0).sum().backward()


# ---------------------------------------------------------------- polynomials


XP = np.array([-1.5, -1.0, -0.3, 0.0, 0.45, 1.0, 2.0])
NP = np.array([0.0, 1.0, 2.0, 3.0, 6.0, 9.7, -1.0])


def _grid():
    xx, nn = np.broadcast_arrays(XP[:, None], NP[None, :])
    k = np.trunc(nn).astype(int)
    return xx, nn, k


def _cheb_u(k, x):
    return np.where(k < 0, 0.0, sp.eval_chebyu(np.maximum(k, 0), x))


POLY = {
    "chebyshev_polynomial_t": lambda k, x: sp.eval_chebyt(k, x),
    "chebyshev_polynomial_u": _cheb_u,
    # V_n = U_n - U_{n-1}, W_n = U_n + U_{n-1}
    "chebyshev_polynomial_v": lambda k, x: _cheb_u(k, x) - _cheb_u(k - 1, x),
    "chebyshev_polynomial_w": lambda k, x: _cheb_u(k, x) + _cheb_u(k - 1, x),
    "hermite_polynomial_h": lambda k, x: sp.eval_hermite(np.maximum(k, 0), x),
    "hermite_polynomial_he": lambda k, x: sp.eval_hermitenorm(np.maximum(k, 0), x),
    "laguerre_polynomial_l": lambda k, x: sp.eval_laguerre(k, x),
    "legendre_polynomial_p": lambda k, x: sp.eval_legendre(k, x),
}


@pytest.mark.parametrize("name", sorted(POLY))
def test_polynomials_against_scipy(name):
    xx, nn, k = _grid()
    got = getattr(S, name)(f64(XP)[:, None], f64(NP)[None, :]).numpy()
    ref = np.where(k < 0, 0.0, POLY[name](k, xx))          # a negative degree gives 0
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-13)


def test_shifted_chebyshev_is_the_plain_one_at_2x_minus_1():
    x = np.array([0.0, 0.2, 0.5, 0.9, 1.0, 1.3])
    for kind in "tuvw":
        got = getattr(S, f"shifted_chebyshev_polynomial_{kind}")(f64(x), 5).numpy()
        ref = getattr(S, f"chebyshev_polynomial_{kind}")(f64(2 * x - 1), 5).numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(S.shifted_chebyshev_polynomial_t(f64(x), 4).numpy(),
                               sp.eval_sh_chebyt(4, x), rtol=1e-13, atol=1e-13)


def test_polynomial_arguments_and_dtypes():
    # n a Python number, x a Python number, float32 results, Hermite's degree limit
    np.testing.assert_allclose(S.legendre_polynomial_p(f64(XP), 4).numpy(),
                               sp.eval_legendre(4, XP), rtol=1e-13, atol=1e-14)
    out = S.chebyshev_polynomial_t(0.5, nv.tensor([0, 1, 2, 3]))
    assert out.dtype == nv.float32
    np.testing.assert_allclose(out.numpy(), [1.0, 0.5, -0.5, -1.0], atol=1e-7)
    out32 = S.hermite_polynomial_he(nv.tensor(XP.astype(np.float32)), 3)
    assert out32.dtype == nv.float32
    np.testing.assert_allclose(out32.numpy(), sp.eval_hermitenorm(3, XP), rtol=1e-6)
    assert math.isnan(S.hermite_polynomial_h(f64([0.5]), 513).item())
    assert math.isnan(S.hermite_polynomial_h(nv.tensor([0.5]), 129).item())
    with pytest.raises(TypeError, match="expected a Tensor"):
        S.legendre_polynomial_p(0.5, 2)


def test_against_torch_where_it_is_right():
    torch = pytest.importorskip("torch")
    xs = np.array([0.3, 1.0, 2.5, 9.0, 40.0])
    for name in ("i1", "i1e", "modified_bessel_k0", "scaled_modified_bessel_k1",
                 "spherical_bessel_j0"):
        np.testing.assert_allclose(getattr(S, name)(f64(xs)).numpy(),
                                   getattr(torch.special, name)(torch.tensor(xs)).numpy(),
                                   rtol=1e-14, err_msg=name)
    xx, nn, _ = _grid()
    for name in POLY:
        theirs = getattr(torch.special, name)(torch.tensor(xx), torch.tensor(nn)).numpy()
        ours = getattr(S, name)(f64(xx), f64(nn)).numpy()
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12, err_msg=name)

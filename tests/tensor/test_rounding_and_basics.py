"""Rounding (floor, ceil, round, trunc, frac), sign, floor division and the two
remainders (``//``, ``%``, fmod), any/all, vector norms and flip, against PyTorch:
values on float and integer inputs (ties of round go to even, NaN and infinities
pass through), gradients where PyTorch defines them, and the errors bad
arguments get."""
import numpy as np
import pytest

import nova as nv

torch = pytest.importorskip("torch")

FLOATS = np.array([[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.7, -2.7],
                   [0.0, -0.0, 3.49, -3.51, np.inf, -np.inf, np.nan, 1e20]], np.float32)
INTS = np.array([[-7, -6, -1, 0, 1, 5, 6, 7]], np.int64)


def _same(got, want):
    got = got.numpy()
    want = want.numpy()
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["floor", "ceil", "round", "trunc", "frac", "sign"])
def test_rounding_matches_torch_on_floats_and_ints(name):
    _same(getattr(nv.tensor(FLOATS), name)(), getattr(torch.from_numpy(FLOATS), name)())
    _same(getattr(nv, name)(nv.tensor(FLOATS)), getattr(torch, name)(torch.from_numpy(FLOATS)))
    if name != "frac":          # torch has no integer frac
        _same(getattr(nv.tensor(INTS), name)(), getattr(torch.from_numpy(INTS), name)())


def test_rounding_in_half_precision_and_round_to_decimals():
    h = nv.tensor(FLOATS[:, :6]).half()
    _same(h.floor(), torch.from_numpy(FLOATS[:, :6]).half().floor())
    x = np.array([1.2345, -2.5551, 0.125], np.float32)
    np.testing.assert_allclose(nv.tensor(x).round(decimals=2).numpy(),
                               torch.from_numpy(x).round(decimals=2).numpy(), rtol=1e-6)


def test_rounding_has_zero_gradient_and_frac_passes_it_through():
    x = nv.tensor(FLOATS[0], requires_grad=True)
    (x.floor() + x.ceil() * 2 + x.round() + x.trunc() + x.frac() * 3 + x.sign()).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(8, 3.0, np.float32))


@pytest.mark.parametrize("a,b", [
    (np.array([7.0, -7.0, 7.5, -7.5, 0.0, 5.0], np.float32),
     np.array([2.0, 2.0, -2.0, -2.0, 3.0, 0.0], np.float32)),
    (np.array([7, -7, 7, -7, 0, 9], np.int64), np.array([2, 2, -2, -2, 3, 3], np.int64)),
])
def test_floor_division_and_remainders_match_torch(a, b):
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    x, y = nv.tensor(a), nv.tensor(b)
    _same(x // y, ta // tb)
    _same(x % y, ta % tb)
    _same(nv.remainder(x, y), torch.remainder(ta, tb))
    _same(nv.fmod(x, y), torch.fmod(ta, tb))
    _same(x // 3, ta // 3)
    _same(x % 3, ta % 3)
    _same(10 // y if a.dtype.kind == "f" else 10 // (y + 10), 10 // tb if a.dtype.kind == "f"
          else 10 // (tb + 10))
    _same(nv.floor_divide(x, y), torch.floor_divide(ta, tb))


def test_integer_floor_division_by_zero_is_an_error():
    with pytest.raises(Exception, match="division by zero"):
        (nv.tensor([1, 2]) // nv.tensor([1, 0])).numpy()


def test_any_all_and_count_nonzero():
    a = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [2.0, 3.0, np.nan]], np.float32)
    t = torch.from_numpy(a)
    x = nv.tensor(a)
    _same(x.any(), t.any())
    _same(x.all(), t.all())
    _same(x.any(dim=1), t.any(dim=1))
    _same(nv.all(x, dim=0, keepdim=True), torch.all(t, dim=0, keepdim=True))
    _same((x > 0).all(1), (t > 0).all(1))
    _same(nv.count_nonzero(x, dim=1), torch.count_nonzero(t, dim=1))


@pytest.mark.parametrize("p", [2, 1, 3.5, float("inf"), float("-inf"), 0])
def test_vector_norms_match_torch(p):
    a = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    t = torch.from_numpy(a)
    np.testing.assert_allclose(nv.linalg.vector_norm(nv.tensor(a), ord=p).numpy(),
                               torch.linalg.vector_norm(t, ord=p).numpy(), rtol=1e-5)
    np.testing.assert_allclose(nv.tensor(a).norm(p=p, dim=1, keepdim=True).numpy(),
                               t.norm(p=p, dim=1, keepdim=True).numpy(), rtol=1e-5)


def test_norm_gradient_matches_torch():
    a = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    x = nv.tensor(a, requires_grad=True)
    x.norm(dim=0).sum().backward()
    tx = torch.tensor(a, requires_grad=True)
    tx.norm(dim=0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5)


def test_flip_matches_torch_and_carries_gradients():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    _same(nv.tensor(a).flip(0, 2), torch.from_numpy(a).flip(0, 2))
    _same(nv.flip(nv.tensor(a), dims=[-1]), torch.flip(torch.from_numpy(a), dims=[-1]))
    w = np.random.default_rng(2).standard_normal((2, 3, 4)).astype(np.float32)
    x = nv.tensor(a, requires_grad=True)
    (x.flip(1) * nv.tensor(w)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), w[:, ::-1])


def test_bad_arguments_name_the_op():
    x = nv.tensor(FLOATS)
    with pytest.raises(IndexError, match="flip"):
        x.flip(3)
    with pytest.raises(ValueError, match="flip: dims .* repeat"):
        x.flip(0, 0)
    with pytest.raises(TypeError, match="vector_norm: ord"):
        nv.linalg.vector_norm(x, ord="fro")

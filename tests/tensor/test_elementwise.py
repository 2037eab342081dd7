"""Elementwise ops against numpy: broadcasting, scalars on either side, dtypes."""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import nova as nv
from tests.helpers import arrays, assert_close, broadcast_pair, shapes

BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (lambda a, b: a / b, np.divide),
    "maximum": (nv.maximum, np.maximum),
    "minimum": (nv.minimum, np.minimum),
}
COMPARE = {
    "lt": (lambda a, b: a < b, np.less), "le": (lambda a, b: a <= b, np.less_equal),
    "gt": (lambda a, b: a > b, np.greater), "ge": (lambda a, b: a >= b, np.greater_equal),
    "eq": (lambda a, b: a == b, np.equal), "ne": (lambda a, b: a != b, np.not_equal),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@given(pair=broadcast_pair())
def test_binary_broadcasting_matches_numpy(name, pair):
    a, b = pair
    ours, ref = BINARY[name]
    if name == "div":
        b = np.where(np.abs(b) < 0.1, 1.0, b).astype(np.float32)
    assert_close(ours(nv.tensor(a), nv.tensor(b)), ref(a, b))


@pytest.mark.parametrize("name", sorted(COMPARE))
@given(pair=broadcast_pair(dtype=np.int64, lo=-2, hi=2))
def test_comparisons_broadcast_and_give_bool(name, pair):
    a, b = pair
    ours, ref = COMPARE[name]
    out = ours(nv.tensor(a), nv.tensor(b))
    assert out.dtype == nv.bool
    np.testing.assert_array_equal(out.numpy(), ref(a, b))


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
@given(x=shapes().flatmap(arrays), s=st.floats(0.5, 4.0))
def test_python_scalars_on_either_side(name, x, s):
    ours, ref = BINARY[name]
    t = nv.tensor(x)
    assert_close(ours(t, s), ref(x, np.float32(s)), rtol=1e-5)
    if name == "div":
        x = np.where(np.abs(x) < 0.1, 1.0, x).astype(np.float32)
        t = nv.tensor(x)
    assert_close(ours(s, t), ref(np.float32(s), x), rtol=1e-5)


UNARY = {
    "exp": (nv.exp, np.exp, (-3, 3)), "log": (nv.log, np.log, (0.1, 5)),
    "sqrt": (nv.sqrt, np.sqrt, (0, 5)), "rsqrt": (nv.rsqrt, lambda x: 1 / np.sqrt(x), (0.1, 5)),
    "sin": (nv.sin, np.sin, (-3, 3)), "cos": (nv.cos, np.cos, (-3, 3)),
    "tanh": (nv.tanh, np.tanh, (-3, 3)), "abs": (nv.abs, np.abs, (-3, 3)),
    "neg": (lambda t: -t, np.negative, (-3, 3)),
    "erf": (nv.erf, np.vectorize(math.erf), (-3, 3)),
    "expm1": (nv.expm1, np.expm1, (-3, 3)), "log1p": (nv.log1p, np.log1p, (-0.9, 5)),
    "sigmoid": (nv.sigmoid, lambda x: 1 / (1 + np.exp(-x)), (-5, 5)),
    "relu": (nv.relu, lambda x: np.maximum(x, 0), (-3, 3)),
    "silu": (nv.silu, lambda x: x / (1 + np.exp(-x)), (-5, 5)),
    "gelu": (nv.gelu, lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))), (-4, 4)),
    "gelu_tanh": (lambda t: nv.gelu(t, approximate="tanh"),
                  lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
                  (-4, 4)),
    "reciprocal": (nv.reciprocal, lambda x: 1 / x, (0.5, 4)),
    "square": (nv.square, np.square, (-3, 3)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@given(data=st.data())
def test_unary_matches_numpy(name, dtype, data):
    ours, ref, (lo, hi) = UNARY[name]
    x = data.draw(shapes().flatmap(lambda s: arrays(s, dtype, lo, hi)))
    out = ours(nv.tensor(x))
    assert out.dtype == nv.tensor(x).dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert_close(out, ref(x.astype(np.float64)), rtol=tol, atol=tol)


@given(pair=broadcast_pair(lo=0.5, hi=2.0))
def test_pow_tensor_tensor_and_scalars(pair):
    a, b = pair
    assert_close(nv.tensor(a) ** nv.tensor(b), a ** b, rtol=1e-5)
    assert_close(nv.tensor(a) ** 2, a ** 2, rtol=1e-6)
    assert_close(2.0 ** nv.tensor(b), np.float32(2.0) ** b, rtol=1e-6)


@given(x=shapes().flatmap(arrays), lo=st.floats(-2, 0), hi=st.floats(0, 2))
def test_clamp_with_scalar_and_tensor_bounds(x, lo, hi):
    assert_close(nv.clamp(nv.tensor(x), lo, hi), np.clip(x, np.float32(lo), np.float32(hi)))
    assert_close(nv.tensor(x).clamp(min=lo), np.maximum(x, np.float32(lo)))
    assert_close(nv.tensor(x).clamp(max=nv.tensor(np.float32(hi))), np.minimum(x, np.float32(hi)))


def test_clamp_promotes_input_and_both_tensor_bounds_at_once():
    """Regression: clamp promoted pairwise (x with min, then with max), so a 0-d bound of
    a higher category outranked a dimensioned one: int32 x, float64 0-d min and float32
    max gave float64, PyTorch's one promotion over the three gives float32."""
    x = nv.tensor([1, 2, 3], dtype=nv.int32)
    lo, hi = nv.tensor(1.5, dtype=nv.float64), nv.tensor([2.5], dtype=nv.float32)
    out = nv.clamp(x, lo, hi)
    assert out.dtype == nv.float32 and out.tolist() == [1.5, 2.0, 2.5]
    out = nv.clamp(nv.tensor([1, 5], dtype=nv.int16), nv.tensor(0.5, dtype=nv.float16),
                   nv.tensor([3.0], dtype=nv.bfloat16))
    assert out.dtype == nv.bfloat16 and out.tolist() == [1.0, 3.0]
    u8 = nv.tensor(np.array([0, 200], np.uint8))
    out = nv.clamp(u8, nv.tensor(-1, dtype=nv.int8), nv.tensor([150], dtype=nv.int16))
    assert out.dtype == nv.int16 and out.tolist() == [0, 150]


@given(pair=broadcast_pair(), c=st.data())
def test_where_broadcasts_all_three(pair, c):
    a, b = pair
    cond = c.draw(arrays(np.broadcast_shapes(a.shape, b.shape)[-1:], np.bool_))
    out = nv.where(nv.tensor(cond), nv.tensor(a), nv.tensor(b))
    assert_close(out, np.where(cond, a, b))
    assert_close(nv.where(nv.tensor(cond), nv.tensor(a), 0.0), np.where(cond, a, np.float32(0)))


def test_integer_and_bool_arithmetic_follow_torch():
    i = nv.tensor([1, 2, 3])
    assert (i + 1).dtype == nv.int64 and (i + 1).tolist() == [2, 3, 4]
    assert (i / 2).dtype == nv.float32 and (i / 2).tolist() == [0.5, 1.0, 1.5]
    assert (i * 1.5).dtype == nv.float32
    assert (i ** 2).tolist() == [1, 4, 9]
    b = nv.tensor([True, False])
    assert (b + b).dtype == nv.bool and (b + b).tolist() == [True, False]
    assert (b & nv.tensor([True, True])).tolist() == [True, False]
    assert (~b).tolist() == [False, True]
    assert nv.exp(i).dtype == nv.float32
    assert (-i).tolist() == [-1, -2, -3]
    assert nv.abs(nv.tensor([-2, 3])).tolist() == [2, 3]


@pytest.mark.parametrize("dtype", [nv.float16, nv.bfloat16])
def test_storage_floats_compute_in_float32_and_round(dtype):
    x = np.linspace(-2, 2, 17, dtype=np.float32)
    t = nv.tensor(x, dtype=dtype)
    out = (t * 3 + 1).exp()
    assert out.dtype == dtype
    ref = np.exp(x.astype(dtype.np).astype(np.float32) * 3 + 1)
    assert_close(out.float(), ref, rtol=1e-2)
    assert (t + nv.tensor(x, dtype=nv.float16)).dtype == (
        nv.float16 if dtype == nv.float16 else nv.float32)


def _to_bfloat16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (to nearest, ties to even), as float32."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("dtype", [nv.float16, nv.bfloat16])
def test_half_floats_times_a_python_float_round_once_as_pytorch(dtype):
    """Regression: ``h * 3.3`` rounded 3.3 to the tensor's dtype first (bfloat16
    1.359375 * 3.3 gave 4.46875, PyTorch 4.5). PyTorch's mul and div keep the scalar at
    float32 precision and round the result once; add and sub round the scalar first;
    ``add(a, b, alpha=)`` rounds alpha, then computes in float32 and rounds once."""
    rnd = (lambda v: v.astype(np.float16).astype(np.float32)) if dtype == nv.float16 \
        else _to_bfloat16
    x = rnd(np.random.default_rng(0).standard_normal(256).astype(np.float32))
    t = nv.tensor(x, dtype=dtype)
    c, c_r = np.float32(3.3), rnd(np.array([3.3], np.float32))[0]
    outs = [t * 3.3, t / 3.3, 3.3 * t, t + 3.3, t - 3.3, nv.add(t, t, alpha=3.3)]
    nv.realize(*outs)
    want = [rnd(x * c), rnd(x / c), rnd(x * c), rnd(x + c_r), rnd(x - c_r), rnd(x + x * c_r)]
    for got, ref in zip(outs, want):
        assert got.dtype == dtype
        np.testing.assert_array_equal(got.float().numpy(), ref)
    assert (nv.tensor([1.359375], dtype=nv.bfloat16) * 3.3).item() == 4.5


def test_add_sub_alpha_scale_in_the_result_dtype():
    """Regression: ``add``/``sub`` with ``alpha`` computed ``alpha * other`` in
    ``other``'s dtype, so a uint8 ``other`` wrapped at 256 before the promotion
    (``float64 - 3 * uint8(200)`` gave -86, PyTorch -598), a scalar ``other`` turned a
    0-d uint8 result into int64, and bool results became int64 counts. PyTorch scales
    in the result dtype, and refuses a float alpha for integer results."""
    u8 = nv.tensor(np.array([100, 200], np.uint8))
    f64 = nv.tensor([1.5, 2.0], dtype=nv.float64)
    got = [nv.add(f64, u8, alpha=3), nv.sub(f64, u8, alpha=3),
           nv.add(nv.tensor([1, 2]), u8, alpha=3), nv.rsub(u8, f64, alpha=3),
           nv.tensor([1, 2], dtype=nv.int32).sub_(u8, alpha=3),
           nv.add(nv.tensor(1, dtype=nv.int16), nv.tensor(200, dtype=nv.uint8), alpha=2),
           nv.add(nv.tensor(7, dtype=nv.uint8), 1, alpha=2),
           nv.add(nv.tensor([True, False]), nv.tensor([True, False]), alpha=2)]
    nv.realize(*got)
    assert [g.dtype for g in got] == [nv.float64, nv.float64, nv.int64, nv.float64,
                                      nv.int32, nv.int16, nv.uint8, nv.bool]
    assert got[0].tolist() == [301.5, 602.0] and got[1].tolist() == [-298.5, -598.0]
    assert got[2].tolist() == [301, 602] and got[3].tolist() == [-298.5, -598.0]
    assert got[4].tolist() == [-299, -598] and got[5].item() == 401
    assert got[6].item() == 9 and got[7].tolist() == [True, False]
    with pytest.raises(RuntimeError, match="alpha"):
        nv.add(nv.tensor([1, 2]), nv.tensor([1, 2]), alpha=1.5)


def test_type_promotion_table():
    f32, f16 = nv.zeros(2), nv.zeros(2, dtype=nv.float16)
    i32, i64, b = nv.zeros(2, dtype=nv.int32), nv.zeros(2, dtype=nv.int64), nv.zeros(2, dtype=nv.bool)
    assert (i32 + i64).dtype == nv.int64
    assert (i32 + b).dtype == nv.int32
    assert (f16 + i64).dtype == nv.float16
    assert (f16 + f32).dtype == nv.float32
    assert (f16 * 2.5).dtype == nv.float16          # a Python scalar does not widen
    assert (i32 * 2).dtype == nv.int32
    assert (i32 + nv.tensor(1.5)).dtype == nv.float32  # a 0-d float lifts an int tensor
    assert (f16 + nv.tensor(1.5, dtype=nv.float64)).dtype == nv.float16  # same category: no
    assert (b + True).dtype == nv.bool
    assert nv.zeros(2, dtype=nv.float64).dtype == nv.float64
    assert (nv.zeros(2, dtype=nv.bfloat16) + f16).dtype == nv.float32


def test_logical_ops_and_nan_inf_checks():
    x = nv.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    assert nv.isnan(x).tolist() == [False, True, False, False]
    assert nv.isinf(x).tolist() == [False, False, True, True]
    assert nv.logical_or(nv.tensor([0, 1]), nv.tensor([0, 0])).tolist() == [False, True]
    assert nv.logical_and(nv.tensor([2, 1]), nv.tensor([3, 0])).tolist() == [True, False]


DTYPES = [nv.bool, nv.int32, nv.int64, nv.float16, nv.bfloat16, nv.float32, nv.float64]


@pytest.mark.parametrize("name", ["add", "mul", "maximum", "minimum", "lt", "eq"])
@given(a_dt=st.sampled_from(DTYPES), b_dt=st.sampled_from(DTYPES), data=st.data())
def test_binary_ops_over_dtype_pairs(name, a_dt, b_dt, data):
    """Values match numpy evaluated on the inputs cast to the promoted dtype."""
    a_shape, b_shape = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3,
                                                                   max_side=3)).input_shapes
    a = data.draw(arrays(a_shape, np.int64, -3, 3)).astype(a_dt.np)
    b = data.draw(arrays(b_shape, np.int64, -3, 3)).astype(b_dt.np)
    ta, tb = nv.tensor(a, dtype=a_dt), nv.tensor(b, dtype=b_dt)
    ours = {**BINARY, **COMPARE}[name][0](ta, tb)
    common = (ta + tb).dtype if not (a_dt == b_dt == nv.bool) else nv.bool
    ref_fn = {**BINARY, **COMPARE}[name][1]
    ref = ref_fn(a.astype(common.np).astype(np.float64), b.astype(common.np).astype(np.float64))
    expected_dtype = nv.bool if name in COMPARE else common
    assert ours.dtype == expected_dtype
    assert_close(ours.to(nv.float64), ref.astype(expected_dtype.np).astype(np.float64))


@pytest.mark.parametrize("dtype", DTYPES)
def test_movement_and_indexing_keep_every_dtype(dtype):
    x = np.arange(12).reshape(3, 4).astype(dtype.np)
    t = nv.tensor(x, dtype=dtype)
    pieces = [t.T, t.reshape(4, 3), t[1:, ::2], t[nv.tensor([2, 0])], nv.cat([t, t], 1),
              t.unsqueeze(0).expand(2, 3, 4), nv.stack(t.split(2, 1), 0)]
    refs = [x.T, x.reshape(4, 3), x[1:, ::2], x[[2, 0]], np.concatenate([x, x], 1),
            np.broadcast_to(x[None], (2, 3, 4)), np.stack(np.split(x, 2, 1), 0)]
    for p, r in zip(pieces, refs):
        assert p.dtype == dtype
        np.testing.assert_array_equal(p.numpy(), r)


@pytest.mark.parametrize("dtype", [nv.float32, nv.float64])
def test_expm1_and_log1p_keep_tiny_arguments_exact(dtype):
    """The reason they are primitives: exp(x) - 1 and log(1 + x) round to 0 for tiny x
    (1 + 1e-10 == 1 in float32), while expm1 and log1p keep the full relative precision,
    as numpy's and PyTorch's do; at moderate x they agree with the composed forms."""
    x = np.array([1e-10, -3e-8, 1e-20, 0.0, -0.0, 0.5, -0.75], dtype=dtype.np)
    t = nv.tensor(x)
    assert_close(nv.expm1(t), np.expm1(x.astype(np.float64)), rtol=2e-7, atol=0)
    assert_close(t.log1p(), np.log1p(x.astype(np.float64)), rtol=2e-7, atol=0)
    assert (nv.exp(t) - 1).numpy()[0] == 0 or dtype == nv.float64
    assert np.signbit(nv.expm1(t).numpy()[4]) and np.signbit(nv.log1p(t).numpy()[4])
    special = np.array([-1.0, -2.0, np.inf, -np.inf, np.nan], dtype=dtype.np)
    with np.errstate(all="ignore"):
        want_log1p, want_expm1 = np.log1p(special), np.expm1(special)
    np.testing.assert_array_equal(nv.log1p(nv.tensor(special)).numpy(), want_log1p)
    np.testing.assert_array_equal(nv.expm1(nv.tensor(special)).numpy(), want_expm1)


def test_maximum_and_minimum_order_signed_zeros_on_every_engine():
    """IEEE 754-2019: max(+0, -0) is +0 and min is -0 in either operand order, NaN wins;
    the engines used to disagree (numpy's tie returns the second operand, LLVM's
    ``maximum`` orders the zeros). 64 elements reach the CPU's vector loop too."""
    pairs = [(0.0, -0.0), (-0.0, 0.0), (0.0, 0.0), (-0.0, -0.0), (np.nan, -0.0),
             (-0.0, np.nan), (-1.0, -0.0), (2.5, 2.5)]
    a = np.array([p[0] for p in pairs] * 8, np.float32)
    b = np.array([p[1] for p in pairs] * 8, np.float32)
    hi, lo = nv.maximum(nv.tensor(a), nv.tensor(b)), nv.minimum(nv.tensor(a), nv.tensor(b))
    nv.realize(hi, lo)
    both_zero = (a == 0) & (b == 0)
    want_hi = np.where(both_zero, np.float32(0.0) * np.where(np.signbit(a) & np.signbit(b), -1, 1),
                       np.fmax(a, b))
    want_lo = np.where(both_zero, np.float32(0.0) * np.where(np.signbit(a) | np.signbit(b), -1, 1),
                       np.fmin(a, b))
    nan = np.isnan(a) | np.isnan(b)
    want_hi[nan], want_lo[nan] = np.nan, np.nan
    for got, want in ((hi.numpy(), want_hi), (lo.numpy(), want_lo)):
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", [nv.float16, nv.bfloat16])
def test_half_composites_compute_in_float32_and_round_once(dtype):
    """Regression: gelu, softmax, log_softmax, lerp, addcmul and addcdiv on half types
    rounded after every step (float16 erf-gelu was -0 at -3.7, for -0.0004; lerp ~490
    ulp off). Now each is its float32 computation rounded once: within one half ulp
    (plus float32's own error) of the float64 value."""
    rnd = (lambda v: v.astype(np.float16).astype(np.float64)) if dtype == nv.float16 \
        else (lambda v: _to_bfloat16(v.astype(np.float32)).astype(np.float64))
    eps = 2.0 ** -11 if dtype == nv.float16 else 2.0 ** -8    # half an ulp, relative
    x = rnd(np.linspace(-6.0, 6.0, 97))
    y = rnd(np.cos(np.arange(97.0)))
    t, u = nv.tensor(x, dtype=dtype), nv.tensor(y, dtype=dtype)
    erf = np.vectorize(math.erf)
    e = np.exp(x - x.max())
    cases = [
        (nv.nn.functional.gelu(t), 0.5 * x * (1 + erf(x / math.sqrt(2)))),
        (nv.nn.functional.gelu(t, approximate="tanh"),
         x / (1 + np.exp(-math.sqrt(8 / math.pi) * (x + 0.044715 * x ** 3)))),
        (t.softmax(0), e / e.sum()),
        (t.log_softmax(0), x - x.max() - np.log(e.sum())),
        (nv.lerp(t, u, 0.3), x + 0.3 * (y - x)),
        (nv.addcmul(t, t, u, value=0.5), x + 0.5 * x * y),
        (nv.addcdiv(t, t, u + 3.0, value=0.5), x + 0.5 * x / rnd(y + 3.0)),
    ]
    for got, want in cases:
        assert got.dtype == dtype
        g = got.float().numpy().astype(np.float64)
        tol = eps * np.abs(want) * 1.01 + 1e-7 * np.abs(want).max() + \
            (6e-8 if dtype == nv.float16 else 1e-38)
        assert np.all(np.abs(g - want) <= tol), np.max(np.abs(g - want) / (np.abs(want) + 1e-30))


def test_round_with_decimals_on_half_types_rounds_once():
    """Regression: ``round(x, decimals=)`` on float16 scaled ``x * 10`` in float16
    (26.140625 * 10 rounded to 261.5, then to 262), giving 26.203125 where PyTorch's
    float32 computation gives 26.1, i.e. float16 26.09375."""
    x = nv.tensor([26.140625, 0.4924, -3.0762], dtype=nv.float16)
    got = nv.round(x, decimals=1)
    assert got.dtype == nv.float16
    np.testing.assert_array_equal(got.numpy(), np.array([26.1, 0.5, -3.1], np.float16))
    b = nv.tensor([25.0, 35.0, 126.0], dtype=nv.bfloat16)
    assert nv.round(b, decimals=-1).tolist() == [20.0, 40.0, 130.0]


def test_lerp_addcmul_addcdiv_cast_every_operand_to_the_result_dtype_first():
    """Regression: lerp, addcmul and addcdiv computed their inner steps in the operands'
    own pairwise dtype: ``end - start`` of uint8 ends wrapped (lerp(255, 0, weight
    5.8125) gave 4.8, PyTorch -1224 in bfloat16) and of int64 ones overflowed, a
    ``uint8 / bfloat16`` quotient inside a float32 addcdiv was rounded to bfloat16, and
    an int32 factor too large for a float16 addcmul was not inf. PyTorch casts every
    operand to the result dtype (the weight's included) first."""
    w = nv.tensor(5.8125, dtype=nv.bfloat16)
    got = nv.lerp(nv.tensor(255, dtype=nv.uint8), nv.tensor(0, dtype=nv.uint8), w)
    assert got.dtype == nv.bfloat16 and got.item() == -1224.0
    got = nv.lerp(nv.tensor([-2**62, 5]), nv.tensor(2**62), nv.tensor(0.25))
    assert got.dtype == nv.float32
    np.testing.assert_allclose(got.numpy(), [-2.0 ** 61, 2.0 ** 60], rtol=1e-6)
    got = nv.lerp(nv.tensor([1.0, 5.0], dtype=nv.float16), nv.tensor([200.0, 300.0], dtype=nv.float16),
                  nv.tensor(0.3))                  # the weight rounds to float16 first
    assert got.dtype == nv.float16 and got.tolist() == [60.71875, 93.5]
    a = nv.tensor([0.828125, -2.125])
    den = nv.tensor([[0.283203125, -1.6875]], dtype=nv.bfloat16)
    got = nv.addcdiv(a, nv.tensor(np.array([10], np.uint8)), den, value=2)
    np.testing.assert_allclose(got.numpy(), [[0.828125 + 20 / 0.283203125, -2.125 - 20 / 1.6875]],
                               rtol=1e-6)
    got = nv.addcmul(nv.tensor(0.0, dtype=nv.float16), nv.tensor([-1, -27986953], dtype=nv.int32),
                     nv.tensor(np.array([8, 0], np.uint8)), value=0.5)
    assert got.dtype == nv.float16 and got[0].item() == -4.0 and math.isnan(got[1].item())

"""uint8, int8 and int16 (issue #22): real dtypes with PyTorch's promotion and
wrap-around, on every engine that runs CPU ops.

The compiled engines hold these types in 8/16 bits and compute them in int32, wrapping
every op's result back (as float16 is computed in float32 and rounded per op); the
interpreter computes them natively in numpy. References are numpy's own narrow-integer
arithmetic (the same two's complement wrap PyTorch has) or hand-written values; the
promotion table is PyTorch's (``torch.promote_types``), written out. Each engine test
realizes all its outputs in one step, so it compiles a few kernels once."""
import pickle

import numpy as np
import pytest

import nova as nv
from nova.compiler.stablehlo import to_stablehlo
from nova.core import dtypes as dt
from nova.runtime.mlir_engine import unavailable_reason
from tests.compiler.parsing import parse_module

ENGINES = ["cpu", "interp"] + (["mlir"] if unavailable_reason() is None else [])
SMALL = [nv.uint8, nv.int8, nv.int16]

# torch.promote_types(row, column), from PyTorch 2.x.
_ORDER = [nv.bool, nv.uint8, nv.int8, nv.int16, nv.int32, nv.int64, nv.float16, nv.bfloat16,
          nv.float32]
_TORCH_PROMOTION = """
bool     bool     uint8    int8     int16    int32    int64    float16  bfloat16 float32
uint8    uint8    uint8    int16    int16    int32    int64    float16  bfloat16 float32
int8     int8     int16    int8     int16    int32    int64    float16  bfloat16 float32
int16    int16    int16    int16    int16    int32    int64    float16  bfloat16 float32
int32    int32    int32    int32    int32    int32    int64    float16  bfloat16 float32
int64    int64    int64    int64    int64    int64    int64    float16  bfloat16 float32
float16  float16  float16  float16  float16  float16  float16  float16  float32  float32
bfloat16 bfloat16 bfloat16 bfloat16 bfloat16 bfloat16 bfloat16 float32  bfloat16 float32
float32  float32  float32  float32  float32  float32  float32  float32  float32  float32
"""


def _samples(d: nv.dtype) -> np.ndarray:
    """Every interesting value of ``d``: both ends, around 0 and (uint8) around 128."""
    lo, hi = nv.iinfo(d).min, nv.iinfo(d).max
    rng = np.random.default_rng(22)
    ends = [lo, lo + 1, hi - 1, hi, 0, 1, 2, 127, 128, 129, -1, -2, -127, 100]
    fixed = [v for v in ends if lo <= v <= hi]
    return np.concatenate([fixed, rng.integers(lo, hi + 1, 32 - len(fixed))]).astype(d.np)


# ---------------------------------------------------------------- the dtypes themselves

def test_names_aliases_and_information_are_pytorchs():
    assert (nv.uint8.name, nv.int8.name, nv.int16.name) == ("uint8", "int8", "int16")
    assert nv.short is nv.int16 and nv.int is nv.int32 and nv.long is nv.int64
    assert nv.dtype is dt.DType and isinstance(nv.uint8, nv.dtype)
    for spec, d in [("uint8", nv.uint8), ("short", nv.int16), (np.int8, nv.int8),
                    (np.dtype(np.uint8), nv.uint8), ("int16", nv.int16)]:
        assert dt.get_dtype(spec) is d
    assert [(nv.iinfo(d).bits, nv.iinfo(d).min, nv.iinfo(d).max) for d in SMALL] == [
        (8, 0, 255), (8, -128, 127), (16, -32768, 32767)]
    assert [d.is_signed for d in (nv.bool, nv.uint8, nv.int8, nv.int16, nv.float16)] == [
        False, False, True, True, True]
    assert not any(d.is_floating_point for d in SMALL)
    # the MLIR element types are distinct (uint8 is ui8, int8 the signless i8), so the two
    # 8-bit types never share a lookup entry, an IR type or a cache key
    assert len({d.mlir for d in dt.ALL_DTYPES}) == len(dt.ALL_DTYPES)
    assert all(dt.from_mlir(d.mlir) is d for d in dt.ALL_DTYPES)
    assert pickle.loads(pickle.dumps(nv.uint8)) is nv.uint8


def test_promotion_is_pytorchs_table():
    rows = [line.split() for line in _TORCH_PROMOTION.strip().splitlines()]
    for a, row in zip(_ORDER, rows):
        assert row[0] == a.name
        got = [nv.promote_types(a, b).name for b in _ORDER]
        assert got == row[1:], a


def test_promotion_with_scalars_and_zero_dim_tensors():
    u8 = nv.tensor([200, 100], dtype=nv.uint8)
    i8 = nv.tensor([-1, 1], dtype=nv.int8)
    cases = [(u8 + 5, nv.uint8), (u8 * True, nv.uint8), (u8 + 1.5, nv.float32),
             (u8 + nv.tensor(5), nv.uint8), (u8 + nv.tensor(5.0), nv.float32),
             (u8 + i8, nv.int16), (i8 + nv.tensor([1, 2], dtype=nv.int32), nv.int32),
             (nv.tensor([True, False]) + u8, nv.uint8), (u8 / 2, nv.float32),
             (u8 // 3, nv.uint8), (i8 + nv.tensor(7, dtype=nv.int16), nv.int8),
             (nv.tensor(1, dtype=nv.int8) + nv.tensor(1, dtype=nv.uint8), nv.int16)]
    assert [t.dtype for t, _ in cases] == [d for _, d in cases]
    assert nv.result_type(u8, 3) == nv.uint8


def test_from_numpy_and_tensor_keep_the_dtype_exactly():
    for d in SMALL:
        a = _samples(d)
        t = nv.from_numpy(a)
        assert t.dtype is d and t.numpy().dtype == a.dtype and t.tolist() == a.tolist()
        assert nv.tensor(a).dtype is d and nv.tensor(list(a), dtype=d).tolist() == a.tolist()
    with pytest.raises(dt.DTypeOverflowError, match="256 cannot be converted to uint8"):
        nv.tensor([256], dtype=nv.uint8)
    with pytest.raises(dt.DTypeOverflowError, match="-1 cannot be converted to uint8"):
        nv.full((2,), -1, dtype=nv.uint8)


def test_tensor_surface():
    x = nv.tensor([1.7, 200.2, -3.5])
    b, c, s = x.byte(), x.char(), x.short()
    assert (b.dtype, c.dtype, s.dtype) == (nv.uint8, nv.int8, nv.int16)
    assert (b.tolist(), c.tolist(), s.tolist()) == ([1, 200, 253], [1, -56, -3], [1, 200, -3])
    assert [t.element_size() for t in (b, c, s)] == [1, 1, 2]
    assert not b.is_floating_point() and b.to(nv.float32).is_floating_point()
    assert [t.type() for t in (b, c, s)] == ["torch.ByteTensor", "torch.CharTensor",
                                             "torch.ShortTensor"]
    assert isinstance(b, nv.ByteTensor) and b.type(nv.CharTensor).dtype is nv.int8
    item = b[1].item()
    assert item == 200 and type(item) is int
    assert repr(c) == "tensor([  1, -56,  -3], dtype=nova.int8)"
    assert str(nv.tensor([255, 0], dtype=nv.uint8)) == "tensor([255,   0], dtype=nova.uint8)"
    assert pickle.loads(pickle.dumps(b)).tolist() == [1, 200, 253]
    assert nv.tensor([True, False]).byte().tolist() == [1, 0]


def test_factories_make_every_small_dtype():
    for d in SMALL:
        made = [nv.zeros(2, dtype=d), nv.ones(2, dtype=d), nv.empty(2, dtype=d),
                nv.full((2,), 7, dtype=d), nv.arange(3, dtype=d),
                nv.randint(0, 100, (4,), dtype=d), nv.zeros_like(nv.ones(2), dtype=d)]
        assert all(t.dtype is d and t.numpy().dtype == d.np for t in made)
        assert [t.tolist() for t in made[:5]] == [[0, 0], [1, 1], [0, 0], [7, 7], [0, 1, 2]]
        assert all(0 <= v < 100 for v in made[5].tolist())
    assert nv.arange(250, 260, dtype=nv.uint8).tolist() == [250, 251, 252, 253, 254, 255,
                                                             0, 1, 2, 3]      # as PyTorch
    drawn = nv.randint(0, 256, (2000,), dtype=nv.uint8).numpy()
    assert drawn.dtype == np.uint8 and drawn.min() < 8 and drawn.max() > 247
    with pytest.raises(dt.DTypeOverflowError, match=r"randint: range \[0, 257\) does not "
                                                    "fit uint8"):
        nv.randint(0, 257, (2,), dtype=nv.uint8)
    with pytest.raises(TypeError, match="rand: dtype must be floating point, got uint8"):
        nv.rand(2, dtype=nv.uint8)


# ---------------------------------------------------------------- every engine

def _binary_cases(a: np.ndarray, b: np.ndarray, bpos: np.ndarray):
    """(name, nova function, numpy reference) of elementwise ops on same-dtype operands;
    ``bpos`` is ``b`` with no zero (a divisor)."""
    return [
        ("add", lambda x, y, z: x + y, a + b),
        ("sub", lambda x, y, z: x - y, a - b),
        ("mul", lambda x, y, z: x * y, a * b),
        ("neg", lambda x, y, z: -x, -a),
        ("abs", lambda x, y, z: x.abs(), np.abs(a)),
        # (a + b) wraps before the halving, as PyTorch computes it: one fused kernel
        ("avg", lambda x, y, z: (x + y) // 2, (a + b) // a.dtype.type(2)),
        ("floordiv", lambda x, y, z: x // z, a // bpos),
        ("remainder", lambda x, y, z: x % z, a % bpos),
        ("and", lambda x, y, z: x & y, a & b),
        ("or", lambda x, y, z: x | y, a | b),
        ("xor", lambda x, y, z: x ^ y, a ^ b),
        ("invert", lambda x, y, z: ~x, ~a),
        ("shl", lambda x, y, z: x << 3, a << a.dtype.type(3)),
        ("shr", lambda x, y, z: x >> 2, a >> a.dtype.type(2)),
        ("maximum", lambda x, y, z: nv.maximum(x, y), np.maximum(a, b)),
        ("minimum", lambda x, y, z: nv.minimum(x, y), np.minimum(a, b)),
        ("clamp", lambda x, y, z: x.clamp(2, 100), np.clip(a, 2, 100).astype(a.dtype)),
        ("where", lambda x, y, z: nv.where(x > y, x * 3, y), np.where(a > b, a * 3, b)),
        ("gt", lambda x, y, z: x > y, a > b),
        ("le_scalar", lambda x, y, z: x <= 127, a <= 127),
        ("eq", lambda x, y, z: x == y, a == b),
        ("square_sum", lambda x, y, z: (x * x + y).sum(), np.sum((a * a + b).astype(np.int64))),
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_elementwise_ops_wrap_as_numpy_on_every_engine(engine):
    outs, refs, names = [], [], []
    with nv.engine(engine):
        for d in SMALL:
            a = _samples(d)
            b = np.roll(a, 5)
            bpos = np.where(b == 0, 7, b).astype(d.np)
            x, y, z = nv.tensor(a), nv.tensor(b), nv.tensor(bpos)
            with np.errstate(over="ignore"):
                for name, f, ref in _binary_cases(a, b, bpos):
                    outs.append(f(x, y, z))
                    refs.append(np.asarray(ref))
                    names.append(f"{d.name} {name}")
        nv.realize(*outs)
        for name, t, ref in zip(names, outs, refs):
            got = t.numpy()
            if got.dtype != np.int64 or ref.dtype != np.int64:
                assert got.dtype == ref.dtype, name
            np.testing.assert_array_equal(got, ref, err_msg=name)


@pytest.mark.parametrize("engine", ENGINES)
def test_conversions_both_ways_on_every_engine(engine):
    f = np.array([300.7, -1.5, 2.5, -200.9, 127.99, 65535.0, 0.0, -0.7], np.float32)
    u = np.array([0, 1, 127, 128, 200, 255], np.uint8)
    i = np.array([-(2**31), -129, -128, 127, 128, 255, 256, 70000], np.int32)
    with nv.engine(engine):
        x, ux, ix = nv.tensor(f), nv.tensor(u), nv.tensor(i)
        outs = {
            # float -> narrow: truncated toward zero to int32, then wrapped (C's
            # conversions; out-of-range floats are undefined in PyTorch)
            "f2u8": x.to(nv.uint8), "f2i8": x.to(nv.int8), "f2i16": x.short(),
            "u8_image": ux.float() / 255, "u8_half": ux.half(), "u8_f64": ux.double(),
            "mask": (ux > 128).to(nv.uint8), "u8_bool": ux.bool(), "u8_i8": ux.char(),
            "u8_i64": ux.long(), "i32_u8": ix.byte(), "i32_i8": ix.char(),
            "i32_i16": ix.short(), "i8_u8": ix.char().byte(), "i16_i32": ix.short().int(),
            "iota_u8": nv.arange(260, dtype=nv.uint8)[-6:],
        }
        nv.realize(*outs.values())
        got = {k: v.numpy() for k, v in outs.items()}
    t32 = f.astype(np.int32)
    expected = {"f2u8": t32.astype(np.uint8), "f2i8": t32.astype(np.int8),
                "f2i16": t32.astype(np.int16), "u8_image": u.astype(np.float32) / 255,
                "u8_half": u.astype(np.float16), "u8_f64": u.astype(np.float64),
                "mask": (u > 128).astype(np.uint8), "u8_bool": u != 0,
                "u8_i8": u.astype(np.int8), "u8_i64": u.astype(np.int64),
                "i32_u8": i.astype(np.uint8), "i32_i8": i.astype(np.int8),
                "i32_i16": i.astype(np.int16), "i8_u8": i.astype(np.int8).astype(np.uint8),
                "i16_i32": i.astype(np.int16).astype(np.int32),
                "iota_u8": np.array([254, 255, 0, 1, 2, 3], np.uint8)}
    assert got["f2u8"].tolist() == [44, 255, 2, 56, 127, 255, 0, 0]      # hand-derived
    for k, ref in expected.items():
        assert got[k].dtype == ref.dtype, k
        np.testing.assert_array_equal(got[k], ref, err_msg=k)


@pytest.mark.parametrize("engine", ENGINES)
def test_reductions_scans_and_orderings_on_every_engine(engine):
    u = np.array([[3, 200, 129, 7], [255, 0, 128, 127], [1, 2, 3, 4]], np.uint8)
    i = np.array([[-128, -5, -100, -1], [-3, -128, -7, -2], [-9, -8, -70, -60]], np.int8)
    s = np.array([[-32768, 32767, 5, -5]] * 3, np.int16)
    with nv.engine(engine):
        ut, it, st = nv.tensor(u), nv.tensor(i), nv.tensor(s)
        outs = {
            "u8_sum": ut.sum(), "u8_sum_dim": ut.sum(dim=1), "i8_sum": it.sum(dim=0),
            "i16_sum": st.sum(), "u8_prod": ut[2].prod(), "u8_cumsum": ut.cumsum(1),
            "i8_cumprod": it[:, :2].cumprod(1), "u8_sum_u8": ut.sum(dtype=nv.uint8),
            "u8_cumsum_u8": ut.cumsum(1, dtype=nv.uint8),
            # the maxima keep the dtype and order uint8 above 127 as unsigned
            "u8_max": ut.max(), "u8_amax0": ut.amax(dim=0), "u8_amax1": ut.amax(dim=1),
            "u8_argmax": ut.argmax(dim=1), "u8_max_dim": ut.max(dim=1).values,
            "i8_amax0": it.amax(dim=0), "i8_amax1": it.amax(dim=1), "i16_max": st.max(),
            "u8_sort": ut.sort(dim=1).values, "u8_argsort": ut.argsort(dim=1, stable=True),
            "i8_sort_desc": it.sort(dim=1, descending=True).values,
            "u8_topk": ut.topk(2, dim=1).values, "u8_cummax": ut.cummax(1).values,
            "u8_cummin": ut.cummin(1).values, "u8_median": ut[0].median(),
            "u8_matmul": ut[:, :3] @ ut[:3, :],                        # wraps, as PyTorch
            "i8_matmul": it @ it.T, "i16_bmm": (st[None] * 3) @ st.T[None],
        }
        nv.realize(*outs.values())
        got = {k: v.numpy() for k, v in outs.items()}
    wide = lambda a: a.astype(np.int64)   # noqa: E731
    expected = {
        "u8_sum": wide(u).sum(), "u8_sum_dim": wide(u).sum(1), "i8_sum": wide(i).sum(0),
        "i16_sum": wide(s).sum(), "u8_prod": np.int64(24), "u8_cumsum": wide(u).cumsum(1),
        "i8_cumprod": wide(i[:, :2]).cumprod(1), "u8_sum_u8": np.uint8(wide(u).sum() % 256),
        "u8_cumsum_u8": (wide(u).cumsum(1) % 256).astype(np.uint8),
        "u8_max": np.uint8(255), "u8_amax0": u.max(0), "u8_amax1": u.max(1),
        "u8_argmax": u.argmax(1), "u8_max_dim": u.max(1), "i8_amax0": i.max(0),
        "i8_amax1": i.max(1), "i16_max": np.int16(32767),
        "u8_sort": np.sort(u, 1), "u8_argsort": np.argsort(u, 1, kind="stable"),
        "i8_sort_desc": -np.sort(-wide(i), 1).astype(np.int8),
        "u8_topk": -np.sort(-wide(u), 1)[:, :2].astype(np.uint8),
        "u8_cummax": np.maximum.accumulate(u, 1), "u8_cummin": np.minimum.accumulate(u, 1),
        "u8_median": np.uint8(7),
        "u8_matmul": (wide(u[:, :3]) @ wide(u[:3, :]) % 256).astype(np.uint8),
        "i8_matmul": (wide(i) @ wide(i).T).astype(np.int8),
        "i16_bmm": ((wide(s) * 3).astype(np.int16).astype(np.int64)
                    @ wide(s).T).astype(np.int16)[None],
    }
    for k, ref in expected.items():
        ref = np.asarray(ref)
        assert got[k].dtype == ref.dtype, (k, got[k].dtype, ref.dtype)
        np.testing.assert_array_equal(got[k], ref, err_msg=k)


@pytest.mark.parametrize("engine", ENGINES)
def test_minima_order_unsigned_and_reach_the_smallest_value(engine):
    """min/amin/argmin: a uint8 0 or 3 below 200, an int8 -128 the smallest (a minimum
    taken as ``-max(-x)`` wraps both: -0 is 0, and -(-128) is -128 in int8)."""
    u = np.array([[200, 3, 129, 0], [255, 254, 128, 130]], np.uint8)
    i = np.array([[5, -128, 127, -1], [-128, -128, 0, 1]], np.int8)
    with nv.engine(engine):
        ut, it = nv.tensor(u), nv.tensor(i)
        outs = [ut.min(), ut.amin(dim=1), ut.argmin(dim=1), ut.min(dim=1).values, it.min(),
                it.amin(dim=0), it.argmin(dim=1), nv.tensor([-(2**31), 5], dtype=nv.int32).min()]
        nv.realize(*outs)
        got = [t.numpy().tolist() for t in outs]
    assert got == [0, [0, 128], [3, 2], [0, 128], -128, [-128, -128, 0, -1], [1, 0], -(2**31)]


# ---------------------------------------------------------------- StableHLO

def test_stablehlo_export_names_the_types_and_their_signedness():
    text = to_stablehlo(parse_module("""
    builtin.module {
      func.func @step(%x: tensor<3xui8>, %f: tensor<3xf32>) -> (tensor<3xi1>, tensor<ui8>,
                                                                  tensor<3xi8>) {
        %c = nova.compare "lt", %x, %x : tensor<3xui8> -> tensor<3xi1>
        %m = nova.reduce_max %x axes = [0] : tensor<3xui8> -> tensor<ui8>
        %i = nova.cast %f : tensor<3xf32> -> tensor<3xi8>
        func.return %c, %m, %i : tensor<3xi1>, tensor<ui8>, tensor<3xi8>
      }
    }"""))
    assert "comparison_type UNSIGNED" in text                  # uint8 compares unsigned
    assert "value = dense<0> : tensor<ui8>" in text            # its maximum starts at 0
    assert "(tensor<3xf32>) -> tensor<3xi32>" in text          # float -> int8 via int32
    assert "(tensor<3xi32>) -> tensor<3xi8>" in text


def test_is_signed_and_gcd_lcm_follow_the_unsigned_range():
    """``Tensor.is_signed`` is the dtype's; gcd/lcm of uint8 run Euclid's steps for
    magnitudes up to 255 (the consecutive Fibonacci numbers 233 and 144 need the most)."""
    u = nv.tensor([1], dtype=nv.uint8)
    assert (u.is_signed(), u.char().is_signed(), u.bool().is_signed()) == (False, True, False)
    with nv.engine("interp"):
        a = np.array([233, 144, 200, 0, 255, 12], np.uint8)
        b = np.array([144, 233, 50, 7, 170, 18], np.uint8)
        g = nv.gcd(nv.tensor(a), nv.tensor(b)).numpy()
        lcm = nv.lcm(nv.tensor(a), nv.tensor(b)).numpy()
    assert g.dtype == np.uint8 and g.tolist() == np.gcd(a.astype(int), b.astype(int)).tolist()
    assert lcm.tolist() == (np.lcm(a.astype(int), b.astype(int)) % 256).tolist()   # wraps

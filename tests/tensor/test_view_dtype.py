"""``Tensor.view(dtype)`` reads the stored bits as another dtype, bit for bit as numpy's
``ndarray.view`` (PyTorch's semantics), on every engine: same sizes through the dialect's
``bitcast``, different sizes splitting or joining the last dimension; writes go both
ways through the view.

The bytes come from half floats of moderate magnitude, so no float reading of them (f16,
bf16, f32, f64) is a NaN or a subnormal: the compiled engines compute half floats in f32,
which keeps neither NaN payloads nor (on the mlir engine) bf16 subnormals."""
import ml_dtypes
import numpy as np
import pytest

import nova as nv
from nova.compiler import dialect as nd
from nova.tensor.realize import realize

NAMES = ["float32", "float64", "float16", "bfloat16", "int32", "int64", "int16", "uint8",
         "int8"]


def _np(name):
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def _buffer():
    rng = np.random.default_rng(0)
    halves = rng.standard_normal((2, 16)) * 100
    halves = np.sign(halves) * np.clip(np.abs(halves), 1e-3, 6e4)
    return halves.astype(np.float16)


@pytest.mark.parametrize("src", NAMES)
def test_every_dtype_pair_reads_the_same_bits_as_numpy(src, engine):
    a = _buffer().view(_np(src))
    x = nv.tensor(a)
    views = {t: x.view(getattr(nv, t)) for t in NAMES}
    realize(*views.values())
    for t, v in views.items():
        want = a.view(_np(t))
        got = v.numpy()
        assert got.dtype == want.dtype and got.shape == want.shape, (src, t)
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=t)


def test_writes_go_through_the_view_both_ways(engine):
    x = nv.tensor([1.0, 2.0])
    y = x.view(nv.int32)
    y[0] = 0
    np.testing.assert_array_equal(x.numpy(), [0.0, 2.0])
    x.add_(1.0)
    np.testing.assert_array_equal(y.numpy(), np.array([1.0, 3.0], np.float32).view(np.int32))
    b = x.view(nv.uint8)
    b[..., 0] = 7
    want = np.array([1.0, 3.0], np.float32).view(np.uint8).copy()
    want[0] = 7
    np.testing.assert_array_equal(x.numpy().view(np.uint8), want)
    assert not nv.ones(2, requires_grad=True).view(nv.int32).requires_grad


def test_float_bit_patterns_survive_a_round_trip(engine):
    """NaN payloads, signed zeros, infinities and subnormals of float32 and float64 pass
    through an integer view and back unchanged (no float arithmetic touches them)."""
    bits32 = np.array([0x7FC00001, 0xFF800000, 0x80000000, 0x00000001, 0x7F7FFFFF,
                       0xFFFFFFFF], np.uint32).view(np.int32)
    bits64 = np.array([0x7FF0000000000001, 0x8000000000000000, 0x0000000000000001],
                      np.uint64).view(np.int64)
    f32 = nv.tensor(bits32).view(nv.float32)
    f64 = nv.tensor(bits64).view(nv.float64)
    back32, back64 = f32.view(nv.int32), f64.view(nv.int64)
    realize(back32, back64)
    np.testing.assert_array_equal(back32.numpy(), bits32)
    np.testing.assert_array_equal(back64.numpy(), bits64)


def test_bool_views_and_errors(engine):
    m = nv.tensor([True, False, True])
    np.testing.assert_array_equal(m.view(nv.uint8).numpy(), [1, 0, 1])
    np.testing.assert_array_equal(nv.tensor([0, 2, 1], dtype=nv.uint8).view(nv.bool).numpy(),
                                  [False, True, True])
    with pytest.raises(RuntimeError, match="dim\\(\\) cannot be 0 to view float32 as uint8"):
        nv.tensor(1.0).view(nv.uint8)
    with pytest.raises(RuntimeError, match="size\\(-1\\) must be divisible by 4 to view uint8 "
                                           "as float32 .* but got 6"):
        nv.ones(2, 6, dtype=nv.uint8).view(nv.float32)
    with pytest.raises(TypeError, match="view_as_complex"):
        nv.ones(2, 2).view(nv.complex64)


def test_the_bitcast_op_prints_and_pairs_only_same_widths(engine):
    x = nv.tensor(np.ones(3, np.float32))
    text = nv.debug.dump_ir(x.view(nv.int32))
    assert "nova.bitcast" in text and "tensor<3xf32> -> tensor<3xi32>" in text
    assert ("f32", "i64") not in nd.BITCAST_PAIRS


def test_stablehlo_exports_bitcast_convert(engine):
    x = nv.tensor(np.ones((2, 4), np.float32))
    text = nv.export.stablehlo(x.view(nv.int32), x.view(nv.float16))
    assert text.count("stablehlo.bitcast_convert") >= 2

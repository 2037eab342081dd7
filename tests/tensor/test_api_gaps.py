"""PyTorch 2.13 names Nova gained (issue #22): ``angle``/``cfloat``/``cdouble``/``chalf``,
the host element maps (``apply_``, ``map_``, ``map2_``), ``igamma``/``igammac`` and their
in-place forms, the default device, ``empty_strided``, ``frombuffer``, DLPack,
``is_inference``, ``constant_pad_nd``, ``convolution``, ``output_nr``, ``dim_order``."""
import threading

import numpy as np
import pytest
from scipy import special

import nova as nv


@pytest.fixture(autouse=True)
def engine():
    """(Python-level logic: the interpreter is enough.)"""
    with nv.engine("interp"):
        yield "interp"


# ---------------------------------------------------------------- complex conversions

def test_angle_of_real_tensors():
    x = nv.tensor([-1.5, 0.0, 2.0, float("nan"), -0.0, float("-inf")])
    np.testing.assert_array_equal(x.angle().numpy(),
                                  np.array([np.pi, 0, 0, np.nan, 0, np.pi], np.float32))
    assert nv.tensor([-1, 2]).angle().dtype == nv.float32
    z = nv.complex(nv.tensor([1.0, -1.0]), nv.tensor([1.0, 0.0]))
    np.testing.assert_allclose(z.angle().numpy(), [np.pi / 4, np.pi])


def test_cfloat_cdouble_and_chalf():
    x = nv.tensor([1.0, -2.0])
    z = x.cfloat()
    assert z.dtype == nv.complex64
    np.testing.assert_array_equal(z.numpy(), np.array([1, -2], np.complex64))
    assert nv.tensor([1, 2]).cdouble().dtype == nv.complex128
    assert z.cdouble().dtype == nv.complex128
    with pytest.raises(TypeError, match="complex32"):
        x.chalf()


# ---------------------------------------------------------------- host element maps

def test_apply_map_map2_write_in_place():
    x = nv.tensor([1.0, 2.0, 3.0])
    assert x.apply_(lambda v: v * 2) is x
    np.testing.assert_array_equal(x.numpy(), [2, 4, 6])
    i = nv.tensor([1, 2, 3])
    i.apply_(lambda v: v * 2.7)                       # float results truncate for ints
    np.testing.assert_array_equal(i.numpy(), [2, 5, 8])
    m = nv.tensor([[1.0, 2.0]])
    m.map_(nv.tensor([10.0, 20.0]), lambda a, b: a + b)      # other broadcasts
    np.testing.assert_array_equal(m.numpy(), [[11, 22]])
    s = nv.tensor([1.0, 2.0])
    s.map2_(nv.tensor([10.0, 20.0]), nv.tensor([100.0, 200.0]), lambda a, b, c: a + b + c)
    np.testing.assert_array_equal(s.numpy(), [111, 222])
    b = nv.tensor([True, False])
    seen = []
    b.apply_(lambda v: seen.append(type(v)) or not v)
    assert seen == [bool, bool] and b.tolist() == [False, True]


def test_apply_writes_through_a_view():
    base = nv.tensor([1.0, 2.0, 3.0, 4.0])
    base[::2].apply_(lambda v: 0.0)
    np.testing.assert_array_equal(base.numpy(), [0, 2, 0, 4])


@pytest.mark.parametrize("call, error, match", [
    (lambda: nv.tensor([1.0], requires_grad=True).apply_(lambda v: v), RuntimeError,
     r"Can't call apply_\(\) on Variable that requires grad"),
    (lambda: nv.tensor([1.0]).map_(nv.tensor([1.0], requires_grad=True), lambda a, b: a),
     RuntimeError, "requires grad"),
    (lambda: nv.tensor([1.0]).apply_(lambda v: "a"), TypeError, "real number, not str"),
    (lambda: nv.tensor([1.0]).apply_(3), TypeError, "not callable"),
    (lambda: nv.tensor([1.0]).map_(3.0, lambda a, b: a), TypeError, "must be Tensor"),
    (lambda: nv.tensor([1.0]).map_(nv.tensor([1]), lambda a, b: a), TypeError,
     "expected float32 for 'other' \\(got int64\\)"),
    (lambda: nv.tensor([1.0, 2.0]).map_(nv.tensor([[1.0, 2.0]]), lambda a, b: a),
     RuntimeError, "cannot be broadcast"),
    (lambda: nv.tensor([1]).apply_(lambda v: 2 ** 70), OverflowError, "does not fit int64"),
])
def test_host_map_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_apply_overflowing_float_gives_inf():
    x = nv.tensor([1.0])
    x.apply_(lambda v: v + 1e40)
    assert x.item() == float("inf")


# ---------------------------------------------------------------- igamma

def test_igamma_methods_and_in_place_forms():
    a, x = np.array([0.5, 2.0, 3.0]), np.array([1.0, 2.0, 0.5])
    at, xt = nv.tensor(a), nv.tensor(x)
    np.testing.assert_allclose(at.igamma(xt).numpy(), special.gammainc(a, x), rtol=1e-10)
    np.testing.assert_allclose(at.igammac(xt).numpy(), special.gammaincc(a, x), rtol=1e-10)
    np.testing.assert_allclose(nv.igamma(at, xt).numpy(), special.gammainc(a, x), rtol=1e-10)
    y = nv.tensor(a, dtype=nv.float32)
    assert y.igamma_(xt) is y and y.dtype == nv.float32          # float64 result cast back
    np.testing.assert_allclose(y.numpy(), special.gammainc(a, x), rtol=1e-6)
    y = nv.tensor(a)
    y.igammac_(xt)
    np.testing.assert_allclose(y.numpy(), special.gammaincc(a, x), rtol=1e-10)
    with pytest.raises(TypeError, match="must be Tensor, not float"):
        at.igamma(2.0)
    with pytest.raises(RuntimeError, match="shape"):
        nv.tensor([1.0, 2.0]).igammac_(nv.tensor([[1.0], [2.0]]))


# ---------------------------------------------------------------- default device

def test_default_device_is_per_thread_and_a_context():
    assert nv.get_default_device() == nv.device("cpu")
    seen = []
    try:
        nv.set_default_device("cpu:0")
        assert nv.get_default_device() == nv.device("cpu:0")
        t = threading.Thread(target=lambda: seen.append(nv.get_default_device()))
        t.start()
        t.join()
        with nv.device("cuda"):
            assert nv.get_default_device() == nv.device("cuda")
        assert nv.get_default_device() == nv.device("cpu:0")
    finally:
        nv.set_default_device(None)
    assert seen == [nv.device("cpu")]
    assert nv.get_default_device() == nv.device("cpu")


def test_factories_use_the_default_device():
    from nova.runtime.cuda_runtime import use_backend
    from tests.runtime.emulated_cuda import EmulatorBackend
    host = nv.ones(2)
    with use_backend(EmulatorBackend()):
        with nv.device("cuda"):
            made = [nv.zeros(2), nv.ones(2), nv.full((2,), 3.0), nv.arange(3), nv.eye(2),
                    nv.rand(2), nv.randn(2), nv.tensor([1.0]), nv.empty(2),
                    nv.linspace(0, 1, 3)]
            like = nv.zeros_like(host)                       # follows its input
            named = nv.zeros(2, device="cpu")
            frozen = nv.from_numpy(np.ones(2))               # shares memory: stays
        assert [t.device.type for t in made] == ["cuda"] * len(made)
        assert like.device.type == "cpu" and named.device.type == "cpu"
        assert frozen.device.type == "cpu"
        assert nv.zeros(2).device.type == "cpu"


def test_a_device_that_cannot_run_fails_at_the_factory():
    from nova.runtime.cuda_runtime import unavailable_reason
    if unavailable_reason() is None:
        pytest.skip("CUDA is usable here")
    with nv.device("cuda"):
        with pytest.raises(RuntimeError, match="zeros: CUDA is not available"):
            nv.zeros(2)
    with pytest.raises(ValueError, match="unknown device type"):
        nv.set_default_device("meta")


# ---------------------------------------------------------------- factories

def test_empty_strided():
    t = nv.empty_strided((2, 3), (1, 2), dtype=nv.float64)
    assert t.shape == (2, 3) and t.dtype == nv.float64
    assert nv.ones(1).new_empty_strided((4,), (1,)).dtype == nv.float32
    assert nv.ones(1, dtype=nv.int64).new_empty_strided((2, 2), (2, 1)).dtype == nv.int64
    with pytest.raises(RuntimeError, match=r"sizes \(2\) must match .* strides \(1\)"):
        nv.empty_strided((2, 3), (1,))
    with pytest.raises(RuntimeError, match="negative strides"):
        nv.empty_strided((2, 3), (-1, 1))
    with pytest.raises(TypeError, match="element of type float at pos 0"):
        nv.empty_strided((2, 3), (1.5, 1))


def test_frombuffer():
    data = np.arange(6, dtype=np.int16).tobytes()
    np.testing.assert_array_equal(nv.frombuffer(data, dtype=nv.int16).numpy(), np.arange(6))
    got = nv.frombuffer(bytearray(b"\x01\x02\x03\x04"), dtype=nv.int8, count=2, offset=1)
    assert got.tolist() == [2, 3] and got.dtype == nv.int8
    src = np.arange(3.0)
    t = nv.frombuffer(src, dtype=nv.float64)
    src[0] = 9.0                                        # a copy: the tensor keeps 0
    assert t.tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("kwargs, match", [
    (dict(buffer=b"\x01\x02\x03"), "multiple of element size"),
    (dict(buffer=b""), "must not be 0"),
    (dict(buffer=b"\x01\x02\x03\x04", count=3), "must not be greater than actual"),
    (dict(buffer=b"\x01\x02\x03\x04", offset=4), "offset \\(4 bytes\\)"),
    (dict(buffer=b"\x01\x02\x03\x04", count=0), "must not be 0"),
    (dict(buffer=[1, 2]), "buffer protocol"),
])
def test_frombuffer_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        nv.frombuffer(dtype=nv.int16, **kwargs)


def test_dlpack_round_trip_through_numpy():
    t = nv.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert t.__dlpack_device__() == (1, 0)
    arr = np.from_dlpack(t)
    np.testing.assert_array_equal(arr, [[1, 2], [3, 4]])
    back = nv.from_dlpack(np.arange(4, dtype=np.int32))
    assert back.dtype == nv.int32 and back.tolist() == [0, 1, 2, 3]
    assert nv.from_dlpack(np.arange(3.0).__dlpack__()).tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(BufferError, match="require gradient"):
        nv.ones(2, requires_grad=True).__dlpack__()
    with pytest.raises(BufferError, match="copy=False"):
        t.__dlpack__(copy=False)
    with pytest.raises(TypeError, match="__dlpack__"):
        nv.from_dlpack([1, 2])


def test_dlpack_with_torch_where_installed():
    torch = pytest.importorskip("torch")
    assert torch.from_dlpack(nv.tensor([1.0, 2.0])).tolist() == [1.0, 2.0]
    assert nv.from_dlpack(torch.arange(3)).tolist() == [0, 1, 2]


def test_is_inference_output_nr_dim_order():
    t = nv.randn(2, 3)
    assert nv.is_inference(t) is False
    with pytest.raises(TypeError, match="must be Tensor, not int"):
        nv.is_inference(3)
    assert t.output_nr == 0
    assert t.dim_order() == (0, 1) and nv.randn(2, 3, 4).dim_order() == (0, 1, 2)
    assert t.dim_order(ambiguity_check=True) == (0, 1)
    with pytest.raises(RuntimeError, match="unique dim order"):
        nv.randn(2, 1).dim_order(ambiguity_check=True)
    with pytest.raises(TypeError, match="bool or a list"):
        t.dim_order(ambiguity_check="ILLEGAL")


# ---------------------------------------------------------------- ATen functional forms

def test_constant_pad_nd():
    x = np.arange(6.0).reshape(2, 3)
    got = nv.constant_pad_nd(nv.tensor(x), [1, 2, -1, 0], 5.0)
    np.testing.assert_array_equal(got.numpy(), np.pad(x[1:], [(0, 0), (1, 2)],
                                                      constant_values=5.0))
    ints = nv.constant_pad_nd(nv.tensor([[1, 2]]), [1, 1], 2.5)
    assert ints.tolist() == [[2, 1, 2, 2]] and ints.dtype == nv.int64
    with pytest.raises(RuntimeError, match="must be even"):
        nv.constant_pad_nd(nv.ones(2, 3), [1])
    with pytest.raises(RuntimeError, match="no more than twice"):
        nv.constant_pad_nd(nv.ones(2, 3), [1] * 6)
    with pytest.raises(RuntimeError, match="negative"):
        nv.constant_pad_nd(nv.ones(2, 3), [-2, -2])


def _np_conv1d(x, w, stride, padding, dilation):
    x = np.pad(x, [(0, 0), (0, 0), (padding, padding)])
    k = w.shape[-1]
    n_out = (x.shape[-1] - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((x.shape[0], w.shape[0], n_out))
    for o in range(n_out):
        patch = x[:, :, o * stride:o * stride + dilation * (k - 1) + 1:dilation]
        out[:, :, o] = np.einsum("nck,ock->no", patch, w)
    return out


def test_convolution_dispatches_by_weight_dimensionality():
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((2, 3, 9)), rng.standard_normal((4, 3, 3)), \
        rng.standard_normal(4)
    got = nv.convolution(nv.tensor(x), nv.tensor(w), nv.tensor(b), [2], [1], [2], False,
                         [0], 1)
    np.testing.assert_allclose(got.numpy(), _np_conv1d(x, w, 2, 1, 2) + b[:, None],
                               rtol=1e-10)
    x2 = rng.standard_normal((1, 2, 5, 5))
    w2 = rng.standard_normal((4, 1, 3, 3))
    out2 = nv.convolution(nv.tensor(x2), nv.tensor(w2), None, (1, 1), (1, 1), (1, 1),
                          False, (0, 0), 2)
    assert out2.shape == (1, 4, 5, 5)
    # a transposed convolution is the adjoint of the convolution: <conv(x), y> = <x, convT(y)>
    y = rng.standard_normal((2, 4, 5))
    conv = nv.convolution(nv.tensor(x), nv.tensor(w), None, [2], [1], [1], False, [0], 1)
    back = nv.convolution(nv.tensor(y), nv.tensor(w), None, [2], [1], [1], True, [0], 1)
    assert back.shape == (2, 3, 9)
    np.testing.assert_allclose((conv.numpy() * y).sum(), (x * back.numpy()).sum(), rtol=1e-10)


@pytest.mark.parametrize("call, error, match", [
    (lambda: nv.convolution(nv.ones(1, 2, 5), nv.ones(3, 2, 2), None, 1, [0], [1], False,
                            [0], 1), TypeError, "'stride' \\(position 4\\) must be tuple"),
    (lambda: nv.convolution(nv.ones(2, 5), nv.ones(3, 2, 2), None, [1], [0], [1], False,
                            [0], 1), RuntimeError, "Expected 3-dimensional input"),
    (lambda: nv.convolution(nv.ones(1, 1, 2, 5, 5, 5), nv.ones(3, 1, 2, 2, 2, 2), None, [1],
                            [0], [1], False, [0], 1), RuntimeError, "unsupported ConvNd"),
])
def test_convolution_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_broadcast_to_takes_ints_and_histogram_has_pytorchs_default_bins():
    """``x.broadcast_to(3)`` and ``broadcast_to(2, 3)`` (ints, as PyTorch takes) raised
    "Value after * must be an iterable"; ``histogram(x)`` needs no ``bins`` (100)."""
    x = nv.arange(3.0)
    assert x.broadcast_to(3).shape == (3,)
    assert x.broadcast_to(2, 3).shape == (2, 3)
    assert x.broadcast_to([2, -1]).shape == (2, 3)
    assert nv.broadcast_to(x, (2, 3)).tolist() == [[0.0, 1.0, 2.0]] * 2
    hist, edges = nv.histogram(nv.tensor([0.0, 0.5, 1.0]))
    assert hist.shape == (100,) and edges.shape == (101,)
    assert hist.sum().item() == 3.0 and x.histogram().hist.shape == (100,)

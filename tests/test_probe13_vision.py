"""Probe 13 (vision and generative models ported by changing imports): PyTorch's
memory-format objects and ``Module.to``'s full signature (``model.to(memory_format=
torch.channels_last)``, ``to(device, non_blocking=True)``, ``to(tensor)``), the
``torch._foreach_*`` list ops EMA helpers call, and ``torch.cpu`` with its older AMP
spelling (``torch.cpu.amp.autocast``).

References are numpy / math values; the interpreter runs these tiny graphs."""
import copy
import math
import pickle
import warnings

import numpy as np
import pytest

import nova as nv
from nova import cpu as nv_cpu
from nova import foreach as fe
from nova.core import memory_format as mf

nn = nv.nn


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def _arrays(seed, shapes=((2, 3), (4,)), low=0.1, high=0.9):
    rng = np.random.default_rng(seed)
    return [rng.uniform(low, high, s).astype(np.float32) for s in shapes]


def _ts(arrays):
    return [nv.tensor(a) for a in arrays]


# ------------------------------------------------------------------ memory formats


def test_memory_formats_are_singletons_through_copy_and_pickle():
    for f in (mf.channels_last, mf.contiguous_format, mf.preserve_format,
              mf.channels_last_3d):
        assert copy.deepcopy(f) is f
        assert pickle.loads(pickle.dumps(f)) is f
        assert isinstance(f, mf.memory_format)
    assert repr(mf.channels_last) == "nova.channels_last"
    assert mf.channels_last is not mf.contiguous_format


def test_module_to_accepts_memory_format_and_keeps_values():
    m = nn.Conv2d(3, 4, 3)
    before = m.weight.numpy()
    w = m.weight
    assert m.to(memory_format=mf.channels_last) is m
    assert m.weight is w
    np.testing.assert_array_equal(m.weight.numpy(), before)


def test_module_to_rejects_a_non_memory_format():
    with pytest.raises(TypeError, match="memory_format must be a memory format"):
        nn.Linear(2, 2).to(memory_format="channels_last")


def test_module_to_takes_non_blocking_and_positional_flags():
    m = nn.Linear(2, 2)
    m.to("cpu", non_blocking=True)
    m.to("cpu", nv.float64, True)              # (device, dtype, non_blocking)
    assert m.weight.dtype == nv.float64
    m.to(nv.float32, False, False)             # (dtype, non_blocking, copy)
    assert m.weight.dtype == nv.float32
    with pytest.raises(TypeError, match="at most two positional flags"):
        m.to(True, True, True)
    with pytest.raises(TypeError, match="unexpected arguments"):
        m.to(foo=1)


def test_module_to_tensor_takes_its_dtype():
    m = nn.Linear(2, 2)
    ref = m.weight.numpy().astype(np.float64)
    m.to(nv.zeros(1, dtype=nv.float64))
    assert m.weight.dtype == nv.float64 and m.bias.dtype == nv.float64
    np.testing.assert_array_equal(m.weight.numpy(), ref)


# ------------------------------------------------------------------ _foreach_*

_UNARY_REF = {
    "abs": np.abs, "acos": np.arccos, "asin": np.arcsin, "atan": np.arctan,
    "ceil": np.ceil, "cos": np.cos, "cosh": np.cosh, "erf": np.vectorize(math.erf),
    "erfc": np.vectorize(math.erfc), "exp": np.exp, "expm1": np.expm1,
    "floor": np.floor, "frac": lambda a: a - np.trunc(a),
    "lgamma": np.vectorize(math.lgamma), "log": np.log, "log10": np.log10,
    "log1p": np.log1p, "log2": np.log2, "neg": np.negative,
    "reciprocal": np.reciprocal, "round": np.round, "rsqrt": lambda a: 1 / np.sqrt(a),
    "sigmoid": lambda a: 1 / (1 + np.exp(-a)), "sign": np.sign, "sin": np.sin,
    "sinh": np.sinh, "sqrt": np.sqrt, "tan": np.tan, "tanh": np.tanh, "trunc": np.trunc,
}


@pytest.mark.parametrize("name", sorted(_UNARY_REF))
def test_foreach_unary_out_of_place_and_in_place(name):
    arrays = _arrays(0)
    out = getattr(fe, f"_foreach_{name}")(_ts(arrays))
    assert isinstance(out, tuple) and len(out) == 2
    ts = _ts(arrays)
    ret = getattr(fe, f"_foreach_{name}_")(ts)
    assert ret[0] is ts[0] and ret[1] is ts[1]
    for a, o, t in zip(arrays, out, ts):
        ref = _UNARY_REF[name](a.astype(np.float64))
        np.testing.assert_allclose(o.numpy(), ref, rtol=2e-6, atol=1e-6)
        np.testing.assert_allclose(t.numpy(), ref, rtol=2e-6, atol=1e-6)


def test_foreach_add_forms():
    a, b = _arrays(1), _arrays(2)
    got = fe._foreach_add(_ts(a), _ts(b), alpha=2)
    for g, x, y in zip(got, a, b):
        np.testing.assert_allclose(g.numpy(), x + 2 * y, rtol=1e-6)
    got = fe._foreach_add(_ts(a), [1.0, -2.0])
    np.testing.assert_allclose(got[1].numpy(), a[1] - 2, rtol=1e-6)
    got = fe._foreach_sub(_ts(a), 0.5)
    np.testing.assert_allclose(got[0].numpy(), a[0] - 0.5, rtol=1e-6)
    got = fe._foreach_mul(_ts(a), nv.tensor(3.0))
    np.testing.assert_allclose(got[0].numpy(), a[0] * 3, rtol=1e-6)
    ts = _ts(a)
    fe._foreach_div_(ts, _ts(b))
    np.testing.assert_allclose(ts[1].numpy(), a[1] / b[1], rtol=1e-6)


def test_foreach_pow_clamp_maximum():
    a, b = _arrays(3), _arrays(4)
    np.testing.assert_allclose(fe._foreach_pow(_ts(a), 2.0)[0].numpy(), a[0] ** 2, rtol=1e-6)
    np.testing.assert_allclose(fe._foreach_pow(2.0, _ts(a))[1].numpy(), 2.0 ** a[1],
                               rtol=1e-6)
    np.testing.assert_allclose(fe._foreach_clamp_min(_ts(a), 0.5)[0].numpy(),
                               np.maximum(a[0], 0.5))
    np.testing.assert_allclose(fe._foreach_clamp_max(_ts(a), [0.5, 0.3])[1].numpy(),
                               np.minimum(a[1], 0.3))
    ts = _ts(a)
    fe._foreach_maximum_(ts, _ts(b))
    np.testing.assert_allclose(ts[0].numpy(), np.maximum(a[0], b[0]))
    np.testing.assert_allclose(fe._foreach_minimum(_ts(a), _ts(b))[1].numpy(),
                               np.minimum(a[1], b[1]))


def test_foreach_lerp_addcmul_addcdiv():
    a, b, c = _arrays(5), _arrays(6), _arrays(7)
    ts = _ts(a)
    fe._foreach_lerp_(ts, _ts(b), 0.25)
    np.testing.assert_allclose(ts[0].numpy(), a[0] + 0.25 * (b[0] - a[0]), rtol=1e-6)
    got = fe._foreach_lerp(_ts(a), _ts(b), _ts(c))
    np.testing.assert_allclose(got[1].numpy(), a[1] + c[1] * (b[1] - a[1]), rtol=1e-6)
    got = fe._foreach_addcmul(_ts(a), _ts(b), _ts(c), [1.0, 2.0])
    np.testing.assert_allclose(got[1].numpy(), a[1] + 2 * b[1] * c[1], rtol=1e-6)
    ts = _ts(a)
    fe._foreach_addcdiv_(ts, _ts(b), _ts(c), nv.tensor([0.5, -1.0]))
    np.testing.assert_allclose(ts[0].numpy(), a[0] + 0.5 * b[0] / c[0], rtol=1e-6)
    np.testing.assert_allclose(ts[1].numpy(), a[1] - b[1] / c[1], rtol=1e-6)


@pytest.mark.parametrize("ord_", [1, 2, float("inf")])
def test_foreach_norm_and_max(ord_):
    a = _arrays(8, low=-1, high=1)
    got = fe._foreach_norm(_ts(a), ord_)
    for g, x in zip(got, a):
        assert g.shape == ()
        np.testing.assert_allclose(g.item(), np.linalg.norm(x.ravel(), ord_), rtol=1e-6)
    assert fe._foreach_max(_ts(a))[1].item() == pytest.approx(float(a[1].max()))


def test_foreach_copy_zero_clone():
    a, b = _arrays(9), _arrays(10)
    ts = _ts(a)
    fe._foreach_copy_(ts, _ts(b))
    np.testing.assert_array_equal(ts[0].numpy(), b[0])
    clones = fe._foreach_clone(ts)
    fe._foreach_zero_(ts)
    np.testing.assert_array_equal(ts[1].numpy(), np.zeros(4, np.float32))
    np.testing.assert_array_equal(clones[1].numpy(), b[1])


def test_foreach_ema_of_parameters_keeps_identity():
    """timm's ModelEmaV3 / ema-pytorch: lerp EMA weights toward the model's in place."""
    model, ema = nn.Linear(3, 2), nn.Linear(3, 2)
    ema_params, params = list(ema.parameters()), list(model.parameters())
    start = [p.numpy() for p in ema_params]
    with nv.no_grad():
        fe._foreach_lerp_(ema_params, [p.detach() for p in params], 0.1)
        fe._foreach_mul_(ema_params, 1.0)
    for p, s, q in zip(ema.parameters(), start, params):
        np.testing.assert_allclose(p.numpy(), s + 0.1 * (q.numpy() - s), rtol=1e-6)
    assert list(ema.parameters())[0] is ema_params[0]


def test_foreach_errors_are_pytorchs():
    ts = _ts(_arrays(11))
    with pytest.raises(RuntimeError, match="same number of elements as scalar list"):
        fe._foreach_add(ts, [1.0])
    with pytest.raises(RuntimeError, match="at least one tensor"):
        fe._foreach_mul([], 2.0)
    with pytest.raises(RuntimeError, match="same number of tensors, got 2 and 1"):
        fe._foreach_add(ts, ts[:1])
    with pytest.raises(TypeError, match="alpha is accepted only"):
        fe._foreach_add(ts, 1.0, alpha=2)
    with pytest.raises(TypeError, match="list or tuple of tensors"):
        fe._foreach_exp(ts[0])


# ------------------------------------------------------------------ nova.cpu


def test_cpu_amp_autocast_is_bfloat16_and_warns():
    lin = nn.Linear(3, 2)
    x = nv.ones(4, 3)
    with pytest.warns(FutureWarning, match="nova.amp.autocast"):
        ctx = nv_cpu.amp.autocast()
    with ctx:
        assert lin(x).dtype == nv.bfloat16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        with nv_cpu.amp.autocast(enabled=False):
            assert lin(x).dtype == nv.float32
        with nv_cpu.amp.autocast(dtype=nv.float16):
            assert lin(x).dtype == nv.float16


def test_cpu_amp_grad_scaler_is_a_cpu_scaler():
    with pytest.warns(FutureWarning, match="GradScaler"):
        s = nv_cpu.amp.GradScaler(init_scale=8.0)
    assert isinstance(s, nv.amp.GradScaler)
    assert s.device == "cpu" and s.get_scale() == 8.0


def test_cpu_device_queries():
    assert nv_cpu.is_available() is True
    assert nv_cpu.device_count() == 1
    assert nv_cpu.current_device() == "cpu"
    nv_cpu.synchronize()
    nv_cpu.set_device("cpu")

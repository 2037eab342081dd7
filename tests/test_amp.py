"""Mixed precision and the names training scripts call unconditionally: nv.autocast
(which ops lower, which stay float32, gradients in float32), GradScaler (scaling,
unscaling, skipping a step with an inf gradient, backoff and growth), inference_mode,
and nv.cuda's seeding and amp spellings."""
import numpy as np
import pytest

import nova as nv
import nova.nn as nn
import nova.nn.functional as F
from nova.amp import GradScaler

RNG = np.random.default_rng(5)


def test_autocast_lowers_matmul_like_ops_and_keeps_float32_ops_float32():
    lin = nn.Linear(4, 3)
    x = nv.tensor(RNG.standard_normal((2, 4)).astype(np.float32))
    with nv.autocast("cpu"):
        # per device type, as torch.is_autocast_enabled (no argument: CUDA's)
        assert nv.amp.is_autocast_enabled("cpu") and not nv.amp.is_autocast_enabled()
        y = lin(x)
        assert y.dtype == nv.bfloat16                   # the bias joins the product
        assert (x @ x.T).dtype == nv.bfloat16
        # PyTorch's CPU lists: softmax and norms stay half, losses run in float32
        assert F.softmax(y, -1).dtype == nv.bfloat16
        assert F.layer_norm(y, (3,)).dtype == nv.bfloat16
        assert F.mse_loss(y, y).dtype == nv.float32
        loss = F.cross_entropy(y, nv.tensor([0, 2]))
        assert loss.dtype == nv.float32
    with nv.autocast("cuda", dtype=nv.bfloat16):    # CUDA's lists (recorded on the CPU)
        assert F.softmax(lin(x), -1).dtype == nv.float32
        assert F.layer_norm(lin(x), (3,)).dtype == nv.float32
    with nv.autocast("cpu"):
        assert (x.double() @ x.double().T).dtype == nv.float64   # float64 is left alone
        conv = nn.Conv2d(1, 2, 3)(nv.randn(1, 1, 5, 5))
        assert conv.dtype == nv.bfloat16
        with nv.autocast("cpu", enabled=False):
            assert (x @ x.T).dtype == nv.float32
    assert (x @ x.T).dtype == nv.float32                # the block ended
    loss.backward()
    assert lin.weight.grad.dtype == nv.float32
    # the product of bfloat16-rounded operands, accumulated in float32, rounded once
    w, b = lin.weight.numpy(), lin.bias.numpy()
    bf = lambda a: nv.tensor(a).bfloat16().float().numpy()   # noqa: E731
    want = bf(bf(bf(x.numpy()) @ bf(w).T) + bf(b))
    np.testing.assert_allclose(y.float().numpy(), want, rtol=1e-2, atol=1e-2)
    with pytest.raises(ValueError, match="autocast: dtype must be bfloat16 or float16"):
        nv.autocast("cpu", dtype=nv.float64)


def test_autocast_matches_pytorch_dtypes_and_values_on_the_cpu():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    w = RNG.standard_normal((5, 8)).astype(np.float32)
    target = np.array([0, 3, 4])

    def run(lib, F_, ac):
        with ac:
            y = F_.linear(lib.tensor(x), lib.tensor(w))
            outs = [y, F_.log_softmax(y, -1), F_.layer_norm(y, (5,)),
                    F_.cross_entropy(y, lib.tensor(target)), F_.mse_loss(y, y * 2)]
        return [(str(o.dtype).split(".")[-1], o.float().detach().numpy()) for o in outs]
    ours = run(nv, F, nv.autocast("cpu", dtype=nv.bfloat16))
    theirs = run(torch, torch.nn.functional, torch.autocast("cpu", dtype=torch.bfloat16))
    for (od, ov), (td, tv) in zip(ours, theirs):
        assert od == td
        np.testing.assert_allclose(ov, tv, rtol=2e-2, atol=5e-2)


def _params_with_grads(grads):
    ps = [nn.Parameter(nv.zeros(len(g))) for g in grads]
    for p, g in zip(ps, grads):
        p.grad = nv.tensor(np.asarray(g, np.float32))
    return ps


def test_grad_scaler_scales_unscales_and_skips_a_step_with_an_inf_gradient():
    scaler = GradScaler(init_scale=8.0, growth_interval=2)
    assert scaler.scale(nv.tensor(1.5)).item() == 12.0
    ps = _params_with_grads([[8.0, 16.0], [-8.0]])
    opt = nv.optim.SGD(ps, lr=1.0)
    scaler.step(opt)                    # unscales, then steps
    scaler.update()
    np.testing.assert_array_equal(ps[0].numpy(), [-1.0, -2.0])
    np.testing.assert_array_equal(ps[1].numpy(), [1.0])
    assert scaler.get_scale() == 8.0    # one clean step of the two before growing
    for p, g in zip(ps, ([8.0, 8.0], [8.0])):
        p.grad = nv.tensor(np.asarray(g, np.float32))
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 16.0   # grew after growth_interval clean steps
    before = [p.numpy().copy() for p in ps]
    ps[0].grad = nv.tensor(np.array([np.inf, 1.0], np.float32))
    ps[1].grad = nv.tensor(np.array([1.0], np.float32))
    assert scaler.step(opt) is None     # skipped
    scaler.update()
    for p, b in zip(ps, before):
        np.testing.assert_array_equal(p.numpy(), b)
    assert scaler.get_scale() == 8.0    # backed off
    ps[1].grad = nv.tensor(np.array([np.nan], np.float32))
    ps[0].grad = None
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 4.0
    state = scaler.state_dict()
    other = GradScaler()
    other.load_state_dict(state)
    assert other.get_scale() == 4.0 and other.state_dict() == state


def test_a_disabled_scaler_passes_everything_through():
    scaler = nv.cuda.amp.GradScaler(enabled=False)
    loss = nv.tensor(3.0)
    assert scaler.scale(loss) is loss and scaler.get_scale() == 1.0
    ps = _params_with_grads([[2.0]])
    opt = nv.optim.SGD(ps, lr=0.5)
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    np.testing.assert_array_equal(ps[0].numpy(), [-1.0])
    assert scaler.state_dict() == {}
    with nv.cuda.amp.autocast(enabled=False):
        assert (nv.ones(2, 2) @ nv.ones(2, 2)).dtype == nv.float32


def test_inference_mode_turns_history_off_as_context_and_decorator():
    w = nv.ones(3, requires_grad=True)
    with nv.inference_mode():
        assert nv.is_inference_mode_enabled() and not nv.is_grad_enabled()
        assert not (w * 2).requires_grad
    assert not nv.is_inference_mode_enabled() and nv.is_grad_enabled()
    with nv.inference_mode(False):
        assert (w * 2).requires_grad

    @nv.inference_mode
    def bare(t):
        return t * 2

    @nv.inference_mode()
    def called(t):
        return t * 3
    assert not bare(w).requires_grad and not called(w).requires_grad
    assert nv.is_grad_enabled()


def test_cuda_seeding_seeds_the_one_generator():
    nv.cuda.manual_seed(7)
    a = nv.rand(4).numpy()
    nv.manual_seed(7)
    b = nv.rand(4).numpy()
    nv.cuda.manual_seed_all(7)
    c = nv.rand(4).numpy()
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    assert isinstance(nv.cuda.is_bf16_supported(), bool)


def test_autocast_state_is_per_device_type_as_in_pytorch():
    """``is_autocast_enabled(device_type)`` (no argument: CUDA's), also at the top level
    as ``torch.is_autocast_enabled``; ``get_autocast_dtype`` per device."""
    assert nv.is_autocast_enabled is nv.amp.is_autocast_enabled
    assert nv.get_autocast_dtype is nv.amp.get_autocast_dtype
    assert not nv.is_autocast_enabled("cpu") and not nv.is_autocast_enabled()
    with nv.autocast("cpu", dtype=nv.float16):
        assert nv.is_autocast_enabled("cpu") and not nv.is_autocast_enabled("cuda")
        assert not nv.is_autocast_enabled() and not nv.is_autocast_enabled("xla")
        assert nv.get_autocast_dtype("cpu") == nv.float16
        assert nv.get_autocast_dtype("cuda") == nv.float16      # CUDA's default
    with nv.autocast("cuda", dtype=nv.bfloat16):
        assert nv.is_autocast_enabled() and nv.is_autocast_enabled("cuda:0")
        assert nv.get_autocast_dtype("cuda") == nv.bfloat16
        assert nv.get_autocast_dtype("cpu") == nv.bfloat16      # the CPU's default
    with nv.autocast("cpu", enabled=False):
        assert not nv.is_autocast_enabled("cpu")
    assert nv.amp.is_autocast_available("cpu") and not nv.amp.is_autocast_available("mps")
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda.*device string: gpu"):
        nv.is_autocast_enabled("gpu")
    with pytest.raises(TypeError, match="device_type must be a str"):
        nv.is_autocast_enabled(0)


def _scaler_run(lib, script):
    """Run ``script`` (calls on a fresh scaler, a one-parameter SGD and a gradient set
    before each call) and return what each call gave: a scale or an error's type
    and message."""
    p = lib.nn.Parameter(lib.zeros(2))
    opt = lib.optim.SGD([p], lr=0.5)
    s = lib.amp.GradScaler("cpu", init_scale=1000.0, growth_factor=1.7, backoff_factor=0.3,
                           growth_interval=2)
    seen = []
    for call, grad in script:
        p.grad = None if grad is None else lib.tensor(np.asarray(grad, np.float32))
        try:
            {"scale": lambda: s.scale(lib.ones(())), "unscale": lambda: s.unscale_(opt),
             "step": lambda: s.step(opt), "update": lambda: s.update(),
             "closure": lambda: s.step(opt, closure=lambda: 0.0)}[call]()
            seen.append(("ok", s.get_scale(), s._get_growth_tracker()))
        except (RuntimeError, AssertionError, ValueError) as e:
            seen.append((type(e).__name__ if type(e).__name__ in ("RuntimeError",
                                                                   "ValueError")
                         else "AssertionError", str(e).split(" (")[0]))
    return seen, p.detach().numpy().tolist() if lib is not nv else p.numpy().tolist()


SCALER_SCRIPT = [
    ("update", None), ("step", [1, 1]), ("unscale", [1, 1]),     # before any scale()
    ("scale", None), ("update", None),                            # no step since
    ("step", [1000, 2000]), ("step", [1000, 2000]),               # twice
    ("unscale", [1, 1]),                                          # after step
    ("update", None), ("update", None),                           # twice
    ("closure", [1, 1]), ("unscale", [1, 1]), ("unscale", [1, 1]),
    ("step", [1, 1]), ("update", None),                           # grows: 2 clean
    ("step", [np.inf, 1]), ("update", None),                      # backs off
    ("step", None),                                               # no gradient
    ("update", None), ("step", [300, 600]), ("update", None),
]


def test_grad_scaler_refuses_misuse_and_updates_as_pytorch():
    """PyTorch's order of calls and its errors (``step`` twice, ``unscale_`` after it,
    ``update`` with no step since, anything before a first ``scale``, closures, a
    step with no gradient), and its float32 scale arithmetic."""
    ours, params = _scaler_run(nv, SCALER_SCRIPT)
    kinds = [r[0] for r in ours]
    assert kinds[:3] == ["AssertionError"] * 3
    assert ours[0][1] == ("Attempted update but _scale is None.  This may indicate your "
                          "script did not use scaler.scale(loss or outputs) earlier in the "
                          "iteration.")
    assert ours[4] == ("AssertionError", "No inf checks were recorded prior to update.")
    assert ours[6] == ("RuntimeError", "step() has already been called since the last "
                                       "update().")
    assert ours[7] == ("RuntimeError", "unscale_() is being called after step().")
    assert ours[10] == ("RuntimeError", "Closure use is not currently supported if "
                                        "GradScaler is enabled.")
    assert ours[12][0] == "RuntimeError" and "already been called on this optimizer" in \
        ours[12][1]
    assert ours[17] == ("AssertionError", "No inf checks were recorded for this optimizer.")
    assert ours[14] == ("ok", float(np.float32(1000.0 * 1.7)), 0)       # grown
    assert ours[16] == ("ok", float(np.float32(1700.0 * 0.3)), 0)      # backed off
    # the misuse errors are RuntimeErrors too (Nova's errors)
    with pytest.raises(RuntimeError, match="_scale is None"):
        GradScaler("cpu").update()
    torch = pytest.importorskip("torch")
    theirs, their_params = _scaler_run(torch, SCALER_SCRIPT)
    assert ours == theirs
    assert params == their_params


def test_grad_scaler_edges_as_pytorch():
    with pytest.raises(AssertionError, match=r"The growth factor must be > 1.0"):
        GradScaler(growth_factor=1.0)
    with pytest.raises(AssertionError, match=r"The backoff factor must be < 1.0"):
        GradScaler(backoff_factor=1.0)
    GradScaler(growth_factor=1.0, enabled=False)                # not checked when off
    s = GradScaler("cpu", init_scale=3.3)
    assert s.get_scale() == 3.3                                 # before the first scale
    s.scale(nv.ones(()))
    assert s.get_scale() == float(np.float32(3.3))              # a float32 scale
    big = GradScaler("cpu", init_scale=3e38, growth_interval=1)
    ps = _params_with_grads([[1.0]])
    opt = nv.optim.SGD(ps, lr=0.0)
    big.scale(nv.ones(()))
    big.step(opt)
    big.update()
    assert big.get_scale() == float(np.float32(3e38))          # a growth to inf not taken
    with pytest.raises(AssertionError, match="new_scale should be a float or a 1-element"):
        big.update(nv.ones(2))
    big.update(nv.tensor(4.0))
    assert big.get_scale() == 4.0
    half = [nn.Parameter(nv.zeros(1, dtype=nv.float16))]
    half[0].grad = nv.ones(1, dtype=nv.float16)
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
        big.unscale_(nv.optim.SGD(half, lr=0.1))
    with pytest.raises(RuntimeError, match="The source state dict is empty"):
        big.load_state_dict({})
    with pytest.raises(ValueError, match="outputs must be a Tensor or an iterable"):
        big.scale(3.0)
    assert list(big.scale(iter([nv.ones(())]))) and isinstance(big.scale((nv.ones(()),)),
                                                               tuple)
    import pickle
    big.unscale_(opt)
    with pytest.raises(AssertionError, match="may only be pickled at the beginning"):
        pickle.dumps(big)

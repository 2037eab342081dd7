"""Every op family and its gradients on ``device="cuda"`` against the interpreter on the
CPU; a GPT training step against the CPU engine. Each test runs twice: on the CPU
emulator of generated kernels (``emulator``, no GPU needed) and on a real GPU through
CuPy (``gpu``, marked ``cuda``: skipped without one). The ``gpu``-only tests at the end
check what emulation cannot: CuPy device memory, donation reusing the same device
pointers, the module cache, and the error flag read back from device globals."""
from __future__ import annotations

import contextlib
import shutil

import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F
from nova import config
from nova.runtime.cache import CACHE
from nova.runtime.cuda_runtime import use_backend

# float32 kernels differ from numpy by device libm ulps; TF32 matmuls keep 10 mantissa
# bits per operand (relative error ~1e-3 of the result's scale).
ULPS = dict(rtol=2e-5, atol=2e-6)
TF32 = dict(rtol=3e-3, atol=3e-3)


@pytest.fixture(params=["emulator", pytest.param("gpu", marks=pytest.mark.cuda)])
def on_device(request):
    """``cuda`` served by the emulator backend or by the GPU, with an empty cache."""
    nv.debug.reset_cache()
    if request.param == "emulator":
        if shutil.which("g++") is None:
            pytest.skip("the emulator needs g++ (C++20)")
        from tests.runtime.emulated_cuda import EmulatorBackend
        ctx = use_backend(EmulatorBackend())
    else:
        ctx = contextlib.nullcontext()
    with ctx:
        yield request.param
        with contextlib.suppress(Exception):   # no pending device work past the backend
            nv.realize()
    nv.debug.reset_cache()


def _inputs(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal((4, 33)).astype(np.float32),
        "y": rng.standard_normal((4, 33)).astype(np.float32),
        "w": rng.standard_normal((33, 20)).astype(np.float32),
        "b": rng.standard_normal((3, 4, 16)).astype(np.float32),
        "c": rng.standard_normal((3, 16, 8)).astype(np.float32),
        "i": rng.integers(0, 4, (6,)),
        "t": rng.integers(0, 33, (4,)),
    }


# name -> (function of the input tensors returning tensors, tolerance)
FAMILIES = {
    "unary": (lambda v: [v["x"].exp(), v["x"].abs().log(), v["x"].abs().sqrt(),
                         (v["x"].abs() + 0.5).rsqrt(), v["x"].sin(), v["x"].cos(),
                         v["x"].tanh(), nv.erf(v["x"]), -v["x"], (v["x"] + 9).reciprocal(),
                         v["x"].sigmoid(), F.gelu(v["x"]), F.silu(v["x"]),
                         nv.atan2(v["x"], v["y"]), nv.asin(v["x"].tanh())], ULPS),
    "binary": (lambda v: [v["x"] + v["y"], v["x"] - v["y"], v["x"] * v["y"],
                          v["x"] / (v["y"].abs() + 1), nv.maximum(v["x"], v["y"]),
                          nv.minimum(v["x"], v["y"]), v["x"].abs() ** v["y"],
                          v["x"][:1] * v["y"]], ULPS),
    "compare_where": (lambda v: [v["x"] < v["y"], v["x"] >= 0, v["x"] == v["x"],
                                 nv.where(v["x"] > v["y"], v["x"], v["y"] * 2),
                                 v["x"].masked_fill(v["y"] > 0, -1.0)], ULPS),
    "reductions": (lambda v: [v["x"].sum(), v["x"].sum(dim=1), v["x"].sum(dim=0),
                              v["x"].amax(dim=1), v["x"].max(dim=0).values,
                              v["x"].mean(dim=1, keepdim=True), v["x"].var(dim=1),
                              v["x"].argmax(dim=1), v["b"].sum(dim=(0, 2)),
                              (v["x"] > 0).any(dim=0), (v["x"] > -1).all(dim=1)], ULPS),
    "row_kernels": (lambda v: [v["x"].softmax(dim=-1), v["x"].log_softmax(dim=-1),
                               F.layer_norm(v["x"], (33,)),
                               F.cross_entropy(v["x"], v["t"]),
                               v["x"].logsumexp(dim=1)], ULPS),
    "matmul": (lambda v: [v["x"] @ v["w"], v["b"] @ v["c"], v["w"].T @ v["x"].T,
                          (v["x"] @ v["w"]).relu() + 1.0, v["b"].transpose(1, 2).mT @ v["c"],
                          v["x"].double() @ v["w"].double()], TF32),
    "movement": (lambda v: [v["x"].T.contiguous(), v["b"].permute(2, 0, 1) * 1,
                            v["x"][:, 3:20:2] + 0, nv.cat([v["x"], v["y"]], dim=0) * 1,
                            v["x"].reshape(11, 12) * 1,
                            v["b"].unsqueeze(1).expand(3, 2, 4, 16) * 1], ULPS),
    "indexing": (lambda v: [v["x"][v["i"]], v["w"].gather(0, v["t"].view(4, 1).expand(4, 20)),
                            nv.zeros(4, 33).scatter_add(0, v["i"][:4].view(4, 1).expand(4, 33),
                                                        v["x"]),
                            F.embedding(v["i"], v["w"].T), F.one_hot(v["t"], 33)], ULPS),
    "dtypes": (lambda v: [v["x"].half() * 2, v["x"].bfloat16() + 1, v["x"].half().float(),
                          v["x"].long(), v["i"].float() / 3, v["i"] * 7 - 3,
                          v["x"].double().exp()], ULPS),
    "sorting": (lambda v: [v["x"].sort(dim=-1).indices,
                           (v["x"] * 2).argsort(dim=0, descending=True),
                           v["x"].topk(5).values,
                           v["i"].argsort(stable=True), (v["x"] > 0).sort(descending=True).indices,
                           nv.cat([v["x"], v["x"]]).argsort(dim=0)], ULPS),
    "rounding": (lambda v: [(v["x"] * 3).floor(), (v["x"] * 3).ceil(), (v["x"] * 4).round(),
                            (v["x"] * 3).trunc(), (v["x"] * 3).frac(), v["i"] // 3 - v["i"] % 3,
                            v["x"] // 0.3, v["x"].flip(1), nv.fmod(v["x"] * 9, v["y"]),
                            (v["x"] * 9) % -0.7], ULPS),
    "bitwise": (lambda v: [v["i"] & 6, v["i"] | (v["t"][:1] * 3), v["i"] ^ 5, ~v["i"],
                           ~v["i"].int() & v["i"].int(), (v["x"] > 0) ^ (v["y"] > 0),
                           ~(v["x"] > 0) | (v["y"] < 0)], ULPS),
    "scan": (lambda v: [v["x"].cumsum(1), (v["x"] * 0.5).cumprod(0), v["i"].cumsum(0),
                        v["b"].cumsum(1), (v["x"] > 0).cumsum(1), v["x"].half().cumsum(1)],
             ULPS),
    "windows": (lambda v: _windows(v["b"].reshape(3, 4, 4, 4),
                                   v["c"].reshape(-1)[:72].reshape(2, 4, 3, 3)), TF32),
    "patterns": (lambda v: [nv.arange(10, device=v["x"].device) * 2,
                            nv.ones(3, 3, device="cuda").tril(),
                            v["x"] + nv.arange(33, dtype=nv.float32)], ULPS),
}


def _windows(img, weight):
    """Convolution, pooling and the batch/group norms (composites of the families
    above, checked together as models use them)."""
    return [F.conv2d(img, weight, padding=1, stride=(1, 2)),
            F.max_pool2d(img, 2, 1, 1, return_indices=True)[1],
            F.max_pool2d(img, 3, 2, 1), F.avg_pool2d(img, 3, 2, 1, count_include_pad=False),
            F.adaptive_avg_pool2d(img, 3),
            F.batch_norm(img, None, None, training=True), F.group_norm(img, 2)]


def _run_family(fn, device: str) -> list[np.ndarray]:
    vals = {k: nv.tensor(a, device=device) for k, a in _inputs().items()}
    outs = fn(vals)
    return [o.numpy() for o in outs]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_op_family_matches_the_interpreter(on_device, family):
    fn, tol = FAMILIES[family]
    if family == "patterns":   # ``ones(device="cuda")`` needs no cpu reference device
        got = _run_family(fn, "cuda")
        assert CACHE.last.engine == "cuda"
        with nv.engine("interp"):
            ref = [nv.arange(10).numpy() * 2, np.tril(np.ones((3, 3), np.float32)),
                   _inputs()["x"] + np.arange(33, dtype=np.float32)]
    else:
        with nv.engine("interp"):
            ref = _run_family(fn, "cpu")
        got = _run_family(fn, "cuda")
        assert CACHE.last.engine == "cuda"
    assert len(got) == len(ref)
    for k, (g, r) in enumerate(zip(got, ref)):
        assert g.dtype == r.dtype and g.shape == r.shape, f"{family}[{k}]"
        if r.dtype.kind in "biu":
            np.testing.assert_array_equal(g, r, err_msg=f"{family}[{k}]")
        else:
            np.testing.assert_allclose(g.astype(np.float64), r.astype(np.float64),
                                       err_msg=f"{family}[{k}]",
                                       **(tol if r.dtype.itemsize >= 4 else
                                          dict(rtol=1e-2, atol=1e-2)))


def test_maximum_and_minimum_order_signed_zeros_as_the_interpreter(on_device):
    """``nv_max``/``nv_min`` are IEEE 754-2019's (fmaxf may return either zero): the
    signs of zero agree with the interpreter's, which the tolerance above cannot see."""
    a = np.array([0.0, -0.0, 0.0, -0.0, np.nan, -0.0, -1.0, 3.0], np.float32)
    b = np.array([-0.0, 0.0, 0.0, -0.0, -0.0, np.nan, -0.0, 3.0], np.float32)

    def run(device):
        x, y = nv.tensor(a, device=device), nv.tensor(b, device=device)
        return [o.numpy() for o in (nv.maximum(x, y), nv.minimum(x, y),
                                    nv.maximum(x.double(), y.double()))]
    with nv.engine("interp"):
        ref = run("cpu")
    for g, r in zip(run("cuda"), ref):
        np.testing.assert_array_equal(g, r)
        np.testing.assert_array_equal(np.signbit(g), np.signbit(r))
    assert np.signbit(ref[0]).tolist() == [False, False, False, True, False, False, True, False]


def _grads(device: str) -> list[np.ndarray]:
    v = _inputs(1)
    x = nv.tensor(v["x"], device=device, requires_grad=True)
    w = nv.tensor(v["w"], device=device, requires_grad=True)
    g = nv.tensor(np.linspace(0.5, 1.5, 20, dtype=np.float32), device=device,
                  requires_grad=True)
    t = nv.tensor(v["t"] % 20, device=device)
    h = F.layer_norm(F.gelu(x @ w), (20,), weight=g)
    emb = F.embedding(t, w.T)                    # gather, and scatter_add in the backward
    loss = F.cross_entropy(h, t) + (h.softmax(-1) * emb[:, :20]).sum() + x.exp().mean()
    loss.backward()
    return [loss.numpy(), x.grad.numpy(), w.grad.numpy(), g.grad.numpy()]


def test_gradients_match_the_interpreter(on_device):
    with nv.engine("interp"):
        ref = _grads("cpu")
    got = _grads("cuda")
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, **TF32)


def _attention(device: str, causal: bool, dropout: float, shape) -> list[np.ndarray]:
    batch, L, S, E, Ev = shape
    rng = np.random.default_rng(L + E)
    q, k, v = (nv.tensor(rng.standard_normal(batch + s).astype(np.float32), device=device,
                         requires_grad=True) for s in ((L, E), (S, E), (S, Ev)))
    g = nv.tensor(rng.standard_normal(batch + (L, Ev)).astype(np.float32), device=device)
    nv.manual_seed(3)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=dropout)
    (y * g).sum().backward()
    return [t.numpy() for t in (y, q.grad, k.grad, v.grad)]


@pytest.mark.parametrize("causal,dropout,shape", [
    (True, 0.0, ((2, 3), 45, 45, 16, 16)), (False, 0.0, ((2,), 33, 50, 24, 8)),
    (True, 0.2, ((1, 2), 70, 70, 64, 64))])
def test_fused_attention_and_its_gradients_match_the_interpreter(on_device, causal,
                                                                  dropout, shape):
    """The step runs the CUDA attention kernels (``targets.cuda.attention``): output and
    gradients against the interpreter's composite, dropout's draws included."""
    with nv.engine("interp"), config.FUSED_ATTENTION.overridden("0"):
        ref = _attention("cpu", causal, dropout, shape)
    got = _attention("cuda", causal, dropout, shape)
    exe = CACHE.last
    assert exe.engine == "cuda" and "nova.attention_grad" in exe.fused_ir()
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, ref):
        np.testing.assert_allclose(a, b, rtol=0, atol=3e-3 * np.abs(b).max(), err_msg=name)


def test_composite_attention_on_the_device_is_its_own_executable(on_device):
    """``NOVA_FUSED_ATTENTION=0`` on the cuda engine compiles the composite, not the
    fused step already cached for the same graph (the engine label tells them apart)."""
    shape = ((1, 2), 20, 20, 8, 8)
    fused = _attention("cuda", True, 0.0, shape)
    assert "nova.attention_grad" in CACHE.last.fused_ir()
    with config.FUSED_ATTENTION.overridden("0"):
        composite = _attention("cuda", True, 0.0, shape)
        assert "nova.attention" not in CACHE.last.fused_ir()
    misses = [m for m in nv.debug.cache_stats().miss_log if m.engine.startswith("cuda")]
    assert len(misses) == 2, [m.engine for m in misses]
    for a, b in zip(fused, composite):
        np.testing.assert_allclose(a, b, rtol=0, atol=3e-3 * np.abs(b).max())


def _gpt_losses(device: str, steps: int = 3) -> tuple[list[float], list[np.ndarray]]:
    from models.gpt import GPT, preset

    nv.manual_seed(0)
    cfg = preset("tiny")
    model = GPT(cfg).to(device)
    opt = nv.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(steps):
        x = nv.tensor(rng.integers(0, cfg.vocab, (2, cfg.block)), device=device)
        y = nv.tensor(rng.integers(0, cfg.vocab, (2, cfg.block)), device=device)
        _, loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses, [p.numpy() for p in model.parameters()]


@pytest.mark.slow
def test_gpt_tiny_training_matches_the_cpu_engine(on_device):
    got, got_params = _gpt_losses("cuda")
    misses = [m for m in nv.debug.cache_stats().miss_log if m.engine == "cuda"]
    assert len(misses) == 1, [m.reason for m in misses]      # compiled once, replayed
    want, want_params = _gpt_losses("cpu")
    np.testing.assert_allclose(got, want, rtol=2e-3)
    for a, b in zip(got_params, want_params):
        np.testing.assert_allclose(a, b, rtol=0, atol=5e-3)   # 3 AdamW steps of lr 1e-3


# ---------------------------------------------------------------- the GPU only

@pytest.mark.cuda
def test_gpu_tensors_are_cupy_arrays_and_steps_donate_device_memory():
    import cupy

    from nova.runtime.cuda_runtime import CupyBackend, backend

    nv.debug.reset_cache()
    assert nv.cuda.is_available() and nv.cuda.device_count() == 1
    assert isinstance(backend(), CupyBackend)
    lin = nv.nn.Linear(64, 64).cuda()
    assert isinstance(lin.weight.node.buffer, cupy.ndarray)
    opt = nv.optim.SGD(lin.parameters(), lr=0.1)
    x = nv.randn(8, 64, device="cuda")
    ptrs = []
    for _ in range(3):
        lin(x).square().mean().backward()
        opt.step()
        opt.zero_grad()
        ptrs.append(lin.weight.node.buffer.data.ptr)
    # the update is written over the old weight: the same device memory every step
    assert ptrs[1] == ptrs[2] and len(CACHE.last.last_donated) == 2
    assert CACHE.last.memory_report().peak_bytes > 0


@pytest.mark.cuda
def test_gpu_index_error_is_reported_from_the_device_flag_and_cleared():
    nv.debug.reset_cache()
    table = nv.randn(4, 3, device="cuda")
    bad = nv.tensor([0, 9], device="cuda")
    with pytest.raises(nv.RealizationError, match="cuda: kernel .* reported an index out of "
                                                  "range"):
        table[bad].sum().item()
    good = nv.tensor([0, 3], device="cuda")
    np.testing.assert_allclose(table[good].sum().item(),
                               table.numpy()[[0, 3]].sum(), rtol=1e-5)


@pytest.mark.cuda
def test_gpu_kernels_load_once_per_process():
    from nova.runtime.cuda_runtime import backend

    nv.debug.reset_cache()
    x = nv.randn(256, 256, device="cuda")
    (x * 2 + 1).exp().sum().item()
    loaded = len(backend()._modules)
    nv.debug.reset_cache()                  # a new executable, the same kernels
    (x * 2 + 1).exp().sum().item()
    assert len(backend()._modules) == loaded

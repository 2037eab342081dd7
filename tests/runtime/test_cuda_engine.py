"""``device="cuda"`` and the cuda engine, without a GPU: the emulator backend
(``tests/runtime/emulated_cuda.py``) runs the generated CUDA C on the CPU with numpy
arrays as device memory, so device placement, the compile pipeline, the arena, donation,
the error flags and launch order are checked here against the interpreter and the CPU
engine. What only a GPU can check (CuPy memory, RawModule launches, timing, device libm)
is in ``test_cuda_gpu.py`` (marked ``cuda``)."""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import nova as nv
from nova.runtime import cuda_runtime
from nova.runtime.cache import CACHE
from nova.runtime.cuda_runtime import CudaCompileError, use_backend
from tests.runtime.emulated_cuda import EmulatorBackend

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (C++20)")

# TF32 tensor-core matmuls keep 10 mantissa bits of each operand.
TF32 = dict(rtol=3e-3, atol=3e-3)


@pytest.fixture
def emu():
    """The emulator installed as the cuda backend, with an empty executable cache."""
    nv.debug.reset_cache()
    with use_backend(EmulatorBackend()) as backend:
        yield backend
        # Pending device work must not outlive its backend (a later CPU test's
        # realization would pick it up); a failure here was already the test's own.
        with contextlib.suppress(Exception):
            nv.realize()
    nv.debug.reset_cache()


def test_import_nova_does_not_import_cupy():
    code = "import sys, nova; assert 'cupy' not in sys.modules, 'import nova loaded cupy'"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    subprocess.run([sys.executable, "-c", code], check=True,
                   env={**os.environ, "PYTHONPATH": root})


@pytest.mark.skipif(cuda_runtime.is_available(), reason="a GPU is present")
def test_without_a_gpu_cuda_is_unavailable_and_says_why():
    reason = nv.cuda.unavailable_reason()
    assert not nv.cuda.is_available() and nv.cuda.device_count() == 0
    assert reason.startswith(("cupy is not installed", "no GPU"))
    for make in (lambda: nv.zeros(2, device="cuda"), lambda: nv.tensor([1.0]).cuda(),
                 lambda: nv.nn.Linear(2, 2).to("cuda")):
        with pytest.raises(RuntimeError, match="CUDA is not available: (cupy|no GPU)"):
            make()


@needs_gxx
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32",
                                   "int64", "bool"])
def test_round_trip_keeps_values_and_dtype(emu, dtype):
    rng = np.random.default_rng(0)
    host = nv.tensor(rng.standard_normal((3, 5)) * 4, dtype=getattr(nv, dtype)
                     if dtype != "bool" else nv.bool)
    x = host.to("cuda")
    assert x.device == nv.device("cuda") and str(x.device) == "cuda" and x.is_cuda
    assert x.dtype == host.dtype and x.shape == (3, 5)
    back = x.cpu()
    assert back.device == nv.device("cpu") and not back.is_cuda
    np.testing.assert_array_equal(back.numpy(), host.numpy())
    np.testing.assert_array_equal(x.numpy(), host.numpy())
    assert x.cuda() is x and host.cpu() is host
    assert host.to(x).device == nv.device("cuda") and x.to(host).device == nv.device("cpu")
    # PyTorch's order: the device, then a dtype that is not a default one
    suffix = "device='cuda:0')" if dtype in ("float32", "int64", "bool") else \
        f"device='cuda:0', dtype=nova.{dtype})"
    # (a suffix past the line width goes on a line of its own, as PyTorch's)
    assert " ".join(repr(x).split()).endswith(suffix) and "device" not in repr(host)
    assert nv.tensor(2.5, device="cuda").item() == 2.5


@needs_gxx
def test_creation_on_the_device_matches_the_cpu(emu):
    for make in (lambda d: nv.zeros(2, 3, device=d), lambda d: nv.ones(4, device=d),
                 lambda d: nv.full((2, 2), 7.0, device=d),
                 lambda d: nv.arange(3, 11, 2, device=d),
                 lambda d: nv.arange(0.5, 2.0, 0.25, device=d)):
        on_gpu, on_cpu = make("cuda"), make("cpu")
        assert on_gpu.device == nv.device("cuda") and on_cpu.device == nv.device("cpu")
        np.testing.assert_array_equal(on_gpu.numpy(), on_cpu.numpy())
    # the counter-based generator draws the same bits on either device
    for draw, tol in ((nv.rand, 0.0), (nv.randn, 1e-5)):
        nv.manual_seed(3)
        a = draw(64, device="cuda")
        nv.manual_seed(3)
        b = draw(64)
        assert a.device == nv.device("cuda")
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tol, atol=tol)
    nv.manual_seed(3)
    k = nv.randint(0, 10, (50,), device="cuda")
    nv.manual_seed(3)
    np.testing.assert_array_equal(k.numpy(), nv.randint(0, 10, (50,)).numpy())
    x = nv.ones(3, device="cuda")
    assert nv.zeros_like(x).device == nv.device("cuda") and nv.rand_like(x).is_cuda
    assert nv.zeros_like(x, device="cpu").device == nv.device("cpu")


@needs_gxx
def test_mixing_devices_names_the_op_and_both_devices(emu):
    a = nv.ones(2, 3, device="cuda")
    b = nv.tensor(np.ones((2, 3), np.float32))
    with pytest.raises(RuntimeError, match="add: expected all tensors to be on the same "
                                           "device, but found at least two devices, cuda "
                                           "and cpu"):
        a + b
    with pytest.raises(RuntimeError, match="same device.*cpu and cuda"):
        b.T @ a
    # scalars and pending constants (no device yet) follow the tensor they meet
    np.testing.assert_array_equal(((a + 1.5) * nv.full((2, 3), 2.0)).numpy(),
                                  np.full((2, 3), 5.0, np.float32))


@needs_gxx
def test_op_families_match_the_interpreter(emu):
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((6, 40)).astype(np.float32)
    ws = rng.standard_normal((40, 24)).astype(np.float32)
    idx = rng.integers(0, 6, (5,))

    def program(x, w, i):
        h = (x @ w).relu() + x[:, :24].exp() * 0.1
        s = h.softmax(dim=-1)
        ln = nv.nn.functional.layer_norm(h, (24,))
        picked = s[i]                                  # gather
        col = h.sum(dim=0, keepdim=True)               # column reduction
        big = nv.where(h > 0, h.tanh(), -h.sqrt().abs())
        return [s, ln, picked, col, big.max(dim=1).values, h.half().float(),
                nv.cat([h, -h], dim=1).mean(dim=0)]

    with nv.engine("interp"):
        ref = [t.numpy() for t in program(nv.tensor(xs), nv.tensor(ws), nv.tensor(idx))]
    out = program(nv.tensor(xs, device="cuda"), nv.tensor(ws, device="cuda"),
                  nv.tensor(idx, device="cuda"))
    assert all(t.device == nv.device("cuda") for t in out)
    nv.realize(*out)
    assert CACHE.last.engine == "cuda" and CACHE.last.num_kernels >= 5
    for got, want in zip(out, ref):
        np.testing.assert_allclose(got.numpy(), want, **TF32)


def _train(device, opt_name="adamw", steps=3, keep_old=False):
    nv.manual_seed(0)
    model = nv.nn.Sequential(nv.nn.Linear(8, 32), nv.nn.GELU(), nv.nn.Dropout(0.1),
                             nv.nn.Linear(32, 3))
    weight = model[0].weight
    model.to(device)
    assert model[0].weight is weight and weight.requires_grad   # moved in place
    opt = (nv.optim.AdamW(model.parameters(), lr=1e-2) if opt_name == "adamw"
           else nv.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    rng = np.random.default_rng(0)
    losses, donated, kept = [], [], []
    for _ in range(steps):
        x = nv.tensor(rng.standard_normal((16, 8)).astype(np.float32), device=device)
        y = nv.tensor(rng.integers(0, 3, 16), device=device)
        loss = nv.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if keep_old:
            kept.append([p.clone() for p in model.parameters()])
        opt.step()
        opt.zero_grad()
        donated.append(len(CACHE.last.last_donated))
        losses.append(loss.item())
    return losses, [p.numpy() for p in model.parameters()], donated, model


@needs_gxx
def test_training_steps_match_the_cpu_engine_compile_once_and_donate(emu):
    losses, params, donated, model = _train("cuda", "sgd")
    assert all(p.device == nv.device("cuda") for p in model.parameters())
    cuda_misses = [m for m in nv.debug.cache_stats().miss_log if m.engine == "cuda"]
    assert emu.loads == 1 and len(cuda_misses) == 1      # compiled once, replayed twice
    exe = CACHE.last
    assert exe.engine == "cuda" and len(emu.launches) == 3 * exe.num_kernels
    # every parameter is written over in place, every step (a momentum buffer only
    # where its update is not fused into the kernel computing its gradient)
    param_args = {a for a, role in enumerate(exe.last_roles) if role == "parameter"}
    assert len(param_args) == 4 and param_args <= exe.last_donated
    assert donated[0] == donated[1] == donated[2] >= 4
    # intermediates are views of the one arena the plan sized
    prog = exe._program
    assert prog._arena_buffer.nbytes == max(prog.memory_plan.arena_bytes, 1)
    assert prog._views and all(np.shares_memory(v, prog._arena_buffer)
                               for v in prog._views.values())
    assert exe.memory_report().peak_bytes > 0
    ref_losses, ref_params, _, _ = _train("cpu", "sgd")
    np.testing.assert_allclose(losses, ref_losses, **TF32)
    for a, b in zip(params, ref_params):
        np.testing.assert_allclose(a, b, **TF32)
    # parameters whose old values the user keeps are not written over (the rest is as
    # before), and the step computes the same bits
    nv.debug.reset_cache()
    held_losses, held_params, held_donated, _ = _train("cuda", "sgd", keep_old=True)
    assert held_donated == [d - len(param_args) for d in donated]
    assert held_losses == losses
    for a, b in zip(held_params, params):
        np.testing.assert_array_equal(a, b)


@needs_gxx
def test_adamw_step_on_the_device(emu):
    losses, _, donated, _ = _train("cuda", "adamw")
    ref, _, _, _ = _train("cpu", "adamw")
    assert donated[1:] == [12, 12]     # parameters and both moments
    np.testing.assert_allclose(losses, ref, **TF32)
    assert losses[-1] < losses[0]


@needs_gxx
def test_cpu_and_cuda_steps_never_share_an_executable(emu):
    def step(device):
        x = nv.tensor(np.arange(6, dtype=np.float32), device=device)
        return (x * 2).sum().item()
    assert step("cpu") == step("cuda") == step("cpu") == step("cuda") == 30.0
    stats = nv.debug.cache_stats()
    assert stats.misses == 2 and stats.hits == 2
    assert "device changed: cpu -> emulator:sm_80" in stats.miss_log[-1].reason


@needs_gxx
def test_pending_work_on_both_devices_realizes_as_two_steps(emu):
    a = nv.ones(4, device="cuda") * 3
    b = nv.ones(4) * 5
    c = nv.full((4,), 2.0)           # device-less: the CPU's unless it meets the GPU
    d = a + c
    nv.realize(b)                    # computes all live pending work, per device
    assert a.node.realized and b.node.realized and d.node.realized
    assert a.device == d.device == nv.device("cuda") and c.device == nv.device("cpu")
    np.testing.assert_array_equal(d.numpy(), np.full(4, 5.0, np.float32))
    np.testing.assert_array_equal(b.numpy() + c.numpy(), np.full(4, 7.0, np.float32))


@needs_gxx
def test_an_index_error_raises_names_the_kernel_and_spares_later_steps(emu):
    table = nv.tensor(np.arange(12, dtype=np.float32).reshape(4, 3), device="cuda")
    bad = nv.tensor(np.array([0, 7]), device="cuda")
    out = (table[bad] * 2).sum()
    with pytest.raises(nv.RealizationError, match=r"cuda: kernel \w+ \(\w+\) reported an "
                                                  "index out of range"):
        out.item()
    with pytest.raises(nv.RealizationError):    # the failed value stays failed
        out.item()
    good = nv.tensor(np.array([0, 3]), device="cuda")
    assert (table[good] * 2).sum().item() == 2 * (0 + 1 + 2 + 9 + 10 + 11)


@needs_gxx
def test_a_kernel_that_cannot_be_generated_raises_naming_it(emu, monkeypatch):
    from nova.compiler.targets.cuda import CudaTarget

    def broken(self, plan):
        raise ValueError("no strategy")
    monkeypatch.setattr(CudaTarget, "emit", broken)   # the engine emits through its target
    x = nv.ones(3, device="cuda") * 2
    with pytest.raises(CudaCompileError, match=r"no CUDA C for kernel (\w+) .*no strategy; "
                                               "its fused IR is in ") as info:
        x.numpy()
    path = str(info.value).rsplit("in ", 1)[1]
    assert os.path.exists(path)


@needs_gxx
def test_moving_a_tensor_that_requires_grad_is_refused(emu):
    w = nv.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="to: cannot move a tensor that requires grad "
                                           "from cpu to cuda"):
        w.to("cuda")
    with pytest.raises(RuntimeError, match="cannot move"):
        (w * 2).cuda()
    moved = w.detach().to("cuda").requires_grad_()
    (moved * moved).sum().backward()
    assert moved.grad.device == nv.device("cuda")
    np.testing.assert_array_equal(moved.grad.numpy(), np.full(3, 2.0, np.float32))


def test_cupy_backend_names_a_kernel_nvrtc_rejects_and_dumps_its_source(tmp_path,
                                                                        monkeypatch):
    """The GPU backend's compile path up to NVRTC runs without a GPU (CuPy only loads
    the cubin afterwards): a kernel that does not compile raises naming it and the file
    holding its source; the flag-gathering kernel compiles for every supported arch."""
    pytest.importorskip("cupy")
    from nova.compiler.targets.cuda.device import SPECS
    from nova.runtime import nvrtc
    from nova.runtime.cuda_runtime import FLAG_GATHER_SOURCE, CupyBackend

    if not nvrtc.available():
        pytest.skip("NVRTC is not installed")
    monkeypatch.setenv("NOVA_DEBUG_DIR", str(tmp_path))
    be = CupyBackend()
    be._spec = SPECS["sm_80"]
    with pytest.raises(CudaCompileError, match="cuda: kernel broken_k did not compile for "
                                               "sm_80; its source is in (.*broken_k.sm_80.cu)"):
        be._module('extern "C" __global__ void broken_k() { undeclared(); }', "broken_k",
                   "broken_k")
    assert (tmp_path / "cuda-failed" / "broken_k.sm_80.cu").exists()
    for arch in SPECS:
        assert nvrtc.compile(FLAG_GATHER_SOURCE, arch, name="flags.cu").cubin



@needs_gxx
def test_checkpoints_load_into_a_model_on_the_device(emu, tmp_path):
    nv.manual_seed(0)
    model = nv.nn.Linear(4, 3).cuda()
    opt = nv.optim.AdamW(model.parameters(), lr=1e-2)
    x = nv.randn(2, 4, device="cuda")
    model(x).sum().backward()
    opt.step()
    nv.save({"model": model.state_dict(), "opt": opt.state_dict()}, tmp_path / "ck.nv")
    ck = nv.load(tmp_path / "ck.nv")
    fresh = nv.nn.Linear(4, 3).cuda()
    fresh_opt = nv.optim.AdamW(fresh.parameters(), lr=1e-2)
    fresh.load_state_dict(ck["model"])            # CPU values copied into GPU parameters
    fresh_opt.load_state_dict(ck["opt"])
    assert all(p.device == nv.device("cuda") for p in fresh.parameters())
    assert all(v.device == nv.device("cuda") for s in fresh_opt.state.values()
               for v in s.values() if isinstance(v, nv.Tensor))
    np.testing.assert_array_equal(fresh.weight.numpy(), model.weight.numpy())
    w = nv.zeros(3, device="cuda")
    w.copy_(nv.ones(3))                           # a constant written into a GPU tensor
    w.copy_(nv.tensor([1.0, 2.0, 3.0]))           # a CPU tensor copied across
    assert w.device == nv.device("cuda") and w.numpy().tolist() == [1.0, 2.0, 3.0]
    for _ in range(2):                            # and training continues on the GPU
        fresh(x).sum().backward()
        assert fresh.bias.grad.device == nv.device("cuda")   # (a gradient of constants)
        fresh_opt.step()
        fresh_opt.zero_grad()
    assert CACHE.last.engine == "cuda"


@needs_gxx
def test_a_step_over_the_memory_limit_raises_with_the_plan(emu):
    x = nv.tensor(np.full((64, 64), 0.01, np.float32), device="cuda")
    y = ((x @ x).exp() @ x).sum()
    nv.debug.set_memory_limit(4096)
    try:
        with pytest.raises(nv.NovaOutOfMemoryError, match=r"nova: out of memory: the CUDA step needs "
                                                          r"[\d.]+ MiB, more than the memory "
                                                          r"limit"):
            y.item()
    finally:
        nv.debug.set_memory_limit(None)
    # within the limit the same step runs: 64 * 64 entries of 64 * e^0.0064 * 0.01 (TF32
    # operands: 0.01 keeps 10 mantissa bits)
    assert y.item() == pytest.approx(4096 * 64 * np.exp(0.0064) * 0.01, rel=3e-3)


@needs_gxx
def test_a_donating_step_refused_for_memory_leaves_its_values_pending(emu):
    """The arena is allocated before any launch, so a step over the memory limit has
    written nothing over the buffers donated to it: its values stay pending (as on the
    CPU) and are computed once the limit is lifted, from the intact old values."""
    w0 = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    w = nv.tensor(w0, device="cuda")
    w.mul_(0.5).add_(1.0)                    # one pointwise kernel: over the old w
    nv.debug.set_memory_limit(4096)
    try:
        with pytest.raises(nv.NovaOutOfMemoryError):
            nv.realize(w)
        assert CACHE.last.last_donated              # the old w was donated to the update
    finally:
        nv.debug.set_memory_limit(None)
    np.testing.assert_array_equal(w.numpy(), w0 * np.float32(0.5) + np.float32(1.0))


@needs_gxx
def test_a_concat_of_four_inputs_reads_each_of_them(emu):
    """Regression: the concat's in-range tests were named ``in<n>`` like the kernel's
    parameters, so the fourth one, ``in3``, shadowed the fourth input (a DDP gradient
    bucket of a Linear(8, 1) model did not compile)."""
    shapes = [(1, 8), (8, 6), (1,), (8,)]
    host = [np.full(s, i + 1.0, np.float32) for i, s in enumerate(shapes)]
    flat = nv.cat([(nv.tensor(h, device="cuda") * 1.0).reshape(-1) for h in host])
    expected = np.concatenate([h.reshape(-1) for h in host])
    np.testing.assert_array_equal(flat.cpu().numpy(), expected)

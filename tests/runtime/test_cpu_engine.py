"""The compiled cpu engine against the interpreter, and its caches, threads and tools."""
import os
import subprocess
import sys
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nova as nv
from nova.compiler.irgen import build_module
from nova.compiler.lowering import plan_kernels
from nova.compiler.passes import simplify
from nova.compiler.passes.fusion import fuse
from nova.runtime.compile_worker import vector_tuning
from nova.runtime.kernel_cache import KERNELS
from nova.tensor.realize import pending_graph

ROOT = Path(__file__).resolve().parents[2]


def both(fn):
    """``fn()`` realized on the interpreter and on the cpu engine."""
    out = []
    for engine in ("interp", "cpu"):
        with nv.engine(engine):
            res = fn()
            res = res if isinstance(res, (list, tuple)) else [res]
            out.append([r.numpy() for r in res])
    return out


UNARY = ["exp", "tanh", "sigmoid", "relu", "gelu", "neg", "abs", "sin"]
BINARY = ["add", "sub", "mul", "maximum", "minimum", "div"]


@st.composite
def programs(draw):
    """A random program over 2-3 inputs: elementwise, broadcasting, reductions,
    movement, matmul, gather and softmax, ending in a scalar whose gradient is taken."""
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    rows, cols = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    steps = draw(st.lists(st.tuples(st.sampled_from(
        ["unary", "binary", "bcast", "reduce", "transpose", "reshape", "slice", "matmul",
         "gather", "softmax", "where"]), st.integers(0, 10**6)), min_size=1, max_size=8))
    data = [rng.uniform(-2, 2, (rows, cols)).astype(np.float32),
            rng.uniform(-2, 2, (cols,)).astype(np.float32),
            rng.uniform(-2, 2, (cols, cols)).astype(np.float32)]

    def program():
        a, v, m = (nv.tensor(x, requires_grad=True) for x in data)
        x = a
        for kind, r in steps:
            if kind == "unary":
                x = getattr(nv, UNARY[r % len(UNARY)])(x)
            elif kind == "binary":
                x = getattr(nv, BINARY[r % len(BINARY)])(x, x * 0.5 + 3.0 if r % 2 else 1.5)
            elif kind == "bcast" and x.shape[-1] == cols:
                x = x * v + v.unsqueeze(0) if x.ndim == 2 else x * v
            elif kind == "reduce" and x.ndim == 2:
                x = [x.sum(r % 2, keepdim=True), x.amax(-1, keepdim=True),
                     x.mean((0, 1), keepdim=True), x.var(0, keepdim=True)][r % 4] + x
            elif kind == "transpose" and x.ndim == 2:
                x = x.T.contiguous().T * 1.0
            elif kind == "reshape":
                x = x.reshape(-1).reshape(x.shape) + 0.25
            elif kind == "slice" and x.ndim == 2 and x.shape[1] > 1:
                x = x[:, ::2].sum(-1, keepdim=True) + x
            elif kind == "matmul" and x.ndim == 2 and x.shape[-1] == cols:
                x = (x @ m if r % 2 else x @ m.T).tanh()
            elif kind == "gather" and x.ndim == 2:
                order = np.roll(np.arange(x.shape[0]), r % (x.shape[0] + 1))
                x = x[nv.tensor(order)] * 1.0
            elif kind == "softmax" and x.ndim == 2:
                x = x.softmax(-1) if r % 2 else x.log_softmax(0)
            elif kind == "where":
                x = nv.where(x > 0.1, x, x * -0.5)
        loss = (x * x).sum() if x.ndim else x * x
        grads = nv.autograd.grad(loss, [a, v, m], allow_unused=True)
        return [x] + [g for g in grads if g is not None]

    return program


@settings(max_examples=25)
@given(program=programs())
def test_cpu_engine_matches_interpreter_on_random_programs(program):
    """Results that pass through sums, matmuls or softmax are allowed rtol 1e-4: the cpu
    engine accumulates in a different order (vectorized, in float64 for sums) than
    numpy's pairwise summation, and float32 rounds each differently. The absolute
    tolerance is 1e-5 of the scale at which float32 rounding happens: the largest entry
    of the array, or of the upstream gradient 2x of the loss sum(x^2), whichever is
    larger, because a gradient's small entries are often differences of terms of that
    size (softmax's backward subtracts sum(g p) from g), where rounding-order noise of
    the large terms is all that separates the engines. Gradients get rtol 1e-3: backward
    formulas such as tanh' = 1 - y^2 amplify a 1-ulp difference in the forward y (the
    engines' tanh and exp differ by up to one ulp) by 1 / (1 - y^2) near saturation.
    NaN and infinite entries (a log_softmax of a -inf, say) must appear in both alike."""
    interp, cpu = both(program)

    def largest(a: np.ndarray) -> float:   # NaN/inf entries must match, not set scales
        finite = np.abs(a[np.isfinite(a)])
        return float(finite.max()) if finite.size else 0.0
    upstream = 2.0 * largest(interp[0])
    for k, (a, b) in enumerate(zip(interp, cpu)):
        scale = 1.0 + max(largest(a), upstream)
        np.testing.assert_allclose(b, a, rtol=1e-4 if k == 0 else 1e-3, atol=1e-5 * scale)


def test_elementwise_chains_are_bit_faithful_to_float32_rounding():
    x = np.linspace(-3, 3, 1001, dtype=np.float32)
    interp, cpu = both(lambda: ((nv.tensor(x) * 1.7 + 0.3) / 2.1 - nv.tensor(x)).abs())
    np.testing.assert_allclose(cpu[0], interp[0], rtol=1e-6, atol=0)


def test_gpt_training_step_fuses_into_far_fewer_kernels_and_matches(tmp_path):
    from models.gpt import GPT, preset
    graphs = {}
    for engine in ("interp", "cpu"):
        with nv.engine(engine):
            nv.manual_seed(0)
            model = GPT(preset("tiny"))
            opt = nv.optim.AdamW(model.parameters(), lr=1e-3)
            rng = np.random.default_rng(0)
            x = nv.tensor(rng.integers(0, 256, (2, 32)))
            _, loss = model(x, x)
            loss.backward()
            nv.debug.reset_cache()
            opt.step()
            opt.zero_grad()         # (the step runs here: realize.end_of_step)
            miss = nv.debug.cache_stats().miss_log[0]
            graphs[engine] = (loss.item(), model.wte.weight.numpy(), miss)
    (l1, w1, _), (l2, w2, m2) = graphs["interp"], graphs["cpu"]
    assert l1 == pytest.approx(l2, rel=1e-6)
    np.testing.assert_allclose(w2, w1, rtol=1e-4, atol=1e-6)
    print(f"GPT tiny training step: {m2.num_ops} primitive ops -> {m2.num_kernels} kernels")
    assert m2.num_kernels * 2 < m2.num_ops


def test_warm_disk_cache_replays_without_llvm(tmp_path):
    script = (
        "import numpy as np, nova as nv\n"
        "from nova.runtime.kernel_cache import KERNELS\n"
        "x = nv.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))\n"
        "print(((x @ x.T).softmax(-1) * 2).sum().item())\n"
        "print('STATS', KERNELS.stats.compiled, KERNELS.stats.disk_hits)\n")
    env = {**os.environ, "NOVA_CACHE_DIR": str(tmp_path), "NOVA_ENGINE": "cpu"}

    def run():
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                             text=True, check=True).stdout
        value, stats = out.splitlines()
        return float(value), tuple(int(n) for n in stats.split()[1:])

    v1, (compiled1, hits1) = run()
    v2, (compiled2, hits2) = run()
    assert compiled1 > 0 and hits1 == 0
    assert compiled2 == 0 and hits2 == compiled1 and v1 == v2
    for obj in Path(tmp_path).rglob("*.o"):
        obj.write_bytes(obj.read_bytes()[:-7] + b"garbage")   # corrupt every entry
    v3, (compiled3, hits3) = run()
    assert compiled3 == compiled1 and hits3 == 0 and v3 == v1   # detected and recompiled


def test_kernels_are_shared_between_step_functions():
    x = nv.tensor(np.ones((5, 7), np.float32))
    (x.exp() * 3).sum().item()
    before = KERNELS.stats.compiled + KERNELS.stats.disk_hits
    y = nv.tensor(np.ones((5, 7), np.float32))
    ((y.exp() * 3).sum(), (y + 1).sum())[0].item()   # a different step with a shared kernel
    assert KERNELS.stats.memory_hits > 0
    assert KERNELS.stats.compiled + KERNELS.stats.disk_hits - before <= 2


def test_thread_count_does_not_change_results():
    x = np.random.default_rng(0).standard_normal((512, 300)).astype(np.float32)
    results = []
    for n in (1, 2, 3):
        nv.set_num_threads(n)
        nv.debug.reset_cache()
        results.append((nv.tensor(x).softmax(-1) * 2 + nv.tensor(x).sum(0)).numpy())
    nv.set_num_threads(2)
    again = (nv.tensor(x).softmax(-1) * 2 + nv.tensor(x).sum(0)).numpy()  # compiled with 3
    nv.set_num_threads(os.cpu_count() or 1)
    np.testing.assert_array_equal(results[0], again)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])
    assert nv.get_num_threads() == (os.cpu_count() or 1)
    with pytest.raises(ValueError, match="set_num_threads: expected a positive int"):
        nv.set_num_threads(0)


def test_fused_dump_profile_and_debug_files(tmp_path):
    x = nv.tensor(np.ones((8, 8), np.float32))
    y = nv.gelu(x @ x + 1.0).sum()
    fused = nv.debug.dump_ir(y, stage="fused")
    assert '"nova.fusion"' in fused and "matmul/" in fused and "parallel_dim" in fused
    paths = nv.debug.dump(str(tmp_path), y)
    assert [Path(p).name for p in paths] == ["step.nova.mlir", "step.fused.mlir", "step.ll"]
    step_ll = Path(paths[2]).read_text()
    assert 'define i32 @"nova_k_' in step_ll
    # the tiled product's kernel calls the shared GEMM driver, whose IR follows
    assert "tiled" in fused and 'define i32 @"nova_sgemm_' in step_ll
    with nv.debug.profile() as prof:
        y.item()
    assert len(prof.steps) == 1 and prof.total() > 0 and "matmul" in prof.report()
    env = {**os.environ, "NOVA_DEBUG": "1", "NOVA_DEBUG_DIR": str(tmp_path / "dbg")}
    subprocess.run([sys.executable, "-c", "import nova as nv; (nv.ones(3) * 2).sum().item()"],
                   env=env, check=True, capture_output=True)
    written = list((tmp_path / "dbg").rglob("step.ll"))
    assert written and "nova_k_" in written[0].read_text()


def test_elementwise_kernels_vectorize_for_the_host():
    """A row-broadcast kernel (rows of 64: no remainder) and a flat one (a run-time
    trip count, whose remainder LLVM may vectorize at half the width)."""
    x = nv.tensor(np.ones((64, 64), np.float32))
    row = nv.tensor(np.arange(64, dtype=np.float32))
    for out, flat in ((x * 2.0 + row, False), (x * 2.0 + 1.0, True)):
        module = fuse(simplify(build_module(pending_graph(out))))
        (plan,) = plan_kernels(module)
        assert plan.schedule.flat == flat
        ir = str(KERNELS.optimized(plan))
        assert " x float>" in ir   # LLVM's vectorizer used the host's vector width
        if llvm.get_host_cpu_features().get("avx512f"):
            # all of it: LLVM's 256-bit preference for AVX-512 hosts is lifted
            assert "<16 x float>" in ir and (flat or "<8 x float>" not in ir)


def test_vector_tuning_lifts_the_256_bit_preference_on_avx512_hosts_only():
    assert vector_tuning("+avx2,+avx512f,+fma") == "+avx2,+avx512f,+fma,-prefer-256-bit"
    assert vector_tuning("+avx2,-avx512f,+fma") == "+avx2,-avx512f,+fma"
    assert vector_tuning("+avx512fp16,+avx2") == "+avx512fp16,+avx2"   # not avx512f


def test_engine_selection():
    assert nv.get_engine() in ("cpu", "interp")
    with pytest.raises(ValueError, match="set_engine: unknown engine 'gpu'"):
        nv.set_engine("gpu")
    with nv.engine("interp"):
        assert nv.get_engine() == "interp"


def test_disk_cache_can_be_disabled(tmp_path):
    script = ("import nova as nv\n"
              "from nova.runtime.kernel_cache import KERNELS\n"
              "print((nv.ones(4) * 3).sum().item(), KERNELS.stats.compiled)\n")
    env = {**os.environ, "NOVA_CACHE_DIR": str(tmp_path), "NOVA_CACHE": "0"}
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                             text=True, check=True).stdout.split()
        assert out == ["12.0", "1"]   # compiled every time, nothing written
    assert not any(Path(tmp_path).rglob("*.o"))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_column_sums_split_over_the_innermost_axis_match_numpy(threads):
    # A bias-gradient-shaped reduction: the kept axis is innermost, so each thread takes a
    # range of columns and streams whole rows into its accumulators.
    x = np.random.default_rng(threads).standard_normal((5, 7, 131)).astype(np.float32)
    prev = nv.get_num_threads()
    nv.set_num_threads(threads)
    try:
        got = (nv.tensor(x) * 2).sum(dim=(0, 1)).numpy()
    finally:
        nv.set_num_threads(prev)
    np.testing.assert_allclose(got, (x.astype(np.float64) * 2).sum(axis=(0, 1)), rtol=1e-6)


@pytest.mark.parametrize("cols", [1, 16, 37, 200])
def test_vectorized_max_reductions_still_propagate_nan(cols):
    # Maxima accumulate with maxnum plus a "saw a NaN" flag so LLVM vectorizes them; a NaN
    # anywhere in a row (first lane, a vector body, the remainder) must still win.
    x = np.random.default_rng(cols).standard_normal((5, cols)).astype(np.float32)
    x[0, 0] = np.nan
    x[1, cols // 2] = np.nan
    x[2, cols - 1] = np.nan
    x[3, :] = -np.inf
    t = nv.tensor(x)
    np.testing.assert_array_equal(t.amax(1).numpy(), np.max(x, 1))
    np.testing.assert_array_equal((t * 2).amax(1).numpy(), np.max(x * 2, 1))   # rows kernel
    s = t.softmax(-1).numpy()
    assert np.isnan(s[:4]).all() and not np.isnan(s[4]).any()

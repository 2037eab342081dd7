"""matmul against numpy: 1-D promotion, batched, broadcast batch dims."""
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import nova as nv
from nova.compiler.lowering.plan import TEAM_CLOSED
from tests.helpers import arrays, assert_close


@st.composite
def matmul_shapes(draw):
    m, k, n = (draw(st.integers(1, 6)) for _ in range(3))
    kind = draw(st.sampled_from(["vv", "vm", "mv", "mm", "batched"]))
    if kind == "vv":
        return (k,), (k,)
    if kind == "vm":
        return (k,), tuple(draw(st.lists(st.integers(1, 3), max_size=2))) + (k, n)
    if kind == "mv":
        return tuple(draw(st.lists(st.integers(1, 3), max_size=2))) + (m, k), (k,)
    if kind == "mm":
        return (m, k), (k, n)
    batch = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    a_batch = [draw(st.sampled_from([b, 1])) for b in batch]
    b_batch = [draw(st.sampled_from([b, 1])) for b in batch][draw(st.integers(0, len(batch))):]
    return tuple(a_batch) + (m, k), tuple(b_batch) + (k, n)


@given(shapes=matmul_shapes(), data=st.data(), dtype=st.sampled_from([np.float32, np.float64]))
def test_matmul_matches_numpy(shapes, data, dtype):
    a = data.draw(arrays(shapes[0], dtype))
    b = data.draw(arrays(shapes[1], dtype))
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    out = nv.tensor(a) @ nv.tensor(b)
    assert out.dtype == nv.tensor(a).dtype
    assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_integer_matmul_and_methods():
    a = nv.tensor([[1, 2], [3, 4]])
    assert (a @ a).tolist() == [[7, 10], [15, 22]]
    assert a.matmul(a).tolist() == nv.mm(a, a).tolist()


@pytest.mark.parametrize("a,b,message", [
    ((8, 16), (32, 4), r"matmul: \(8, 16\) @ \(32, 4\): inner dims 16 != 32"),
    ((2, 3, 4), (5, 4, 2), r"matmul: shapes \(2,\) and \(5,\) cannot be broadcast"),
    ((), (3,), r"matmul: both arguments need at least 1 dim"),
])
def test_matmul_shape_errors_name_the_shapes(a, b, message):
    with pytest.raises(ValueError, match=message):
        nv.zeros(a) @ nv.zeros(b)


def test_matmul_dtype_mismatch():
    with pytest.raises(TypeError, match="matmul: expected both operands to have the same dtype"):
        nv.zeros(2, 2) @ nv.zeros(2, 2, dtype=nv.float64)


SIDES = [1, 2, 5, 6, 7, 13, 31, 33, 37, 64, 67]


@given(m=st.sampled_from(SIDES), k=st.sampled_from(SIDES), n=st.sampled_from(SIDES),
       ta=st.booleans(), tb=st.booleans(), batch=st.sampled_from([(), (3,), (2, 1)]),
       epilogue=st.sampled_from(["none", "bias", "gelu", "residual"]), seed=st.integers(0, 99))
@example(m=1, k=1, n=1, ta=False, tb=False, batch=(), epilogue="gelu", seed=3)  # gelu(-5.2)
def test_gemm_shapes_transposes_batches_and_epilogues(m, k, n, ta, tb, batch, epilogue, seed):
    """Sizes of 1, primes and non-multiples of the register tile, every transposition,
    batched with broadcasting, and fused epilogues, against numpy in float64."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch + ((k, m) if ta else (m, k))).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    res = rng.standard_normal(batch + (m, n)).astype(np.float32)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = (np.swapaxes(a64, -1, -2) if ta else a64) @ (b64.T if tb else b64)
    # errors are relative to the product's scale: gelu's far negative tail (-5 ->
    # -4.8e-7) cannot be evaluated in float32 to 5e-4 of its own size (PyTorch's
    # float32 gelu gives the same -4.66e-7 as Nova)
    scale = np.abs(ref).max()
    x, y = nv.tensor(a), nv.tensor(b)
    out = (x.transpose(-2, -1) if ta else x) @ (y.T if tb else y)
    if epilogue == "bias":
        out, ref = out + nv.tensor(bias), ref + bias
    elif epilogue == "gelu":
        import math
        out = nv.gelu(out)
        ref = 0.5 * ref * (1 + np.vectorize(math.erf)(ref / math.sqrt(2)))
    elif epilogue == "residual":
        out, ref = out + nv.tensor(res), ref + res
    got = out.numpy().astype(np.float64)
    err = np.abs(got - ref).max() / max(np.abs(ref).max(), scale, 1e-30)
    assert err < 5e-4, err


def _tiny_cache_spec(cores: int = 2):
    """The host's ISA with caches so small that KC, MC and NC are a few dozen: small
    shapes then cross every block boundary (several K blocks accumulating in the output,
    several MC blocks per packed B panel, several NC panels). With 4 cores, unbatched
    products split "m" share their packed B panels."""
    import dataclasses

    from nova.compiler.targets.cpu.device import detect_cpu
    return dataclasses.replace(detect_cpu(), cores=cores, l1d=4096, l2=3584, l3=16384)


BLOCK_SIDES = [1, 2, 13, 14, 15, 29, 31, 33, 64, 65, 97]


@given(m=st.sampled_from(BLOCK_SIDES), k=st.sampled_from(BLOCK_SIDES),
       n=st.sampled_from(BLOCK_SIDES), ta=st.booleans(), tb=st.booleans(),
       batch=st.sampled_from([(), (2,)]),
       epilogue=st.sampled_from(["none", "bias", "gelu", "residual", "half"]),
       seed=st.integers(0, 99))
@example(m=1, k=1, n=1, ta=False, tb=False, batch=(), epilogue="gelu", seed=3)  # gelu(-5.2)
@pytest.mark.parametrize("engine", ["cpu"], indirect=True)   # the cpu target's blocking
def test_gemm_cache_blocking_with_tiny_caches(monkeypatch, m, k, n, ta, tb, batch, epilogue,
                                              seed):
    """The blocked GEMM with KC, MC and NC forced small, against numpy in float64: K
    blocks accumulate partial sums in the output (or, for a float16 output, K is not
    blocked), edge tiles at every block boundary, both thread splits."""
    import math

    from nova.compiler.targets import cpu as plan_module
    monkeypatch.setattr(plan_module, "detect_cpu", _tiny_cache_spec)
    nv.debug.reset_cache()
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch + ((k, m) if ta else (m, k))).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    res = rng.standard_normal(batch + (m, n)).astype(np.float32)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = (np.swapaxes(a64, -1, -2) if ta else a64) @ (b64.T if tb else b64)
    # errors are relative to the product's scale: gelu's far negative tail (-5 ->
    # -4.8e-7) cannot be evaluated in float32 to 5e-4 of its own size (PyTorch's
    # float32 gelu gives the same -4.66e-7 as Nova)
    scale = np.abs(ref).max()
    x, y = nv.tensor(a), nv.tensor(b)
    out = (x.transpose(-2, -1) if ta else x) @ (y.T if tb else y)
    tol = 5e-4
    if epilogue == "bias":
        out, ref = out + nv.tensor(bias), ref + bias
    elif epilogue == "gelu":
        out = nv.gelu(out)
        ref = 0.5 * ref * (1 + np.vectorize(math.erf)(ref / math.sqrt(2)))
    elif epilogue == "residual":
        out, ref = out + nv.tensor(res), ref + res
    elif epilogue == "half":
        out, tol = out.half(), 1e-3      # float16 rounding: 2^-11 relative
    got = out.numpy().astype(np.float64)
    err = np.abs(got - ref).max() / max(np.abs(ref).max(), scale, 1e-30)
    assert err < tol, err
    nv.debug.reset_cache()


def test_tiny_cache_blocking_is_what_the_kernel_gets(monkeypatch):
    """The plan of a 97 x 97 x 97 product under the tiny caches has several K, M and N
    blocks (so the property test above exercises them), split along the larger side."""
    from nova.compiler.targets import cpu as plan_module
    monkeypatch.setattr(plan_module, "detect_cpu", _tiny_cache_spec)
    spec = _tiny_cache_spec()
    x = nv.tensor(np.ones((97, 97), np.float32))
    y = nv.tensor(np.ones((97, 33), np.float32))
    dump = nv.debug.dump_ir(x @ y, stage="fused")
    line = next(ln for ln in dump.splitlines() if "/tiled" in ln)
    nr = 2 * spec.lanes(4)
    kc = int(line.split("KC=")[1].split()[0])
    mc = int(line.split("MC=")[1].split()[0])
    nc = int(line.split("NC=")[1].split()[0])
    assert kc < 97 / 2 and mc < 97 and "split=m" in line
    assert nc <= max(nr, 64)
    dump = nv.debug.dump_ir(y.T @ x, stage="fused")   # M = 33 < N = 97
    assert "split=n" in next(ln for ln in dump.splitlines() if "/tiled" in ln)
    # and the numbers: every element of ones @ ones is K
    assert np.all((x @ y).numpy() == 97.0)


@pytest.mark.parametrize("m,k,n,ta,tb", [(200, 450, 300, True, False), (130, 700, 90, False, True),
                                          (3, 1000, 513, True, True), (515, 385, 7, False, False)])
def test_gemm_larger_than_the_host_blocks(m, k, n, ta, tb):
    """With the host's own blocking: K past one KC, rows and columns past MR/NR edges."""
    rng = np.random.default_rng(m + k + n)
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    ref = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    x, y = nv.tensor(a), nv.tensor(b)
    got = ((x.T if ta else x) @ (y.T if tb else y)).numpy().astype(np.float64)
    assert np.abs(got - ref).max() / np.abs(ref).max() < 5e-4


@settings(max_examples=20, deadline=None)
@given(m=st.sampled_from([33, 64, 65, 97]), k=st.sampled_from([2, 29, 97]),
       n=st.sampled_from(BLOCK_SIDES[1:]), ta=st.booleans(), tb=st.booleans(),
       batch=st.sampled_from([(), (1,)]), epilogue=st.sampled_from(["none", "bias", "half"]),
       threads=st.sampled_from([2, 3, "one after another"]), seed=st.integers(0, 99))
@pytest.mark.parametrize("engine", ["cpu"], indirect=True)   # the cpu target's threads
def test_gemm_threads_sharing_the_packed_b_panel(monkeypatch, m, k, n, ta, tb, batch,
                                                 epilogue, threads, seed):
    """Threads that pack one B panel together (``shared_b``: the plan of a 4-core
    machine, tiny caches so there are several K blocks and NC panels, hence both
    alternating buffers and many barriers), against numpy in float64: on 2 threads, on
    3 (more than this machine's cores: the workers sleep and the barrier yields), and
    with the chunks run one after another (the pool busy with another dispatch), where
    every chunk packs the whole panel itself. (K and N of 1 are not GEMMs: a
    matrix-vector or outer product, ``passes.vector_products``.)"""
    from nova.compiler.targets import cpu as plan_module
    from nova.runtime import threads as pool_threads
    monkeypatch.setattr(plan_module, "detect_cpu", lambda: _tiny_cache_spec(cores=4))
    nv.debug.reset_cache()
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch + ((k, m) if ta else (m, k))).astype(np.float32)
    b = rng.standard_normal(batch + ((n, k) if tb else (k, n))).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = (np.swapaxes(a64, -1, -2) if ta else a64) @ (np.swapaxes(b64, -1, -2) if tb else b64)
    x, y = nv.tensor(a), nv.tensor(b)
    out = (x.transpose(-2, -1) if ta else x) @ (y.transpose(-2, -1) if tb else y)
    tol = 5e-4
    if epilogue == "bias":
        out, ref = out + nv.tensor(bias), ref + bias
    elif epilogue == "half":
        out, tol = out.half(), 1e-3
    line = next(ln for ln in nv.debug.dump_ir(out, stage="fused").splitlines()
                if "/tiled" in ln)
    assert ("shared_b" in line) == ("split=m" in line)
    previous = nv.get_num_threads()
    try:
        if threads == "one after another":
            nv.set_num_threads(2)
            with pool_threads.pool()._busy:
                got = out.numpy()
        else:
            nv.set_num_threads(threads)
            got = out.numpy()
        teams = _team_headers()
    finally:
        nv.set_num_threads(previous)
        nv.debug.reset_cache()
    err = np.abs(got.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-30)
    assert err < tol, err
    for members, arrived, barriers, chunks in teams:   # how the chunks met
        joined = arrived & (TEAM_CLOSED - 1)
        if threads == "one after another" or chunks == 1:
            assert members == 1   # (a team of one neither joins nor meets)
        else:   # a team of the chunks that came in time (a late one works alone)
            assert members == chunks and 1 <= joined <= chunks
            assert barriers % joined == 0 and (barriers > 0) == (joined > 1)


def _team_headers() -> list[tuple[int, int, int, int]]:
    """(members, arrived word, barrier count, chunks) of each shared-B kernel of the step
    that ran last (none under the interpreter engine)."""
    from nova.compiler.lowering.plan import TEAM_ARRIVED, TEAM_BARRIER, TEAM_MEMBERS
    from nova.runtime.cache import CACHE
    program = CACHE.last._program
    return [(team[TEAM_MEMBERS], team[TEAM_ARRIVED], team[TEAM_BARRIER],
             len(program._ranges[p]))
            for p, team in enumerate(getattr(program, "_teams", [])) if team is not None]


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("m,k,n", [(65, 97, 33), (97, 29, 64)])
def test_a_computed_b_is_packed_into_the_shared_panel_by_its_kernel(monkeypatch, m, k, n,
                                                                    threads):
    """B computed (a reshape across strides, no view): each team member's share of a
    shared B panel is packed by the kernel's callback (``TiledKernel.pack_function``)
    at the offset the shared driver gives, with tiny caches (several K blocks and NC
    panels), against numpy in float64."""
    from nova.compiler.targets import cpu as plan_module
    monkeypatch.setattr(plan_module, "detect_cpu", lambda: _tiny_cache_spec(cores=4))
    nv.debug.reset_cache()
    rng = np.random.default_rng(m + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    xb = rng.standard_normal((n // 11 + 1, k, 11)).astype(np.float32)   # B: (k, 11 x ...)
    width = xb.shape[0] * 11
    b = xb.transpose(1, 0, 2).reshape(k, width)
    x, y = nv.tensor(a), nv.tensor(xb)
    out = (x @ y.transpose(0, 1).reshape(k, width)).relu()
    line = next(ln for ln in nv.debug.dump_ir(out, stage="fused").splitlines()
                if "/tiled" in ln)
    assert "shared_b" in line
    from tests.compiler.llvm_ir import kernel_llvm
    [text] = kernel_llvm(out, strategy="tiled")
    assert ".pack_b" in text and ".pack_a" not in text     # B packed by the kernel
    previous = nv.get_num_threads()
    try:
        nv.set_num_threads(threads)
        got = out.numpy()
    finally:
        nv.set_num_threads(previous)
        nv.debug.reset_cache()
    ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64), 0)
    assert np.abs(got - ref).max() / np.abs(ref).max() < 5e-4


def test_products_of_computed_operands():
    """Pointwise-computed operands (the CPU GEMM packs them through its prologue, not
    from a stored value): left, right through a transpose, batched, both at once, odd
    sizes that leave partial register tiles and K blocks."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((37, 45)).astype(np.float32)
    s = rng.standard_normal((37, 1)).astype(np.float32)
    g = rng.standard_normal(45).astype(np.float32)
    w = rng.standard_normal((29, 45)).astype(np.float32)
    q = rng.standard_normal((3, 19, 24)).astype(np.float32)
    k = rng.standard_normal((3, 21, 24)).astype(np.float32)
    ta, ts, tg, tw, tq, tk = map(nv.tensor, (a, s, g, w, q, k))
    outs = [(ta * ts * tg) @ tw.T, ta @ (tw * 2.0 - 1.0).T,
            (tq * 0.5) @ (tk + 1.0).transpose(1, 2), (ta * tg) @ (tw * tw).T]
    nv.realize(*outs)
    want = [(a * s * g) @ w.T, a @ (w * 2 - 1).T, (q * 0.5) @ (k + 1).transpose(0, 2, 1),
            (a * g) @ (w * w).T]
    for o, r in zip(outs, want):
        np.testing.assert_allclose(o.numpy(), r, rtol=2e-5, atol=2e-4)

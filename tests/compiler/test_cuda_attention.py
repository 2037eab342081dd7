"""The CUDA target's fused attention kernels (``targets.cuda.attention``): fusion picks
them for the cuda target, the configurator's blocks, the generated source's structure,
the kernels on the CPU emulator against the interpreter's definition of the fused ops --
with float32 operands on the tensor cores (``Emulator(tf32=False)``), which checks the
algorithm to float32 accuracy, and with TF32 as the GPU computes -- and NVRTC compiles
them without spills. On a GPU: ``tests/runtime/test_cuda_ops.py``."""
from __future__ import annotations

import math
import shutil
from dataclasses import replace

import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F
from nova.compiler.pipeline import compile_step, front
from nova.compiler.targets.cuda.codegen import generate
from nova.compiler.targets.cuda.configurator import attention_config
from nova.compiler.targets.cuda.device import SM80, SM86, SM90
from nova.runtime import nvrtc
from nova.tensor.realize import pending_graph
from tests.compiler.cuda_cases import module_cases

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (C++20)")
ONE_SM = replace(SM80, name="one-SM", sms=1)     # the largest blocks that fit


def _sdpa_graph(batch, L, S, E, Ev, causal, dropout=0.0, seed=0, edit=None):
    """A step of ``scaled_dot_product_attention`` with its three gradients (``edit``
    may change the query, key and value arrays first)."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(batch + s).astype(np.float32)
              for s in ((L, E), (S, E), (S, Ev))]
    if edit is not None:
        edit(*arrays)
    q, k, v = (nv.tensor(a, requires_grad=True) for a in arrays)
    g = nv.tensor(rng.standard_normal(batch + (L, Ev)).astype(np.float32))
    nv.manual_seed(7)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=dropout)
    (y * g).sum().backward()
    return pending_graph(y, q.grad, k.grad, v.grad)


def _attention_cases(graph):
    """The attention kernels of the step (as the cuda engine compiles it) with their
    real inputs and the interpreter's results."""
    cases = module_cases(front(graph, engine="cuda"), graph.arg_buffers)
    return [c for c in cases if c.plan.kind == "attention"]


def _emulate(cases, spec, tf32: bool) -> list[np.ndarray]:
    from tests.compiler.cuda_emulator import Emulator
    kernels = [(f"_{i}", generate(c.plan, spec), c.plan) for i, c in enumerate(cases)]
    emu = Emulator(kernels, tf32=tf32)
    outs = []
    for (key, k, plan), c in zip(kernels, cases):
        out = np.full(plan.out[0], np.nan, np.float32)    # every element must be stored
        assert emu.run(key, k, plan, [np.ascontiguousarray(x) for x in c.inputs], out) == 0
        outs.append(out)
    return outs


def _assert_close(outs, cases, rel: float) -> None:
    for out, c in zip(outs, cases):
        want = c.expected
        np.testing.assert_allclose(out, want, rtol=0, atol=rel * np.abs(want).max(),
                                   err_msg=c.plan.describe())


# ---------------------------------------------------------------- fusion and plans

@pytest.mark.parametrize("pattern", ["sdpa", "hand_written", "dropout"])
def test_fusion_picks_the_fused_kernels_for_the_cuda_target(pattern):
    """Both patterns (and dropout on the probabilities) become one forward and one
    backward attention kernel on the cuda target, and no kernel's result is score-sized."""
    T = 24
    if pattern == "hand_written":
        rng = np.random.default_rng(0)
        q, k, v = (nv.tensor(rng.standard_normal((2, 3, T, 8)).astype(np.float32),
                             requires_grad=True) for _ in range(3))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(8))
        att = att.masked_fill(nv.triu(nv.ones(T, T, dtype=nv.bool), 1), float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        (y * y).sum().backward()
        graph = pending_graph(y, q.grad, k.grad, v.grad)
    else:
        graph = _sdpa_graph((2, 3), T, T, 8, 8, True, 0.25 if pattern == "dropout" else 0.0)
    step = compile_step(front(graph, engine="cuda"), "cuda")
    strategies = [p.schedule.strategy for p in step.plans if p.kind == "attention"]
    assert strategies == ["attention", "attention_grad"]
    for p in step.plans:
        shape = tuple(p.fusion.outputs[0].type.get_shape())
        assert shape[-2:] != (T, T), p.describe()
        assert p.kind != "matmul", p.describe()


def test_the_configurator_picks_blocks_from_shared_memory_and_the_grid():
    def cfg(batch, L, E, spec, backward=False, dropout=0.0):
        cases_graph = _sdpa_graph(batch, L, L, E, E, True, dropout)
        step = compile_step(front(cases_graph, engine="cuda"), "cuda")
        plan = [p for p in step.plans if p.kind == "attention"][int(backward)]
        return attention_config(plan, spec)
    # a medium GPT's shape: 16 x 8 heads x T 256 x 64 -> blocks of 64 (4 warps), enough
    # query blocks to fill the SMs; a small problem takes the smallest blocks (more of them)
    assert cfg((4, 2), 256, 64, SM90).attention.block == 16
    big = cfg((16, 8), 256, 64, SM90)
    assert big.attention.block == 64 and big.block == (128, 1, 1) and big.grid == (4, 128, 1)
    assert big.shared_bytes == 4 * 64 * ((64 + 4) * 2 + (64 + 8) + (64 + 4))
    assert "B = largest of [64, 32, 16]" in big.derivation
    small = cfg((1, 1), 40, 16, SM90, backward=True)
    assert small.attention.block == 16 and small.grid == (3 + 3, 1, 1)   # key, query blocks
    # sm_86's smaller shared memory: head dim 128 fits only blocks of 16 in the backward
    assert cfg((4, 8), 128, 128, SM86, backward=True).attention.block == 16
    assert cfg((4, 8), 128, 128, SM90, backward=True).attention.block == 32


def test_a_head_dim_that_fits_no_block_is_refused_naming_the_kernel():
    step = compile_step(front(_sdpa_graph((1,), 16, 16, 1200, 1200, True), engine="cuda"),
                        "cuda")
    plan = next(p for p in step.plans if p.kind == "attention")
    with pytest.raises(ValueError, match=f"{plan.name}: attention head dims E=1200, "
                                         r"Ev=1200 need \d+ B of shared memory"):
        attention_config(plan, SM86)


def test_golden_forward_and_backward_structure():
    """The pieces of the kernels' text that carry the algorithm: fragments per the PTX
    ISA layout on the tensor cores, the causal bound on the key blocks, the online
    softmax's quad shuffles and rescaling, P through the warp's rows of shared memory,
    the log-sum-exp after the output; the backward's split into key blocks and query
    blocks with D = rowsum(dO * O)."""
    fwd, bwd = (generate(c.plan, SM80) for c in _attention_cases(
        _sdpa_graph((1, 2), 40, 40, 16, 8, True)))
    src = fwd.source
    assert "// cuda sm_80: attention grid=(3, 2, 1) block=(32, 1, 1)" in src
    assert "float* const sQ = nv_smem + 0;" in src and "float* const sP = nv_smem + " in src
    assert "for (int kb = 0; kb <= min(qb, 2); ++kb) {" in src          # causal: skip
    assert "af[1] = nv_tf32(sQ[(w16 + gid + 8) * 20 + (kk + tig + 0)]);" in src
    assert "bf[1] = nv_tf32(sK[(j * 8 + gid) * 20 + (kk + tig + 4)]);" in src
    assert "nv_mma_tf32(s[j], af, bf);" in src and "nv_mma_tf32(o[j], af, bf);" in src
    assert "const bool vis = (q0 + fr) < 40 && (k0 + fc) < 40 && (k0 + fc) <= (q0 + fr);" \
        in src
    assert "bm[h] = nv_max(bm[h], __shfl_xor_sync(0xffffffffu, bm[h], 2));" in src
    assert "corr[h] = expf(m[h] - mn);" in src and "o[j][r] *= corr[r >> 1];" in src
    assert "sP[(fr) * 20 + (fc)] = p;" in src and "__syncwarp();" in src
    assert "= o[j][r] / l[r >> 1];" in src and "= m[h] + logf(l[h]);" in src
    assert "nv_philox" not in src.split("extern")[-1]                  # no dropout here
    src = bwd.source
    assert "if (blockIdx.x < 3) {" in src and "const int qb = blockIdx.x - 3;" in src
    assert "for (int qb = kb; qb < 3; ++qb) {" in src                  # causal: skip
    assert "nv_mma_tf32(dv[j], af, bf);" in src and "nv_mma_tf32(dk[j], af, bf);" in src
    assert "nv_mma_tf32(dq[j], af, bf);" in src
    assert "d += sdO[(r) * 12 + (c)] * " in src and "sD[r] = d; slse[r] = lse;" in src
    assert "atomic" not in src.split("extern")[-1]                     # one writer each


# ---------------------------------------------------------------- on the emulator

SHAPES = [  # (batch, L, S, E, Ev, causal): odd sizes, L != S, head dims 16..128
    ((1, 2), 37, 37, 16, 16, True), ((2,), 45, 45, 24, 20, False),
    ((1, 1), 33, 50, 8, 12, False), ((1, 1), 50, 33, 16, 8, True),
    ((1, 1), 20, 20, 128, 128, True), ((1, 1), 70, 70, 64, 32, True)]


@needs_gxx
@pytest.mark.parametrize("batch,L,S,E,Ev,causal", SHAPES)
def test_the_kernels_match_the_interpreter_in_float32(batch, L, S, E, Ev, causal):
    """Float32 operands on the emulated tensor cores: the kernels' results (output and
    log-sum-exp; dq, dk and dv) to float32 accuracy, with the smallest blocks (sm_80's
    choice here) and the largest that fit (a one-SM GPU)."""
    cases = _attention_cases(_sdpa_graph(batch, L, S, E, Ev, causal, seed=L + E))
    assert len(cases) == 2
    for spec in (SM80, ONE_SM):
        _assert_close(_emulate(cases, spec, tf32=False), cases, 2e-6)


@needs_gxx
@pytest.mark.parametrize("dropout", [0.1, 0.6])
@pytest.mark.parametrize("shape", [SHAPES[0], SHAPES[2]])
def test_the_kernels_with_dropout_match_the_interpreter(shape, dropout):
    """The same Philox draws as the composite's ``rng_uniform`` over (..., L, S)."""
    batch, L, S, E, Ev, causal = shape
    graph = _sdpa_graph(batch, L, S, E, Ev, causal, dropout, seed=3)
    cases = _attention_cases(graph)
    assert all("dropout" in str(c.plan.fusion) for c in cases)
    _assert_close(_emulate(cases, ONE_SM, tf32=False), cases, 2e-6)


@needs_gxx
def test_tf32_results_are_within_the_tensor_cores_rounding():
    """As the GPU computes: operands rounded to TF32 (10 mantissa bits)."""
    cases = _attention_cases(_sdpa_graph((2, 2), 45, 45, 32, 32, True, seed=9))
    outs = _emulate(cases, ONE_SM, tf32=True)
    _assert_close(outs, cases, 3e-3)
    err = max(np.abs(o - c.expected).max() / np.abs(c.expected).max()
              for o, c in zip(outs, cases))
    assert err > 1e-5                 # TF32 really was emulated


@needs_gxx
def test_nan_and_inf_spread_as_the_fused_ops_define():
    """A NaN in a query and an inf in a key: the kernels' NaNs are the interpreter's,
    save that a key block no query of a block sees is skipped (there the definition's
    ``0 * NaN`` is the exact value instead); every finite value agrees."""
    def poison(q, k, v):
        q[0, 0, 3, 2] = np.nan
        k[0, 1, 5, 1] = np.inf
    graph = _sdpa_graph((1, 2), 40, 40, 8, 8, True, seed=4, edit=poison)
    cases = _attention_cases(graph)
    for out, c in zip(_emulate(cases, SM80, tf32=False), cases):
        want = c.expected
        assert np.isnan(out).any() and not (np.isnan(out) & ~np.isnan(want)).any()
        ok = ~np.isnan(want)
        np.testing.assert_allclose(out[ok], want[ok], rtol=0,
                                   atol=2e-6 * np.abs(want[ok]).max())


@needs_gxx
def test_parts_are_stored_where_the_heads_are_merged():
    """A GPT block's attention: the gradients of q, k and v merged and padded into the
    QKV projection's gradient by the backward kernel itself (``lowering.placement``),
    3 heads of 5 at T = 13."""
    rng = np.random.default_rng(11)
    b, t, c, h = 2, 13, 15, 3
    x = nv.tensor(rng.standard_normal((b, t, c)).astype(np.float32), requires_grad=True)
    w = nv.tensor((rng.standard_normal((3 * c, c)) * 0.3).astype(np.float32),
                  requires_grad=True)
    q, k, v = (z.view(b, t, h, c // h).transpose(1, 2) for z in (x @ w.t()).split(c, dim=2))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, c)
    (y * nv.tensor(rng.standard_normal((b, t, c)).astype(np.float32))).sum().backward()
    cases = _attention_cases(pending_graph(y, x.grad, w.grad))
    assert [(c.plan.schedule.strategy, c.expected.shape) for c in cases] == \
        [("attention", (2, 3, 13 * 5 + 13)), ("attention_grad", (2, 13, 45))]
    _assert_close(_emulate(cases, SM80, tf32=False), cases, 2e-6)


# ---------------------------------------------------------------- NVRTC

@pytest.mark.skipif(not nvrtc.available(),
                    reason="NVRTC not installed (pip install nvidia-cuda-nvrtc)")
@pytest.mark.parametrize("arch,spec", [("sm_80", SM80), ("sm_86", SM86), ("sm_90", SM90)])
def test_the_kernels_compile_without_spills(arch, spec):
    """Head dims 32 (the small GPT's), 64 with dropout (the medium's) and 128 with
    dropout (the largest the tests cover): forward and backward, every arch, no spills
    (the backward holds dK and dV, or dQ, in registers across its loop)."""
    bad = []
    for batch, L, E, dropout in (((4, 4), 256, 32, 0.0), ((4, 8), 256, 64, 0.1),
                                 ((2, 8), 512, 128, 0.1)):
        graph = _sdpa_graph(batch, L, L, E, E, True, dropout)
        for plan in compile_step(front(graph, engine="cuda"), "cuda").plans:
            if plan.kind != "attention":
                continue
            k = generate(plan, spec)
            out = nvrtc.compile(k.source, arch, name=f"{plan.name}.cu", entry=k.entry)
            if out.ptxas.spills or out.ptxas.stack_bytes:
                bad.append(f"E={E} {plan.schedule.strategy}: {out.ptxas}")
    assert not bad, "register spills:\n" + "\n".join(bad)

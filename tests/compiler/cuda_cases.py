"""Kernel plans the CUDA tests share: representative graphs of every kernel kind and
dtype, and a full GPT training step (tiny preset + AdamW), each with the real inputs of
every kernel (computed by the reference interpreter, kernel by kernel)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

import nova as nv
from nova.compiler.irgen import build_module
from nova.compiler.lowering import plan_kernels
from nova.compiler.lowering.plan import KernelPlan
from nova.compiler.passes import simplify
from nova.compiler.passes.fusion import fuse
from nova.runtime.interpreter import run_region
from nova.tensor.realize import _pending_outputs, pending_graph
from nova.core.graph import PendingGraph
from nova.tensor.trace import extract

F = nv.nn.functional


@dataclass
class Case:
    """One kernel with inputs from a real program and the interpreter's output."""

    plan: KernelPlan
    inputs: list[np.ndarray]
    expected: np.ndarray


def cases_of(graph: PendingGraph) -> list[Case]:
    """Every kernel of the graph's fused step with its real inputs: the fused function
    is evaluated kernel by kernel with ``run_region`` (the interpreter's definition).
    The step is only simplified (the optimizer's other passes, attention's among them,
    do not run: ``module_cases`` takes an optimized one)."""
    return module_cases(simplify(build_module(graph)), graph.arg_buffers)


def module_cases(module, args) -> list[Case]:
    """``cases_of`` for a nova module (e.g. ``pipeline.front``'s) and its arguments."""
    fused = fuse(module, "cuda")
    plans = plan_kernels(fused, target="cuda")
    fn = next(op for op in fused.ops if op.name == "func.func")
    values = {a: np.asarray(v) for a, v in zip(fn.body.block.args, args)}
    out: list[Case] = []
    fusions = [op for op in fn.body.block.ops if op.name == "nova.fusion"]
    for plan, op in zip(plans, fusions):
        inputs = [values[v] for v in op.inputs]
        (result,) = run_region(op.body.block, inputs)
        values[op.results[0]] = np.asarray(result)
        out.append(Case(plan, inputs, np.asarray(result)))
    return out


def _graph(*tensors) -> PendingGraph:
    return pending_graph(*tensors)


def _representative() -> dict[str, PendingGraph]:
    rng = np.random.default_rng(0)
    t = lambda *s, dtype=np.float32: nv.tensor(rng.standard_normal(s).astype(dtype))
    g: dict[str, PendingGraph] = {}
    x, w, b = t(37, 45), t(45, 64), t(64)
    g["f32_linear_gelu"] = _graph(F.gelu(x @ w + b))                    # matmul + epilogue
    g["f32_matmul_aligned"] = _graph(t(64, 96) @ t(96, 128))             # cp.async A, B
    g["f32_matmul_deep_k"] = _graph(t(40, 264) @ t(264, 48))                # 9 k-tiles
    g["f32_matmul_transposed"] = _graph(t(96, 64).transpose(0, 1) @ t(128, 96).transpose(0, 1))
    q, k = t(2, 4, 32, 16), t(2, 4, 32, 16)
    g["f32_attention"] = _graph(F.softmax((q @ k.transpose(-2, -1)) * 0.25, dim=-1) @ t(2, 4, 32, 16))
    g["f64_matmul"] = _graph(t(19, 23, dtype=np.float64) @ t(23, 17, dtype=np.float64))
    g["f16_matmul"] = _graph(t(24, 40).half() @ t(40, 16).half())
    g["i32_matmul"] = _graph(nv.tensor(rng.integers(-3, 4, (9, 7)).astype(np.int32))
                             @ nv.tensor(rng.integers(-3, 4, (7, 5)).astype(np.int32)))
    y = t(33, 70)
    g["f32_softmax"] = _graph(F.softmax(y, dim=-1))
    g["f32_log_softmax"] = _graph(F.log_softmax(y, dim=-1))
    g["f32_layer_norm"] = _graph(F.layer_norm(y, (70,), t(70), t(70)))
    g["f32_long_rows"] = _graph(F.softmax(t(3, 3000), dim=-1))            # block per row
    logits = t(16, 50)
    target = nv.tensor(rng.integers(0, 50, (16,)))
    g["f32_cross_entropy"] = _graph(F.cross_entropy(logits, target))
    g["f32_reductions"] = _graph(y.sum(dim=-1), y.amax(dim=-1), y.sum(dim=0), y.sum())
    g["f32_empty_k"] = _graph(t(4, 0) @ t(0, 8) + 1.0)
    g["f32_long_column"] = _graph(t(1100, 3, 5).amax(dim=(0, 2)), t(1030, 40).sum(dim=0))
    g["f64_elementwise"] = _graph((t(5, 7, dtype=np.float64).exp() * 2.0).tanh())
    g["f32_expm1_log1p"] = _graph(t(6, 9).expm1() + (t(6, 9).abs() * 1e-6).log1p())
    g["f16_elementwise"] = _graph((t(8, 9).half().sigmoid() + 1.0) * t(8, 9).half())
    g["bf16_elementwise"] = _graph(F.gelu(t(6, 10).bfloat16()) - t(6, 10).bfloat16())
    g["bf16_rows"] = _graph(F.softmax(t(6, 40).bfloat16(), dim=-1))
    ia = nv.tensor(rng.integers(-50, 50, (4, 6)))
    ib = nv.tensor(rng.integers(1, 5, (4, 6)))
    g["i64_arith"] = _graph(ia * ib - nv.maximum(ia, ib), nv.pow(ia, ib))
    g["i32_cast"] = _graph((t(4, 6) * 10).int() + nv.tensor(rng.integers(0, 9, (4, 6)).astype(np.int32)))
    u8 = nv.tensor(rng.integers(0, 256, (6, 40)).astype(np.uint8))
    v8 = nv.tensor(rng.integers(0, 256, (6, 40)).astype(np.uint8))
    s8 = nv.tensor(rng.integers(-128, 128, (6, 40)).astype(np.int8))
    s16 = nv.tensor(rng.integers(-2**15, 2**15, (6, 40)).astype(np.int16))
    # int8/uint8/int16: computed in int, each op wrapped ((u8 + v8) overflows before // 2),
    # uint8 above 127 compared and maximized unsigned, a float truncated then wrapped
    g["small_ints"] = _graph((u8 + v8) // 2, (u8 > 128).to(nv.uint8) * s8, u8.amax(dim=-1),
                             s8.amax(dim=0), s16 * 3 - s16, (t(6, 40) * 300).to(nv.uint8),
                             u8.float() / 255, u8.sum(dim=-1, dtype=nv.uint8))
    g["small_int_matmul"] = _graph(s8[:, :9].T @ s8[:, 9:16] + 1)        # wraps, + epilogue
    z = t(5, 8) * 1.0          # pending: the slices below stay slice ops of the step
    g["bool_where"] = _graph(nv.where((z > 0) & (z < 1), z, -z), (z > 0.5).sum(dim=-1))
    g["movement"] = _graph(nv.cat([z[:, 1:5], z[:, ::2]], dim=1).T.reshape(4, 10) + 1.0)
    leaf = nv.tensor(rng.standard_normal((5, 8)).astype(np.float32), requires_grad=True)
    (leaf[1:4, ::3] * t(3, 3)).sum().backward()
    g["pad_from_slice_grad"] = _graph(leaf.grad)
    g["dropout"] = _graph(F.dropout(t(64, 32), p=0.25, training=True))
    emb = nv.nn.Embedding(20, 8)
    idx = nv.tensor(rng.integers(0, 20, (3, 5)))
    (emb(idx) * t(3, 5, 8)).sum().backward()
    g["embedding_backward"] = _graph(emb.weight.grad)                   # gather + scatter_add
    grid = t(6, 5)
    grid[nv.tensor(rng.integers(-6, 6, (40,))), nv.tensor(rng.integers(0, 5, (40,)))] = t(40)
    g["index_assign"] = _graph(grid)                        # wrap_index + scatter (last wins)
    g["sort"] = _graph((t(4, 50) * 2).argsort(descending=True))         # block_sort
    g["sort_uint8"] = _graph(u8.argsort(dim=-1, stable=True))
    g["scan"] = _graph(t(6, 40).cumsum(1), (t(5, 9) * 0.5).cumprod(0),   # thread_scan
                       nv.tensor(rng.integers(0, 9, (3, 7))).cumsum(1))
    return g


@lru_cache(maxsize=1)
def representative() -> dict[str, list[Case]]:
    nv.manual_seed(0)
    return {name: cases_of(graph) for name, graph in _representative().items()}


@lru_cache(maxsize=1)
def gpt_step() -> list[Case]:
    """Every kernel of one training step of the tiny GPT with AdamW: forward, backward
    and update recorded as one pending graph (the update is recorded as
    ``optimizer.step()`` does, without realizing)."""
    from models.gpt import GPT, preset

    nv.manual_seed(0)
    cfg = preset("tiny")
    model = GPT(cfg)
    opt = nv.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    rng = np.random.default_rng(0)
    x = nv.tensor(rng.integers(0, cfg.vocab, (2, cfg.block)))
    y = nv.tensor(rng.integers(0, cfg.vocab, (2, cfg.block)))
    _, loss = model(x, y)
    loss.backward()
    with nv.no_grad():
        for group in opt.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    opt._update(group, p, p.grad, opt.state.setdefault(p, {}))
    return cases_of(extract(_pending_outputs(())))


def storage_view(a: np.ndarray) -> np.ndarray:
    """The raw storage a CUDA kernel sees: float16/bfloat16 as uint16 bits, bool as
    uint8 (the generated code loads and converts them itself)."""
    a = np.ascontiguousarray(a)
    if a.dtype.itemsize == 2 and a.dtype.kind not in "iu":
        return a.view(np.uint16)
    if a.dtype == np.bool_:
        return a.view(np.uint8)
    return a


def from_storage(raw: np.ndarray, like: np.ndarray) -> np.ndarray:
    return raw.view(like.dtype).reshape(like.shape)


def assert_matches(case: Case, out: np.ndarray) -> None:
    """The kernel's output against the interpreter's: exact for integers and booleans;
    float32 to a few ulps (device libm vs numpy); half types to one rounding of their
    own precision; TF32 tensor-core GEMMs to their 10-bit mantissa (relative error
    ~ 2^-11 per operand, scaled by the result's magnitude)."""
    ref = case.expected
    name = f"{case.plan.name} ({case.plan.describe()})"
    assert out.shape == ref.shape and out.dtype == ref.dtype, name
    if ref.dtype.kind in "biu":
        np.testing.assert_array_equal(out, ref, err_msg=name)
        return
    got, want = out.astype(np.float64), ref.astype(np.float64)
    finite = np.isfinite(want)
    scale = float(np.abs(want[finite]).max()) if finite.any() else 1.0
    scale = max(scale, 1.0)
    if ref.dtype.itemsize == 2:
        rtol, atol = 1e-2, 1e-2 * scale
    elif case.plan.kind == "matmul" and ref.dtype == np.float32:
        rtol, atol = 1e-2, 5e-3 * scale
    elif ref.dtype == np.float32:
        rtol, atol = 1e-4, 1e-5 * scale
    else:
        rtol, atol = 1e-10, 1e-12 * scale
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=name)


def all_cases() -> dict[str, Case]:
    """Representative kernels (``<graph>:<i>``) and the GPT step's (``gpt:<kernel>``,
    one per distinct kernel)."""
    out: dict[str, Case] = {}
    for name, cases in representative().items():
        for i, c in enumerate(cases):
            out[f"{name}:{i}"] = c
    for c in gpt_step():
        out.setdefault(f"gpt:{c.plan.name}", c)
    return out

"""GPU benchmarks for ``benchmarks/gpu_check.sh``: TF32 GEMM, causal attention and a GPT
training step, Nova's cuda engine against CuPy/cuBLAS and PyTorch, in one process.

    python -m benchmarks.bench_gpu --out DIR [--budget 330] [--quick]

GEMM: square N = 1024..8192 and the products of a GPT training step for the presets
medium, gpt-42m and gpt-144m at ``--tokens`` rows (forward ``x @ W^T``, ``dX = dY @ W``,
``dW = dY^T @ X``), all float32 with TF32 tensor cores allowed everywhere (CuPy through
``CUPY_TF32=1``, set before CuPy is imported; PyTorch through
``torch.backends.cuda.matmul.allow_tf32``). Each is timed with CUDA events around
``--reps`` launches after warm-up (Nova: the step's kernels alone, ``CudaProgram.enqueue``,
so Python's per-step cost is not counted); GFLOP/s = 2 M N K / median time. Accuracy:
``|C - C64|_F / |C64|_F`` and ``max|C - C64| / max|C64|`` against a float64 product of
the same float32 operands.

Attention: causal ``scaled_dot_product_attention`` forward and backward at the medium
GPT's shape and a longer one (``ATTENTION_SHAPES``), Nova's fused kernels against its
composite and PyTorch's SDPA (``bench_attention``).

Training: the GPT of ``models/gpt.py`` (Nova: recorded every step with CUDA graphs, the
same with ``NOVA_CUDA_GRAPHS=0``, and under ``nv.compile``) and nanoGPT in PyTorch
(``benchmarks/peers/torch_gpt.py``, eager and ``torch.compile``) with AdamW on random
tokens: tokens/s over the steady steps (the first two are warm-up and compilation) and
peak GPU memory (Nova: bytes CuPy's pool holds, which it never returns during the run,
and the memory plan's peak; PyTorch: ``max_memory_allocated``).

Everything runs under a time budget: an item that would start after it is recorded as
skipped, so the script ends in time. Without a GPU it writes the reason and exits 0.
Writes ``gpu_bench.json`` and ``gpu_bench.md`` into ``--out``.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("CUPY_TF32", "1")     # before CuPy is imported anywhere

import numpy as np

import nova as nv
import nova.nn.functional as F
from nova import config
from benchmarks.common import preset_products
from benchmarks.peers import nova_gpt
from models.gpt import preset


def gemm_shapes(tokens: int, quick: bool) -> list[tuple[str, int, int, int, bool, bool]]:
    """(label, M, K, N, transpose_a, transpose_b) as a training step computes them."""
    sizes = (1024, 4096) if quick else (1024, 2048, 4096, 8192)
    out = [(f"square {n}", n, n, n, False, False) for n in sizes]
    for name in (("medium",) if quick else ("medium", "gpt-42m", "gpt-144m")):
        out += preset_products(name, tokens)
    return out


class Budget:
    def __init__(self, seconds: float):
        self.end = time.perf_counter() + seconds

    def left(self) -> float:
        return self.end - time.perf_counter()


def _events_time(run, reps: int, sync) -> float:
    """Median seconds of ``run()`` between CUDA events (CuPy events; torch work is on
    its own stream, so torch callers pass their own timer)."""
    import cupy
    run()
    run()
    sync()
    times = []
    for _ in range(reps):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        run()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return float(np.median(times))


def _torch_time(run, reps: int) -> float:
    import torch
    run()
    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3)
    return float(np.median(times))


def _errors(c: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    c = c.astype(np.float64)
    return {"rel_fro": float(np.linalg.norm(c - ref) / np.linalg.norm(ref)),
            "rel_max": float(np.abs(c - ref).max() / np.abs(ref).max())}


def bench_gemm(shape, reps: int, peers: dict[str, bool]) -> dict:
    import cupy

    from nova.runtime.cache import CACHE

    label, m, k, n, ta, tb = shape
    rng = np.random.default_rng(0)
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    flops = 2.0 * m * n * k
    row: dict = {"label": label, "M": m, "K": k, "N": n, "transpose_a": ta, "transpose_b": tb}
    a64, b64 = cupy.asarray(a, dtype=cupy.float64), cupy.asarray(b, dtype=cupy.float64)
    ref = cupy.asnumpy((a64.T if ta else a64) @ (b64.T if tb else b64))
    del a64, b64

    # Nova: one step computing the product; then its kernels alone, replayed.
    from nova.tensor.realize import pending_graph

    na, nb = nv.tensor(a, device="cuda"), nv.tensor(b, device="cuda")
    t0 = time.perf_counter()
    c = (na.T if ta else na) @ (nb.T if tb else nb)
    args = list(pending_graph(c).arg_buffers)   # the step's argument order (first use)
    out = c.numpy()
    row["nova_first_call_s"] = time.perf_counter() - t0
    program = CACHE.last._program
    assert len(args) == program.n_args, (len(args), program.n_args)
    row["nova_kernels"] = program.num_kernels
    row["nova_kernel"] = "; ".join(st.plan.describe() for st in program.steps)[:300]
    sec = _events_time(lambda: program.enqueue(args), reps, cupy.cuda.runtime.deviceSynchronize)
    row["nova"] = {"s": sec, "gflops": flops / sec / 1e9, **_errors(out, ref)}
    nv.debug.reset_cache()     # (the device arrays go with this frame)

    ca, cb = cupy.asarray(a), cupy.asarray(b)
    opa, opb = (ca.T if ta else ca), (cb.T if tb else cb)
    sec = _events_time(lambda: cupy.matmul(opa, opb), reps, cupy.cuda.runtime.deviceSynchronize)
    row["cupy"] = {"s": sec, "gflops": flops / sec / 1e9,
                   **_errors(cupy.asnumpy(cupy.matmul(opa, opb)), ref)}

    if peers.get("torch"):
        import torch
        ta_, tb_ = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        pa, pb = (ta_.T if ta else ta_), (tb_.T if tb else tb_)
        sec = _torch_time(lambda: pa @ pb, reps)
        row["torch"] = {"s": sec, "gflops": flops / sec / 1e9,
                        **_errors((pa @ pb).cpu().numpy(), ref)}
    return row


# (batch, heads, T, head dim): the medium GPT's attention, and a longer one
ATTENTION_SHAPES = ((16, 8, 256, 64), (8, 16, 1024, 64))


def bench_attention(shape: tuple[int, int, int, int], reps: int, peers: dict[str, bool],
                    timer) -> dict:
    """Causal attention forward + backward at ``shape``: Nova's fused kernels
    (``targets.cuda.attention``) and its composite (``NOVA_FUSED_ATTENTION=0``) -- each
    the step's kernels alone, replayed -- and PyTorch's SDPA; ``timer(run, reps)`` gives
    the median seconds of ``run``. Errors of the output and the three gradients: the
    worst relative max error against PyTorch's float64 SDPA (when installed), and the
    fused kernels' against the composite's (``vs_composite``)."""
    from nova.runtime.cache import CACHE
    from nova.tensor.realize import pending_graph

    b, h, t, e = shape
    rng = np.random.default_rng(0)
    q, k, v, g = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
    flops = (2 + 5) * 2.0 * b * h * t * t * e / 2   # products: 2 fwd, 5 bwd; causal half
    row: dict = {"label": f"attention {b}x{h}x{t}x{e}", "shape": list(shape)}
    ref = None
    if peers.get("torch"):
        import torch
        ts = [torch.from_numpy(a).cuda().double().requires_grad_() for a in (q, k, v)]
        y = torch.nn.functional.scaled_dot_product_attention(*ts, is_causal=True)
        grads = torch.autograd.grad(y, ts, torch.from_numpy(g).cuda().double())
        ref = [x.detach().cpu().numpy() for x in (y, *grads)]

    def errors(outs: list[np.ndarray]) -> dict:
        if ref is None:
            return {}
        return {"rel_max": max(float(np.abs(o - r).max() / np.abs(r).max())
                               for o, r in zip(outs, ref))}
    results: dict[str, list[np.ndarray]] = {}
    for name, fused in (("nova", "1"), ("nova_composite", "0")):
        gc.collect()
        nv.realize()       # other pending work first: the timed step is this one alone
        with config.FUSED_ATTENTION.overridden(fused):
            ts = [nv.tensor(a, device="cuda", requires_grad=True) for a in (q, k, v)]
            y = F.scaled_dot_product_attention(*ts, is_causal=True)
            grads = nv.autograd.grad(y, ts, [nv.tensor(g, device="cuda")])
            args = list(pending_graph(y, *grads).arg_buffers)
            outs = [x.numpy() for x in (y, *grads)]
            program = CACHE.last._program
            assert len(args) == program.n_args, (len(args), program.n_args)
            sec = timer(lambda: program.enqueue(args), reps)
            row[name] = {"s": sec, "tflops": flops / sec / 1e12,
                         "kernels": program.num_kernels, **errors(outs)}
            results[name] = outs
        nv.debug.reset_cache()
    row["nova"]["vs_composite"] = max(float(np.abs(a - c).max() / np.abs(c).max())
                                      for a, c in zip(results["nova"], results["nova_composite"]))
    if peers.get("torch"):
        import torch
        tq, tk, tv, tg = (torch.from_numpy(a).cuda() for a in (q, k, v, g))

        def torch_run():
            ts = [x.detach().requires_grad_() for x in (tq, tk, tv)]
            y = torch.nn.functional.scaled_dot_product_attention(*ts, is_causal=True)
            return [y, *torch.autograd.grad(y, ts, tg)]
        sec = _torch_time(torch_run, reps)
        row["torch"] = {"s": sec, "tflops": flops / sec / 1e12,
                        **errors([x.detach().cpu().numpy() for x in torch_run()])}
    return row


def _release_gemm_memory() -> None:
    """Return the pools' cached blocks between shapes (8192^2 operands add up)."""
    import cupy
    gc.collect()
    cupy.get_default_memory_pool().free_all_blocks()
    try:
        import torch
        torch.cuda.empty_cache()
    except ImportError:
        pass


# ---------------------------------------------------------------- training

def _tokens(cfg, batch: int, steps: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [(rng.integers(0, cfg.vocab, (batch, cfg.block)),
             rng.integers(0, cfg.vocab, (batch, cfg.block))) for _ in range(steps)]


def _summary(times: list[float], losses: list[float], tokens_per_step: int) -> dict:
    steady = times[2:] or times[1:] or times
    return {"first_step_s": times[0], "step_s": float(np.median(steady)),
            "tokens_per_s": tokens_per_step / float(np.median(steady)),
            "losses": losses, "step_times": times}


def train_nova(name: str, batch: int, steps: int, graphs: bool = True,
               compiled: bool = False) -> dict:
    """Nova's GPT step on the GPU: recorded every step, or under ``nv.compile``; with
    CUDA graphs, or launched kernel by kernel (``NOVA_CUDA_GRAPHS=0``)."""
    with config.CUDA_GRAPHS.overridden("1" if graphs else "0"):
        return _train_nova(name, batch, steps, compiled)


def _train_nova(name: str, batch: int, steps: int, compiled: bool) -> dict:
    import cupy

    from models.gpt import GPT
    from nova.runtime.cache import CACHE

    cfg = preset(name)
    pool = cupy.get_default_memory_pool()
    nv.debug.reset_cache()
    gc.collect()
    pool.free_all_blocks()
    nv.manual_seed(0)
    model = GPT(cfg).to("cuda")
    opt = nv.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), eps=1e-8,
                         weight_decay=0.1)
    run = nova_gpt._step(model, opt)      # the CPU benchmark's step function
    if compiled:
        run = nv.compile(run)
    times, losses = [], []
    for x, y in _tokens(cfg, batch, steps):
        t0 = time.perf_counter()
        loss = run(nv.tensor(x, device="cuda"), nv.tensor(y, device="cuda"))
        losses.append(loss.item())
        times.append(time.perf_counter() - t0)
    out = _summary(times, losses, batch * cfg.block)
    out["peak_gpu_mb"] = pool.total_bytes() / 2**20
    out["planned_peak_mb"] = CACHE.last.memory_report().peak_bytes / 2**20
    out["kernels"] = CACHE.last.num_kernels
    stats = nv.debug.cache_stats()
    out["compiles"] = sum(1 for m in stats.miss_log if m.engine == "cuda")
    out["graph_replays"] = stats.graph_replays
    out["graph_without"] = stats.graph_without
    del model, opt, loss, run
    nv.debug.reset_cache()
    gc.collect()
    pool.free_all_blocks()
    return out


def train_torch(name: str, batch: int, steps: int, compiled: bool) -> dict:
    import torch

    from benchmarks.common import Work
    from benchmarks.peers.torch_gpt import build

    cfg = preset(name)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model = build(Work(name, steps, batch)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.1)
    fn = torch.compile(model) if compiled else model
    times, losses = [], []
    for x, y in _tokens(cfg, batch, steps):
        t0 = time.perf_counter()
        loss = fn(torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        times.append(time.perf_counter() - t0)
    out = _summary(times, losses, batch * cfg.block)
    out["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
    del model, opt, fn, loss
    torch.cuda.empty_cache()
    return out


# ---------------------------------------------------------------- report

def _fmt(v, spec: str = ".0f") -> str:
    return "—" if v is None else format(v, spec)


def markdown(report: dict) -> str:
    lines = [f"# Nova GPU check — {report.get('gpu', 'no GPU')}", ""]
    if report.get("skipped"):
        return "\n".join(lines + [f"GPU benchmarks skipped: {report['skipped']}", ""])
    lines += [f"{report['environment']}", "",
              "## TF32 GEMM (GFLOP/s; relative Frobenius error vs float64)", "",
              ("| shape | M×K×N | Nova | cuBLAS (CuPy) | PyTorch | Nova/cuBLAS | err Nova | "
               "err cuBLAS | err PyTorch |"), "|---|---|---|---|---|---|---|---|---|"]
    for r in report["gemm"]:
        if "error" in r or "skipped" in r:
            lines.append(f"| {r['label']} | | {r.get('error') or r.get('skipped')} | | | | | | |")
            continue
        nova, cp, th = r["nova"], r["cupy"], r.get("torch", {})
        lines.append(f"| {r['label']} | {r['M']}×{r['K']}×{r['N']} | {nova['gflops']:.0f} | "
                     f"{cp['gflops']:.0f} | {_fmt(th.get('gflops'))} | "
                     f"{nova['gflops'] / cp['gflops']:.2f} | {nova['rel_fro']:.1e} | "
                     f"{cp['rel_fro']:.1e} | {_fmt(th.get('rel_fro'), '.1e')} |")
    lines += ["", "## Causal attention forward + backward (ms; TFLOP/s of the visible half; "
              "worst relative max error vs float64)", "",
              ("| shape | Nova fused | Nova composite | PyTorch SDPA | fused/SDPA | "
               "err fused | err composite | err SDPA |"), "|---|---|---|---|---|---|---|---|"]
    for r in report.get("attention", []):
        if "error" in r or "skipped" in r:
            lines.append(f"| {r['label']} | {r.get('error') or r.get('skipped')} "
                         "| | | | | | |")
            continue
        nova, comp, th = r["nova"], r["nova_composite"], r.get("torch", {})
        ms = lambda x: _fmt(x.get("s") and x["s"] * 1e3, ".2f")   # noqa: E731
        speed = th.get("s") and f"{th['s'] / nova['s']:.2f}"
        lines.append(f"| {r['label']} | {ms(nova)} ({nova['tflops']:.1f}) | {ms(comp)} | "
                     f"{ms(th)} | {speed or '—'} | {_fmt(nova.get('rel_max'), '.1e')} | "
                     f"{_fmt(comp.get('rel_max'), '.1e')} | {_fmt(th.get('rel_max'), '.1e')} |")
    lines += ["", "## GPT training step (tokens/s, peak GPU MiB)", "",
              ("| preset | batch | framework | tokens/s | step ms | first step s | peak MiB | "
               "final loss | graph replays |"), "|---|---|---|---|---|---|---|---|---|"]
    for r in report["train"]:
        if "error" in r or "skipped" in r:
            lines.append(f"| {r['preset']} | {r['batch']} | {r['framework']} | "
                         f"{r.get('error') or r.get('skipped')} | | | | | |")
            continue
        peak = f"{r['peak_gpu_mb']:.0f}" + (f" (plan {r['planned_peak_mb']:.0f})"
                                             if "planned_peak_mb" in r else "")
        lines.append(f"| {r['preset']} | {r['batch']} | {r['framework']} | "
                     f"{r['tokens_per_s']:.0f} | {r['step_s'] * 1e3:.1f} | "
                     f"{r['first_step_s']:.1f} | {peak} | {r['losses'][-1]:.3f} | "
                     f"{r.get('graph_replays', '')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    ap.add_argument("--budget", type=float, default=230.0,
                    help="seconds for all benchmarks; later items are skipped")
    ap.add_argument("--tokens", type=int, default=8192, help="rows of the GPT GEMMs")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--steps", type=int, default=8, help="training steps per framework")
    ap.add_argument("--quick", action="store_true", help="fewer shapes, small presets")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    budget = Budget(args.budget)

    def save() -> None:
        """Write both files now: a run stopped from outside keeps what it measured."""
        (out / "gpu_bench.json").write_text(json.dumps(report, indent=1))
        (out / "gpu_bench.md").write_text(markdown(report))

    report: dict = {"python": sys.version.split()[0], "platform": platform.platform(),
                    "nova": nv.__version__}
    if not nv.cuda.is_available():
        report["skipped"] = f"CUDA is not available: {nv.cuda.unavailable_reason()}"
        print(f"bench_gpu: {report['skipped']}; no GPU benchmarks run", flush=True)
    else:
        import cupy

        from nova.runtime.cuda_runtime import backend
        spec = backend().spec()
        report["gpu"] = spec.name
        peers = {}
        try:
            import torch
            peers["torch"] = torch.cuda.is_available()
            torch.backends.cuda.matmul.allow_tf32 = True
            tv = torch.__version__
        except ImportError:
            tv = "not installed"
        report["environment"] = (f"{spec.describe()}; CuPy {cupy.__version__} "
                                 f"(CUPY_TF32={os.environ.get('CUPY_TF32')}); PyTorch {tv}; "
                                 f"Python {report['python']}")
        print(report["environment"], flush=True)
        report["gemm"], report["train"] = [], []
        for shape in gemm_shapes(args.tokens, args.quick):
            if budget.left() < args.budget * 0.45:   # keep time for the training runs
                report["gemm"].append({"label": shape[0], "skipped": "time budget"})
                continue
            try:
                row = bench_gemm(shape, args.reps, peers)
            except Exception as e:  # noqa: BLE001  (recorded in the report; the rest runs)
                traceback.print_exc()
                row = {"label": shape[0], "error": f"{type(e).__name__}: {str(e)[:200]}"}
            _release_gemm_memory()
            report["gemm"].append(row)
            save()
            print(json.dumps(row)[:400], flush=True)
        report["attention"] = []
        for shape in ATTENTION_SHAPES[:1] if args.quick else ATTENTION_SHAPES:
            if budget.left() < args.budget * 0.35:   # keep time for the training runs
                report["attention"].append({"label": f"attention {shape}",
                                            "skipped": "time budget"})
                continue
            try:
                row = bench_attention(shape, args.reps, peers, lambda run, reps: _events_time(
                    run, reps, cupy.cuda.runtime.deviceSynchronize))
            except Exception as e:  # noqa: BLE001  (recorded in the report; the rest runs)
                traceback.print_exc()
                row = {"label": f"attention {shape}", "error": f"{type(e).__name__}: "
                                                               f"{str(e)[:200]}"}
            _release_gemm_memory()
            report["attention"].append(row)
            save()
            print(json.dumps(row)[:400], flush=True)
        presets = [("medium", 16)] if args.quick else [("medium", 16), ("gpt-42m", 8)]
        for name, batch in presets:
            for fw in ("nova", "nova-no-graphs", "nova-compiled", "torch-eager",
                       "torch-compile"):
                item = {"preset": name, "batch": batch, "framework": fw}
                if fw != "nova" and not peers.get("torch"):
                    item["skipped"] = "PyTorch with CUDA is not available"
                elif budget.left() < 30:
                    item["skipped"] = "time budget"
                else:
                    try:
                        item.update(train_nova(name, batch, args.steps,
                                               graphs=fw != "nova-no-graphs",
                                               compiled=fw == "nova-compiled")
                                    if fw.startswith("nova") else
                                    train_torch(name, batch, args.steps,
                                                fw == "torch-compile"))
                    except Exception as e:  # noqa: BLE001  (recorded; the rest runs)
                        traceback.print_exc()
                        item["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                report["train"].append(item)
                save()
                print(json.dumps({k: v for k, v in item.items()
                                  if k not in ("losses", "step_times")}), flush=True)
    save()
    print(f"bench_gpu: wrote {out / 'gpu_bench.json'} and {out / 'gpu_bench.md'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

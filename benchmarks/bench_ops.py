"""Memory-bound kernels on the cpu engine: GB/s against numpy and the machine's copy
bandwidth, all measured in this run (ratios, not absolute claims).

    python -m benchmarks.bench_ops [--rows 4096 --cols 1024] [--reps 10]

For each case the bytes counted are the minimum a kernel must move (inputs read once,
outputs written once); time is the median of ``--reps`` replays of the cached step,
including Nova's per-step Python work (recording the graph, hashing it, dispatch).
It also reports the per-kernel dispatch overhead of a replay, and what handing half of
a kernel to a worker thread costs (``nova.runtime.threads``) with the worker spinning and
after it went to sleep.
"""
from __future__ import annotations

import argparse
import ctypes
import time

import numpy as np

import nova as nv
import nova.nn.functional as F
from benchmarks.common import median_time


def _np_softmax_fb(x, g):
    e = np.exp(x - x.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    return p, p * (g - (g * p).sum(-1, keepdims=True))


def _np_layer_norm_fb(x, g, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    rstd = 1 / np.sqrt((xc * xc).mean(-1, keepdims=True) + eps)
    y = xc * rstd
    gy = g
    dx = rstd * (gy - gy.mean(-1, keepdims=True) - y * (gy * y).mean(-1, keepdims=True))
    return y, dx


def _np_ce_fb(x, t):
    m = x.max(-1, keepdims=True)
    lse = np.log(np.exp(x - m).sum(-1, keepdims=True)) + m
    loss = (lse[:, 0] - x[np.arange(len(t)), t]).mean()
    p = np.exp(x - lse)
    p[np.arange(len(t)), t] -= 1
    return loss, p / len(t)


def cases(rows: int, cols: int):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    y = rng.standard_normal((rows, cols)).astype(np.float32)
    g = rng.standard_normal((rows, cols)).astype(np.float32)
    t = rng.integers(0, cols, rows)
    nbytes = x.nbytes

    def nova_chain():
        a, b = nv.from_numpy(x), nv.from_numpy(y)
        out = nv.relu(a * 1.5 + b * 0.5 - 0.25)
        nv.realize(out)
        return out

    def numpy_chain():
        return np.maximum(x * 1.5 + y * 0.5 - 0.25, 0)

    def nova_fb(fn):
        def run():
            a = nv.from_numpy(x).requires_grad_()
            out = fn(a)
            (gx,) = nv.autograd.grad(out, [a], [nv.from_numpy(g)] if out.ndim else None)
            nv.realize(out, gx)
            return gx
        return run

    yield "elementwise chain (2 in, 1 out)", 3 * nbytes, nova_chain, numpy_chain
    yield ("softmax fwd+bwd (x, g in; y, dx out)", 4 * nbytes,
           nova_fb(lambda a: a.softmax(-1)), lambda: _np_softmax_fb(x, g))
    yield ("layer_norm fwd+bwd (x, g in; y, dx out)", 4 * nbytes,
           nova_fb(lambda a: F.layer_norm(a, (cols,))), lambda: _np_layer_norm_fb(x, g))
    tt = nv.tensor(t)
    yield ("cross_entropy fwd+bwd (x in; dx out)", 2 * nbytes,
           nova_fb(lambda a: F.cross_entropy(a, tt)), lambda: _np_ce_fb(x, t))


def dispatch_overhead(reps: int) -> tuple[float, int]:
    """Seconds per kernel of replaying a step of many tiny kernels."""
    x = nv.tensor(np.ones(8, np.float32))

    def step():
        outs = [(x + float(i)).sum() for i in range(50)]
        nv.realize(*outs)
    step()
    with nv.debug.profile() as prof:
        step()
    kernels = sum(len(s) for s in prof.steps)
    return median_time(step, reps) / kernels, kernels


def handoff_overhead(reps: int) -> tuple[float, float]:
    """Seconds the worker pool adds to a kernel split in two: (workers spinning, workers
    asleep). Both against the same kernel run whole on the calling thread (an add of
    16 x 4096 floats), so what remains is the launch, the wait and any imbalance."""
    from nova.runtime import threads
    from nova.runtime.cache import CACHE
    if threads.pool() is None:
        return float("nan"), float("nan")
    src = np.ones((16, 4096), np.float32)
    nv.realize(nv.tensor(src) + 1.0)
    program = CACHE.last._program
    step = program.steps[0]
    table = program._ptrs[0]
    out = np.empty(step.shape, step.np_dtype)
    for j, slot in program._moving[0]:
        table[j] = (out if slot == step.out else src).ctypes.data
    extent = step.plan.schedule.parallel_extent
    halves = threads.ranges_array([(0, extent // 2), (extent // 2, extent)])
    address = ctypes.cast(step.fn, ctypes.c_void_p).value
    pool = threads.pool()

    def whole():
        step.fn(table, 0, extent)

    def split():
        pool.run(step.fn, address, ctypes.addressof(table), halves, 2)

    def split_after_sleep():
        time.sleep(4 * threads.SPIN_SECONDS)     # the worker gives up spinning
        t0 = time.perf_counter()
        split()
        return time.perf_counter() - t0
    alone = median_time(whole, reps * 20)
    spinning = median_time(split, reps * 20) - alone / 2
    asleep = float(np.median([split_after_sleep() for _ in range(reps)])) - alone / 2
    return spinning, asleep


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_ops", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--cols", type=int, default=1024)
    p.add_argument("--reps", type=int, default=10)
    args = p.parse_args(argv)
    nv.set_engine("cpu")
    src = np.ones((args.rows, args.cols), np.float32)
    dst = np.empty_like(src)
    copy_s = median_time(lambda: np.copyto(dst, src), args.reps)
    copy_gbs = 2 * src.nbytes / copy_s / 1e9
    print(f"cpu engine, {nv.get_num_threads()} threads, {args.rows}x{args.cols} float32; "
          f"numpy copy bandwidth {copy_gbs:.1f} GB/s (read + write)")
    print(f"{'case':44s} {'nova GB/s':>9s} {'numpy GB/s':>10s} {'vs numpy':>8s} {'of copy':>8s}")
    rows = []
    for name, nbytes, nova_fn, numpy_fn in cases(args.rows, args.cols):
        tn = median_time(nova_fn, args.reps)
        tp = median_time(numpy_fn, args.reps)
        row = {"case": name, "nova_gbs": nbytes / tn / 1e9, "numpy_gbs": nbytes / tp / 1e9}
        row["speedup_vs_numpy"] = tp / tn
        row["fraction_of_copy"] = row["nova_gbs"] / copy_gbs
        rows.append(row)
        print(f"{name:44s} {row['nova_gbs']:9.2f} {row['numpy_gbs']:10.2f} "
              f"{row['speedup_vs_numpy']:7.2f}x {100 * row['fraction_of_copy']:7.0f}%")
    per_kernel, n = dispatch_overhead(args.reps)
    print(f"replay overhead: {per_kernel * 1e6:.1f} us per kernel (a step of {n} tiny kernels, "
          "recording and hashing included)")
    spinning, asleep = handoff_overhead(args.reps)
    print(f"thread hand-off: +{spinning * 1e6:.1f} us per split kernel with the workers "
          f"spinning, +{asleep * 1e6:.0f} us when they sleep")
    return rows


if __name__ == "__main__":
    main()

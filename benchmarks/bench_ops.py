"""Memory-bound kernels on the cpu engine: GB/s against numpy and the machine's copy
bandwidth, all measured in this run (ratios, not absolute claims).

    python -m benchmarks.bench_ops [--rows 4096 --cols 1024] [--reps 10] [--unary-elements N]
                                   [--only-unary | --only-attention]

For each case the bytes counted are the minimum a kernel must move (inputs read once,
outputs written once); time is the median of ``--reps`` replays of the cached step,
including Nova's per-step Python work (recording the graph, hashing it, dispatch).

Then what a step costs beyond its kernels, on a step of 50 near-empty kernels (sums of
8 floats), where kernel time is the time measured by ``nv.debug.profile`` (its
``total()``, taken on separate calls interleaved with the timed ones: the profiler's own
bookkeeping, a few us per kernel, would otherwise count as overhead):

- *replay overhead per kernel, no recording*: ``Executable.run`` of the cached step on
  its argument buffers (what ``nv.compile`` and a cache hit call), run time minus kernel
  time, divided by the kernel count;
- *end-to-end per kernel, recording included*: the same step written as plain code and
  realized (record, extract, hash, look up, run, bind), total time divided by the kernel
  count;
- *per-step overhead of ``nv.compile``*: the step as a function, compiled and replayed,
  call time minus kernel time per call, next to the same function uncompiled.

Unary float32 ops: GB/s of each next to the ``x + 1`` kernel's, the bandwidth a
memory-bound unary op should reach once its math is vectorized (interleaved rep by rep;
``--only-unary`` runs this section alone).

Causal attention forward + backward (``scaled_dot_product_attention`` and the gradients
of q, k and v for a given output gradient) at the small and medium GPT's shapes: Nova's
fused kernels, Nova's composite (``NOVA_FUSED_ATTENTION=0``: the scores stored, softmax
and masks as their own kernels) and PyTorch's SDPA when torch is installed, interleaved
rep by rep (each timed call after a pause for the other framework's threads to go idle
and one untimed call), median milliseconds; without dropout and with dropout 0.1 on
the probabilities (``--only-attention`` runs this section alone).

Last, what handing half of a kernel to a worker thread costs (``nova.runtime.threads``)
with the worker spinning and after it went to sleep.
"""
from __future__ import annotations

import argparse
import ctypes
import time
import warnings
from collections.abc import Callable

import numpy as np

import nova as nv
import nova.nn.functional as F
from nova import config
from benchmarks.bench_conv import SETTLE_S
from benchmarks.common import median_time
from nova.runtime.cache import RecompileWarning


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
    # one row against a square matrix read along K (passes.vector_products: a row
    # reduction, not a GEMM) and its row sums read through a transpose
    # (passes.reduce_layout); square, so the transposed read strides a whole row (at
    # 4096 x 4096 it took 122 ms before the pass, 1.2 ms after)
    w = rng.standard_normal((rows, rows)).astype(np.float32)
    v = rng.standard_normal(rows).astype(np.float32)
    yield ("one row @ w.T (w square in)", w.nbytes,
           lambda: nv.realize(nv.from_numpy(v)[None] @ nv.from_numpy(w).T),
           lambda: v[None] @ w.T)
    yield ("w.T.sum(0) (w square in)", w.nbytes,
           lambda: nv.realize(nv.from_numpy(w).T.sum(0)), lambda: w.T.sum(0))


# Unary float32 ops (one input read, one output written), with ``x + 1`` as the
# baseline: each should run at the add kernel's bandwidth (#20 asks >= 0.8x), i.e.
# stay memory-bound, which needs its math vectorized (no libm call per element).
UNARY = {
    "add (x + 1)": (lambda t: t + 1.0, lambda a: a + np.float32(1)),
    "exp": (nv.exp, np.exp), "log": (nv.log, np.log), "log1p": (nv.log1p, np.log1p),
    "expm1": (nv.expm1, np.expm1), "tanh": (nv.tanh, np.tanh), "erf": (nv.erf, None),
    "sigmoid": (nv.sigmoid, lambda a: 1 / (1 + np.exp(-a))),
    "gelu (erf)": (F.gelu, None), "gelu (tanh)": (lambda t: F.gelu(t, approximate="tanh"), None),
    "sin": (nv.sin, np.sin), "cos": (nv.cos, np.cos),
}


UNARY_ELEMENTS = 8 << 20     # 32 MiB of float32: in and out do not fit a cache


def unary_bandwidth(elements: int, reps: int) -> list[dict]:
    """Per unary op on ``elements`` float32: Nova's GB/s (time of a realized call,
    recording included), as a fraction of the add kernel's, and numpy's GB/s where
    numpy has the function."""
    rng = np.random.default_rng(1)
    x = rng.uniform(0.05, 3.0, elements).astype(np.float32)   # in every op's domain
    nbytes = 2 * x.nbytes
    with warnings.catch_warnings():     # one line compiling one step per op, on purpose
        warnings.simplefilter("ignore", RecompileWarning)
        out = _unary_rows(x, nbytes, reps)
    for row in out:
        row["of_add"] = row["nova_gbs"] / out[0]["nova_gbs"]
    return out


def _unary_rows(x: np.ndarray, nbytes: int, reps: int) -> list[dict]:
    """``unary_bandwidth``'s rows, before the fractions of add. Every op is compiled and
    warmed first, then each rep times every op in turn (this VM's memory bandwidth
    drifts by tens of percent within a minute: one op's reps all in one stretch made
    the fractions of add move more than the kernels did)."""
    runs = {}
    for name, (fn, numpy_fn) in UNARY.items():
        def run(fn=fn):
            nv.realize(fn(nv.from_numpy(x)))
        runs[name] = (run, (lambda f=numpy_fn: f(x)) if numpy_fn is not None else None)
    for run, numpy_run in runs.values():
        for _ in range(2):
            run()
            if numpy_run is not None:
                numpy_run()
    times: dict[str, tuple[list[float], list[float]]] = {n: ([], []) for n in runs}
    for _ in range(reps):
        for name, (run, numpy_run) in runs.items():
            for fn, into in ((run, times[name][0]), (numpy_run, times[name][1])):
                if fn is not None:
                    t0 = time.perf_counter()
                    fn()
                    into.append(time.perf_counter() - t0)
    return [{"op": name, "nova_gbs": nbytes / float(np.median(nova)) / 1e9,
             "numpy_gbs": nbytes / float(np.median(numpy)) / 1e9 if numpy else None}
            for name, (nova, numpy) in times.items()]


# (batch, heads, T, head dim) of the small and medium GPT presets at batch 16
ATTENTION_SHAPES = ((16, 4, 128, 32), (16, 8, 256, 32))
ATTENTION_DROPOUT = (0.0, 0.1)     # without, and with dropout on the probabilities


def attention_times(shape: tuple[int, int, int, int], reps: int,
                    dropout: float = 0.0) -> dict[str, float]:
    """Median seconds of causal attention forward + backward at ``shape`` (with
    ``dropout`` on the probabilities) for Nova fused, Nova composite and (when installed)
    PyTorch's SDPA, timed in turn within each rep."""
    rng = np.random.default_rng(2)
    q, k, v, g = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))

    def nova_run():
        ts = [nv.from_numpy(a).requires_grad_() for a in (q, k, v)]
        y = F.scaled_dot_product_attention(*ts, is_causal=True, dropout_p=dropout)
        grads = nv.autograd.grad(y, ts, [nv.from_numpy(g)])
        nv.realize(y, *grads)

    def composite_run():
        with config.FUSED_ATTENTION.overridden("0"):
            nova_run()

    runs = {"nova fused": nova_run, "nova composite": composite_run}
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(nv.get_num_threads())
        tq, tk, tv, tg = (torch.from_numpy(a) for a in (q, k, v, g))

        def torch_run():
            ts = [t.clone().requires_grad_() for t in (tq, tk, tv)]
            y = torch.nn.functional.scaled_dot_product_attention(*ts, is_causal=True,
                                                                 dropout_p=dropout)
            torch.autograd.grad(y, ts, tg)
        runs["torch sdpa"] = torch_run
    for fn in runs.values():        # compile and warm up
        fn()
        fn()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(reps):
        for name, fn in runs.items():
            # PyTorch's OpenMP team keeps spinning for a while after a call and took
            # the cores from the Nova run that followed it (16x8x256x32: 35.5 ms timed
            # against 18.6 ms alone); as bench_conv does, let the other framework's
            # threads go idle, then run once untimed so this one's are awake.
            time.sleep(SETTLE_S)
            fn()
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: float(np.median(ts)) for name, ts in times.items()}


TINY_KERNELS = 50
INNER = 20        # calls per timed sample: one replay of a tiny step takes microseconds


def tiny_step(x: nv.Tensor) -> list[nv.Tensor]:
    """A step of ``TINY_KERNELS`` near-empty kernels (sums of ``x`` plus a constant):
    what it costs is almost all overhead."""
    return [(x + float(i)).sum() for i in range(TINY_KERNELS)]


def _tiny_input() -> nv.Tensor:
    return nv.tensor(np.ones(8, np.float32))


def timed_with_kernels(fn: Callable[[], object], reps: int, inner: int = INNER
                       ) -> tuple[float, float, int]:
    """(median seconds of a call of ``fn``, median kernel seconds of a call, kernels per
    call). Each of the ``reps`` samples times ``inner`` calls, then profiles ``inner``
    more with ``nv.debug.profile``: kernel time from separate calls, since the
    profiler's own bookkeeping would count as overhead."""
    for _ in range(2):
        fn()
    walls, kernels, counts = [], [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        walls.append((time.perf_counter() - t0) / inner)
        with nv.debug.profile() as prof:
            for _ in range(inner):
                fn()
        kernels.append(prof.total() / inner)
        counts.append(sum(len(s) for s in prof.steps) // inner)
    return float(np.median(walls)), float(np.median(kernels)), counts[-1]


def replay_overhead(reps: int) -> tuple[float, float, int]:
    """Seconds per kernel that running a cached step adds to its kernels, without
    recording: ``Executable.run`` of ``tiny_step``'s executable on its argument
    buffers. Returns (overhead per kernel, run time per kernel, kernels)."""
    from nova.runtime.cache import CACHE
    from nova.tensor.realize import pending_graph
    outs = tiny_step(_tiny_input())
    buffers = pending_graph(*outs).arg_buffers
    nv.realize(*outs)
    exe = CACHE.last
    wall, kernels, n = timed_with_kernels(lambda: exe.run(buffers), reps)
    if n != exe.num_kernels:
        raise RuntimeError(f"replay_overhead: profiled {n} kernels a run, the executable "
                           f"has {exe.num_kernels}")
    return (wall - kernels) / n, wall / n, n


def dispatch_overhead(reps: int) -> tuple[float, int]:
    """Seconds per kernel of a step of many tiny kernels written as plain code, end to
    end: recording, extraction, hashing and the cache look-up included."""
    x = _tiny_input()

    def step():
        nv.realize(*tiny_step(x))
    step()
    with nv.debug.profile() as prof:
        step()
    kernels = sum(len(s) for s in prof.steps)
    return median_time(step, reps) / kernels, kernels


def compile_overhead(reps: int) -> dict[str, float]:
    """Per-call seconds outside the kernels of ``tiny_step`` under ``nv.compile``
    (replayed) and as plain code (recorded each call): call time minus kernel time.
    Raises if the compiled function does not replay, or records again while timed."""
    x = _tiny_input()
    compiled = nv.compile(tiny_step)
    for _ in range(6):
        if compiled.replays:
            break
        compiled(x)
    if not compiled.replays:
        raise RuntimeError(f"compile_overhead: nv.compile(tiny_step) did not replay after "
                           f"{compiled.recorded} recorded calls; "
                           f"{nv.debug.cache_stats().compile_log[-1:]}")
    recorded = compiled.recorded
    wall_c, kernels_c, n = timed_with_kernels(lambda: compiled(x), reps)
    if compiled.recorded != recorded:
        raise RuntimeError("compile_overhead: nv.compile(tiny_step) recorded again while "
                           f"timed: {nv.debug.cache_stats().compile_log[-1:]}")
    wall_p, kernels_p, _ = timed_with_kernels(lambda: nv.realize(*tiny_step(x)), reps,
                                              inner=2)
    return {"compiled_s": wall_c - kernels_c, "compiled_call_s": wall_c,
            "plain_s": wall_p - kernels_p, "plain_call_s": wall_p, "kernels": n}


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
    (step,) = program.steps
    out = np.empty(step.shape, step.np_dtype)
    # The kernel's buffer table, in its slot order: the argument, then the result.
    slots = list(step.inputs) + [step.out]
    table = (ctypes.c_void_p * len(slots))(
        *[(out if slot == step.out else src).ctypes.data for slot in slots])
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


def _print_unary(args: argparse.Namespace) -> None:
    title = f"unary float32 op, {args.unary_elements} elements"
    print(f"{title:44s} {'nova GB/s':>9s} {'of add':>8s} {'numpy GB/s':>10s}")
    for u in unary_bandwidth(args.unary_elements, args.reps):
        numpy_gbs = f"{u['numpy_gbs']:10.2f}" if u["numpy_gbs"] is not None else f"{'-':>10s}"
        print(f"{u['op']:44s} {u['nova_gbs']:9.2f} {100 * u['of_add']:7.0f}% {numpy_gbs}")


def _print_attention(args) -> None:
    for dropout in ATTENTION_DROPOUT:
        for shape in ATTENTION_SHAPES:
            t = attention_times(shape, args.reps, dropout)
            base = t["nova fused"]
            cells = ", ".join(f"{name} {1e3 * s:.1f} ms ({s / base:.2f}x)"
                              for name, s in t.items())
            what = f", dropout {dropout:g}" if dropout else ""
            print(f"causal attention fwd+bwd {'x'.join(map(str, shape))} (B, H, T, E"
                  f"{what}): {cells}", flush=True)


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_ops", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--cols", type=int, default=1024)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--unary-elements", type=int, default=UNARY_ELEMENTS)
    only = p.add_mutually_exclusive_group()
    only.add_argument("--only-unary", action="store_true",
                      help="run only the unary float32 ops' section")
    only.add_argument("--only-attention", action="store_true",
                      help="run only the causal attention section")
    args = p.parse_args(argv)
    if args.only_unary:
        nv.set_engine("cpu")
        _print_unary(args)
        return []
    if args.only_attention:
        nv.set_engine("cpu")
        _print_attention(args)
        return []
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
    _print_unary(args)
    _print_attention(args)
    per_kernel, per_kernel_run, n = replay_overhead(args.reps)
    print(f"replay overhead, no recording: {per_kernel * 1e6:.2f} us per kernel "
          f"(Executable.run of a cached step of {n} tiny kernels, run time minus kernel time "
          f"from nv.debug.profile, / {n}; the whole run: {per_kernel_run * 1e6:.2f} us per "
          "kernel)")
    per_kernel, n = dispatch_overhead(args.reps)
    print(f"end-to-end, recording included: {per_kernel * 1e6:.1f} us per kernel (the same "
          f"step as plain code: record, hash, look up, run, bind; total time / {n})")
    c = compile_overhead(args.reps)
    print(f"per-step overhead (call time minus kernel time), a step of {c['kernels']} tiny "
          f"kernels: nv.compile {c['compiled_s'] * 1e6:.0f} us per call replayed, "
          f"uncompiled {c['plain_s'] * 1e6:.0f} us per call")
    spinning, asleep = handoff_overhead(args.reps)
    print(f"thread hand-off: +{spinning * 1e6:.1f} us per split kernel with the workers "
          f"spinning, +{asleep * 1e6:.0f} us when they sleep")
    return rows


if __name__ == "__main__":
    main()

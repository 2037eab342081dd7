"""conv2d forward + backward (the input's and the weight's gradients) on ResNet-like
shapes: Nova against PyTorch's CPU convolution, interleaved rep by rep in one run.

    python -m benchmarks.bench_conv [--batch 8] [--reps 7] [--shapes stem,stage1,...]

Each rep runs one framework after the other on the same data (PyTorch with Nova's thread
count), each after a pause that lets the other's spinning worker threads go idle and one
untimed call (two thread pools spinning at once in one process would otherwise slow
whichever runs second); the table reports median milliseconds, GFLOP/s (2 x the forward's multiply-adds,
three products in all) and PyTorch's time over Nova's (above 1: Nova is faster). Nova's
convolution is im2col and one matmul (``nova.nn.convolution``), recorded and realized
per call like any step (its Python work included in the time); ``compiled`` is the same
computation under ``nv.compile``, as a training loop runs it (replayed without recording
once two calls agreed: kernel time plus the replay's few microseconds); ``kernels ms``
is that step's kernel time alone (``nv.debug.profile``, median of as many more runs,
the quantity to compare when tuning Nova's kernels on a noisy machine); PyTorch runs
oneDNN. Results are checked against each other once before timing. ``nova 1st s`` is Nova's
first call, its compiles included (run with an empty ``NOVA_CACHE_DIR`` for the cold
figure).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import nova as nv
import nova.nn.functional as F

SETTLE_S = 0.3    # pause before switching frameworks (see conv_times)

# name: (C_in, H=W, C_out, kernel, stride, padding)
SHAPES = {
    "stem 7x7/2": (3, 224, 64, 7, 2, 3),
    "stage1 3x3": (64, 56, 64, 3, 1, 1),
    "stage2 3x3": (128, 28, 128, 3, 1, 1),
    "stage3 3x3": (256, 14, 256, 3, 1, 1),
    "stage1 1x1": (64, 56, 256, 1, 1, 0),
    "stage2 3x3/2": (128, 56, 128, 3, 2, 1),
    "inception 5x5": (32, 28, 64, 5, 1, 2),
    # small images (CIFAR-like), where LLVM once unrolled the window stack's loops fully
    "small 5x5": (3, 16, 8, 5, 1, 2),
    "small 7x7/2": (3, 16, 8, 7, 2, 3),
}


def flops(batch: int, shape: tuple[int, ...]) -> float:
    """Multiply-adds x 2 of the forward, times 3 (forward, input and weight gradients)."""
    c, hw, o, k, s, p = shape
    out = (hw + 2 * p - k) // s + 1
    return 3 * 2.0 * batch * o * out * out * c * k * k


def conv_times(batch: int, shape: tuple[int, ...], reps: int) -> dict[str, float]:
    """Median seconds of conv2d forward + both gradients, per framework."""
    c, hw, o, k, s, p = shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, c, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
    out = (hw + 2 * p - k) // s + 1
    g = rng.standard_normal((batch, o, out, out)).astype(np.float32)
    results: dict[str, list[np.ndarray]] = {}

    def nova_run(keep: bool = False):
        xs, ws = nv.from_numpy(x).requires_grad_(), nv.from_numpy(w).requires_grad_()
        y = F.conv2d(xs, ws, stride=s, padding=p)
        dx, dw = nv.autograd.grad(y, [xs, ws], [nv.from_numpy(g)])
        nv.realize(y, dx, dw)
        if keep:
            results["nova"] = [t.numpy() for t in (y, dx, dw)]

    xc, wc, gc = nv.from_numpy(x), nv.from_numpy(w), nv.from_numpy(g)

    def conv_grads(xt, wt, gt):
        xs, ws = xt.detach().requires_grad_(), wt.detach().requires_grad_()
        y = F.conv2d(xs, ws, stride=s, padding=p)
        return (y, *nv.autograd.grad(y, [xs, ws], [gt]))

    compiled = nv.compile(conv_grads)

    def compiled_run(keep: bool = False):
        out = compiled(xc, wc, gc)
        nv.realize(*out)
        if keep:
            results["compiled"] = [t.numpy() for t in out]

    runs = {"nova": nova_run, "compiled": compiled_run}
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(nv.get_num_threads())
        tx, tw, tg = (torch.from_numpy(a) for a in (x, w, g))

        def torch_run(keep: bool = False):
            xs, ws = tx.clone().requires_grad_(), tw.clone().requires_grad_()
            y = torch.nn.functional.conv2d(xs, ws, stride=s, padding=p)
            dx, dw = torch.autograd.grad(y, [xs, ws], tg)
            if keep:
                results["torch"] = [t.detach().numpy() for t in (y, dx, dw)]
        runs["torch"] = torch_run
    first: dict[str, float] = {}
    for name, fn in runs.items():     # compile, warm up, and keep one result each
        t0 = time.perf_counter()
        fn(keep=True)
        first[name] = time.perf_counter() - t0     # Nova's compiles included
        fn()
    for peer in ("torch", "compiled"):
        for a, b in zip(results["nova"], results.get(peer, ())):
            scale = float(np.abs(b).max()) or 1.0
            if float(np.abs(a - b).max()) > 1e-3 * scale:
                raise AssertionError(f"bench_conv: Nova and {peer} disagree on {shape}")
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(reps):
        for name, fn in runs.items():
            # Both frameworks keep their worker threads spinning for a while after a
            # call (PyTorch's OpenMP team, Nova's pool): let the other's go idle, then
            # run once untimed so this one's are awake, as in a training loop.
            time.sleep(SETTLE_S)
            fn()
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    kernels = []          # the compiled step's kernels alone (nv.debug.profile)
    for _ in range(reps):
        with nv.debug.profile() as prof:
            compiled_run()
        kernels.append(prof.total())
    return {**{name: float(np.median(ts)) for name, ts in times.items()},
            **{f"first_{name}": s for name, s in first.items()},
            "kernels": float(np.median(kernels))}


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_conv", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--shapes", default=",".join(SHAPES),
                   help="comma-separated names from: " + ", ".join(SHAPES))
    p.add_argument("--size", type=int, default=None,
                   help="override H=W of every shape (quick checks)")
    args = p.parse_args(argv)
    nv.set_engine("cpu")
    print(f"conv2d fwd+bwd, batch {args.batch}, {nv.get_num_threads()} threads, float32")
    print(f"{'shape (C_in, HxW, C_out, k/s)':34s} {'nova ms':>8s} {'GFLOP/s':>8s} "
          f"{'torch ms':>9s} {'GFLOP/s':>8s} {'torch/nova':>10s} {'compiled ms':>11s} "
          f"{'torch/compiled':>14s} {'kernels ms':>10s} {'nova 1st s':>10s}")
    rows = []
    for name in args.shapes.split(","):
        shape = SHAPES[name.strip()]
        if args.size is not None:
            shape = (shape[0], args.size) + shape[2:]
        t = conv_times(args.batch, shape, args.reps)
        work = flops(args.batch, shape)
        row = {"shape": name, "dims": shape, "nova_s": t["nova"], "torch_s": t.get("torch"),
               "compiled_s": t["compiled"], "kernels_s": t["kernels"],
               "nova_first_s": t["first_nova"],
               "torch_first_s": t.get("first_torch")}
        c, hw, o, k, s, _ = shape
        label = f"{name} ({c}, {hw}x{hw}, {o}, {k}/{s})"
        torch_cells = [f"{'-':>9s}", f"{'-':>8s}", f"{'-':>10s}"]
        vs_compiled = f"{'-':>14s}"
        if row["torch_s"] is not None:
            row["ratio"] = row["torch_s"] / row["nova_s"]
            row["ratio_compiled"] = row["torch_s"] / row["compiled_s"]
            torch_cells = [f"{1e3 * t['torch']:9.1f}", f"{work / t['torch'] / 1e9:8.1f}",
                           f"{row['ratio']:9.2f}x"]
            vs_compiled = f"{row['ratio_compiled']:13.2f}x"
        print(f"{label:34s} {1e3 * t['nova']:8.1f} {work / t['nova'] / 1e9:8.1f} "
              + " ".join(torch_cells)
              + f" {1e3 * t['compiled']:11.2f} {vs_compiled} {1e3 * t['kernels']:10.2f}"
              f" {t['first_nova']:10.2f}")
        rows.append(row)
    return rows


if __name__ == "__main__":
    main()

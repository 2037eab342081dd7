"""GEMM throughput: Nova's blocked kernel against numpy (OpenBLAS) and PyTorch.

    python -m benchmarks.bench_gemm [--reps 5] [--tokens 2048] [--rounds 1]
                                    [--threads N] [--stat median|min]

Square N = 256..2048 and the products of a GPT training step for the ``small``,
``medium`` and ``gpt-42m`` presets (forward ``x @ W^T``, backward ``dY @ W`` and
``dY^T @ X``) at ``--tokens`` rows. GFLOP/s = 2 M N K / median time.

This machine may set OPENBLAS_CORETYPE (an older kernel for OpenBLAS); numpy is
therefore also timed in a helper process with those variables removed ("numpy*", the
reference the target is set against), and the kernel threadpoolctl reports is printed
for both. Per shape, every peer is timed back to back (the helper answers one shape at a
time), so a ratio compares the peers under the same load; ``--rounds R`` repeats the
whole table and reports, per shape, the median of the R ratios and their spread
(min-max), which is the noise of a shared machine. Between peers the benchmark sleeps
``SETTLE_SECONDS``: OpenBLAS and OpenMP worker threads keep spinning for a while after a
call, and on a 2-core machine they would otherwise steal the next peer's cores.
Every peer is warmed up for ``WARMUP_SECONDS`` of calls before its timed reps (see
``_time``). ``--threads N`` limits every peer to N threads (default: all cores); ``--stat min``
reports the fastest rep instead of the median, the better estimate of uncontended speed
when other jobs share the cores.

"nova" is a user's call, ``nv.realize(x @ w)``: recording the product, looking the step
up, running it and binding the result. "nova kernel" is the compiled kernel alone, timed
by ``nv.debug.profile`` in separate calls; the difference is Nova's Python dispatch,
which runs after the product has evicted its working set from the L2 and so costs
several times its warm figure (``bench_ops`` reports it warm).

"numpy/numpy*" is the control: numpy against itself, the same BLAS timed in two helper
processes (when the header names the same kernel for both). Its spread across shapes is
what a ratio of two equally fast peers looks like on this machine, so a Nova ratio is
read against it, not against 1.00 exactly. The summary at the end gives, per group of
shapes the target names (squares N >= 512, each preset), the median ratio of the call,
of the kernel and of the control, and how many shapes are at or above 1.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import nova as nv
from benchmarks.common import median_time, preset_products
from nova.compiler.targets.cpu.device import detect_cpu

STAT = {"stat": "median"}


def _time(fn, reps: int) -> float:
    """Seconds per call of ``fn``: the median of ``reps`` (or their minimum), after
    calling it for ``WARMUP_SECONDS``. Measured on this VM: after 0.3 s idle, a 2-thread
    Nova product of ~1 ms ran at 1-thread speed for 30-100 ms (the idle vCPU's wake-up
    and clock ramp; OpenBLAS's spinning threads hide it), so a fixed count of warm-up
    calls would time the ramp, not the kernel."""
    t0 = time.perf_counter()
    fn()
    while time.perf_counter() - t0 < WARMUP_SECONDS:
        fn()
    if STAT["stat"] == "median":
        return median_time(fn, reps, warmup=0)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parents[1]
SETTLE_SECONDS = 0.3
WARMUP_SECONDS = 0.2


def shapes(tokens: int) -> list[tuple[str, int, int, int, bool, bool]]:
    """(label, M, K, N, transpose_a, transpose_b) as the step computes them."""
    out = [(f"square {n}", n, n, n, False, False) for n in (256, 512, 1024, 2048)]
    for name in ("small", "medium", "gpt-42m"):
        out += preset_products(name, tokens)
    return out


def operands(m: int, k: int, n: int, ta: bool, tb: bool):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    return a, b


def time_numpy(case, reps: int) -> float:
    _, m, k, n, ta, tb = case
    a, b = operands(m, k, n, ta, tb)
    x, y = (a.T if ta else a), (b.T if tb else b)
    return _time(lambda: x @ y, reps)


def blas_info() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed"
    info = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    return ", ".join(f"{i.get('internal_api')} {i.get('architecture', '?')} "
                     f"({i.get('num_threads')} threads)" for i in info) or "no BLAS found"


def time_torch(case, reps: int) -> float:
    import torch
    _, m, k, n, ta, tb = case
    a, b = operands(m, k, n, ta, tb)
    x, y = torch.from_numpy(a), torch.from_numpy(b)
    x, y = (x.T if ta else x), (y.T if tb else y)
    return _time(lambda: x @ y, reps)


def serve(peer: str, tokens: int, reps: int, stat: str, threads: int) -> None:
    """A peer's process: print what it runs, then for each shape index read on stdin
    print its seconds per call (``nan`` when the peer is not installed)."""
    STAT["stat"] = stat
    cases = shapes(tokens)
    timer = time_numpy
    if peer == "torch":
        try:
            import torch
        except ImportError:
            print(json.dumps(None), flush=True)
            return
        if threads:
            torch.set_num_threads(threads)
        timer = time_torch
        info = f"torch {torch.__version__} ({torch.get_num_threads()} threads)"
    else:
        info = blas_info()
    print(json.dumps(info), flush=True)
    for line in sys.stdin:
        print(json.dumps(timer(cases[int(line)], reps)), flush=True)


class Peer:
    """numpy, numpy with OPENBLAS_* removed from the environment, or torch, each in its
    own process: no peer's worker threads share a process with another's."""

    def __init__(self, peer: str, tokens: int, reps: int, threads: int | None):
        env = dict(os.environ)
        if peer == "numpy*":
            env = {k: v for k, v in env.items() if not k.startswith("OPENBLAS_")}
        if threads:
            env["OPENBLAS_NUM_THREADS"] = str(threads)
        code = (f"from benchmarks.bench_gemm import serve; "
                f"serve({peer!r}, {tokens}, {reps}, {STAT['stat']!r}, {threads or 0})")
        self.proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.info = json.loads(self.proc.stdout.readline())

    def time(self, index: int) -> float:
        self.proc.stdin.write(f"{index}\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def time_nova(case, reps: int) -> tuple[float, float]:
    """Seconds per call of ``nv.realize(product)`` and of its kernel alone."""
    _, m, k, n, ta, tb = case
    a, b = operands(m, k, n, ta, tb)
    x, y = nv.from_numpy(a), nv.from_numpy(b)

    def call() -> None:
        nv.realize((x.T if ta else x) @ (y.T if tb else y))

    def kernel_seconds() -> float:
        with nv.debug.profile() as prof:
            call()
        return prof.total()

    total = _time(call, reps)
    kernels = [kernel_seconds() for _ in range(reps)]
    return total, float(np.median(kernels) if STAT["stat"] == "median" else min(kernels))


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}" if len(values) > 1 else ""


def _group(label: str) -> str | None:
    """The target's group of a shape: squares from N = 512, or the GPT preset."""
    name, _, size = label.partition(" ")
    if name == "square":
        return "squares N >= 512" if int(size) >= 512 else None
    return name


def summarize(rows: list[dict]) -> str:
    """Per group of the target's shapes: the median call, kernel and control ratios
    against numpy*, and how many shapes each puts at or above 1."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        group = _group(row["shape"])
        if group is not None:
            groups.setdefault(group, []).append(row)
    out = ["group | shapes | nova/numpy* median | >= 1 | kernel/numpy* median | >= 1 | "
           "numpy/numpy* median | >= 1"]
    for group, members in groups.items():
        cells = [group, str(len(members))]
        for key in ("nova/numpy*", "kernel/numpy*", "numpy/numpy*"):
            values = [r[key] for r in members]
            cells += [f"{np.median(values):.2f}", str(sum(v >= 1.0 for v in values))]
        out.append(" | ".join(cells))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_gemm", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--tokens", type=int, default=2048)
    p.add_argument("--rounds", type=int, default=1, help="repeat the table, report spread")
    p.add_argument("--threads", type=int, default=None, help="threads per peer")
    p.add_argument("--stat", choices=["median", "min"], default="median")
    p.add_argument("--quick", action="store_true", help="a few small shapes, no files")
    args = p.parse_args(argv)
    STAT["stat"] = args.stat
    nv.set_engine("cpu")
    if args.threads:
        nv.set_num_threads(args.threads)
    cases = shapes(args.tokens)
    if args.quick:
        cases = [c for c in cases if c[1] * c[2] * c[3] <= 512**3][:4]
    spec = detect_cpu()
    here = Peer("numpy", args.tokens, args.reps, args.threads)
    free = Peer("numpy*", args.tokens, args.reps, args.threads)
    torch = Peer("torch", args.tokens, args.reps, args.threads)
    if torch.info is None:
        torch.close()
        torch = None
    index = {c: i for i, c in enumerate(shapes(args.tokens))}
    header = (f"cpu {spec.name}, {spec.cores} cores, {spec.isa}; theoretical peak "
              f"{spec.peak_flops / 1e9:.0f} GFLOP/s (DeviceSpec estimate)\n"
              f"numpy BLAS here: {here.info}\n"
              f"numpy* = numpy with OPENBLAS_* unset: {free.info}\n"
              + (f"torch: {torch.info}\n" if torch is not None else "")
              + f"{args.stat} of {args.reps} reps per peer, peers back to back per shape; "
              f"{args.rounds} round(s); threads per peer: {args.threads or 'all'}")
    print(header)
    lines = [header, ""]
    cols = ["shape", "MxKxN", "nova GF/s", "numpy GF/s", "numpy* GF/s", "nova/numpy*",
            "nova kernel GF/s", "kernel/numpy*"]
    if args.rounds > 1:
        cols.append("nova/numpy* range")
    if torch is not None:
        cols += ["torch GF/s", "nova/torch"]
    cols.append("numpy/numpy*")
    print(" | ".join(cols))
    lines.append(" | ".join(cols))
    rows = []
    for case in cases:
        label, m, k, n = case[:4]
        flops = 2.0 * m * n * k
        runs: dict[str, list[float]] = {"nova": [], "nova_kernel": [], "numpy": [],
                                        "numpy_unrestricted": [], "torch": []}
        for _ in range(args.rounds):
            runs["numpy_unrestricted"].append(flops / free.time(index[case]) / 1e9)
            time.sleep(SETTLE_SECONDS)
            total, kernel = time_nova(case, args.reps)
            runs["nova"].append(flops / total / 1e9)
            runs["nova_kernel"].append(flops / kernel / 1e9)
            runs["numpy"].append(flops / here.time(index[case]) / 1e9)
            time.sleep(SETTLE_SECONDS)
            if torch is not None:
                runs["torch"].append(flops / torch.time(index[case]) / 1e9)
                time.sleep(SETTLE_SECONDS)
        ratios = [a / b for a, b in zip(runs["nova"], runs["numpy_unrestricted"])]
        kernel_ratios = [a / b for a, b in zip(runs["nova_kernel"], runs["numpy_unrestricted"])]
        control = [a / b for a, b in zip(runs["numpy"], runs["numpy_unrestricted"])]
        row = {"shape": label, "m": m, "k": k, "n": n,
               **{key: float(np.median(v)) for key, v in runs.items() if v},
               "nova/numpy*": float(np.median(ratios)), "nova/numpy* all": ratios,
               "kernel/numpy*": float(np.median(kernel_ratios)),
               "numpy/numpy*": float(np.median(control))}
        rows.append(row)
        cells = [label, f"{m}x{k}x{n}", f"{row['nova']:.0f}", f"{row['numpy']:.0f}",
                 f"{row['numpy_unrestricted']:.0f}", f"{row['nova/numpy*']:.2f}",
                 f"{row['nova_kernel']:.0f}", f"{row['kernel/numpy*']:.2f}"]
        if args.rounds > 1:
            cells.append(_spread(ratios))
        if torch is not None:
            cells += [f"{row['torch']:.0f}", f"{row['nova'] / row['torch']:.2f}"]
        cells.append(f"{row['numpy/numpy*']:.2f}")
        print(" | ".join(cells), flush=True)
        lines.append(" | ".join(cells))
    summary = summarize(rows)
    print(summary)
    lines += ["", summary]
    for peer in (here, free, torch):
        if peer is not None:
            peer.close()
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        suffix = f"-{args.threads}thread" if args.threads else ""
        (RESULTS / f"gemm{suffix}.json").write_text(json.dumps({"header": header,
                                                               "rows": rows}, indent=1))
        (RESULTS / f"gemm{suffix}.md").write_text("# GEMM (float32)\n\n```\n" + "\n".join(lines)
                                         + "\n```\n")
    return rows


if __name__ == "__main__":
    main()

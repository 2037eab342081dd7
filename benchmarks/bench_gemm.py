"""GEMM throughput: Nova's register-tiled kernel against numpy (OpenBLAS) and PyTorch.

    python -m benchmarks.bench_gemm [--reps 5] [--tokens 2048]

Square N = 256..2048 and the products of a GPT training step for the ``small``,
``medium`` and ``gpt-42m`` presets (forward ``x @ W^T``, backward ``dY @ W`` and
``dY^T @ X``) at ``--tokens`` rows. GFLOP/s = 2 M N K / median time; ratios are from
this one run. This machine may set OPENBLAS_CORETYPE (an older kernel for OpenBLAS);
numpy is therefore also timed in a subprocess with those variables removed, and the
kernel threadpoolctl reports is printed for both.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import nova as nv
from benchmarks.common import median_time
from models.gpt import preset
from nova.compiler.device import detect_cpu

RESULTS = Path(__file__).resolve().parent / "results"


def shapes(tokens: int) -> list[tuple[str, int, int, int, bool, bool]]:
    """(label, M, K, N, transpose_a, transpose_b) as the step computes them."""
    out = [(f"square {n}", n, n, n, False, False) for n in (256, 512, 1024, 2048)]
    for name in ("small", "medium", "gpt-42m"):
        d, v = preset(name).d, preset(name).vocab
        for layer, (k, n) in {"qkv": (d, 3 * d), "mlp up": (d, 4 * d), "mlp down": (4 * d, d),
                              "lm head": (d, v)}.items():
            out.append((f"{name} {layer} fwd", tokens, k, n, False, True))     # x @ W^T
            out.append((f"{name} {layer} dX", tokens, n, k, False, False))     # dY @ W
            out.append((f"{name} {layer} dW", n, tokens, k, True, False))      # dY^T @ X
    return out


def operands(m: int, k: int, n: int, ta: bool, tb: bool):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    return a, b


def time_numpy(cases, reps: int) -> list[float]:
    out = []
    for _, m, k, n, ta, tb in cases:
        a, b = operands(m, k, n, ta, tb)
        x, y = (a.T if ta else a), (b.T if tb else b)
        out.append(median_time(lambda: x @ y, reps))
    return out


def blas_info() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed"
    info = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    return ", ".join(f"{i.get('internal_api')} {i.get('architecture', '?')} "
                     f"({i.get('num_threads')} threads)" for i in info) or "no BLAS found"


def numpy_unrestricted(tokens: int, reps: int) -> tuple[list[float], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENBLAS_")}
    code = ("import json, sys; from benchmarks.bench_gemm import *; "
            f"c = shapes({tokens}); print(json.dumps([time_numpy(c, {reps}), blas_info()]))")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, cwd=Path(__file__).resolve().parents[1])
    if proc.returncode:
        return [], f"failed: {proc.stderr.strip().splitlines()[-1:]}"
    times, info = json.loads(proc.stdout.strip().splitlines()[-1])
    return times, info


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_gemm", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--tokens", type=int, default=2048)
    p.add_argument("--quick", action="store_true", help="a few small shapes, no subprocess")
    args = p.parse_args(argv)
    nv.set_engine("cpu")
    cases = shapes(args.tokens)
    if args.quick:
        cases = [c for c in cases if c[1] * c[2] * c[3] <= 512**3][:4]
    spec = detect_cpu()
    try:
        import torch
    except ImportError:
        torch = None
    np_times = time_numpy(cases, args.reps)
    np_free, free_info = numpy_unrestricted(args.tokens, args.reps) if not args.quick else ([], "")
    header = (f"cpu {spec.name}, {spec.cores} cores, {spec.isa}; theoretical peak "
              f"{spec.peak_flops / 1e9:.0f} GFLOP/s (DeviceSpec estimate)\n"
              f"numpy BLAS here: {blas_info()}\n"
              + (f"numpy BLAS unrestricted (OPENBLAS_* unset): {free_info}\n" if free_info else ""))
    print(header)
    cols = ["shape", "MxKxN", "nova GF/s", "numpy GF/s", "nova/numpy"]
    if np_free:
        cols += ["numpy* GF/s", "nova/numpy*"]
    if torch is not None:
        cols += ["torch GF/s", "nova/torch"]
    print(" | ".join(cols))
    rows = []
    for i, (label, m, k, n, ta, tb) in enumerate(cases):
        a, b = operands(m, k, n, ta, tb)
        ta_, tb_ = nv.from_numpy(a), nv.from_numpy(b)

        def run_nova():
            c = (ta_.T if ta else ta_) @ (tb_.T if tb else tb_)
            nv.realize(c)
        flops = 2.0 * m * n * k
        row = {"shape": label, "m": m, "k": k, "n": n,
               "nova": flops / median_time(run_nova, args.reps) / 1e9,
               "numpy": flops / np_times[i] / 1e9}
        if np_free:
            row["numpy_unrestricted"] = flops / np_free[i] / 1e9
        if torch is not None:
            x, y = torch.from_numpy(a), torch.from_numpy(b)
            x, y = (x.T if ta else x), (y.T if tb else y)
            row["torch"] = flops / median_time(lambda: x @ y, args.reps) / 1e9
        rows.append(row)
        cells = [label, f"{m}x{k}x{n}", f"{row['nova']:.0f}", f"{row['numpy']:.0f}",
                 f"{row['nova'] / row['numpy']:.2f}"]
        if np_free:
            cells += [f"{row['numpy_unrestricted']:.0f}",
                      f"{row['nova'] / row['numpy_unrestricted']:.2f}"]
        if torch is not None:
            cells += [f"{row['torch']:.0f}", f"{row['nova'] / row['torch']:.2f}"]
        print(" | ".join(cells), flush=True)
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "gemm.json").write_text(json.dumps({"header": header, "rows": rows}, indent=1))
    return rows


if __name__ == "__main__":
    main()

"""GPT training throughput and memory: Nova against PyTorch (eager, torch.compile), JAX
(jit of the whole step) and IREE (Nova's step exported as StableHLO, compiled by IREE),
each in its own process, on the same work.

    python -m benchmarks.bench_train --preset small --steps 30
    python -m benchmarks.bench_train --preset small --frameworks nova nova-compiled
    python -m benchmarks.bench_train --parity          # Nova vs PyTorch losses, 20 steps

Nova runs twice: ``nova`` is the step as plain code (each step records its ops and finds
its executable by hashing the graph), ``nova-compiled`` the same step function wrapped in
``nv.compile`` (replayed without its Python once two recorded calls agreed). For both it
reports the time a step spends outside its kernels, on ``--profile-steps`` more steps run
under ``nv.debug.profile`` after the timed ones: the median over those steps of step time
minus kernel time (``total()``) minus the profiler's own bookkeeping (it formats every
kernel's description after each step, ~2 ms a small-GPT step, which an unprofiled step
does not pay; measured, see ``peers/nova_gpt.profile_kernels``). Tokens/s and losses
come from the timed, unprofiled steps.

Writes ``benchmarks/results/train_<presets>.{md,json,png}``. Ratios are peer / Nova
(``nova-compiled`` where it ran, else ``nova``): a tokens/s ratio below 1 means Nova is
faster; a memory ratio above 1 means Nova uses less.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import fields
from pathlib import Path

import numpy as np

from benchmarks.common import Result, Work
from benchmarks.run_one import FRAMEWORKS, PROFILE_STEPS

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def run_isolated(framework: str, work: Work, timeout: float,
                 env: dict[str, str] | None = None, profile_steps: int = 0) -> Result:
    """Run ``framework`` on ``work`` in a fresh process (``benchmarks.run_one``), Nova
    with ``profile_steps`` profiled steps after the timed ones (for the overhead)."""
    cmd = [sys.executable, "-m", "benchmarks.run_one", framework, work.preset, str(work.steps),
           str(work.batch_size), str(profile_steps), str(work.dropout)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        r = Result(framework, work.preset, work.steps, work.tokens_per_step, available=False)
        r.note = f"failed (exit {proc.returncode}): {' | '.join(tail)}"
        return r
    data = json.loads(line[len("RESULT "):])
    r = Result(**{f.name: data[f.name] for f in fields(Result) if f.name in data})
    print(f"  {framework:14s} done in {time.perf_counter() - t0:6.1f}s"
          + ("" if r.available else f"  ({r.note})")
          + ("" if r.replays is None else f"  ({_replayed(r)})"), flush=True)
    return r


def _replayed(r: Result) -> str:
    return f"{r.replays} of {r.replays + r.recorded} calls of the step replayed"


def _base(results: list[Result], preset: str) -> Result | None:
    """The Nova run a preset's ratios are taken against: nv.compile's where it ran (as
    models/train.py trains), else the plain one."""
    runs = {r.framework: r for r in results if r.preset == preset and r.available}
    return runs.get("nova-compiled") or runs.get("nova")


def _ms(seconds: float) -> str:
    return "–" if seconds != seconds else f"{seconds * 1e3:.1f}"     # NaN: not measured


def table(results: list[Result]) -> str:
    lines = ["| preset | framework | first step (s) | tokens/s | tokens/s vs Nova | peak RSS (MiB) "
             "| memory vs Nova | final loss | step − kernels (ms) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if not r.available:
            lines.append(f"| {r.preset} | {r.framework} | – | – | – | – | – | {r.note} | – |")
            continue
        base = _base(results, r.preset)
        tok_ratio = f"{r.tokens_per_s / base.tokens_per_s:.2f}x" if base else "–"
        mem_ratio = (f"{r.peak_rss_mb / base.peak_rss_mb:.2f}x" if base and base.peak_rss_mb > 0
                     else "–")
        lines.append(f"| {r.preset} | {r.framework} | {r.first_step_s:.2f} | "
                     f"{r.tokens_per_s:,.0f} | {tok_ratio} | {r.peak_rss_mb:,.0f} | {mem_ratio} | "
                     f"{r.losses[-1]:.4f} | {_ms(r.overhead_s)} |")
    return "\n".join(lines)


def overhead_report(results: list[Result]) -> str:
    """Per Nova run: the time a step spends outside its kernels, with the two medians
    it is the difference of (``Result.overhead_s``)."""
    lines = []
    for r in results:
        if not r.available or not r.kernel_times:
            continue
        how = f"; {_replayed(r)}" if r.replays is not None else ""
        book = float(np.median(r.bookkeeping_times)) if r.bookkeeping_times else 0.0
        lines.append(f"  {r.preset} {r.framework:14s} {r.overhead_s * 1e3:7.2f} ms per step "
                     f"(median over {len(r.kernel_times)} profiled steps; kernels "
                     f"{r.kernel_s * 1e3:.1f} ms, profiler bookkeeping {book * 1e3:.2f} ms "
                     f"taken out; median timed step {r.steady_step_s * 1e3:.1f} ms{how})")
    if not lines:
        return ""
    return ("step time − kernel time (nv.debug.profile's total(); the profiler's own "
            "bookkeeping not counted):\n" + "\n".join(lines))


def chart(results: list[Result], path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("  (matplotlib not installed: no chart; pip install -e .[bench])")
        return False
    ok = [r for r in results if r.available]
    labels = [f"{r.preset}\n{r.framework}" for r in ok]
    colors = ["#d62728" if r.framework.startswith("nova") else "#7f7f7f" for r in ok]
    fig, axes = plt.subplots(1, 2, figsize=(max(8, 1.3 * len(ok) + 4), 4.5))
    for ax, values, title in ((axes[0], [r.tokens_per_s for r in ok], "tokens/s (higher is better)"),
                              (axes[1], [r.peak_rss_mb for r in ok],
                               "peak RSS above baseline, MiB (lower is better)")):
        ax.bar(range(len(ok)), values, color=colors)
        ax.set_xticks(range(len(ok)), labels, fontsize=8)
        ax.set_title(title, fontsize=10)
    fig.suptitle("GPT training on CPU: Nova vs peers (same model, batch, AdamW)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def parity(preset: str, steps: int, batch_size: int) -> float:
    """Nova and PyTorch from identical weights and batches; returns the max relative
    loss difference over ``steps`` AdamW steps."""
    from benchmarks.peers import nova_gpt, torch_gpt
    work = Work(preset, steps, batch_size)
    model = nova_gpt.build(work)
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    _, nova_losses = nova_gpt.train(work, model)
    _, torch_losses = torch_gpt.train(work, state=state)
    print(f"loss parity, preset {preset}, {steps} AdamW steps, batch {batch_size}")
    print(f"{'step':>4}  {'nova':>10}  {'torch':>10}  {'rel diff':>9}")
    worst = 0.0
    for i, (a, b) in enumerate(zip(nova_losses, torch_losses)):
        rel = abs(a - b) / abs(b)
        worst = max(worst, rel)
        print(f"{i:4d}  {a:10.6f}  {b:10.6f}  {rel:9.2e}")
    print(f"max relative difference: {worst:.2e}")
    return worst


def main(argv: list[str] | None = None) -> list[Result]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", nargs="+", default=["small", "medium"])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--frameworks", nargs="+", default=list(FRAMEWORKS), choices=list(FRAMEWORKS))
    p.add_argument("--out", default=str(RESULTS))
    p.add_argument("--timeout", type=float, default=3600, help="seconds per framework run")
    p.add_argument("--profile-steps", type=int, default=PROFILE_STEPS,
                   help="Nova: steps run under nv.debug.profile after the timed ones, for "
                        "the kernel time (0: no overhead measurement)")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="dropout in every framework's model (embeddings, residuals, the "
                        "attention probabilities); results go to train_*_dropout0_1.* for 0.1")
    p.add_argument("--parity", action="store_true", help="only the Nova/PyTorch loss parity")
    args = p.parse_args(argv)
    if args.parity:
        worst = parity(args.preset[0] if args.preset != ["small", "medium"] else "small",
                       20, args.batch_size)
        if worst > 1e-3:
            raise SystemExit(f"parity: max relative difference {worst:.2e} exceeds 1e-3")
        return []
    results = []
    for preset in args.preset:
        work = Work(preset, args.steps, args.batch_size, dropout=args.dropout)
        print(f"preset {preset}: {args.steps} steps of {work.tokens_per_step} tokens", flush=True)
        for fw in args.frameworks:
            results.append(run_isolated(fw, work, args.timeout,
                                        profile_steps=args.profile_steps))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / (f"train_{'_'.join(args.preset)}"
                  + (f"_dropout{args.dropout:g}".replace(".", "_") if args.dropout else ""))
    md = table(results)
    overhead = overhead_report(results)
    command = " ".join(sys.argv[1:] if argv is None else argv)
    meta = (f"{args.steps} steps, batch {args.batch_size}, "
            + (f"dropout {args.dropout:g}, " if args.dropout else "")
            + "float32, CPU "
            f"({os.cpu_count()} cores), {time.strftime('%Y-%m-%d')}: "
            f"`python -m benchmarks.bench_train {command}`. Ratios are against "
            "nova-compiled where it ran, else nova.")
    stem.with_suffix(".md").write_text(f"# GPT training benchmark\n\n{meta}\n\n{md}\n"
                                       + (f"\n```\n{overhead}\n```\n" if overhead else ""))
    stem.with_suffix(".json").write_text(json.dumps(
        {"meta": meta, "results": [r.to_json() for r in results]}, indent=1))
    chart(results, stem.with_suffix(".png"))
    print(md)
    if overhead:
        print(overhead)
    print(f"wrote {stem}.md, .json" + (", .png" if stem.with_suffix(".png").exists() else ""))
    return results


if __name__ == "__main__":
    main()

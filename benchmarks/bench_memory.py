"""Peak memory of a GPT training step: Nova (each rematerialization mode) against PyTorch.

    python -m benchmarks.bench_memory                      # small and medium, 4 steps
    python -m benchmarks.bench_memory --preset medium --steps 3

Each framework runs in its own process (``benchmarks.run_one``): peak RSS above a
baseline taken after imports and corpus loading, so it counts the model, the optimizer
state, every step's activations and temporaries, allocator caches, and — for Nova — the
compilation of the step. Nova's own plan (``nv.debug.memory_report()``: arguments +
arena + fresh results) is printed alongside. Ratios are Nova / PyTorch eager: below 1
means Nova uses less. Writes ``benchmarks/results/memory_<presets>.{md,json}``.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from benchmarks.bench_train import RESULTS, run_isolated
from benchmarks.common import Result, Work

# (label, framework, environment): Nova once per rematerialization mode.
RUNS = [("nova (remat off)", "nova", {"NOVA_REMAT": "off"}),
        ("nova (remat default)", "nova", {"NOVA_REMAT": "default"}),
        ("nova (remat aggressive)", "nova", {"NOVA_REMAT": "aggressive"}),
        ("torch-eager", "torch-eager", {})]


def table(rows: list[tuple[str, Result]]) -> str:
    torch = {r.preset: r for label, r in rows if label == "torch-eager" and r.available}
    lines = ["| preset | run | peak RSS above baseline (MiB) | vs torch eager | Nova's plan (MiB) "
             "| tokens/s | final loss |", "|---|---|---|---|---|---|---|"]
    for label, r in rows:
        if not r.available:
            lines.append(f"| {r.preset} | {label} | – | – | – | – | {r.note} |")
            continue
        base = torch.get(r.preset)
        ratio = f"{r.peak_rss_mb / base.peak_rss_mb:.2f}x" if base and base.peak_rss_mb else "–"
        plan = f"{r.planned_peak_mb:,.0f}" if r.planned_peak_mb else "–"
        lines.append(f"| {r.preset} | {label} | {r.peak_rss_mb:,.0f} | {ratio} | {plan} | "
                     f"{r.tokens_per_s:,.0f} | {r.losses[-1]:.4f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[tuple[str, Result]]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_memory", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", nargs="+", default=["small", "medium"])
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--runs", nargs="+", default=[label for label, _, _ in RUNS],
                   choices=[label for label, _, _ in RUNS])
    p.add_argument("--out", default=str(RESULTS))
    p.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    args = p.parse_args(argv)
    rows = []
    for preset in args.preset:
        work = Work(preset, args.steps, args.batch_size)
        print(f"preset {preset}: {args.steps} steps of {work.tokens_per_step} tokens", flush=True)
        for label, framework, env in RUNS:
            if label in args.runs:
                rows.append((label, run_isolated(framework, work, args.timeout, env)))
    md = table(rows)
    print(md)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"memory_{'_'.join(args.preset)}"
    meta = (f"{args.steps} steps, batch {args.batch_size}, float32, CPU ({os.cpu_count()} "
            f"cores), {time.strftime('%Y-%m-%d')}")
    stem.with_suffix(".md").write_text(f"# GPT training-step memory\n\n{meta}\n\n{md}\n")
    stem.with_suffix(".json").write_text(json.dumps(
        [{"run": label, **r.to_json()} for label, r in rows], indent=1))
    print(f"wrote {stem}.md and .json")
    return rows


if __name__ == "__main__":
    main()

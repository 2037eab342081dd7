"""Peak memory of a GPT training step: Nova against PyTorch eager, and the largest batch
each trains at under one memory cap.

    python -m benchmarks.bench_memory                       # small and medium, 4 steps
    python -m benchmarks.bench_memory --preset gpt-42m gpt-144m --batch-size 2 \\
        --runs "nova (remat default)" nova-compiled torch-eager
    python -m benchmarks.bench_memory --preset gpt-42m --cap-gib 6 --cap-preset gpt-144m

**Peak memory.** Each framework runs in its own process (``benchmarks.run_one``): peak
RSS above a baseline taken after imports and corpus loading, so it counts the model,
the optimizer state, every step's activations and temporaries, allocator caches, and --
for Nova -- the compilation of the step. Nova's own plan (``nv.debug.memory_report()``:
arguments + arena + fresh results) is printed alongside. Ratios are Nova / PyTorch
eager: below 1 means Nova uses less. ``nova`` runs the step as plain code, where the
logits and gradients the loop still holds when ``opt.step()`` realizes are results of
the step; ``nova-compiled`` wraps it in ``nv.compile``, as ``models/train.py`` trains,
where the call's return is the step boundary and they are not.

**Under a cap** (``--cap-gib``): each framework trains ``--cap-preset`` for
``--cap-steps`` steps in a process whose memory the kernel caps (its own cgroup:
``benchmarks.memory_cap``; the process is killed when it goes over, as on a full
machine). Batches from ``--cap-batches`` are tried upward, doubling, until one fails,
then the gap is bisected; the table gives the largest batch that trained, its tokens/s, and how
the next one failed. Needs a writable cgroup memory controller (root); elsewhere the
table says so.

Writes ``benchmarks/results/memory_<presets>.{md,json}`` and, with a cap,
``memory_cap_<preset>.{md,json}``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.bench_train import RESULTS, ROOT, run_isolated
from benchmarks.common import Result, Work
from benchmarks.memory_cap import cap_support, run_capped

# (label, framework, environment): Nova once per rematerialization mode.
RUNS = [("nova (remat off)", "nova", {"NOVA_REMAT": "off"}),
        ("nova (remat default)", "nova", {"NOVA_REMAT": "default"}),
        ("nova (remat aggressive)", "nova", {"NOVA_REMAT": "aggressive"}),
        ("nova-compiled", "nova-compiled", {"NOVA_REMAT": "default"}),
        ("torch-eager", "torch-eager", {})]
CAP_BATCHES = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]


def table(rows: list[tuple[str, Result]]) -> str:
    torch = {r.preset: r for label, r in rows if label == "torch-eager" and r.available}
    lines = ["| preset | batch | run | peak RSS above baseline (MiB) | vs torch eager "
             "| Nova's plan (MiB) | tokens/s | final loss |",
             "|---|---|---|---|---|---|---|---|"]
    for label, r in rows:
        batch = _batch(r)
        if not r.available:
            lines.append(f"| {r.preset} | {batch} | {label} | – | – | – | – | {r.note} |")
            continue
        base = torch.get(r.preset)
        ratio = f"{r.peak_rss_mb / base.peak_rss_mb:.2f}x" if base and base.peak_rss_mb else "–"
        plan = f"{r.planned_peak_mb:,.0f}" if r.planned_peak_mb else "–"
        lines.append(f"| {r.preset} | {batch} | {label} | {r.peak_rss_mb:,.0f} | {ratio} | "
                     f"{plan} | {r.tokens_per_s:,.0f} | {r.losses[-1]:.4f} |")
    return "\n".join(lines)


def _batch(r: Result) -> str:
    try:
        return str(r.tokens_per_step // Work(r.preset, 1, 1).tokens_per_step)
    except ValueError:          # not a preset of models/gpt.py
        return "–"


# ------------------------------------------------------------------ under a cap


def _trial(framework: str, preset: str, batch: int, steps: int, cap_bytes: int,
           timeout: float) -> tuple[Result | None, str, float | None]:
    """One capped run: (its Result or None, how it ended, the group's peak MiB)."""
    cmd = [sys.executable, "-m", "benchmarks.run_one", framework, preset, str(steps),
           str(batch), "0"]
    env = {**os.environ, "NOVA_REMAT": os.environ.get("NOVA_REMAT", "default")}
    run = run_capped(cmd, cap_bytes, timeout, cwd=str(ROOT), env=env)
    peak = None if run.peak_bytes is None else run.peak_bytes / 2**20
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if run.returncode == 0 and line is not None:
        data = json.loads(line[len("RESULT "):])
        r = Result(framework, preset, steps, data["tokens_per_step"],
                   data["step_times"], data["losses"], data["peak_rss_mb"],
                   planned_peak_mb=data.get("planned_peak_mb", 0.0))
        return r, f"trained ({run.seconds:.0f} s)", peak
    if run.oom_killed:
        return None, "killed by the cap (out of memory)", peak
    tail = (run.stderr or run.stdout).strip().splitlines()[-1:] or [""]
    oom = any(w in tail[0] for w in ("MemoryError", "OutOfMemory", "can't allocate",
                                     "not enough memory"))
    how = "out of memory: " if oom else f"failed (exit {run.returncode}): "
    return None, how + tail[0][-160:], peak


def largest_batch(framework: str, preset: str, batches: list[int], steps: int,
                  cap_bytes: int, timeout: float,
                  log: Callable[[str], None] = lambda m: print(m, flush=True)) -> list[dict]:
    """Every trial, in the order run: batches upward, doubling, until one fails, then a
    bisection of the gap between the last that trained and the first that did not."""
    trials: list[dict] = []

    def attempt(b: int) -> bool:
        r, how, peak = _trial(framework, preset, b, steps, cap_bytes, timeout)
        trials.append({"batch": b, "trained": r is not None, "how": how, "cgroup_peak_mb": peak,
                       "tokens_per_s": r.tokens_per_s if r else None,
                       "peak_rss_mb": r.peak_rss_mb if r else None,
                       "planned_peak_mb": r.planned_peak_mb if r else None})
        log(f"  {framework:14s} batch {b:3d}: {how}")
        return r is not None

    ok, bad, i = -1, len(batches), 0
    while i < len(batches):            # upward, doubling the batch
        if not attempt(batches[i]):
            bad = i
            break
        ok = i
        i = next((j for j in range(i + 1, len(batches)) if batches[j] >= 2 * batches[i]),
                 i + 1)
    while bad - ok > 1:
        mid = (ok + bad) // 2
        if attempt(batches[mid]):
            ok = mid
        else:
            bad = mid
    return trials


def cap_table(preset: str, cap_gib: float, results: dict[str, list[dict]]) -> str:
    lines = [f"| framework | largest batch under {cap_gib:g} GiB | tokens/s there | "
             "peak use there (MiB, cgroup) | next batch |", "|---|---|---|---|---|"]
    for framework, trials in results.items():
        good = [t for t in trials if t["trained"]]
        best = max(good, key=lambda t: t["batch"]) if good else None
        fails = sorted((t for t in trials if not t["trained"]), key=lambda t: t["batch"])
        nxt = (f"{fails[0]['batch']}: {fails[0]['how']}" if fails else "not reached")
        if best is None:
            lines.append(f"| {framework} | none | – | – | {nxt} |")
            continue
        peak = "–" if best["cgroup_peak_mb"] is None else f"{best['cgroup_peak_mb']:,.0f}"
        lines.append(f"| {framework} | {best['batch']} | {best['tokens_per_s']:,.0f} | {peak} "
                     f"| {nxt} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[tuple[str, Result]]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_memory", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", nargs="*", default=["small", "medium"])
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--runs", nargs="+", default=[label for label, _, _ in RUNS],
                   choices=[label for label, _, _ in RUNS])
    p.add_argument("--out", default=str(RESULTS))
    p.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    p.add_argument("--cap-gib", type=float, default=None,
                   help="also find the largest batch each framework trains at under this cap")
    p.add_argument("--cap-preset", default="gpt-144m")
    p.add_argument("--cap-batches", type=int, nargs="+", default=CAP_BATCHES)
    p.add_argument("--cap-steps", type=int, default=4)
    p.add_argument("--cap-frameworks", nargs="+", default=["nova-compiled", "torch-eager"])
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for preset in args.preset:
        work = Work(preset, args.steps, args.batch_size)
        print(f"preset {preset}: {args.steps} steps of {work.tokens_per_step} tokens", flush=True)
        for label, framework, env in RUNS:
            if label in args.runs:
                rows.append((label, run_isolated(framework, work, args.timeout, env)))
    if rows:
        md = table(rows)
        print(md)
        stem = out / f"memory_{'_'.join(args.preset)}"
        meta = (f"{args.steps} steps, batch {args.batch_size}, float32, CPU ({os.cpu_count()} "
                f"cores), {time.strftime('%Y-%m-%d')}")
        stem.with_suffix(".md").write_text(f"# GPT training-step memory\n\n{meta}\n\n{md}\n")
        stem.with_suffix(".json").write_text(json.dumps(
            [{"run": label, **r.to_json()} for label, r in rows], indent=1))
        print(f"wrote {stem}.md and .json")
    if args.cap_gib is not None:
        cap_experiment(args, out)
    return rows


def cap_experiment(args: argparse.Namespace, out: Path) -> dict[str, list[dict]]:
    """The largest batch of ``args.cap_preset`` each framework trains at under the cap."""
    stem = out / f"memory_cap_{args.cap_preset}"
    why = cap_support()
    if why is not None:
        print(f"memory cap: not run: {why}")
        stem.with_suffix(".md").write_text(f"# Largest batch under a memory cap\n\nnot run: "
                                           f"{why}\n")
        return {}
    cap = int(args.cap_gib * 2**30)
    print(f"{args.cap_preset} under a {args.cap_gib:g} GiB cap, {args.cap_steps} steps per "
          "trial", flush=True)
    results = {fw: largest_batch(fw, args.cap_preset, sorted(args.cap_batches),
                                 args.cap_steps, cap, args.timeout)
               for fw in args.cap_frameworks}
    md = cap_table(args.cap_preset, args.cap_gib, results)
    print(md)
    meta = (f"{args.cap_preset}, cap {args.cap_gib:g} GiB on the process and its children "
            f"(a cgroup), {args.cap_steps} steps per trial, float32, CPU ({os.cpu_count()} "
            f"cores), {time.strftime('%Y-%m-%d')}")
    stem.with_suffix(".md").write_text(f"# Largest batch under a memory cap\n\n{meta}\n\n{md}\n")
    stem.with_suffix(".json").write_text(json.dumps(
        {"cap_gib": args.cap_gib, "preset": args.cap_preset, "trials": results}, indent=1))
    print(f"wrote {stem}.md and .json")
    return results


if __name__ == "__main__":
    main()

"""Training throughput with a core taken by another process (issue #25): Nova on its
default threads and on one thread, against PyTorch eager, quiet and with one core busy.

    python -m benchmarks.bench_contention                 # small GPT, 3 rounds
    python -m benchmarks.bench_contention --rounds 5 --steps 24
    python -m benchmarks.bench_contention --frameworks nova nova-unpinned

Each run is a fresh process (``--child``) training the small GPT of ``bench_train``
(shared weights, batch 16 x 128, AdamW; Nova's step under ``nv.compile``) for
``--steps`` steps; its tokens/s is the median over the steps after the first three
(compiles and warm-up). "Busy" runs have a spinning subprocess that this benchmark
starts before the run and stops after it, pinned to one CPU: the last of this
process's affinity mask (where Nova pins its first worker) or the first (where the
caller usually runs). Runs are interleaved, every (framework, condition) once per round, the
frameworks in reverse order every other round, so a shared VM's drift (and whatever
the previous run left behind) hits all of them alike; the table shows medians over rounds and
the ratios the issue asks for. ``nova-unpinned`` (not run by default) is Nova with
``NOVA_PIN_THREADS=0``.

Writes ``benchmarks/results/contention.{md,json}`` (``contention_<frameworks>`` for
another choice of frameworks).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
FRAMEWORKS = ("nova", "nova-1thread", "torch-eager")
OPTIONAL = ("nova-unpinned",)
CONDITIONS = ("quiet", "busy-last", "busy-first")   # NOVA_PIN_THREADS=0: whether pinning helps under load
WARMUP_STEPS = 3


def child(framework: str, steps: int, preset: str = "small", batch: int = 16) -> None:
    """Train in this process and print ``RESULT {json}``."""
    from benchmarks.common import Work
    work = Work(preset, steps, batch)
    info: dict = {}
    if framework.startswith("nova"):
        if framework == "nova-unpinned":
            os.environ["NOVA_PIN_THREADS"] = "0"
        import nova as nv
        from benchmarks.peers import nova_gpt as peer
        if framework == "nova-1thread":
            nv.set_num_threads(1)
        times, losses = peer.train(work, compiled=True)
        from nova.runtime import threads
        pool = threads._state["pool"]
        info["threads"] = nv.get_num_threads()
        if pool is not None:
            info["bench_changes"] = pool.contention.changes
            info["benched_at_end"] = sorted(pool.contention.benched)
    else:
        import torch
        from benchmarks.peers import torch_gpt as peer
        times, losses = peer.train(work, compiled=False)
        info["threads"] = torch.get_num_threads()
    step = statistics.median(times[WARMUP_STEPS:])
    print("RESULT " + json.dumps({"tokens_per_s": work.tokens_per_step / step,
                                  "step_s": step, "loss": losses[-1], **info}), flush=True)


def _spinner(cpu: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    os.sched_setaffinity(proc.pid, {cpu})
    time.sleep(0.3)            # let it take the core before the run starts
    return proc


def run(framework: str, condition: str, steps: int, cpus: list[int], preset: str = "small",
        batch: int = 16) -> dict:
    """One fresh-process run of ``framework`` under ``condition``."""
    spinner = None
    if condition != "quiet":
        spinner = _spinner(cpus[-1] if condition == "busy-last" else cpus[0])
    try:
        proc = subprocess.run([sys.executable, "-m", "benchmarks.bench_contention", "--child",
                               framework, str(steps), preset, str(batch)], cwd=ROOT,
                              capture_output=True, text=True, timeout=900)
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise SystemExit(f"bench_contention: {framework} ({condition}) failed: {tail}")
    return json.loads(line[len("RESULT "):])


def main(argv: list[str] | None = None) -> dict[tuple[str, str], float] | None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--frameworks", nargs="+", default=list(FRAMEWORKS),
                    choices=FRAMEWORKS + OPTIONAL)
    ap.add_argument("--conditions", nargs="+", default=list(CONDITIONS), choices=CONDITIONS)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--child", nargs=4, metavar=("FRAMEWORK", "STEPS", "PRESET", "BATCH"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]), args.child[2], int(args.child[3]))
        return
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("bench_contention: needs at least 2 CPUs (one is made busy)")
    conditions = args.conditions
    print(f"load before: {os.getloadavg()[0]:.2f}; CPUs {cpus}; {args.rounds} rounds of "
          f"{args.steps} steps", flush=True)
    runs: dict[tuple[str, str], list[dict]] = {}
    for r in range(args.rounds):
        for condition in conditions:
            order = args.frameworks if r % 2 == 0 else args.frameworks[::-1]
            for fw in order:   # reversed every other round: no framework always runs first
                result = run(fw, condition, args.steps, cpus, args.preset, args.batch_size)
                runs.setdefault((fw, condition), []).append(result)
                print(f"  round {r + 1}: {fw:13s} {condition:10s} "
                      f"{result['tokens_per_s']:8.0f} tok/s", flush=True)
    median = {key: statistics.median(x["tokens_per_s"] for x in rs) for key, rs in runs.items()}
    lines = ["| run | " + " | ".join(f"tokens/s {c}" for c in conditions) + " |",
             "|---|" + "---|" * len(conditions)]
    for fw in args.frameworks:
        lines.append(f"| {fw} | " + " | ".join(f"{median[(fw, c)]:,.0f}" for c in conditions)
                     + " |")
    ratios = []
    for c in conditions:
        if ("nova", c) in median and ("nova-1thread", c) in median:
            ratios.append(f"- {c}: Nova default / Nova 1 thread = "
                          f"{median[('nova', c)] / median[('nova-1thread', c)]:.2f}")
        if ("nova", c) in median and ("torch-eager", c) in median:
            ratios.append(f"- {c}: Nova default / PyTorch eager = "
                          f"{median[('nova', c)] / median[('torch-eager', c)]:.2f}")
    report = "\n".join([
        f"# Throughput with one core busy ({args.preset} GPT, {args.steps} steps, median "
        f"of {args.rounds} interleaved rounds)", "",
        "`python -m benchmarks.bench_contention "
        f"--rounds {args.rounds} --steps {args.steps}"
        + ("" if args.preset == "small" else f" --preset {args.preset}")
        + ("" if args.frameworks == list(FRAMEWORKS) else
           " --frameworks " + " ".join(args.frameworks))
        + ("" if list(conditions) == list(CONDITIONS) else
           " --conditions " + " ".join(conditions)) + "`", "", *lines, "", *ratios, ""])
    print(report)
    args.out.mkdir(parents=True, exist_ok=True)
    name = "contention" if args.frameworks == list(FRAMEWORKS) else \
        "contention_" + "_".join(args.frameworks)
    if list(conditions) != list(CONDITIONS):
        name += "_" + "_".join(conditions)
    (args.out / f"{name}.md").write_text(report)
    (args.out / f"{name}.json").write_text(json.dumps(
        {f"{fw}/{c}": rs for (fw, c), rs in runs.items()}, indent=1))
    return median


if __name__ == "__main__":
    main()

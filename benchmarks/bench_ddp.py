"""Data-parallel scaling (issue #23): 2 ranks x 1 thread against 1 rank x 1 thread.

    python -m benchmarks.bench_ddp                       # small and medium, 3 rounds
    python -m benchmarks.bench_ddp --presets small --rounds 2 --steps 12
    python -m benchmarks.bench_ddp --device cuda --backend nccl   # one GPU per rank

Each run is a fresh job: ``mpiexec -n N python -m benchmarks.bench_ddp --child ...``
(N = 1 runs without mpiexec), every rank on one thread, training the GPT of
``bench_train`` (AdamW, the step under ``nv.compile``) on ``--batch`` sequences *per
rank* (weak scaling: two ranks train twice the tokens per step). Tokens/s is the whole
job's (every rank's sequences) over the median step after the first three; scaling
efficiency = tokens/s(2 ranks) / (2 x tokens/s(1 rank)). Runs alternate 1 and 2 ranks,
round by round, so a shared VM's drift hits both.

How much of the all-reduce is hidden: rank 0 profiles ``--profile-steps`` more steps
(``nv.debug.profile``). The time its ``all_reduce_wait`` kernels take is communication
the backward did not cover (the step waits); the time the same buckets take to
all-reduce alone, with nothing to overlap (a step of only those collectives, run right
after), is the whole cost. Hidden = 1 - waited / alone, and 0 where the step waited
longer than that: rank 0 then also waited for a slower rank to arrive (skew, which the
two raw columns show).

Writes ``benchmarks/results/ddp_<presets>.{md,json}``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
WARMUP_STEPS = 3


def child(preset: str, steps: int, batch: int, profile_steps: int,
          progress_thread: bool = True, bucket_mb: float | None = None,
          device: str = "cpu", backend: str = "mpi") -> None:
    """One rank: train, then (rank 0, CPU) profile; print ``RESULT {json}`` on rank 0."""
    import nova as nv
    import nova.distributed as dist
    from benchmarks.common import BETAS, EPS, LR, WEIGHT_DECAY, Timer, Work
    from benchmarks.peers.nova_gpt import build
    from nova.nn.parallel import DistributedDataParallel as DDP
    from nova.runtime import collectives

    collectives.Mpi.progress_thread = progress_thread
    if device == "cpu":
        nv.set_num_threads(1)
    dist.init_process_group(backend, timeout=600)
    rank, world = dist.get_rank(), dist.get_world_size()
    work = Work(preset, steps + profile_steps, batch, seed=rank)   # each rank its own data
    model = build(Work(preset, steps, batch))                      # the same weights
    if device != "cpu":
        model.to(device)
    net = DDP(model, bucket_cap_mb=bucket_mb) if world > 1 else model
    opt = nv.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS,
                         weight_decay=WEIGHT_DECAY)

    def step(x, y):
        _, loss = net(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    step = nv.compile(step)
    batches = work.batches()
    timer = Timer()
    for i in range(steps):
        x, y = batches(i)
        with timer:
            step(nv.tensor(x, device=device), nv.tensor(y, device=device)).item()
    waited, kernels, profiled = [], [], []
    # nv.debug.profile times CPU kernels: on a GPU the step's waits are not measured
    for i in range(steps, steps + (profile_steps if device == "cpu" else 0)):
        x, y = batches(i)
        with nv.debug.profile() as prof:
            t0 = time.perf_counter()
            step(nv.tensor(x), nv.tensor(y)).item()
            profiled.append(time.perf_counter() - t0)
        waited.append(sum(s for ran in prof.steps for _, desc, s in ran
                          if "all_reduce_wait" in desc))
        kernels.append(prof.total())
    alone = _alone(net, device) if world > 1 else []
    dist.destroy_process_group()
    if rank == 0:
        median = statistics.median(timer.times[WARMUP_STEPS:])
        print("RESULT " + json.dumps({
            "world": world, "tokens_per_s": world * work.tokens_per_step / median,
            "step_s": median, "device": device, "backend": backend,
            "waited_s": statistics.median(waited) if waited else None,
            "alone_s": statistics.median(alone) if alone else 0.0,
            "kernel_s": statistics.median(kernels) if kernels else 0.0,
            "buckets": len(getattr(net, "_buckets", ())),
            "grad_mb": sum(p.numel() * 4 for p in model.parameters()) / 2**20}), flush=True)


def _alone(net, device: str, reps: int = 5) -> list[float]:
    """Seconds a step of only the model's bucket all-reduces takes (nothing to hide
    them behind), median-ready: ``reps`` timed runs after one warm-up."""
    import numpy as np

    import nova as nv
    import nova.distributed as dist
    sizes = [sum(p.numel() for p in bucket) for bucket in net._buckets]
    buffers = [nv.tensor(np.ones(n, np.float32), device=device) for n in sizes]
    nv.realize(*buffers)
    times = []
    for r in range(reps + 1):
        dist.barrier()
        t0 = time.perf_counter()
        out = [dist.reduced(b) for b in buffers]
        nv.realize(*out)
        if r:
            times.append(time.perf_counter() - t0)
    return times


def run(world: int, preset: str, steps: int, batch: int, profile_steps: int,
        progress_thread: bool = True, bucket_mb: float | None = None,
        device: str = "cpu", backend: str = "mpi") -> dict:
    cmd = [sys.executable, "-m", "benchmarks.bench_ddp", "--child", "--presets", preset,
           "--steps", str(steps), "--batch", str(batch), "--profile-steps", str(profile_steps),
           "--device", device, "--backend", backend]
    if not progress_thread:
        cmd.append("--no-progress-thread")
    if bucket_mb is not None:
        cmd += ["--bucket-mb", str(bucket_mb)]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if world > 1:
        mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable) + os.pathsep
                               + env.get("PATH", ""))
        if mpiexec is None:
            raise SystemExit("bench_ddp: mpiexec not found (pip install -e .[distributed])")
        cmd = [mpiexec, "-n", str(world), "--bind-to",
               "core" if device == "cpu" else "none"] + cmd
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"bench_ddp: the {world}-rank {preset} run failed:\n"
                         f"{done.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def report(results: dict[tuple[str, int], list[dict]], args: argparse.Namespace) -> str:
    lines = [f"uptime at start: {args.uptime}; MPI progress thread: "
             f"{'no' if getattr(args, 'no_progress_thread', False) else 'yes'}; "
             f"bucket_cap_mb {getattr(args, 'bucket_mb', None) or 25}", "",
             f"per rank: batch {args.batch}, 1 thread; {args.steps} steps, median after "
             f"{WARMUP_STEPS}; medians over {args.rounds} rounds", "",
             "| preset | 1 rank tokens/s | 2 ranks tokens/s | scaling efficiency | gradients "
             "| buckets | all-reduce alone | waited in the step | hidden |",
             "|---|---|---|---|---|---|---|---|---|"]
    for preset in args.presets:
        one = statistics.median(r["tokens_per_s"] for r in results[(preset, 1)])
        two_runs = results[(preset, 2)]
        two = statistics.median(r["tokens_per_s"] for r in two_runs)
        alone = statistics.median(r["alone_s"] for r in two_runs)
        if two_runs[0]["waited_s"] is None:      # a GPU run: the waits are not profiled
            lines.append(f"| {preset} | {one:,.0f} | {two:,.0f} | {two / (2 * one):.2f} | "
                         f"{two_runs[0]['grad_mb']:.1f} MiB | {two_runs[0]['buckets']} | "
                         f"{statistics.median(r['alone_s'] for r in two_runs) * 1e3:.2f} ms"
                         " | - | - |")
            continue
        waited = statistics.median(r["waited_s"] for r in two_runs)
        # waiting longer than the exchange alone takes is the ranks' skew: nothing hidden
        hidden = max(0.0, 1 - waited / alone) if alone > 0 else float("nan")
        lines.append(f"| {preset} | {one:,.0f} | {two:,.0f} | {two / (2 * one):.2f} | "
                     f"{two_runs[0]['grad_mb']:.1f} MiB | {two_runs[0]['buckets']} | "
                     f"{alone * 1e3:.2f} ms | {waited * 1e3:.2f} ms | {hidden:.0%} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_ddp", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--presets", nargs="+", default=["small", "medium"])
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--batch", type=int, default=8, help="sequences per rank")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--profile-steps", type=int, default=3)
    p.add_argument("--no-progress-thread", action="store_true",
                   help="no MPI progress thread (collectives.Mpi.progress_thread): the "
                        "all-reduces then move on only when a start or wait tests them")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="where each rank trains (cuda: one GPU per rank)")
    p.add_argument("--backend", default="mpi", choices=["mpi", "nccl"],
                   help="the process group's library (nccl: cuda only)")
    p.add_argument("--bucket-mb", type=float, default=None,
                   help="DistributedDataParallel's bucket_cap_mb (default: its 25)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.presets[0], args.steps, args.batch, args.profile_steps,
              not args.no_progress_thread, args.bucket_mb, args.device, args.backend)
        return {}
    args.uptime = os.getloadavg() if hasattr(os, "getloadavg") else "n/a"
    results: dict[tuple[str, int], list[dict]] = {}
    for r in range(args.rounds):
        for preset in args.presets:
            for world in ((1, 2) if r % 2 == 0 else (2, 1)):
                got = run(world, preset, args.steps, args.batch, args.profile_steps,
                          not args.no_progress_thread, args.bucket_mb, args.device,
                          args.backend)
                results.setdefault((preset, world), []).append(got)
                print(f"round {r + 1}, {preset}, {world} rank(s): "
                      f"{got['tokens_per_s']:,.0f} tokens/s", flush=True)
    text = report(results, args)
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = ("ddp_" + "_".join(args.presets) + ("_no_progress" if args.no_progress_thread else "")
            + (f"_{args.device}_{args.backend}" if args.device != "cpu" else "")
            + (f"_bucket{args.bucket_mb:g}" if args.bucket_mb else ""))
    (RESULTS / f"{name}.md").write_text(
        "# bench_ddp\n\n`python -m benchmarks.bench_ddp " + " ".join(argv or sys.argv[1:])
        + "`\n\n" + text + "\n")
    (RESULTS / f"{name}.json").write_text(json.dumps(
        {f"{k[0]}/{k[1]}": v for k, v in results.items()}, indent=1))
    return results


if __name__ == "__main__":
    main()

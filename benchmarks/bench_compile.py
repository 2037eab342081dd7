"""Cold start (issue #21): the first training step with an empty kernel cache, compiled on
one worker and on the default number (one per core), and again with the cache warm.

    python -m benchmarks.bench_compile                  # small GPT, 2 rounds
    python -m benchmarks.bench_compile --preset medium --rounds 3
    python -m benchmarks.bench_compile --generate 64    # and generation of 64 tokens

Each case is a fresh process (``--child``) with its own cache directory
(``NOVA_CACHE_DIR``): "cold" starts from an empty one, "warm" reuses the directory the
cold default run just filled. The first step is ``bench_train``'s (AdamW, batch 16,
under ``nv.compile``), timed from before the model is built to the loss being read, so
it includes model construction and every compile; import time is reported apart.
With ``--generate N``, two more cases time ``GPT.generate`` of N tokens after an
8-token prompt (top-k 50, model construction included), cold and warm. Rounds
interleave the cases; the table shows medians.

Writes ``benchmarks/results/compile_<preset>.md``.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


GENERATE_PROMPT = 8      # prompt tokens of the generation case
GENERATE_TOP_K = 50


def child(preset: str, generate: int = 0) -> None:
    t0 = time.perf_counter()
    importlib.import_module("nova")      # import time is reported apart
    from benchmarks.common import Work
    from benchmarks.peers import nova_gpt as peer
    from nova.runtime.kernel_cache import KERNELS
    imported = time.perf_counter()
    if generate:
        import numpy as np
        import nova as nv
        from models.gpt import GPT, preset as gpt_preset
        nv.manual_seed(0)
        cfg = gpt_preset(preset)
        model = GPT(cfg)
        model.eval()
        prompt = nv.tensor(np.arange(GENERATE_PROMPT, dtype=np.int64)[None] % cfg.vocab)
        out = model.generate(prompt, generate, top_k=GENERATE_TOP_K)
        assert out.shape == (1, GENERATE_PROMPT + generate)
    else:
        work = Work(preset, 1, 16)
        peer.train(work, compiled=True)
    done = time.perf_counter()
    print("RESULT " + json.dumps({
        "import_s": imported - t0, "first_step_s": done - imported,
        "compiled": KERNELS.stats.compiled, "disk_hits": KERNELS.stats.disk_hits,
        "compile_s": KERNELS.stats.compile_seconds}), flush=True)


def run(preset: str, cache: str, jobs: int | None, generate: int = 0) -> dict:
    env = {**os.environ, "NOVA_CACHE_DIR": cache}
    env.pop("NOVA_COMPILE_JOBS", None)
    if jobs is not None:
        env["NOVA_COMPILE_JOBS"] = str(jobs)
    cmd = [sys.executable, "-m", "benchmarks.bench_compile", "--child", preset]
    if generate:
        cmd += ["--generate", str(generate)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise SystemExit(f"bench_compile: {preset} (jobs {jobs}) failed: {tail}")
    return json.loads(line[len("RESULT "):])


def main(argv: list[str] | None = None) -> dict[str, float] | None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--generate", type=int, default=0, metavar="N",
                    help="also time generating N tokens, cold and warm")
    ap.add_argument("--child", metavar="PRESET", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.generate)
        return None
    from nova.compiler.targets.cpu.device import usable_cores
    cases: dict[str, list[dict]] = {"cold, 1 worker": [], "cold, default workers": [],
                                    "warm cache": []}
    gen = f"generate {args.generate} tokens"
    if args.generate:
        cases.update({f"{gen}, cold": [], f"{gen}, warm cache": []})
    print(f"{usable_cores()} usable cores; load {os.getloadavg()[0]:.2f}", flush=True)
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory() as serial, tempfile.TemporaryDirectory() as cache:
            cases["cold, 1 worker"].append(run(args.preset, serial, 1))
            cases["cold, default workers"].append(run(args.preset, cache, None))
            cases["warm cache"].append(run(args.preset, cache, None))
        if args.generate:
            with tempfile.TemporaryDirectory() as cache:
                cases[f"{gen}, cold"].append(run(args.preset, cache, None, args.generate))
                cases[f"{gen}, warm cache"].append(run(args.preset, cache, None,
                                                       args.generate))
        for name, results in cases.items():
            print(f"  round {r + 1}: {name:22s} first step {results[-1]['first_step_s']:6.2f} s "
                  f"({results[-1]['compiled']} kernels compiled)", flush=True)
    median = {name: statistics.median(x["first_step_s"] for x in rs) for name, rs in cases.items()}
    lines = ["| case | seconds | import (s) | kernels compiled | compile (s) |",
             "|---|---|---|---|---|"]
    for name, rs in cases.items():
        lines.append(f"| {name} | {median[name]:.2f} | "
                     f"{statistics.median(x['import_s'] for x in rs):.2f} | "
                     f"{rs[0]['compiled']} | {statistics.median(x['compile_s'] for x in rs):.2f} |")
    speedup = median["cold, 1 worker"] / median["cold, default workers"]
    report = "\n".join([
        f"# First step, {args.preset} GPT ({usable_cores()} cores; median of {args.rounds} "
        f"rounds)", "", f"`python -m benchmarks.bench_compile --preset {args.preset} "
        f"--rounds {args.rounds}" + (f" --generate {args.generate}" if args.generate else "")
        + "`", "", "Seconds: the first training step (model construction and compiles "
        "included), or the whole generation after an "
        f"{GENERATE_PROMPT}-token prompt (top-k {GENERATE_TOP_K}).", "", *lines, "",
        f"- cold: 1 worker / default workers = {speedup:.2f}x", ""])
    print(report)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"compile_{args.preset}.md").write_text(report)
    return median


if __name__ == "__main__":
    main()

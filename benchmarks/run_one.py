"""Run one framework's training loop in this process and print its Result as JSON.

``bench_train`` starts one of these per framework, so each peak RSS is that framework's
own. Usage: ``python -m benchmarks.run_one FRAMEWORK PRESET STEPS BATCH``.
"""
from __future__ import annotations

import importlib.util
import sys

from benchmarks.common import Result, Work, dump, peak_rss_mb, rss_mb

FRAMEWORKS = {
    "nova": "nova",
    "torch-eager": "torch",
    "torch-compile": "torch",
    "jax": "jax",
}


def available(framework: str) -> bool:
    return importlib.util.find_spec(FRAMEWORKS[framework]) is not None


def run(framework: str, work: Work) -> Result:
    result = Result(framework, work.preset, work.steps, work.tokens_per_step)
    if not available(framework):
        result.available = False
        result.note = f"{FRAMEWORKS[framework]} is not installed (pip install -e .[bench])"
        return result
    if framework == "nova":
        from benchmarks.peers import nova_gpt as peer
        train = peer.train
    elif framework.startswith("torch"):
        from benchmarks.peers import torch_gpt as peer
        train = lambda w: peer.train(w, compiled=framework == "torch-compile")  # noqa: E731
    else:
        from benchmarks.peers import jax_gpt as peer
        train = peer.train
    work.batches()(0)  # load the corpus before the baseline
    baseline = rss_mb()
    result.step_times, result.losses = train(work)
    result.peak_rss_mb = max(peak_rss_mb() - baseline, 0.0)
    if framework == "nova":
        import nova as nv
        result.planned_peak_mb = nv.debug.memory_report().peak_bytes / 2**20
    return result


def main(argv: list[str]) -> None:
    framework, preset, steps, batch = argv
    if framework not in FRAMEWORKS:
        raise SystemExit(f"run_one: unknown framework {framework!r}; valid: {list(FRAMEWORKS)}")
    print("RESULT " + dump(run(framework, Work(preset, int(steps), int(batch)))), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

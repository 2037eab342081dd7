"""Run one framework's training loop in this process and print its Result as JSON.

``bench_train`` starts one of these per framework, so each peak RSS is that framework's
own. Usage: ``python -m benchmarks.run_one FRAMEWORK PRESET STEPS BATCH [PROFILE_STEPS]``.

``iree`` is Nova's step exported as StableHLO and compiled by IREE
(``peers/iree_gpt``). ``nova`` runs the step as plain code (recorded every step), ``nova-compiled`` wraps it in
``nv.compile`` (replayed without its Python); both then run ``PROFILE_STEPS`` more
steps (default 8) under ``nv.debug.profile`` for the kernels' own time, which gives the
per-step overhead (``Result.overhead_s``).
"""
from __future__ import annotations

import importlib.util
import sys

from benchmarks.common import Result, Work, dump, peak_rss_mb, rss_mb

FRAMEWORKS = {
    "nova": "nova",
    "nova-compiled": "nova",
    "torch-eager": "torch",
    "torch-compile": "torch",
    "jax": "jax",
    "iree": "iree",
}
PROFILE_STEPS = 8    # Nova: steps run under nv.debug.profile after the timed ones


def available(framework: str) -> bool:
    return importlib.util.find_spec(FRAMEWORKS[framework]) is not None


def run(framework: str, work: Work, profile_steps: int = PROFILE_STEPS) -> Result:
    result = Result(framework, work.preset, work.steps, work.tokens_per_step)
    if framework in ("jax", "iree") and work.dropout:
        result.available = False
        result.note = f"the {framework.upper() if framework == 'iree' else 'JAX'} peer has no dropout"
        return result
    if framework == "iree":
        from benchmarks.peers import iree_module
        why = iree_module.unavailable_reason()
        if why:
            result.available = False
            result.note = why
            return result
    if not available(framework):
        result.available = False
        result.note = f"{FRAMEWORKS[framework]} is not installed (pip install -e .[bench])"
        return result
    nova_stats: dict = {}
    if framework.startswith("nova"):
        from benchmarks.peers import nova_gpt as peer
        train = lambda w: peer.train(w, compiled=framework == "nova-compiled",  # noqa: E731
                                     profile_steps=profile_steps, stats=nova_stats)
    elif framework.startswith("torch"):
        from benchmarks.peers import torch_gpt as peer
        train = lambda w: peer.train(w, compiled=framework == "torch-compile")  # noqa: E731
    elif framework == "iree":
        from benchmarks.peers import iree_gpt as peer
        train = peer.train
    else:
        from benchmarks.peers import jax_gpt as peer
        train = peer.train
    work.batches()(0)  # load the corpus before the baseline
    baseline = rss_mb()
    result.step_times, result.losses = train(work)
    result.peak_rss_mb = max(peak_rss_mb() - baseline, 0.0)
    if framework.startswith("nova"):
        import nova as nv
        result.planned_peak_mb = nv.debug.memory_report().peak_bytes / 2**20
        for name, value in nova_stats.items():
            setattr(result, name, value)
    return result


def main(argv: list[str]) -> None:
    if len(argv) not in (4, 5, 6):
        raise SystemExit("usage: python -m benchmarks.run_one FRAMEWORK PRESET STEPS BATCH "
                         "[PROFILE_STEPS [DROPOUT]]")
    framework, preset, steps, batch = argv[:4]
    profile_steps = int(argv[4]) if len(argv) >= 5 else PROFILE_STEPS
    dropout = float(argv[5]) if len(argv) == 6 else 0.0
    if framework not in FRAMEWORKS:
        raise SystemExit(f"run_one: unknown framework {framework!r}; valid: {list(FRAMEWORKS)}")
    result = run(framework, Work(preset, int(steps), int(batch), dropout=dropout),
                 profile_steps)
    print("RESULT " + dump(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

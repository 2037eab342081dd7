"""How long a training step's native runs take, the first against the later ones
(issue #21): the GPT step of ``benchmarks/peers/nova_gpt.py`` under ``nv.compile``, each
run of the worker pool's ``drive`` (the one native call a step makes) timed with the
process's minor page faults during it. Run 1 initializes the parameters, run 2 is the
first training step, which writes its arena for the first time.

    python tools/first_run.py [--preset medium] [--steps 3]

Run with a warm kernel cache (``NOVA_CACHE_DIR``) so that compiling is not what differs,
and compare trees by running each in its own process, alternating.
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import Work  # noqa: E402
from benchmarks.peers import nova_gpt  # noqa: E402
from nova.runtime import threads  # noqa: E402


def main(argv: list[str] | None = None) -> list[tuple[float, int]]:
    """Print and return (seconds, minor page faults) of each native run."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="medium")
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args(argv)
    runs: list[tuple[float, int]] = []
    drive = threads.drive

    def timed(control):
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        try:
            return drive(control)
        finally:
            runs.append((time.perf_counter() - t0,
                         resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults))

    threads.drive = timed
    try:
        nova_gpt.train(Work(args.preset, args.steps, 16), compiled=True)
    finally:
        threads.drive = drive
    print(f"{args.preset} GPT, drive per run (s, minor page faults):")
    print("  " + "  ".join(f"{k + 1}: {s:.3f} ({f})" for k, (s, f) in enumerate(runs)))
    return runs


if __name__ == "__main__":
    main()

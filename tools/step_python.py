"""Where a recorded training step's Python goes (issue #19): the GPT step of
``benchmarks/peers/nova_gpt.py`` recorded every step (no ``nv.compile``), batch 1 so the
kernels are short, each phase timed apart and the kernels taken out.

    python tools/step_python.py [--preset medium] [--steps 200] [--warmup 5]

Per phase the median milliseconds over ``--steps`` steps: ``forward`` (the model and
the loss, recorded), ``backward``, ``optimizer`` (``opt.step()``: the updates,
recorded), ``zero_grad`` (where the step runs: extraction, the cache lookup, donation,
binding) less the native driver's time, and the total; then how many nodes the step
extracted (the pending nodes, with how many of them are ``call``s and
``call_result``s). The driver's time is read by wrapping the worker pool's ``drive``
for the run (the one native call a step makes), so no per-kernel profiling adds its
own bookkeeping to what is measured. Compare trees by running each in its own
process, alternating, on a quiet machine.
"""
from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nova as nv  # noqa: E402
from benchmarks.common import Work  # noqa: E402
from benchmarks.peers import nova_gpt  # noqa: E402
from nova.core.graph import CALL, CALL_RESULT  # noqa: E402
from nova.runtime import threads  # noqa: E402
from nova.tensor import realize  # noqa: E402

PHASES = ("forward", "backward", "optimizer", "zero_grad")


class _DriveClock:
    """Seconds spent in the worker pool's ``drive`` (the step's native run) while
    installed; ``extract`` wrapped alike to count the step's nodes."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.nodes: collections.Counter = collections.Counter()
        self._drive = threads.WorkerPool.drive
        self._extract = realize.extract

    def __enter__(self) -> _DriveClock:
        clock, drive, extract = self, self._drive, self._extract

        def timed_drive(pool, control):
            t0 = time.perf_counter()
            try:
                return drive(pool, control)
            finally:
                clock.seconds += time.perf_counter() - t0

        def counting_extract(outputs, *args, **kwargs):
            graph = extract(outputs, *args, **kwargs)
            clock.nodes = collections.Counter(
                "call" if n.op == CALL else "call_result" if n.op == CALL_RESULT else "other"
                for n in graph.pending_nodes)
            return graph

        threads.WorkerPool.drive = timed_drive
        realize.extract = counting_extract
        return self

    def __exit__(self, *exc) -> None:
        threads.WorkerPool.drive = self._drive
        realize.extract = self._extract


def measure(preset: str, steps: int, warmup: int) -> tuple[dict[str, float], collections.Counter]:
    """Median milliseconds per phase (and ``total``), and the last step's node counts."""
    work = Work(preset, 1, 1)
    model = nova_gpt.build(work)
    opt = nv.optim.AdamW(model.parameters(), lr=1e-3)
    batches = work.batches()
    times: dict[str, list[float]] = {p: [] for p in PHASES + ("total",)}
    with _DriveClock() as clock:
        for i in range(warmup + steps):
            x, y = batches(i % 100)
            xs, ys = nv.tensor(x), nv.tensor(y)
            clock.seconds = 0.0
            t0 = time.perf_counter()
            _, loss = model(xs, ys)
            t1 = time.perf_counter()
            loss.backward()
            t2 = time.perf_counter()
            opt.step()
            t3 = time.perf_counter()
            opt.zero_grad()
            t4 = time.perf_counter()
            loss.item()
            if i < warmup:
                continue
            spent = (t1 - t0, t2 - t1, t3 - t2, t4 - t3 - clock.seconds)
            for phase, s in zip(PHASES, spent):
                times[phase].append(s)
            times["total"].append(sum(spent))
        nodes = clock.nodes
    return {p: 1e3 * statistics.median(v) for p, v in times.items()}, nodes


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="medium")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args(argv)
    ms, nodes = measure(args.preset, args.steps, args.warmup)
    print(f"recorded {args.preset} GPT step, batch 1, median of {args.steps} steps (ms):")
    print("  " + "  ".join(f"{p} {ms[p]:.2f}" for p in PHASES + ("total",)))
    print(f"  nodes extracted: {sum(nodes.values())} ({nodes['call']} calls, "
          f"{nodes['call_result']} call results)")
    return ms


if __name__ == "__main__":
    main()

"""Nova: the GPT of ``models/gpt.py`` with ``nv.optim.AdamW``; one compiled step.

Two ways to run it: as plain eager-looking code (every step records its ops, and the
cached executable is found by hashing the graph), or with the step function wrapped in
``nv.compile``, as ``models/train.py`` runs it (after two agreeing recorded calls the
step replays without running its Python).
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

import nova as nv
from benchmarks.common import BETAS, EPS, LR, WEIGHT_DECAY, Timer, Work
from models.gpt import GPT


def build(work: Work) -> GPT:
    nv.manual_seed(work.seed)
    return GPT(work.config)


def train(work: Work, model: GPT | None = None, compiled: bool = False,
          profile_steps: int = 0, stats: dict | None = None
          ) -> tuple[list[float], list[float]]:
    """Train ``work.steps`` timed steps; returns (step seconds, losses).

    ``compiled`` wraps the step in ``nv.compile``. ``profile_steps`` more steps then run
    under ``profile_kernels`` (neither in the times nor in the losses, so tokens/s and
    the loss curve are the unprofiled run's). ``stats``, if given, receives for those
    steps ``profiled_times`` (wall seconds), ``kernel_times`` (``nv.debug.profile``'s
    total) and ``bookkeeping_times`` (the profiler's own work), and, compiled,
    ``replays`` and ``recorded`` (calls of the step)."""
    model = model or build(work)
    opt = nv.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS,
                         weight_decay=WEIGHT_DECAY)
    step = _step(model, opt)
    if compiled:
        step = nv.compile(step)
    batches = work.batches()
    timer, losses = Timer(), []
    for i in range(work.steps):
        x, y = batches(i)
        with timer:
            losses.append(step(nv.tensor(x), nv.tensor(y)).item())
    profiled = _profiled(step, batches, work.steps, profile_steps)
    if stats is not None:
        stats.update(profiled)
        if compiled:
            stats.update(replays=step.replays, recorded=step.recorded)
    return timer.times, losses


def _step(model: GPT, opt: nv.optim.Optimizer) -> Callable[[nv.Tensor, nv.Tensor], nv.Tensor]:
    """One training step as a function of the batch (what ``nv.compile`` captures): it
    returns the loss without reading it, since a host read inside a compiled function
    would stop it from replaying."""
    def step(x: nv.Tensor, y: nv.Tensor) -> nv.Tensor:
        _, loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    return step


def _profiled(step: Callable, batches: Callable, first: int, count: int
              ) -> dict[str, list[float]]:
    """Run ``count`` more steps (batches ``first``...) under ``profile_kernels``:
    per step its wall, kernel and profiler-bookkeeping seconds."""
    out: dict[str, list[float]] = {"profiled_times": [], "kernel_times": [],
                                   "bookkeeping_times": []}
    for i in range(first, first + count):
        x, y = batches(i)
        timer = Timer()
        with profile_kernels() as prof, timer:
            step(nv.tensor(x), nv.tensor(y)).item()
        out["profiled_times"].append(timer.times[0])
        out["kernel_times"].append(prof.total())
        out["bookkeeping_times"].append(prof.bookkeeping)
    return out


class _ClockedList(list):
    """The list the cpu engine reports a step's kernel times into
    (``nova.runtime.cpu_engine.PROFILE``), clocking the engine's ``extend``: the
    profiler's bookkeeping (a description of every kernel, formatted per run)."""

    seconds = 0.0

    def extend(self, items) -> None:
        t0 = time.perf_counter()
        super().extend(items)
        self.seconds += time.perf_counter() - t0


@contextlib.contextmanager
def profile_kernels() -> Iterator[nv.debug.Profile]:
    """``nv.debug.profile()``, whose ``Profile`` also gets ``bookkeeping``: the seconds
    the profiler itself spent in the block. After every step it formats a description
    of each kernel (~4-5 us a kernel, ~2 ms a small-GPT step of 400 kernels), which a
    step run without the profiler does not pay, so a step's time outside its kernels is
    ``wall - total() - bookkeeping``. (0 if the engine stopped reporting through
    ``extend``; ``tests/benchmarks`` checks that it does.)"""
    from nova.runtime.cpu_engine import PROFILE
    with nv.debug.profile() as prof:
        clocked = _ClockedList()
        token = PROFILE.set(clocked)
        try:
            yield prof
        finally:
            PROFILE.reset(token)
            if clocked:
                prof.steps.append(list(clocked))
            prof.bookkeeping = clocked.seconds

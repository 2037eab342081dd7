"""Nova: the GPT of ``models/gpt.py`` with ``nv.optim.AdamW``; one compiled step.

Two ways to run it: as plain eager-looking code (every step records its ops, and the
cached executable is found by hashing the graph), or with the step function wrapped in
``nv.compile``, as ``models/train.py`` runs it (after two agreeing recorded calls the
step replays without running its Python).
"""
from __future__ import annotations

from collections.abc import Callable

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
    under ``nv.debug.profile`` (neither timed nor in the losses) for the kernels' own
    time: the profiler's bookkeeping (~4 us a kernel, ~1.6 ms a small-GPT step) would
    otherwise count as Python overhead, so the timed steps run without it. ``stats``,
    if given, receives ``kernel_times`` (seconds per profiled step), ``profiled_times``
    (those steps' wall time, profiler included) and, compiled, ``replays`` and
    ``recorded`` (calls of the step)."""
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
    kernel_times, profiled = _profiled(step, batches, work.steps, profile_steps)
    if stats is not None:
        stats.update(kernel_times=kernel_times, profiled_times=profiled)
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
              ) -> tuple[list[float], list[float]]:
    """Run ``count`` more steps (batches ``first``...) under ``nv.debug.profile``:
    (kernel seconds, wall seconds) per step."""
    kernels, walls = [], []
    for i in range(first, first + count):
        x, y = batches(i)
        timer = Timer()
        with nv.debug.profile() as prof, timer:
            step(nv.tensor(x), nv.tensor(y)).item()
        kernels.append(prof.total())
        walls.append(timer.times[0])
    return kernels, walls

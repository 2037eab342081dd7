"""What every framework's run shares: the work, the data, and how it is measured."""
from __future__ import annotations

import json
import os
import resource
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np

from models.data import ByteCorpus
from models.gpt import GPTConfig, preset

# AdamW hyperparameters used by every framework (constant learning rate, decay on all
# parameters), so the loops are identical.
LR, BETAS, EPS, WEIGHT_DECAY = 1e-3, (0.9, 0.95), 1e-8, 0.1
CORPUS_BYTES = 2_000_000


@dataclass
class Work:
    preset: str
    steps: int
    batch_size: int
    seed: int = 0
    dropout: float = 0.0     # everywhere the model has dropout, attention's included

    @property
    def config(self) -> GPTConfig:
        return preset(self.preset, dropout=self.dropout)

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.config.block

    def batches(self) -> Callable[[int], tuple[np.ndarray, np.ndarray]]:
        corpus = ByteCorpus.load(None, CORPUS_BYTES, seed=self.seed)
        cfg = self.config
        return lambda step: corpus.batch("train", step, self.batch_size, cfg.block)


@dataclass
class Result:
    framework: str
    preset: str
    steps: int
    tokens_per_step: int
    step_times: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    peak_rss_mb: float = 0.0
    available: bool = True
    note: str = ""
    planned_peak_mb: float = 0.0    # Nova: the step's memory plan (nv.debug.memory_report)
    # Nova: per step run under nv.debug.profile after the timed ones, its wall time, its
    # kernels' time and the profiler's own bookkeeping (peers/nova_gpt.profile_kernels);
    # for nv.compile, how many calls of the step replayed and how many were recorded.
    profiled_times: list[float] = field(default_factory=list)
    kernel_times: list[float] = field(default_factory=list)
    bookkeeping_times: list[float] = field(default_factory=list)
    replays: int | None = None
    recorded: int | None = None

    @property
    def first_step_s(self) -> float:
        return self.step_times[0] if self.step_times else float("nan")

    @property
    def steady_step_s(self) -> float:
        """Median seconds of a step once compiled (the first two steps left out)."""
        steady = self.step_times[2:] or self.step_times[1:] or self.step_times
        return float(np.median(steady)) if steady else float("nan")

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.steady_step_s

    @property
    def kernel_s(self) -> float:
        """Median seconds a step spends in its kernels (Nova; NaN when not profiled)."""
        return float(np.median(self.kernel_times)) if self.kernel_times else float("nan")

    @property
    def overhead_s(self) -> float:
        """A step's time outside its kernels -- recording, hashing, dispatch, binding --
        median over the profiled steps of wall time minus kernel time minus the
        profiler's own bookkeeping (which an unprofiled step does not pay)."""
        if not self.kernel_times:
            return float("nan")
        book = self.bookkeeping_times or [0.0] * len(self.kernel_times)
        return float(np.median([w - k - b for w, k, b in
                                zip(self.profiled_times, self.kernel_times, book)]))

    def to_json(self) -> dict:
        d = asdict(self)
        d.update(first_step_s=self.first_step_s, tokens_per_s=self.tokens_per_s,
                 final_loss=self.losses[-1] if self.losses else None,
                 steady_step_s=self.steady_step_s,
                 kernel_s=None if not self.kernel_times else self.kernel_s,
                 overhead_s=None if not self.kernel_times else self.overhead_s)
        return d


def rss_mb() -> float:
    """Current resident set size of this process."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Timer:
    """Times each step; ``stop`` must see the step's values on the host (loss.item())."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def __enter__(self) -> Timer:
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.times.append(time.perf_counter() - self.t0)


def median_time(fn: Callable[[], object], reps: int, warmup: int = 2) -> float:
    """Median seconds of ``reps`` calls of ``fn`` after ``warmup`` untimed calls
    (compilation, first-touch page faults)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def preset_products(name: str, tokens: int) -> list[tuple[str, int, int, int, bool, bool]]:
    """The GEMMs of one training step of GPT preset ``name`` over ``tokens`` tokens, as
    (label, M, K, N, transpose_a, transpose_b): each linear layer's forward and both
    backward products."""
    d, v = preset(name).d, preset(name).vocab
    out = []
    for layer, (k, n) in {"qkv": (d, 3 * d), "mlp up": (d, 4 * d), "mlp down": (4 * d, d),
                          "lm head": (d, v)}.items():
        out.append((f"{name} {layer} fwd", tokens, k, n, False, True))     # x @ W^T
        out.append((f"{name} {layer} dX", tokens, n, k, False, False))     # dY @ W
        out.append((f"{name} {layer} dW", n, tokens, k, True, False))      # dY^T @ X
    return out


def dump(result: Result) -> str:
    return json.dumps(result.to_json())

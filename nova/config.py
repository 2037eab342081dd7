"""Every environment variable Nova reads, in one table: name, default, meaning, parser.

Why one module: a setting should be findable (``print(nova.config.describe())`` shows
the table), and a bad value should fail the same way everywhere -- naming the variable,
its value and what would be valid -- instead of as a bare ``float()`` error deep inside
the runtime. Each setting is read when it is used, not cached at import, because users
and tests set some of them at run time (``NOVA_DEBUG``, ``NOVA_SPIN_US`` before a new
pool); the few that only matter at import say so. No other module reads ``os.environ``
for these (``tests/test_config.py`` checks).
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


def _flag(raw: str) -> bool:
    if raw in ("0", "1"):
        return raw == "1"
    raise ValueError("expected 0 or 1")


def _number(raw: str, low: float, low_ok: bool, what: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not ((low <= value) if low_ok else (low < value)) or value == float("inf"):
        raise ValueError(f"expected {what}")
    return value


def _positive_number(raw: str) -> float:
    return _number(raw, 0.0, False, "a positive number")


def _non_negative_number(raw: str) -> float:
    return _number(raw, 0.0, True, "a number >= 0")


def _positive_int(raw: str) -> int:
    value = _number(raw, 1.0, True, "an integer >= 1")
    if value != int(value):
        raise ValueError("expected an integer >= 1")
    return int(value)


def _non_negative_int(raw: str) -> int:
    value = _number(raw, 0.0, True, "an integer >= 0")
    if value != int(value):
        raise ValueError("expected an integer >= 0")
    return int(value)


def _text(raw: str) -> str:
    return raw


@dataclass(frozen=True)
class Setting:
    """One environment variable: ``get()`` is its parsed value, or ``default`` when
    unset or empty."""

    name: str
    default: Any
    parse: Callable[[str], Any]
    help: str

    def get(self) -> Any:
        raw = os.environ.get(self.name, "")
        if raw == "":
            return self.default
        try:
            return self.parse(raw)
        except ValueError as e:
            raise ValueError(f"{self.name}={raw!r}: {e} ({self.help})") from None

    def is_set(self) -> bool:
        return os.environ.get(self.name, "") != ""

    @contextlib.contextmanager
    def overridden(self, raw: str) -> Iterator[None]:
        """The variable set to ``raw`` inside the block (process-wide, as the
        environment is), restored after it: for settings read per use, such as
        ``NOVA_FUSED_ATTENTION`` in the tests and benchmarks."""
        self.parse(raw)                        # a bad value fails here, not later
        old = os.environ.get(self.name)
        os.environ[self.name] = raw
        try:
            yield
        finally:
            if old is None:
                os.environ.pop(self.name, None)
            else:
                os.environ[self.name] = old


ENGINE = Setting("NOVA_ENGINE", "cpu", _text,
                 "the default engine of every thread: cpu, interp or mlir; read at import")
REMAT = Setting("NOVA_REMAT", "default", _text,
                "the default remat mode of every thread: off, default or aggressive; "
                "read at import")
CACHE = Setting("NOVA_CACHE", True, _flag, "0 turns the on-disk kernel caches off")
CACHE_DIR = Setting("NOVA_CACHE_DIR", None, _text,
                    "where the on-disk kernel caches live (default ~/.cache/nova)")
STEP_DISK_CACHE_MB = Setting("NOVA_STEP_DISK_CACHE_MB", 512.0, _non_negative_number,
                             "the most the compiled steps on disk may take (least recently "
                             "used go first; 0 keeps none)")
STEP_CACHE_MB = Setting("NOVA_STEP_CACHE_MB", 1024.0, _non_negative_number,
                        "MiB of compiled steps kept for replay, least recently used out "
                        "first; read at import (nv.debug.set_step_cache_limit after)")
MEMORY_LIMIT_MB = Setting("NOVA_MEMORY_LIMIT_MB", None, _positive_number,
                          "the most MiB a step may plan for; read at import "
                          "(nv.debug.set_memory_limit after)")
GC_FREEZE = Setting("NOVA_GC_FREEZE", True, _flag,
                    "0 stops freezing the collector's survivors after a compile "
                    "and raising its young-generation threshold")
COMPILE_WORKER = Setting("NOVA_COMPILE_WORKER", True, _flag,
                         "0 runs LLVM's optimizer in this process instead of a worker")
COMPILE_JOBS = Setting("NOVA_COMPILE_JOBS", None, _positive_int,
                       "compile workers a step's missing kernels are spread over "
                       "(default: the usable cores, at most 8)")
COMPILE_WORKER_MB = Setting("NOVA_COMPILE_WORKER_MB", 256.0, _positive_number,
                            "the compile worker's size in MiB at which it is replaced")
SPIN_US = Setting("NOVA_SPIN_US", None, _non_negative_number,
                  "microseconds an idle kernel thread spins before it sleeps "
                  "(0: sleep at once); read when the pool starts")
PIN_THREADS = Setting("NOVA_PIN_THREADS", True, _flag,
                      "0 leaves kernel threads unpinned; read when the pool starts")
VERIFY_PASSES = Setting("NOVA_VERIFY_PASSES", False, _flag,
                        "1 verifies the IR after every compiler pass (the tests do); "
                        "otherwise only the built step is verified")
FUSED_ATTENTION = Setting("NOVA_FUSED_ATTENTION", True, _flag,
                          "0 keeps attention as its composite (the scores stored) instead "
                          "of the fused attention kernels; read per compile")
CUDA_GRAPHS = Setting("NOVA_CUDA_GRAPHS", True, _flag,
                      "0 launches every CUDA step kernel by kernel instead of replaying a "
                      "captured CUDA graph (nova.runtime.launch_graph); read per program")
ROW_CHUNK_MB = Setting("NOVA_ROW_CHUNK_MB", 64.0, _non_negative_number,
                       "MiB of one chunk of a wide row-local region (a language model's "
                       "logits and their gradient) computed a block of rows at a time; "
                       "regions under two chunks stay whole; 0 computes every region "
                       "whole; read per compile")
DEBUG = Setting("NOVA_DEBUG", False, _flag,
                "1 writes every compiled step's IR into the debug directory")
DEBUG_DIR = Setting("NOVA_DEBUG_DIR", None, _text,
                    "the debug directory (default: a fresh private one per process)")
NVRTC = Setting("NOVA_NVRTC", None, _text, "the path of libnvrtc.so to use")
CUDA_HOME = Setting("CUDA_HOME", None, _text, "a CUDA toolkit to find NVRTC in")
CUDA_PATH = Setting("CUDA_PATH", None, _text, "a CUDA toolkit to find NVRTC in")
# nova.distributed: PyTorch's variables (checked against MPI's ranks), and what mpiexec
# sets in every rank's environment (Open MPI, PMIx, MPICH/Intel MPI and Slurm's PMI,
# MPICH's Hydra), which tells a rank of a job from a process started alone.
WORLD_SIZE = Setting("WORLD_SIZE", None, _positive_int,
                     "the world size init_process_group expects (MPI's must agree)")
RANK = Setting("RANK", None, _non_negative_int,
               "this process's rank as init_process_group expects it (MPI's must agree)")
MPI_LAUNCHER_VARIABLES = tuple(
    Setting(name, None, _text, "set by mpiexec: this process is a rank of an MPI job")
    for name in ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK",
                 "MPI_LOCALNRANKS"))

def cache_root() -> str | None:
    """Where the on-disk caches live, or None when ``NOVA_CACHE=0`` turns them off."""
    if not CACHE.get():
        return None
    return CACHE_DIR.get() or os.path.join(os.path.expanduser("~"), ".cache", "nova")


def launched_by_mpi() -> bool:
    """Whether this process was started by ``mpiexec`` (``MPI_LAUNCHER_VARIABLES``)."""
    return any(s.is_set() for s in MPI_LAUNCHER_VARIABLES)


SETTINGS: tuple[Setting, ...] = tuple(
    v for v in globals().values() if isinstance(v, Setting)) + MPI_LAUNCHER_VARIABLES


def describe() -> str:
    """The table of settings: name, default, meaning."""
    width = max(len(s.name) for s in SETTINGS)
    return "\n".join(f"{s.name:<{width}}  default {s.default!r}: {s.help}" for s in SETTINGS)

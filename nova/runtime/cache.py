"""The executable cache, keyed by the structural key of a pending graph.

A hit replays the cached Executable on new buffers; a miss builds, verifies and compiles
the nova function once. Every miss records *why* it missed, found by comparing its key
with the key of the step that ran last (in a loop, the previous iteration), so a
recompile caused by a changed shape names that shape.

The cache is bounded: each entry is charged its arena (the step's planned
intermediates, kept between runs), its IR (``IR_BYTES_PER_OP`` per op: the nova, fused
and planned forms together) and, on the cpu engine, its kernels' code
(``KERNEL_BYTES`` per kernel); once the total passes the limit the least recently used
entries are dropped -- never the ``KEEP_RECENT`` most recent ones, so a loop alternating
a training and an evaluation step keeps both however large they are. Measured on a
small MLP training step (183 ops, 40 kernels, 26 of them its own): 997 KB of RSS per
entry, of which 3.7 KB per op of Python (tracemalloc) and ~11 KB per kernel it loaded;
a 4-kernel step, 5.1 KB per op. A shared kernel is charged to every step using it.

What a dropped entry frees: its arena and IR (after an eviction the collector is
unfrozen, see ``settle_garbage_collector``, so the IR's cycles are collected), and the
code of every kernel no remaining step uses (``nova.runtime.kernel_cache``) -- unless
something else still holds the executable (``last``, a thread running it), which then
keeps all of it alive and runnable. A dropped step compiles again if it comes back, its
kernels from the disk cache when they are there. Compiling leaves no native memory
behind (``nova.runtime.compile_worker``). The limit is ``NOVA_STEP_CACHE_MB`` (default
1024) or ``nv.debug.set_step_cache_limit(nbytes)``.

Threads: the entries and statistics have one lock, held only for bookkeeping; misses
compile one at a time under another, so two threads missing the same structure compile
it once, and a thread whose step is cached replays while another compiles.
"""
from __future__ import annotations

import contextlib
import contextvars
import gc
import itertools
import os
import sys
import threading
import time
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterator

from nova import config
from nova.core.graph import decoded_key
from nova.core.lru import LRU
from nova.runtime.executable import Executable

# A call site that misses this many times gets a warning naming the latest reason.
RECOMPILE_WARNING_THRESHOLD = 8
IR_BYTES_PER_OP = 4096          # Python memory an entry's IR holds per op (module doc)
KERNEL_BYTES = 8192             # a cpu kernel's code and handles (module doc)
KEEP_RECENT = 4                 # entries never evicted, however large
YOUNG_GC_THRESHOLD = 50_000     # the young generation's threshold after a compile
DEFAULT_LIMIT_BYTES = int(config.STEP_CACHE_MB.get() * 2**20)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Compiles whose settling a caller deferred, in this context (``settling_deferred``).
_DEFERRED: contextvars.ContextVar[list[bool] | None] = contextvars.ContextVar(
    "nova_deferred_settle", default=None)
_FREEZES = itertools.count(1)      # next(): how many freezes so far, in any thread
_frozen = 0


def freezes() -> int:
    """How many times Nova froze the heap so far (``freeze``, any thread): a caller
    that must know whether objects it made were frozen under it compares two readings."""
    return _frozen


def freeze() -> None:
    """``gc.freeze()``, counted (``freezes``)."""
    global _frozen
    gc.freeze()
    _frozen = next(_FREEZES)


@contextlib.contextmanager
def settling_deferred() -> Iterator[list[bool]]:
    """Inside, in this context, a compile does not settle the collector
    (``settle_garbage_collector``) but notes it in the list yielded; the caller settles
    afterwards. For ``nv.compile``'s first call, which
    scans the heap after the call for the tensors holding its results: a freeze during
    the call would freeze that call's cycles, which may die before the scan and then
    only a full collection of the whole thawed heap can free (~90 ms of a small GPT's
    warm first step, against ~25 ms for collecting what is not frozen)."""
    pending: list[bool] = []
    token = _DEFERRED.set(pending)
    try:
        yield pending
    finally:
        _DEFERRED.reset(token)


def settle_garbage_collector() -> None:
    """After a compile, collect once and move every surviving object to the collector's
    permanent generation (``gc.freeze``), as servers do after warm-up.

    Why: a compiled step keeps its IR (the xDSL modules, a few hundred thousand objects
    for a GPT step), and every later full collection would traverse all of it while a
    training loop allocates thousands of trace nodes per step: measured 24 ms of GC per
    small-GPT step, 4 ms after freezing. Frozen objects are still freed by reference
    counting; only cycles among them wait until ``gc.unfreeze()`` -- and a step's IR is
    full of cycles, so a miss that evicts (and ``clear``) unfreezes before this
    collection: otherwise a dropped step's IR would never be freed.

    It also raises the young generation's threshold to ``YOUNG_GC_THRESHOLD`` (never
    lowers it): a recorded step makes ~10,000 trace objects (nodes, GradFns, tensors)
    that live until the step realizes and then die by reference counting. At CPython's
    default (700) a medium GPT step ran ~4 young and ~0.4 middle collections that
    traversed them all, ~0.8 ms of its ~10 ms of Python; above a step's allocations they
    are freed before any collection sees them. Cyclic garbage waits a little longer
    (one young collection per ~50,000 net allocations). ``NOVA_GC_FREEZE=0`` turns both
    off."""
    if config.GC_FREEZE.get():
        pending = _DEFERRED.get()
        if pending is not None:
            pending.append(True)
            return
        gc.collect()
        freeze()
        young, middle, old = gc.get_threshold()
        if 0 < young < YOUNG_GC_THRESHOLD:     # (0: the user disabled collections)
            gc.set_threshold(YOUNG_GC_THRESHOLD, middle, old)


def _kernels_compiled() -> int:
    """Kernels the CPU kernel cache has compiled so far (0 before it is loaded)."""
    kernel_cache = sys.modules.get("nova.runtime.kernel_cache")
    return kernel_cache.KERNELS.stats.compiled if kernel_cache is not None else 0


class RecompileWarning(RuntimeWarning):
    """One call site keeps producing new step structures (and so keeps compiling)."""


@dataclass
class Miss:
    reason: str
    site: str
    num_ops: int
    num_kernels: int = 0
    engine: str = ""
    seconds: float = 0.0      # building the executable: passes, planning, code, LLVM
    compiled: int = 0         # kernels LLVM compiled for it (cpu; not found on disk)
    from_disk: bool = False   # the step itself came from the step cache (step_cache)


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    entries: int = 0
    miss_log: list[Miss] = field(default_factory=list)
    evictions: int = 0
    bytes: int = 0        # what the entries are charged (module doc)
    replays: int = 0      # calls of nv.compile'd functions that ran without recording
    compile_log: list[str] = field(default_factory=list)   # nv.compile's re-records
    # CUDA graphs (nova.runtime.launch_graph), filled in by nv.debug.cache_stats()
    graph_captures: int = 0
    graph_replays: int = 0
    graph_without: list[str] = field(default_factory=list)  # why a capture failed

    def __str__(self) -> str:
        lines = [f"nova cache: {self.hits} hits, {self.misses} misses, {self.entries} entries"
                 + (f" ({self.bytes / 2**20:.1f} MiB)" if self.bytes else "")
                 + (f", {self.evictions} evicted" if self.evictions else "")]
        lines += [f"  miss {i}: {m.reason}  [{m.site}, {m.engine}: {m.num_ops} ops"
                  + (f" -> {m.num_kernels} kernels, {m.compiled} compiled"
                     if m.engine == "cpu" else "")
                  + (", step from disk" if m.from_disk else "")
                  + f", {m.seconds:.2f} s]" for i, m in enumerate(self.miss_log)]
        if self.graph_captures or self.graph_without:
            lines.append(f"cuda graphs: {self.graph_captures} captured, "
                         f"{self.graph_replays} replays")
            lines += [f"  without a graph: {why}" for why in self.graph_without]
        if self.replays or self.compile_log:
            lines.append(f"nv.compile: {self.replays} replayed calls")
            lines += [f"  {line}" for line in self.compile_log]
        return "\n".join(lines)


def _sig_text(sig) -> str:
    op, attrs, shape, dtype = sig
    return f"nova.{op} {shape} {dtype}" if op != "buffer" else f"{shape} {dtype}"


def explain_difference(new: tuple, old: tuple | None) -> str:
    """A one-line reason why structural key ``new`` differs from ``old``."""
    if old is None:
        return "first compilation"
    new_args, new_nodes, new_out = decoded_key(new)[:3]
    old_args, old_nodes, old_out = decoded_key(old)[:3]
    # A step off the CPU carries ("device", backend key) as a last part (see extract).
    new_dev = new[5][1] if len(new) > 5 else "cpu"
    old_dev = old[5][1] if len(old) > 5 else "cpu"
    if new_dev != old_dev:
        return f"device changed: {old_dev} -> {new_dev}"
    if len(new_args) != len(old_args):
        return f"number of inputs changed: {len(old_args)} -> {len(new_args)}"
    for i, (a, b) in enumerate(zip(new_args, old_args)):
        if a != b:
            what = "shape" if a[2] != b[2] else "dtype"
            return (f"input {i} {what} changed: {b[2] if what == 'shape' else b[3]} -> "
                    f"{a[2] if what == 'shape' else a[3]}")
    base = len(new_args)
    for k, ((s1, w1), (s2, w2)) in enumerate(zip(new_nodes, old_nodes)):
        if (s1, w1) == (s2, w2):
            continue
        where = f"value %{base + k}"
        if s1[0] != s2[0]:
            return f"{where}: op changed nova.{s2[0]} -> nova.{s1[0]}"
        if s1[2] != s2[2]:
            return f"{where} (nova.{s1[0]}): shape changed {s2[2]} -> {s1[2]}"
        if s1[3] != s2[3]:
            return f"{where} (nova.{s1[0]}): dtype changed {s2[3]} -> {s1[3]}"
        if s1[1] != s2[1]:
            return f"{where} (nova.{s1[0]}): attributes changed {dict(s2[1])} -> {dict(s1[1])}"
        return f"{where} (nova.{s1[0]}): operands changed {w2} -> {w1}"
    if len(new_nodes) != len(old_nodes):
        return f"graph size changed: {len(old_nodes)} -> {len(new_nodes)} ops"
    return f"outputs changed: {list(old_out)} -> {list(new_out)}"


def _user_frame() -> tuple[str, int]:
    """The innermost stack frame outside the nova package: the user's line."""
    for frame in reversed(traceback.extract_stack()):
        if not os.path.abspath(frame.filename).startswith(_PACKAGE_DIR):
            return frame.filename, frame.lineno or 0
    return "<nova>", 0


def entry_bytes(exe: Executable) -> int:
    """What a cached executable is charged: its arena, its IR and its kernels' code
    (module doc)."""
    plan = getattr(getattr(exe, "_program", None), "memory_plan", None)
    arena = plan.arena_bytes if plan is not None else 0
    code = exe.num_kernels * KERNEL_BYTES if exe.engine == "cpu" else 0
    return arena + exe.num_ops * IR_BYTES_PER_OP + code


class ExecutableCache:
    """In-memory map from structural key to Executable, with hit/miss accounting and
    least-recently-used eviction by bytes (module doc)."""

    def __init__(self, limit_bytes: int | None = None) -> None:
        self._entries: LRU[Executable] = LRU()
        self._sizes: dict[tuple, int] = {}
        self._last_key: tuple | None = None
        self._site_misses: Counter[str] = Counter()
        self._lock = threading.RLock()          # the entries and the statistics
        self._compile_lock = threading.RLock()  # held while a miss compiles
        self.limit_bytes = DEFAULT_LIMIT_BYTES if limit_bytes is None else limit_bytes
        self.stats = CacheStats()
        self.last: Executable | None = None   # the executable of the latest realization

    def lookup(self, key: tuple, build: Callable[[], Executable], engine: str = "") -> Executable:
        """The executable for structural ``key`` on ``engine``, built on a miss."""
        entry = (engine, key)
        with self._lock:
            exe = self._hit(entry, key)
        if exe is not None:
            return exe
        with self._compile_lock:        # one compile at a time; hits meanwhile go on
            with self._lock:
                exe = self._hit(entry, key)   # another thread may have just built it
            if exe is not None:
                return exe
            reason = (f"first compilation for engine {engine}" if key == self._last_key
                      else explain_difference(key, self._last_key))
            compiled = _kernels_compiled()
            start = time.perf_counter()
            exe = build()
            seconds = time.perf_counter() - start
            compiled = _kernels_compiled() - compiled
            with self._lock:
                self._insert(entry, exe, reason, engine, seconds, compiled)
                self._last_key = key
                self.last = exe
            settle_garbage_collector()   # (a full collection: not under the entries' lock)
            return exe

    def _hit(self, entry: tuple, key: tuple) -> Executable | None:
        exe = self._entries.get(entry)
        if exe is not None:
            self.stats.hits += 1
            self._last_key = key
            self.last = exe
        return exe

    def _insert(self, entry: tuple, exe: Executable, reason: str, engine: str,
                seconds: float = 0.0, compiled: int = 0) -> None:
        self._entries[entry] = exe
        self._sizes[entry] = entry_bytes(exe)
        self.stats.bytes += self._sizes[entry]
        if self._evict():
            gc.unfreeze()   # the dropped steps' IR is cyclic garbage among frozen objects
        filename, lineno = _user_frame()
        site = f"{os.path.basename(filename)}:{lineno}"
        self.stats.misses += 1
        self.stats.entries = len(self._entries)
        self.stats.miss_log.append(Miss(reason, site, exe.num_ops, exe.num_kernels, engine,
                                        seconds, compiled,
                                        getattr(exe, "from_step_cache", False)))
        self._site_misses[site] += 1
        if self._site_misses[site] == RECOMPILE_WARNING_THRESHOLD:
            warnings.warn_explicit(
                f"nova: {site} has compiled {RECOMPILE_WARNING_THRESHOLD} different "
                f"step functions; latest reason: {reason}. Values that change every "
                "step should be tensors, not Python numbers or shapes.",
                RecompileWarning, filename, lineno)

    def _evict(self) -> int:
        """Drop least recently used entries while over the limit (keeping the
        ``KEEP_RECENT`` most recent); returns how many were dropped."""
        dropped = 0
        while self.stats.bytes > self.limit_bytes and len(self._entries) > KEEP_RECENT:
            entry, _ = self._entries.pop_oldest()
            self.stats.bytes -= self._sizes.pop(entry)
            self.stats.evictions += 1
            dropped += 1
        self.stats.entries = len(self._entries)
        return dropped

    def set_limit(self, nbytes: int) -> None:
        """Bound the bytes the cached steps are charged (evicting at once if over)."""
        if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 0:
            raise ValueError(f"set_step_cache_limit: expected a byte count >= 0, got {nbytes!r}")
        with self._lock:
            self.limit_bytes = nbytes
            if self._evict():
                gc.unfreeze()
                settle_garbage_collector()

    def clear(self) -> None:
        limit = self.limit_bytes
        self.__init__(limit)
        gc.unfreeze()   # the dropped steps' IR: collectable again


CACHE = ExecutableCache()

"""The executable cache, keyed by the structural key of a pending graph.

A hit replays the cached Executable on new buffers; a miss builds, verifies and compiles
the nova function once. Every miss records *why* it missed, found by comparing its key
with the key of the step that ran last (in a loop, the previous iteration), so a
recompile caused by a changed shape names that shape.
"""
from __future__ import annotations

import gc
import os
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from nova.runtime.executable import Executable

# A call site that misses this many times gets a warning naming the latest reason.
RECOMPILE_WARNING_THRESHOLD = 8
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _settle_garbage_collector() -> None:
    """After a compile, collect once and move every surviving object to the collector's
    permanent generation (``gc.freeze``), as servers do after warm-up.

    Why: a compiled step keeps its IR (the xDSL modules, a few hundred thousand objects
    for a GPT step), and every later full collection would traverse all of it while a
    training loop allocates thousands of trace nodes per step: measured 24 ms of GC per
    small-GPT step, 4 ms after freezing. Frozen objects are still freed by reference
    counting; only cycles among them wait until ``gc.unfreeze()``. ``NOVA_GC_FREEZE=0``
    turns this off."""
    if os.environ.get("NOVA_GC_FREEZE", "1") != "0":
        gc.collect()
        gc.freeze()


class RecompileWarning(RuntimeWarning):
    """One call site keeps producing new step structures (and so keeps compiling)."""


@dataclass
class Miss:
    reason: str
    site: str
    num_ops: int
    num_kernels: int = 0
    engine: str = ""


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    entries: int = 0
    miss_log: list[Miss] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"nova cache: {self.hits} hits, {self.misses} misses, {self.entries} entries"]
        lines += [f"  miss {i}: {m.reason}  [{m.site}, {m.engine}: {m.num_ops} ops"
                  + (f" -> {m.num_kernels} kernels]" if m.engine == "cpu" else "]")
                  for i, m in enumerate(self.miss_log)]
        return "\n".join(lines)


def _sig_text(sig) -> str:
    op, attrs, shape, dtype = sig
    return f"nova.{op} {shape} {dtype}" if op != "buffer" else f"{shape} {dtype}"


def explain_difference(new: tuple, old: tuple | None) -> str:
    """A one-line reason why structural key ``new`` differs from ``old``."""
    if old is None:
        return "first compilation"
    new_args, new_nodes, new_out = new[:3]
    old_args, old_nodes, old_out = old[:3]
    # A step off the CPU carries ("device", backend key) as a 4th part (see extract).
    new_dev = new[3][1] if len(new) > 3 else "cpu"
    old_dev = old[3][1] if len(old) > 3 else "cpu"
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


class ExecutableCache:
    """In-memory map from structural key to Executable, with hit/miss accounting."""

    def __init__(self) -> None:
        self._entries: dict[tuple, Executable] = {}
        self._last_key: tuple | None = None
        self._site_misses: Counter[str] = Counter()
        self.stats = CacheStats()
        self.last: Executable | None = None   # the executable of the latest realization

    def lookup(self, key: tuple, build: Callable[[], Executable], engine: str = "") -> Executable:
        """The executable for structural ``key`` on ``engine``, built on a miss."""
        exe = self._entries.get((engine, key))
        if exe is not None:
            self.stats.hits += 1
        else:
            reason = (f"first compilation for engine {engine}" if key == self._last_key
                      else explain_difference(key, self._last_key))
            exe = build()
            self._entries[(engine, key)] = exe
            _settle_garbage_collector()
            filename, lineno = _user_frame()
            site = f"{os.path.basename(filename)}:{lineno}"
            self.stats.misses += 1
            self.stats.entries = len(self._entries)
            self.stats.miss_log.append(Miss(reason, site, exe.num_ops, exe.num_kernels, engine))
            self._site_misses[site] += 1
            if self._site_misses[site] == RECOMPILE_WARNING_THRESHOLD:
                warnings.warn_explicit(
                    f"nova: {site} has compiled {RECOMPILE_WARNING_THRESHOLD} different "
                    f"step functions; latest reason: {reason}. Values that change every "
                    "step should be tensors, not Python numbers or shapes.",
                    RecompileWarning, filename, lineno)
        self._last_key = key
        self.last = exe
        return exe

    def clear(self) -> None:
        self.__init__()


CACHE = ExecutableCache()

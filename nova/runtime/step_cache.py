"""Compiled steps on disk: a warm process skips the front end, fusion and planning.

A cold step pays the compiler twice: LLVM for its kernels (cached on disk one by one,
``kernel_cache``) and, before that, Python for the step itself -- building the nova
function, CSE/DCE and the rewrites, fusion and each kernel's plan: ~0.35 s of the small
GPT's first step with every kernel already on disk, half of a warm start. This cache
keeps that second part too: the optimized nova module and the ``CompiledStep`` (fused
module and plans), pickled, under a digest of everything they are a function of:

- the step's structural key (``PendingGraph.key``: ops, attributes, shapes, dtypes,
  wiring -- what the in-memory executable cache is keyed by), which must print the same
  in every process (a key whose text holds an object address is never cached);
- the engine label (remat mode, composite or fused attention), ``NOVA_ROW_CHUNK_MB``
  and the CPU the plans were configured for (``detect_cpu``);
- Nova's source fingerprint (any change to the compiler invalidates every entry), and
  the versions of Python and xDSL (the pickle's classes).

Entries are ``disk_cache`` files (atomic writes, a checksum over header and payload,
the full digest in the header), so a torn or altered file is recompiled, never loaded.
Steps of fewer than ``MIN_OPS`` ops are not cached, and the directory is kept under
``NOVA_STEP_DISK_CACHE_MB`` (512) by removing the least recently used entries.
The trust model is the kernel cache's: the directory is the user's own (it holds native
code already), and a pickle runs code as it loads -- do not point ``NOVA_CACHE_DIR`` at
a directory others can write. CPU steps only.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import sys
import threading
from dataclasses import dataclass
from typing import Any

from nova import config
from nova.core.graph import decoded_key
from nova.runtime import disk_cache

FORMAT_VERSION = 1
KIND = "nova-step"
# Steps smaller than this are not cached: building them takes about as long as reading
# an entry (the front end costs ~0.1 ms per op), and a test suite or a sweep over shapes
# makes thousands of them.
MIN_OPS = 100


@dataclass
class StepCacheStats:
    hits: int = 0        # steps loaded from disk
    stored: int = 0      # steps written
    skipped: int = 0     # steps not cached (their key does not print the same everywhere)
    evicted: int = 0     # entries removed to keep the directory under its limit


STATS = StepCacheStats()
_lock = threading.Lock()


def _directory() -> str | None:
    from nova.runtime.kernel_cache import source_fingerprint
    root = config.cache_root()
    if root is None or source_fingerprint() is None:
        return None
    return os.path.join(root, "steps")


def digest(key: tuple, label: str) -> str | None:
    """The entry name of structural ``key`` compiled as ``label``, or None when the key
    cannot name the same step in another process, or the step is too small to be worth
    an entry (``MIN_OPS``)."""
    if len(key[1]) < MIN_OPS:
        return None
    import xdsl

    from nova.compiler.targets.cpu.device import detect_cpu
    from nova.runtime.kernel_cache import source_fingerprint
    text = repr(decoded_key(key))   # signatures, not this process's ids
    if " at 0x" in text:        # an object's default repr: not the same in two processes
        return None
    raw = (f"{FORMAT_VERSION}|{source_fingerprint()}|{sys.version}|xdsl "
           f"{getattr(xdsl, '__version__', '?')}|{label}|{config.ROW_CHUNK_MB.get()}|"
           f"{detect_cpu()}|{text}")
    return hashlib.sha256(raw.encode()).hexdigest()


def load(name: str) -> tuple[Any, Any] | None:
    """``(module, compiled_step)`` stored under ``name``, or None (missing, corrupted,
    another key, or not loadable)."""
    directory = _directory()
    if directory is None:
        return None
    path = os.path.join(directory, name + ".step")
    found = disk_cache.read_entry(path, {"kind": KIND, "key": name},
                                  lambda header, payload: None)
    if found.status != "hit":
        return None
    try:
        os.utime(path)          # recently used: evicted last
    except OSError:
        pass
    try:
        module, lowered = pickle.loads(found.payload)
    except Exception:          # noqa: BLE001 -- an unloadable entry is recompiled
        return None
    with _lock:
        STATS.hits += 1
    return module, lowered


# Pickling follows xDSL's linked lists of ops one recursion level per link (~4 per op:
# the medium GPT's step needs a limit of 20,000), so it runs in a thread of its own with
# a deep stack; loading is iterative and needs neither.
PICKLE_STACK_BYTES = 512 << 20
PICKLE_RECURSION_LIMIT = 100_000


def _pickled(value: Any) -> bytes | None:
    """``value`` pickled, or None if it cannot be (too deep, or not picklable)."""
    out: list[bytes] = []

    def dump() -> None:
        try:
            out.append(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        except (pickle.PicklingError, TypeError, AttributeError, RecursionError):
            pass
    with _lock:
        old_limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old_limit, PICKLE_RECURSION_LIMIT))
        try:
            old_stack = threading.stack_size(PICKLE_STACK_BYTES)
            try:            # (the size applies when the thread starts)
                worker = threading.Thread(target=dump, name="nova-step-cache")
                worker.start()
            finally:
                threading.stack_size(old_stack)
            worker.join()
        finally:
            sys.setrecursionlimit(old_limit)
    return out[0] if out else None


def store(name: str, module: Any, lowered: Any) -> None:
    """Write ``(module, lowered)`` under ``name`` (best effort: a step that cannot be
    written is compiled again by the next process)."""
    directory = _directory()
    if directory is None:
        return
    payload = _pickled((module, lowered))
    if payload is None:
        with _lock:
            STATS.skipped += 1
        return
    limit = int(config.STEP_DISK_CACHE_MB.get() * 2**20)
    if len(payload) > limit:
        return
    if disk_cache.write_entry(os.path.join(directory, name + ".step"),
                              {"kind": KIND, "key": name, "size": len(payload)}, payload):
        with _lock:
            STATS.stored += 1
        _evict(directory, limit)


def _evict(directory: str, limit: int) -> None:
    """Remove the least recently used entries (by modification time: a hit touches its
    entry) while the directory holds more than ``limit`` bytes of them, down to 3/4 of
    it (so a run of new steps does not list the directory on every store)."""
    try:
        entries = []
        with os.scandir(directory) as it:
            for e in it:
                if e.name.endswith(".step") and e.is_file(follow_symlinks=False):
                    st = e.stat(follow_symlinks=False)
                    entries.append((st.st_mtime, st.st_size, e.path))
    except OSError:
        return
    total = sum(size for _, size, _ in entries)
    if total <= limit:
        return
    for _, size, path in sorted(entries):
        if total <= limit * 3 // 4:
            break
        try:
            os.unlink(path)
        except OSError:
            continue
        total -= size
        with _lock:
            STATS.evicted += 1

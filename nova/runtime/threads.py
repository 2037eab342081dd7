"""Running kernels on all cores.

Mechanism: each kernel takes a ``[start, end)`` range of its parallel dimension, cut
into a few chunks per thread (``configurator.chunks_per_thread``), which ``threads - 1``
worker threads and the calling thread claim one at a time until none is left. The
workers are Python threads that spend their life inside one native function,
``nova_pool_worker`` (LLVM IR from ``nova.compiler.targets.cpu.pool``, JIT-compiled once
per process): ctypes releases the GIL for the call, and the worker spins on its ticket,
claims and runs chunks and counts them done, all without Python. A worker whose core
another process keeps taking is benched: left out of launches
(``nova.runtime.contention``). A worker that gets no chunk for ``SPIN_SECONDS`` returns
to Python and sleeps on a condition variable until the caller wakes it. So there is no native threading runtime to ship or find
(OpenMP would need libgomp on the user's machine), and handing a chunk to a spinning
worker costs a few microseconds (the launch and join calls included) instead of the
50-150 us of a ``ThreadPoolExecutor`` round trip, which is what lets the configurator
split kernels of tens of microseconds (``benchmarks/bench_ops.py`` measures the
hand-off).

Spinning keeps a core busy for up to ``SPIN_SECONDS`` after the last parallel kernel,
the same trade OpenBLAS and OpenMP runtimes make: a training step's kernels come every
few microseconds to milliseconds, and a worker that slept between them would pay the
wake-up (tens of microseconds natively, far more on a VM whose idle vCPU is descheduled)
on every kernel. ``NOVA_SPIN_US`` overrides it (0: sleep at once). With more threads than
the cores this process may use (``set_num_threads`` above them), workers sleep at once:
spinning there takes the cores the busy threads need (measured with 3 threads on 2
cores: a 64K-element add took 2.4 ms spinning, 0.1 ms with 2 threads).

Each worker is pinned to a CPU of its own (worker w to the w-th CPU of the process's
affinity mask; the calling thread stays free and the scheduler moves it off a worker's
CPU), unless threads outnumber CPUs or ``NOVA_PIN_THREADS=0``. Why: a worker woken from
its sleep is placed by Linux next to the thread that woke it, on the caller's CPU, and
the two then share one core until the load balancer separates them, milliseconds later.
Measured on the 2-core VM, the two halves of a 768x2048x256 product (5.3-5.5 ms each
alone) took a median of 8-10 ms together unpinned, often no faster than one after the
other, and 7 ms pinned; training the small GPT for 80 steps, six alternating pairs of
runs gave pinned workers +6% tokens/s in the median (-4% to +20%).
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import threading
from collections.abc import Iterator, Sequence
from functools import lru_cache

from nova import config
from nova.compiler.targets.cpu.pool import (
    ACTIVE,
    BENCHED,
    DONE,
    DRIVE_POOL,
    DRIVE_STATE,
    DRIVE_WAKE,
    IDLE,
    LINE,
    OPEN,
    SEEN,
    THREADS,
    TICKET,
    X86,
    pool_module,
    state_words,
    thread_word,
)
from nova.compiler.targets.cpu.configurator import chunks_per_thread, thread_chunks
from nova.compiler.targets.cpu.device import detect_cpu, usable_cores
from nova.compiler.lowering.plan import (
    TEAM_ARRIVED,
    TEAM_BARRIER,
    TEAM_MEMBERS,
    TEAM_WORDS,
)
from nova.runtime.contention import Contention
from nova.runtime.interrupts import deferred_interrupt

SPIN_SECONDS = 2e-3
SPINS_PER_SECOND_WITHOUT_TSC = 1e8   # spin iterations per second off x86 (rough)


_state: dict = {"threads": usable_cores(), "pool": None}
_pool_lock = threading.Lock()

_i64p = ctypes.POINTER(ctypes.c_int64)


@lru_cache(maxsize=1)
def _native() -> tuple:
    """(worker, launch, join, stop, drive, cancel) as ctypes functions, loaded on
    first use (compiled once, then read from the kernel disk cache)."""
    from nova.runtime.kernel_cache import KERNELS
    jit = KERNELS.jit
    names = ("nova_pool_worker", "nova_pool_launch", "nova_pool_join", "nova_pool_stop",
             "nova_drive", "nova_pool_cancel")
    addr = jit.load(pool_module(jit.triple, jit.data_layout), names, KERNELS.stats)
    i64 = ctypes.c_int64
    return (ctypes.CFUNCTYPE(i64, _i64p, i64, i64)(addr[names[0]]),
            ctypes.CFUNCTYPE(i64, _i64p, i64, i64, _i64p, i64)(addr[names[1]]),
            ctypes.CFUNCTYPE(ctypes.c_int32, _i64p)(addr[names[2]]),
            ctypes.CFUNCTYPE(i64, _i64p, i64)(addr[names[3]]),
            ctypes.CFUNCTYPE(i64, _i64p)(addr[names[4]]),
            ctypes.CFUNCTYPE(i64, _i64p)(addr[names[5]]))


def _spin_units(seconds: float | None) -> int:
    """``seconds`` (default ``SPIN_SECONDS``, or ``NOVA_SPIN_US``) in the worker's spin
    clock: time-stamp counter ticks on x86 (the TSC runs at about the nominal clock),
    else iterations."""
    if seconds is None:
        override = config.SPIN_US.get()
        seconds = SPIN_SECONDS if override is None else override * 1e-6
    from nova.runtime.kernel_cache import KERNELS
    if KERNELS.jit.triple.startswith(X86):
        return int(seconds * detect_cpu().ghz * 1e9)
    return int(seconds * SPINS_PER_SECOND_WITHOUT_TSC)


class WorkerPool:
    """The caller plus ``threads - 1`` spinning workers (see the module docstring);
    ``spin_seconds`` overrides how long an idle worker spins before it sleeps."""

    def __init__(self, threads: int, spin_seconds: float | None = None):
        self.threads = threads
        (self._worker, self._launch, self._join, self._stop, self._drive,
         self._cancel) = _native()
        words = state_words(threads)
        self._buffer = (ctypes.c_int64 * (words + LINE))()    # + room to align to 64 B
        aligned = -(-ctypes.addressof(self._buffer) // 64) * 64
        self.words = (ctypes.c_int64 * words).from_address(aligned)
        self.state = ctypes.cast(aligned, _i64p)
        self.words[THREADS] = self.words[ACTIVE] = threads
        self._wake = threading.Condition()
        self._busy = threading.Lock()
        self._open_ranges: ctypes.Array | None = None   # the open ``run`` job's chunks
        if spin_seconds is None and threads > usable_cores():
            spin_seconds = 0.0     # more threads than cores: spinning would steal them
        self._spin = _spin_units(spin_seconds)
        self.cpus = pinned_cpus(threads)     # worker w runs on cpus[w], if not None
        self._workers = [threading.Thread(target=self._work, args=(w,), daemon=True,
                                          name=f"nova-worker-{w}")
                         for w in range(1, threads)]
        for t in self._workers:
            t.start()
        self.contention = Contention([t.native_id for t in self._workers], self._set_benched)

    def _set_benched(self, w: int, benched: bool) -> None:
        """Leave worker w out of launches (or take it back); only the pool's holder
        calls this, between jobs."""
        self.words[thread_word(w, BENCHED)] = int(benched)
        self.words[ACTIVE] = self.threads - sum(
            self.words[thread_word(v, BENCHED)] for v in range(1, self.threads))

    @property
    def active(self) -> int:
        """Threads a job can use now: the caller and the workers not benched."""
        return self.words[ACTIVE]

    def _work(self, w: int) -> None:
        if self.cpus is not None:
            try:
                os.sched_setaffinity(0, {self.cpus[w]})   # 0: this thread
            except OSError:   # the CPU left the mask since: the worker runs unpinned
                pass
        ticket, seen, idle = (thread_word(w, f) for f in (TICKET, SEEN, IDLE))
        words = self.words
        while self._worker(self.state, w, self._spin):   # 1: no work for a while
            with self._wake:
                while words[ticket] == words[seen]:
                    self._wake.wait()
                words[idle] = 0

    def run(self, fn, fn_address: int, args_address: int, ranges: ctypes.Array,
            n: int, team: ctypes.Array | None = None) -> int:
        """Run kernel ``fn`` (at ``fn_address``) on the buffer table at ``args_address``
        over the ``n`` chunks of ``ranges`` (``ranges_array``), claimed by whichever
        threads come; the largest return code. Another Python thread dispatching at the
        same time runs its chunks one after the other on its own thread instead
        (correct, not parallel). ``team``: the kernel's team header (``team_header``),
        set up for n members (at most one per thread) or, run one after another, for
        one."""
        if n < 1 or (team is not None and n > self.threads):
            raise ValueError(f"WorkerPool.run: {n} chunks for a pool of {self.threads} "
                             "threads; expected at least 1"
                             + (", and at most one per thread for a team" if n >= 1 else ""))
        if n == 1:
            return self._alone(fn, args_address, ranges, n, team)
        with self._held() as held:
            if not held or (team is not None and n > self.active):
                return self._alone(fn, args_address, ranges, n, team)
            if team is not None:
                team[TEAM_MEMBERS], team[TEAM_ARRIVED], team[TEAM_BARRIER] = n, 0, 0
            # Workers read the chunks from ``ranges`` as they claim them: it must outlive
            # a caller interrupted between launch and join (until a recovery ends the job).
            self._open_ranges = ranges
            if self._launch(self.state, fn_address, args_address, ranges, n):
                with self._wake:
                    self._wake.notify_all()
            code = self._join(self.state)
            self._open_ranges = None
            return code

    @staticmethod
    def _alone(fn, args_address: int, ranges: ctypes.Array, n: int,
               team: ctypes.Array | None) -> int:
        """``run``'s chunks one after another on this thread (a team of one)."""
        if team is not None:
            team[TEAM_MEMBERS] = 1
        table = ctypes.cast(args_address, ctypes.POINTER(ctypes.c_void_p))
        return max(fn(table, ranges[2 * i], ranges[2 * i + 1]) for i in range(n))

    def drive(self, control: ctypes.Array) -> int:
        """Run a step's kernel list (``nova_drive``'s ``control`` block, see
        ``nova.compiler.targets.cpu.pool``) on the pool; the driver's return code.
        The driver returns to Python only to wake sleeping workers (a condition
        variable), then goes on. Another thread holding the pool: every kernel runs on
        this thread, one call over all its chunks. Interrupted between such a return and
        the next call, the open job is finished as in ``run``."""
        with self._held() as held:
            if not held:
                control[DRIVE_POOL], control[DRIVE_STATE] = 0, 0
                return self._drive(control)
            control[DRIVE_POOL], control[DRIVE_STATE] = 1, ctypes.addressof(self.words)
            while True:
                code = self._drive(control)
                if code != DRIVE_WAKE:
                    return code
                with self._wake:
                    self._wake.notify_all()

    @contextlib.contextmanager
    def _held(self) -> Iterator[bool]:
        """The pool for this thread's job (True), or False if another thread holds it
        (its chunks then run on the caller). While held: a job a twice-interrupted
        recovery left open is finished first, and one this holder leaves open (Ctrl-C
        between a launch and its join) is finished before the pool is released. After
        a job, the holder looks at contention (``nova.runtime.contention``)."""
        if not self._busy.acquire(blocking=False):
            yield False
            return
        try:
            if self.words[OPEN]:     # abandoned earlier, and its recovery interrupted too
                self._recover(caller_alive=False)
            yield True
            self.contention.tick()
        finally:
            try:
                if self.words[OPEN]:     # interrupted between launch and join (Ctrl-C)
                    self._recover(caller_alive=True)
            finally:
                self._busy.release()

    def _recover(self, caller_alive: bool) -> None:
        """Finish a job abandoned between launch and join, with SIGINT held back.

        ``OPEN`` (set by the native launch, cleared by the native join) says a job is in
        flight, whatever Python line the interrupt hit. Its workers may still be
        writing into its buffers, which the caller is about to free, and a worker still
        on it when the next job is launched would run stale chunks; a worker asleep
        when it was handed the job may not have been woken. So: wake the sleepers,
        and -- while the caller's frames still hold the job's buffers
        (``caller_alive``, the normal case) -- join, which claims and runs what is left
        (the members of a team kernel wait at barriers for every member). Only if that
        recovery was itself interrupted, and the buffers are gone, does the next job
        find ``OPEN`` still set: then the chunks not yet claimed are cancelled first
        (they would write freed memory; a sleeper woken before the cancel could claim
        one) and those claimed are waited for. Claimed chunks are on awake threads, and
        a team's members finish too: a cancelled chunk never joined its team, which
        closes without it (``GemmDriver.join_team``)."""
        with deferred_interrupt():
            if caller_alive:
                with self._wake:
                    self._wake.notify_all()
                self._join(self.state)
                self._open_ranges = None
                return
            claimed = self._cancel(self.state)
            words = self.words
            while words[DONE] != claimed:
                os.sched_yield()
            words[OPEN] = 0
            self._open_ranges = None

    def close(self) -> None:
        """Stop and join the workers (at exit, on ``set_num_threads``)."""
        with self._busy:
            if self.words[OPEN]:
                self._recover(caller_alive=False)
            self._stop(self.state, self.threads)
            with self._wake:
                self._wake.notify_all()
            for t in self._workers:
                t.join()
            self.contention.close()


def drive(control: ctypes.Array) -> int:
    """Run a step's kernel list natively (``nova_drive``): on the process's pool, or on
    this thread alone with one thread."""
    p = pool()
    if p is None:
        control[DRIVE_POOL], control[DRIVE_STATE] = 0, 0
        return _native()[4](control)
    return p.drive(control)


def team_header(address: int) -> ctypes.Array:
    """The team header (``nova.compiler.lowering.plan``) at ``address``, the start of
    a kernel's scratch buffer, as the int64 array ``WorkerPool.run`` writes."""
    return (ctypes.c_int64 * TEAM_WORDS).from_address(address)


def pinned_cpus(threads: int) -> list[int] | None:
    """The CPUs worker threads are pinned to (worker w to the w-th CPU this process may
    use; the caller, w = 0, is left free), or None: with ``NOVA_PIN_THREADS=0``, more
    threads than CPUs, or no affinity API."""
    if not config.PIN_THREADS.get() or not hasattr(os, "sched_setaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    return cpus if threads <= len(cpus) else None


def ranges_array(chunks: Sequence[tuple[int, int]]) -> ctypes.Array:
    """``chunks`` as the flat (start, end) int64 array ``WorkerPool.run`` takes."""
    flat = [v for chunk in chunks for v in chunk]
    return (ctypes.c_int64 * len(flat))(*flat)


def get_num_threads() -> int:
    return _state["threads"]


def active_threads() -> int:
    """Threads a parallel kernel can use now: ``get_num_threads()`` less the workers
    benched for contention (``nova.runtime.contention``)."""
    p = _state["pool"]
    return _state["threads"] if p is None else p.active


def set_num_threads(n: int) -> None:
    """Threads used by compiled kernels (default: the cores this process may use)."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: expected a positive int, got {n!r}")
    _shutdown()
    _state["threads"] = n


def pool() -> WorkerPool | None:
    """The process's worker pool, started on first use (None with one thread)."""
    n = _state["threads"]
    if n <= 1:
        return None
    p = _state["pool"]
    if p is None:
        with _pool_lock:     # two threads' first parallel kernels: one pool
            if _state["pool"] is None:
                _state["pool"] = WorkerPool(n)
            p = _state["pool"]
    return p


def _shutdown() -> None:
    with _pool_lock:
        p, _state["pool"] = _state["pool"], None
    if p is not None:
        p.close()


def _forget_after_fork() -> None:
    """A forked child has none of the parent's threads: start a new pool when needed."""
    global _pool_lock
    _pool_lock = threading.Lock()   # (the parent may have held it while forking)
    _state["pool"] = None


atexit.register(_shutdown)   # before the JIT's code is freed, stop the threads running it
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def chunks(extent: int, seconds: float, strategy: str = "elementwise",
           team: bool = False, active: int | None = None,
           min_chunk: int = 1) -> list[tuple[int, int]]:
    """Split ``[0, extent)`` of a kernel estimated at ``seconds`` for the threads as the
    configurator decides (``thread_chunks``, ``chunks_per_thread``; chunks of at least
    ``min_chunk`` iterations, ``smallest_chunk``): a team's for the threads in use now
    (``active``, default ``active_threads()``: one chunk per member), others for all
    (claimed as they come)."""
    threads = (active_threads() if active is None else active) if team else _state["threads"]
    if threads <= 1:
        return [(0, extent)]
    return thread_chunks(extent, seconds, threads, detect_cpu(),
                         chunks_per_thread(strategy, team), min_chunk)

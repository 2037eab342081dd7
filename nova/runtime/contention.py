"""Which pool workers to leave out: those whose cores another process keeps taking.

Chunks are claimed dynamically (``nova.compiler.targets.cpu.pool``), so a worker that
never starts costs nothing. One that the OS deschedules *while it holds a chunk* does:
the others wait for that chunk for up to a time slice (~3 ms), once per kernel. Measured
on the 2-core bench VM with another process spinning on the worker's core: the small
GPT step went from 151 ms quiet to 335 ms, slower than Nova on one thread (~290 ms,
which the OS then gives the free core).

Linux counts, per thread, the time it spent runnable but waiting for a CPU
(``/proc/self/task/<tid>/schedstat``, second field, nanoseconds). A worker that spins
or computes is always runnable, so on a core of its own that count stays near 0 (1.6e-5
of the time, measured), and on a core shared with one busy process it grows at half
the wall clock (0.50, measured). Every ``CHECK_SECONDS`` the pool's holder reads it for
the caller and the workers in use: a worker waiting more than ``CONTENDED_SHARE`` of
the interval in two checks in a row is benched (launches stop moving its ticket; it
spins out and sleeps), and if the caller waits that much twice in a row, the
highest-numbered worker in use is benched, freeing a core the OS can move the caller
to. Twice, because one check's wait can be Nova's own: around the evaluations of
``models/train.py`` (forwards recorded op by op, the caller in Python while the worker
spins) single checks saw the worker wait 0.11-0.15 of the interval between checks of
under 0.05, with no other process using the CPUs (``/proc/stat``'s busy time less this
process's own), and benching it cost 2 s at one thread each time; another process on
the core makes the wait ~0.5 at every check, and is caught one check later. Every ``PROBE_SECONDS`` the bench is reconsidered:
a retry costs a step run contended (the check comes after a step), so it is made only
if the process's CPUs were idle, together, for at least ``IDLE_TO_RETRY`` of a CPU
since the last look (``/proc/stat``: a benched worker sleeps, so a core freed by the
other process shows as idle; while that process runs, none does). A retry that
benches again doubles the wait before the next (up to ``PROBE_MAX_SECONDS``), in case
idle time was there but not for Nova's threads.

Where schedstat cannot be read (not Linux, or a kernel without it), nothing is benched.
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence

CHECK_SECONDS = 0.05     # how often the holder looks at the counters
CONTENDED_SHARE = 0.1    # run-queue wait / wall above which a thread shares its core
PROBE_SECONDS = 2.0      # how long a benched worker first stays out before a retry
PROBE_MAX_SECONDS = 64.0  # ... doubling after each retry that finds it contended still
IDLE_TO_RETRY = 0.5      # CPUs idle (summed over the process's) that make a retry worth it


def _reader(tid: int) -> Callable[[], int] | None:
    """A function returning thread ``tid``'s run-queue wait so far (ns), or None."""
    try:
        fd = os.open(f"/proc/self/task/{tid}/schedstat", os.O_RDONLY)
    except OSError:
        return None

    def read() -> int:
        try:
            return int(os.pread(fd, 128, 0).split()[1])
        except (OSError, IndexError, ValueError):
            return 0
    read.fd = fd   # type: ignore[attr-defined]
    return read


def idle_shares(cpus: Sequence[int]) -> dict[int, tuple[int, int]] | None:
    """(idle, total) clock ticks so far of each of ``cpus``, from ``/proc/stat`` (None
    where it cannot be read)."""
    try:
        with open("/proc/stat", "rb") as f:
            text = f.read().decode()
    except OSError:
        return None
    wanted = {f"cpu{c}": c for c in cpus}
    out = {}
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] in wanted:
            ticks = [int(v) for v in fields[1:]]
            out[wanted[fields[0]]] = (ticks[3] + ticks[4], sum(ticks[:8]))   # idle + iowait
    return out


class Contention:
    """Bench and unbench a pool's workers by their run-queue waits (module docstring).

    ``bench(w, flag)`` writes worker w's flag where launches read it; ``tick()``, called
    by the pool's holder after each job, does the work at most every ``CHECK_SECONDS``.
    ``clock``, ``waits`` (thread id -> ns) and ``idle`` (``idle_shares`` of the
    process's CPUs) replace the real ones in tests."""

    def __init__(self, worker_ids: Sequence[int], bench: Callable[[int, bool], None],
                 clock: Callable[[], float] = time.monotonic,
                 waits: Callable[[int], int | None] | None = None,
                 idle: Callable[[], dict[int, tuple[int, int]] | None] | None = None):
        self._ids = list(worker_ids)            # index w - 1: worker w's native id
        self._bench = bench
        self._clock = clock
        self._readers: dict[int, Callable[[], int] | None] = {}
        self._waits = waits or self._read
        self.benched: set[int] = set()
        self.changes = 0                         # bench changes so far (for tests, stats)
        now = clock()
        self._next = now + CHECK_SECONDS
        self._probe_every = PROBE_SECONDS
        self._probe_at = now + PROBE_SECONDS
        self._probing = False                    # the bench was just cleared to retry
        self._suspects: set[int] = set()         # workers late at the last check
        self._caller_suspect = False             # ... and whether the caller was
        self._last: dict[int, int] = {}
        self._last_time = now
        if idle is None:
            mask = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
            idle = lambda: idle_shares(mask)   # noqa: E731
        self._idle = idle
        self._idle_mark: dict[int, tuple[int, int]] | None = None
        self.enabled = all(self._waits(tid) is not None for tid in self._ids[:1])

    def _read(self, tid: int) -> int | None:
        if tid not in self._readers:
            if len(self._readers) > 64:          # callers come and go: keep the workers'
                self._forget(keep=set(self._ids))
            self._readers[tid] = _reader(tid)
        read = self._readers[tid]
        return None if read is None else read()

    def _forget(self, keep: set[int]) -> None:
        for tid in [t for t in self._readers if t not in keep]:
            read = self._readers.pop(tid)
            if read is not None:
                os.close(read.fd)   # type: ignore[attr-defined]

    def close(self) -> None:
        self._forget(keep=set())

    def tick(self) -> None:
        """After a job: every ``CHECK_SECONDS``, bench the workers (or, for the caller, a
        worker) that waited for a CPU, and every ``PROBE_SECONDS`` unbench them all."""
        if not self.enabled:
            return
        now = self._clock()
        if now < self._next:
            return
        self._next = now + CHECK_SECONDS
        caller = threading.get_native_id()
        interval = max(now - self._last_time, 1e-9)
        waits = {tid: self._waits(tid) for tid in (caller, *self._ids)}
        share = {tid: ((w - self._last[tid]) * 1e-9 / interval
                       if w is not None and tid in self._last else 0.0)
                 for tid, w in waits.items()}
        self._last = {tid: w for tid, w in waits.items() if w is not None}
        self._last_time = now
        if self.benched and now >= self._probe_at:
            if not self._idle_since_mark():    # the other process still runs: stay out
                self._probe_at = now + PROBE_SECONDS
                return
            for w in sorted(self.benched):
                self._set(w, False)
            self._probing = True
            return
        in_use = [w for w in range(1, len(self._ids) + 1) if w not in self.benched]
        waiting = {w for w in in_use if share[self._ids[w - 1]] > CONTENDED_SHARE}
        caller_waits = share[caller] > CONTENDED_SHARE
        late = sorted(waiting & self._suspects)            # late twice in a row
        if not late and caller_waits and self._caller_suspect and in_use:
            late = [in_use[-1]]
        self._suspects, self._caller_suspect = waiting, caller_waits
        if self._probing and (late or not (waiting or caller_waits)):
            # the retry's verdict: back off, or start afresh
            self._probe_every = (min(2 * self._probe_every, PROBE_MAX_SECONDS) if late
                                 else PROBE_SECONDS)
            self._probing = False
        if late:
            self._probe_at = now + self._probe_every
            self._idle_mark = self._idle()
        for w in late:
            self._set(w, True)

    def _idle_since_mark(self) -> bool:
        """Whether the process's CPUs were idle for ``IDLE_TO_RETRY`` of a CPU since the
        last look (True where ``/proc/stat`` cannot tell); takes a new mark."""
        before, now = self._idle_mark, self._idle()
        self._idle_mark = now
        if not before or not now:
            return True
        idle = sum((now[c][0] - before[c][0]) / (now[c][1] - before[c][1])
                   for c in now if c in before and now[c][1] > before[c][1])
        return idle >= IDLE_TO_RETRY

    def _set(self, w: int, benched: bool) -> None:
        (self.benched.add if benched else self.benched.discard)(w)
        self._bench(w, benched)
        self.changes += 1

"""LLVM IR of the CPU thread pool's hand-off: chunks claimed from a shared counter.

A multi-threaded kernel call is a job of n ``[start, end)`` chunks. Through Python (a
``ThreadPoolExecutor``: a lock, a condition variable and a future per chunk, and a
sleeping thread to wake) a hand-off cost about 50 us back to back and 150 us or more
after a pause, measured on the 2-core bench VM. Here it is native, a few microseconds
(``benchmarks/bench_ops.py`` reports it): the caller publishes the job in a shared line
and moves each worker's ticket; a worker spinning on its ticket sees it within a few
hundred cycles. Then every thread -- the caller too -- claims chunks one at a time from
the job's claim counter, runs each and counts it done, until none is left; the caller
then waits only for chunks already claimed. So a worker the OS has descheduled (another
process holds its core) is never waited for before it starts: the others take its share
(a fixed split would wait for its half, measured 3.7x slower than one thread with one
core busy, issue #25). Which thread runs a chunk never changes a result: each chunk
writes its own part of the output, and the chunks are fixed by the configurator.

Only a worker that has found no work for ``spin_cycles`` leaves the spin loop
(``nova_pool_worker`` returns 1) and sleeps on a Python condition variable;
``nova_pool_launch`` reports whether any worker it moved the ticket of is asleep, so
the caller wakes them (see ``nova.runtime.threads``).

State block: ``i64`` words in 64-byte lines:

- line 0: ``[STOP]`` (1: workers exit), ``[OPEN]`` (1 from a launch until its join has
  collected every claimed chunk: how the caller tells, after an interrupt, whether a job
  is in flight), ``[THREADS]`` (the pool's size, written once by Python), ``[ACTIVE]``
  (the threads a launch can use: the caller and the workers not ``BENCHED``)
- line 1: ``[DONE]``, chunks finished in the current job (by any thread)
- line 2, the job: ``[CLAIM]`` (the job's sequence number in the high 32 bits, the next
  unclaimed chunk in the low 32), ``[JOB_FN]`` (the kernel's address), ``[JOB_ARGS]``
  (its buffer table), ``[JOB_RANGES]`` (the chunks' start, end pairs), ``[CHUNKS]`` (n),
  ``[JOB_RC]`` (the largest return code so far)
- line 3 + t, per worker t (t = 0, the caller, leaves its line unused): ``TICKET``
  (jobs handed to t), ``SEEN`` (the ticket t last took), ``IDLE`` (1 while worker t
  sleeps or is about to), ``BENCHED`` (1: launches leave t out, written by the
  caller's Python between jobs -- a worker whose core another process keeps taking,
  see ``nova.runtime.threads``).

Claiming without a lock, and without running a chunk of the wrong job: a worker may
look at the job line late, while the caller is already publishing the next job. So the
caller first seals the claim word (next chunk ``SEALED``, with the new sequence
number), then writes the job's fields, then opens the claim word (next chunk 0). A
claim is a compare-and-swap of the exact word the claimer read before reading the
fields: it succeeds only if no seal came in between, so the fields it read belong to the
job whose chunk it took, and that job cannot end (nor its buffers go) before the chunk
is counted done.

Teams: a kernel whose chunks work together (the threads of a GEMM pack one B panel, see
``nova.compiler.targets.cpu.configurator``) starts its scratch buffer with a header of
``TEAM_WORDS`` words (its layout: ``nova.compiler.lowering.plan``). Before each call the
launcher (``nova.runtime.threads``) writes ``TEAM_MEMBERS``, how many of the call's
chunks run at the same time (n when the pool runs them, at most one per thread; 1 when
they run one after another), and zeroes ``TEAM_ARRIVED`` and ``TEAM_BARRIER``. A chunk
joins the team by incrementing the count in ``TEAM_ARRIVED``; a member that waited
``TEAM_JOIN_SPINS`` for the others closes the team as it is, and a chunk that comes
after (its thread descheduled, or never arriving so that another thread claimed its
chunk) works alone with panels of its own (``GemmDriver.join_team``). At its r-th barrier a
member increments ``TEAM_BARRIER`` and waits until it reaches r x the team's size
(``emit_barrier``). A barrier would deadlock chunks run one after another, hence
``TEAM_MEMBERS`` = 1 there: each chunk then does all the shared work itself. A team job
has at most one chunk per thread in use (``ACTIVE``), so every member can be claimed
by a thread of its own.

Sleeping without losing a wake-up is Dekker's handshake, both sides sequentially
consistent: a worker stores ``IDLE = 1`` and then re-reads its ticket, the caller
increments the ticket and then reads ``IDLE``; at least one of them sees the other's
write, so either the worker takes the job itself or the caller wakes it.
"""
from __future__ import annotations

from llvmlite import ir

from nova.compiler.lowering.plan import TEAM_ARRIVED, TEAM_BARRIER, TEAM_MEMBERS

I32, I64 = ir.IntType(32), ir.IntType(64)
LINE = 8                     # i64 words per 64-byte cache line
STOP, OPEN, THREADS, ACTIVE = 0, 1, 2, 3
DONE = LINE
CLAIM, JOB_FN, JOB_ARGS, JOB_RANGES, CHUNKS, JOB_RC = range(2 * LINE, 2 * LINE + 6)
TICKET, SEEN, IDLE, BENCHED = range(4)   # offsets in a worker's line
INDEX_BITS = 32              # the claim word: sequence number << 32 | next chunk
INDEX_MASK = (1 << INDEX_BITS) - 1
SEALED = INDEX_MASK          # the next chunk while the caller writes a job's fields
YIELD_EVERY = 256            # spin steps between sched_yield calls (a power of two)
X86 = ("x86_64", "i686", "i386")   # triples with ``pause`` and a user-mode rdtsc


def thread_word(thread: int, field: int) -> int:
    """Index of ``field`` in thread ``thread``'s line (thread 0 is the caller)."""
    return (3 + thread) * LINE + field


def state_words(threads: int) -> int:
    """Size of the state block, in i64 words, for the caller plus ``threads - 1`` workers."""
    return (3 + threads) * LINE


KERNEL = ir.FunctionType(I32, [I64.as_pointer(), I64, I64])   # nova kernels' signature


class _Builder:
    """Words of the state block, atomics, the spin-wait hint and the cycle counter."""

    def __init__(self, module: ir.Module, fn: ir.Function, pause: bool):
        self.module, self.fn = module, fn
        self.state = fn.args[0]
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self._pause = pause

    def word(self, index: int) -> ir.Value:
        return self.b.gep(self.state, [ir.Constant(I64, index)])

    def field(self, thread: ir.Value, field: int) -> ir.Value:
        """Pointer to ``field`` of thread ``thread``'s line."""
        b = self.b
        index = b.add(b.mul(b.add(thread, ir.Constant(I64, 3)), ir.Constant(I64, LINE)),
                      ir.Constant(I64, field))
        return b.gep(self.state, [index])

    def load(self, ptr: ir.Value, ordering: str | None = None) -> ir.Value:
        return self.b.load(ptr) if ordering is None else self.b.load_atomic(ptr, ordering, 8)

    def store(self, value: ir.Value | int, ptr: ir.Value, ordering: str | None = None) -> None:
        if isinstance(value, int):
            value = ir.Constant(I64, value)
        if ordering is None:
            self.b.store(value, ptr)
        else:
            self.b.store_atomic(value, ptr, ordering, 8)

    def intrinsic(self, name: str, ret: ir.Type) -> ir.Value:
        fn = self.module.globals.get(name) or ir.Function(
            self.module, ir.FunctionType(ret, []), name=name)
        return self.b.call(fn, [])

    def pause(self, spins: ir.Value | None = None) -> None:
        """One spin-wait step (``emit_pause``). The caller waiting in
        ``nova_pool_join`` yields, so a worker that holds a chunk but lost its core
        (another busy process) gets one back within microseconds rather than a time
        slice. Workers do not: measured on this VM, a worker that yields while idle can
        end up sharing the caller's core for good (the scheduler sees no reason to move
        either), which raised the hand-off from ~3 to ~30 us; a worker that spins on is
        moved to a free core."""
        emit_pause(self.module, self.b, self._pause, spins)

    def cycles(self, counter: ir.Value) -> ir.Value:
        """The spin clock: the time-stamp counter on x86 (``rdtsc``); elsewhere LLVM's
        cycle counter may trap in user mode, so the clock is ``counter``, a count of
        spin iterations."""
        if self._pause:
            return self.intrinsic("llvm.readcyclecounter", I64)
        value = self.b.add(self.b.load(counter), ir.Constant(I64, 1))
        self.b.store(value, counter)
        return value

    def work(self) -> None:
        """Claim chunks of the current job and run them until none is left (see the
        module docstring): read the claim word, then the job's fields, and take chunk i
        by swapping exactly that word for i + 1. A sealed word (the next job being
        written) or an exhausted one ends the loop; a failed swap (another claim, or a
        seal) reads again. A failing chunk raises ``JOB_RC`` to its code; every chunk
        run is counted in ``DONE`` (release: its writes are visible to whoever sees the
        count)."""
        b, fn = self.b, self.fn
        claim = self.word(CLAIM)
        loop, attempt, run, out = (fn.append_basic_block(name)
                                   for name in ("claim", "attempt", "run", "claimed_all"))
        b.branch(loop)
        b.position_at_end(loop)
        word = self.load(claim, "acquire")
        index = b.and_(word, ir.Constant(I64, INDEX_MASK))
        n = self.load(self.word(CHUNKS), "acquire")
        b.cbranch(b.icmp_unsigned("<", index, n), attempt, out)   # SEALED >= any n

        b.position_at_end(attempt)
        kernel = self.load(self.word(JOB_FN), "acquire")
        args = self.load(self.word(JOB_ARGS), "acquire")
        ranges = b.inttoptr(self.load(self.word(JOB_RANGES), "acquire"), I64.as_pointer())
        swapped = b.cmpxchg(claim, word, b.add(word, ir.Constant(I64, 1)),
                            "acq_rel", "acquire")
        b.cbranch(b.extract_value(swapped, 1), run, loop)

        b.position_at_end(run)
        pair = b.mul(index, ir.Constant(I64, 2))
        start = b.load(b.gep(ranges, [pair]))
        end = b.load(b.gep(ranges, [b.add(pair, ir.Constant(I64, 1))]))
        code = b.zext(b.call(b.inttoptr(kernel, KERNEL.as_pointer()),
                             [b.inttoptr(args, I64.as_pointer()), start, end]), I64)
        with b.if_then(b.icmp_unsigned("!=", code, ir.Constant(I64, 0))):
            b.atomic_rmw("umax", self.word(JOB_RC), code, "monotonic")
        b.atomic_rmw("add", self.word(DONE), ir.Constant(I64, 1), "release")
        b.branch(loop)
        b.position_at_end(out)


def emit_pause(module: ir.Module, b: ir.IRBuilder, x86: bool,
               spins: ir.Value | None = None) -> None:
    """One spin-wait step: x86 ``pause`` (which also yields to the core's sibling
    thread) and, given a ``spins`` counter (an ``i64`` slot), a ``sched_yield`` every
    ``YIELD_EVERY`` steps, so a waiter gives its core to a thread it waits for when
    threads outnumber cores. Not every step: a yield is a system call (~1 us in a VM)."""
    if x86:
        fn = module.globals.get("llvm.x86.sse2.pause") or ir.Function(
            module, ir.FunctionType(ir.VoidType(), []), name="llvm.x86.sse2.pause")
        b.call(fn, [])
    if spins is None:
        return
    count = b.add(b.load(spins), ir.Constant(I64, 1))
    b.store(count, spins)
    due = b.icmp_unsigned("==", b.and_(count, ir.Constant(I64, YIELD_EVERY - 1)),
                          ir.Constant(I64, 0))
    with b.if_then(due):
        fn = module.globals.get("sched_yield") or ir.Function(
            module, ir.FunctionType(I32, []), name="sched_yield")
        b.call(fn, [])


def emit_barrier(module: ir.Module, b: ir.IRBuilder, team: ir.Value, target: ir.Value,
                 spins: ir.Value) -> None:
    """Arrive at a team barrier and wait for the others: increment the team's
    ``TEAM_BARRIER`` word (sequentially consistent: this thread's earlier stores, its
    share of the packed panel, are visible to whoever sees the increment) and spin,
    with ``emit_pause``, until the word reaches ``target`` (members x barriers so far),
    reading it with acquire ordering so the others' stores are visible after."""
    word = b.gep(team, [ir.Constant(I64, TEAM_BARRIER)])
    b.atomic_rmw("add", word, ir.Constant(I64, 1), "seq_cst")
    fn = b.function
    poll, wait, done = (fn.append_basic_block(name) for name in ("bpoll", "bwait", "bdone"))
    b.branch(poll)
    b.position_at_end(poll)
    b.cbranch(b.icmp_signed(">=", b.load_atomic(word, "acquire", 8), target), done, wait)
    b.position_at_end(wait)
    emit_pause(module, b, module.triple.startswith(X86), spins)
    b.branch(poll)
    b.position_at_end(done)


def _worker(module: ir.Module, pause: bool) -> None:
    """``i64 nova_pool_worker(i64* state, i64 w, i64 spin_cycles)``: whenever worker w's
    ticket moves, claim and run chunks of the current job; return 0 when told to stop,
    1 after ``spin_cycles`` without a job (its caller then sleeps until the ticket
    moves). Off x86, ``spin_cycles`` counts spin iterations (see ``_Builder.cycles``)."""
    fn = ir.Function(module, ir.FunctionType(I64, [I64.as_pointer(), I64, I64]),
                     name="nova_pool_worker")
    h = _Builder(module, fn, pause)
    b = h.b
    w, spin = fn.args[1], fn.args[2]
    t0 = b.alloca(I64)
    counter = b.alloca(I64)                      # the spin clock where rdtsc is absent
    b.store(ir.Constant(I64, 0), counter)
    ticket, seen, idle = h.field(w, TICKET), h.field(w, SEEN), h.field(w, IDLE)
    blocks = {name: fn.append_basic_block(name) for name in (
        "wait", "poll", "spin", "try_sleep", "sleep", "job", "stop", "run")}
    b.branch(blocks["wait"])

    b.position_at_end(blocks["wait"])            # (re)start the spin clock
    b.store(h.cycles(counter), t0)
    b.branch(blocks["poll"])

    b.position_at_end(blocks["poll"])
    moved = b.icmp_unsigned("!=", h.load(ticket, "acquire"), h.load(seen))
    b.cbranch(moved, blocks["job"], blocks["spin"])

    b.position_at_end(blocks["spin"])
    h.pause()                                    # never yields (see _Builder.pause)
    waited = b.sub(h.cycles(counter), b.load(t0))
    b.cbranch(b.icmp_unsigned(">", waited, spin), blocks["try_sleep"], blocks["poll"])

    b.position_at_end(blocks["try_sleep"])       # Dekker: announce, then look again
    h.store(1, idle, "seq_cst")
    moved = b.icmp_unsigned("!=", h.load(ticket, "seq_cst"), h.load(seen))
    with b.if_then(moved):
        h.store(0, idle, "seq_cst")
        b.branch(blocks["job"])
    b.branch(blocks["sleep"])
    b.position_at_end(blocks["sleep"])
    b.ret(ir.Constant(I64, 1))

    b.position_at_end(blocks["job"])             # however many jobs were handed since
    h.store(h.load(ticket, "acquire"), seen)
    stop = b.icmp_unsigned("!=", h.load(h.word(STOP), "acquire"), ir.Constant(I64, 0))
    b.cbranch(stop, blocks["stop"], blocks["run"])

    b.position_at_end(blocks["stop"])
    b.ret(ir.Constant(I64, 0))

    b.position_at_end(blocks["run"])
    h.work()
    b.branch(blocks["wait"])


def _launch(module: ir.Module, pause: bool) -> None:
    """``i64 nova_pool_launch(i64* state, i64 fn, i64 args, i64* ranges, i64 n)``:
    publish a job of n chunks (``ranges``: start, end pairs) -- seal the claim word
    with the next sequence number, write the fields, open it at chunk 0 -- set
    ``OPEN``, move the tickets of the workers it can use (up to n - 1 of those not
    ``BENCHED``: a job of two chunks wakes one), and return how many of them are
    asleep."""
    fn = ir.Function(module, ir.FunctionType(
        I64, [I64.as_pointer(), I64, I64, I64.as_pointer(), I64]), name="nova_pool_launch")
    h = _Builder(module, fn, pause)
    b = h.b
    kernel, args, ranges, n = fn.args[1:]
    h.store(1, h.word(OPEN))
    h.store(0, h.word(DONE), "monotonic")
    claim = h.word(CLAIM)
    seq = b.add(b.lshr(h.load(claim, "monotonic"), ir.Constant(I64, INDEX_BITS)),
                ir.Constant(I64, 1))
    base = b.shl(seq, ir.Constant(I64, INDEX_BITS))
    h.store(b.or_(base, ir.Constant(I64, SEALED)), claim, "seq_cst")
    for field, value in ((JOB_FN, kernel), (JOB_ARGS, args),
                         (JOB_RANGES, b.ptrtoint(ranges, I64)), (CHUNKS, n),
                         (JOB_RC, ir.Constant(I64, 0))):
        h.store(value, h.word(field), "release")
    h.store(base, claim, "seq_cst")
    asleep, handed = b.alloca(I64), b.alloca(I64)
    b.store(ir.Constant(I64, 0), asleep)
    b.store(ir.Constant(I64, 1), handed)         # the caller takes part
    with _counted(b, ir.Constant(I64, 1), h.load(h.word(THREADS))) as t:
        wanted = b.and_(b.icmp_signed("<", b.load(handed), n),
                        b.icmp_unsigned("==", h.load(h.field(t, BENCHED)), ir.Constant(I64, 0)))
        with b.if_then(wanted):
            b.atomic_rmw("add", h.field(t, TICKET), ir.Constant(I64, 1), "seq_cst")
            b.store(b.add(b.load(asleep), h.load(h.field(t, IDLE), "seq_cst")), asleep)
            b.store(b.add(b.load(handed), ir.Constant(I64, 1)), handed)
    b.ret(b.load(asleep))


def _join(module: ir.Module, pause: bool) -> None:
    """``i32 nova_pool_join(i64* state)``: claim and run chunks of the launched job
    alongside the workers, then wait for the chunks they claimed (pausing, and yielding
    now and then: a descheduled worker gets a core back), clear ``OPEN``, return the
    largest return code."""
    fn = ir.Function(module, ir.FunctionType(I32, [I64.as_pointer()]), name="nova_pool_join")
    h = _Builder(module, fn, pause)
    b = h.b
    spins = b.alloca(I64)
    b.store(ir.Constant(I64, 0), spins)
    h.work()
    n = h.load(h.word(CHUNKS))
    poll, spin, done = (fn.append_basic_block(name) for name in ("poll", "spin", "done"))
    b.branch(poll)
    b.position_at_end(poll)
    b.cbranch(b.icmp_unsigned("==", h.load(h.word(DONE), "acquire"), n), done, spin)
    b.position_at_end(spin)
    h.pause(spins)
    b.branch(poll)
    b.position_at_end(done)
    rc = h.load(h.word(JOB_RC), "monotonic")
    h.store(0, h.word(OPEN))
    b.ret(b.trunc(rc, I32))


def _cancel(module: ir.Module, pause: bool) -> None:
    """``i64 nova_pool_cancel(i64* state)``: seal the current job's claim word, so no
    chunk not yet claimed will run, and return how many were claimed (the chunks a
    recovery must still wait for when the job's caller is gone)."""
    fn = ir.Function(module, ir.FunctionType(I64, [I64.as_pointer()]), name="nova_pool_cancel")
    h = _Builder(module, fn, pause)
    b = h.b
    claim = h.word(CLAIM)
    loop, done = fn.append_basic_block("cancel"), fn.append_basic_block("cancelled")
    b.branch(loop)
    b.position_at_end(loop)
    word = h.load(claim, "acquire")
    sealed = b.or_(word, ir.Constant(I64, SEALED))
    swapped = b.cmpxchg(claim, word, sealed, "seq_cst", "seq_cst")
    b.cbranch(b.extract_value(swapped, 1), done, loop)
    b.position_at_end(done)
    index = b.and_(word, ir.Constant(I64, INDEX_MASK))
    n = h.load(h.word(CHUNKS), "acquire")
    b.ret(b.select(b.icmp_unsigned("<", index, n), index, n))


def _stop(module: ir.Module, pause: bool) -> None:
    """``i64 nova_pool_stop(i64* state, i64 threads)``: tell workers 1..threads-1 to
    exit (each leaves at its next look at its ticket); returns how many are asleep."""
    fn = ir.Function(module, ir.FunctionType(I64, [I64.as_pointer(), I64]),
                     name="nova_pool_stop")
    h = _Builder(module, fn, pause)
    b = h.b
    h.store(1, h.word(STOP), "seq_cst")
    asleep = b.alloca(I64)
    b.store(ir.Constant(I64, 0), asleep)
    with _counted(b, ir.Constant(I64, 1), fn.args[1]) as t:
        b.atomic_rmw("add", h.field(t, TICKET), ir.Constant(I64, 1), "seq_cst")
        b.store(b.add(b.load(asleep), h.load(h.field(t, IDLE), "seq_cst")), asleep)
    b.ret(b.load(asleep))


# The driver's control block (``nova_drive``): i64 words.
DRIVE_STATE, DRIVE_POOL, DRIVE_RECORDS, DRIVE_COUNT, DRIVE_MOVING, DRIVE_ADDRESSES, \
    DRIVE_TIMES, DRIVE_CLOCK, DRIVE_NEXT, DRIVE_JOINING, DRIVE_RC = range(11)
DRIVE_WORDS = 16
# One kernel's record in the driver's kernel list: i64 words.
REC_FN, REC_TABLE, REC_RANGES, REC_CHUNKS, REC_TEAM, REC_MOVE_AT, REC_MOVE_COUNT = range(7)
REC_WORDS = 8
# What ``nova_drive`` returns.
DRIVE_DONE, DRIVE_WAKE, DRIVE_FAILED = 0, 1, 2


def _drive(module: ir.Module, pause: bool) -> None:
    """``i64 nova_drive(i64* control)``: run a step's kernels, in order, with no Python
    between them (``nova.runtime.cpu_engine``).

    ``control`` (``DRIVE_*`` words) names the pool's state block (0 without a pool),
    whether the pool may be used, the kernel list (``REC_WORDS`` per kernel: entry
    point, buffer table, chunks and their count, team header or 0, and its slice of
    the moving list), the moving list (pairs: an entry of the kernel's buffer table,
    the slot whose address goes there), the slot address table the caller filled for
    this run (arguments and results, whose addresses change every run), an optional
    timestamp array (two ``clock_gettime`` nanosecond readings per kernel, for
    ``nv.debug.profile``) and its clock id, and where to start (``DRIVE_NEXT``).

    Kernels of one chunk, and all kernels when the pool may not be used (another thread
    holds it) or every worker is benched (``ACTIVE`` = 1), run on the calling thread in
    one call over the whole of their chunks, ``[first start, last end)``, with their
    team set to one member: a kernel list's chunks are contiguous (``thread_chunks``),
    and how an extent is cut changes no result (tested: one thread and two give
    bit-identical training), only what each call re-derives (a GEMM's packing of the
    other operand, per call). A team kernel with more chunks than ``ACTIVE`` threads
    runs alone too (its members could not all run at once). Others go to the pool
    through ``nova_pool_launch`` / ``nova_pool_join``. Returns ``DRIVE_DONE``;
    ``DRIVE_FAILED`` with ``DRIVE_NEXT`` the failing kernel and ``DRIVE_RC`` its code;
    or ``DRIVE_WAKE`` when a launch found a worker asleep: the job is open
    (``DRIVE_JOINING`` = 1), the caller wakes the sleepers (a Python condition
    variable) and calls again, and the driver joins that kernel before going on."""
    fn = ir.Function(module, ir.FunctionType(I64, [I64.as_pointer()]), name="nova_drive")
    ctl = fn.args[0]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    i64p = I64.as_pointer()
    launch, join = module.globals["nova_pool_launch"], module.globals["nova_pool_join"]
    timespec = ir.LiteralStructType([I64, I64])
    clock_gettime = module.globals.get("clock_gettime") or ir.Function(
        module, ir.FunctionType(I32, [I32, timespec.as_pointer()]), name="clock_gettime")

    def c(v: int) -> ir.Constant:
        return ir.Constant(I64, v)

    def word(base: ir.Value, index: ir.Value | int) -> ir.Value:
        return b.gep(base, [c(index) if isinstance(index, int) else index])

    def pointer(base: ir.Value, index: int) -> ir.Value:
        return b.inttoptr(b.load(word(base, index)), i64p)

    state = pointer(ctl, DRIVE_STATE)
    use_pool = b.icmp_unsigned("!=", b.load(word(ctl, DRIVE_POOL)), c(0))
    records, moving = pointer(ctl, DRIVE_RECORDS), pointer(ctl, DRIVE_MOVING)
    addresses, times = pointer(ctl, DRIVE_ADDRESSES), pointer(ctl, DRIVE_TIMES)
    timed = b.icmp_unsigned("!=", b.load(word(ctl, DRIVE_TIMES)), c(0))
    clock = b.trunc(b.load(word(ctl, DRIVE_CLOCK)), I32)
    count = b.load(word(ctl, DRIVE_COUNT))
    spec = b.alloca(timespec)
    k = b.alloca(I64)
    rc = b.alloca(I64)
    b.store(b.load(word(ctl, DRIVE_NEXT)), k)

    def stamp(index: ir.Value) -> None:
        """``times[index]`` = now, in nanoseconds, if timing."""
        with b.if_then(timed):
            b.call(clock_gettime, [clock, spec])
            sec = b.load(b.gep(spec, [ir.Constant(I32, 0), ir.Constant(I32, 0)]))
            nsec = b.load(b.gep(spec, [ir.Constant(I32, 0), ir.Constant(I32, 1)]))
            b.store(b.add(b.mul(sec, c(1_000_000_000)), nsec), word(times, index))

    blocks = {name: fn.append_basic_block(name) for name in (
        "resume", "head", "body", "threads", "pooled", "join", "wake", "alone", "ran", "failed",
        "next", "done")}
    joining = word(ctl, DRIVE_JOINING)
    b.cbranch(b.icmp_unsigned("!=", b.load(joining), c(0)), blocks["resume"], blocks["head"])

    b.position_at_end(blocks["resume"])         # the kernel before NEXT is still open
    b.store(c(0), joining)
    b.store(b.sub(b.load(k), c(1)), k)
    b.store(b.zext(b.call(join, [state]), I64), rc)
    b.branch(blocks["ran"])

    b.position_at_end(blocks["head"])
    b.cbranch(b.icmp_signed("<", b.load(k), count), blocks["body"], blocks["done"])

    b.position_at_end(blocks["body"])
    rec = b.gep(records, [b.mul(b.load(k), c(REC_WORDS))])
    kernel_fn = b.load(word(rec, REC_FN))
    table = pointer(rec, REC_TABLE)
    ranges = pointer(rec, REC_RANGES)
    chunks = b.load(word(rec, REC_CHUNKS))
    team_word = b.load(word(rec, REC_TEAM))
    team = b.inttoptr(team_word, i64p)
    has_team = b.icmp_unsigned("!=", team_word, c(0))
    at = b.load(word(rec, REC_MOVE_AT))
    with _counted(b, at, b.add(at, b.load(word(rec, REC_MOVE_COUNT)))) as m:
        pair = b.mul(m, c(2))
        entry = b.load(word(moving, pair))
        slot = b.load(word(moving, b.add(pair, c(1))))
        b.store(b.load(word(addresses, slot)), word(table, entry))
    stamp(b.mul(b.load(k), c(2)))
    parallel = b.and_(use_pool, b.icmp_signed(">", chunks, c(1)))
    b.cbranch(parallel, blocks["threads"], blocks["alone"])

    # a team needs a thread per member: with workers benched since the kernel list was
    # cut (by another Python thread's run), its chunks run one after another instead
    b.position_at_end(blocks["threads"])
    active = b.load(word(state, ACTIVE))
    short = b.and_(has_team, b.icmp_signed(">", chunks, active))
    alone = b.or_(short, b.icmp_signed("<=", active, c(1)))   # every worker benched
    b.cbranch(alone, blocks["alone"], blocks["pooled"])

    b.position_at_end(blocks["pooled"])
    with b.if_then(has_team):
        b.store(chunks, word(team, TEAM_MEMBERS))
        b.store(c(0), word(team, TEAM_ARRIVED))
        b.store(c(0), word(team, TEAM_BARRIER))
    asleep = b.call(launch, [state, kernel_fn, b.ptrtoint(table, I64), ranges, chunks])
    b.cbranch(b.icmp_unsigned("!=", asleep, c(0)), blocks["wake"], blocks["join"])

    b.position_at_end(blocks["join"])
    b.store(b.zext(b.call(join, [state]), I64), rc)
    b.branch(blocks["ran"])

    b.position_at_end(blocks["wake"])           # back to Python to wake the sleepers
    b.store(b.add(b.load(k), c(1)), word(ctl, DRIVE_NEXT))
    b.store(c(1), joining)
    b.ret(c(DRIVE_WAKE))

    b.position_at_end(blocks["alone"])          # one call over all chunks, a team of one
    with b.if_then(has_team):
        b.store(c(1), word(team, TEAM_MEMBERS))
    last_end = word(ranges, b.sub(b.mul(chunks, c(2)), c(1)))
    b.store(b.zext(b.call(b.inttoptr(kernel_fn, KERNEL.as_pointer()), [
        table, b.load(word(ranges, 0)), b.load(last_end)]), I64), rc)
    b.branch(blocks["ran"])

    b.position_at_end(blocks["ran"])
    stamp(b.add(b.mul(b.load(k), c(2)), c(1)))
    b.cbranch(b.icmp_unsigned("!=", b.load(rc), c(0)), blocks["failed"], blocks["next"])

    b.position_at_end(blocks["failed"])
    b.store(b.load(k), word(ctl, DRIVE_NEXT))
    b.store(b.load(rc), word(ctl, DRIVE_RC))
    b.ret(c(DRIVE_FAILED))

    b.position_at_end(blocks["next"])
    b.store(b.add(b.load(k), c(1)), k)
    b.branch(blocks["head"])

    b.position_at_end(blocks["done"])
    b.store(count, word(ctl, DRIVE_NEXT))
    b.ret(c(DRIVE_DONE))


class _counted:
    """``with _counted(b, lo, hi) as i:`` emits ``for i in [lo, hi)``."""

    def __init__(self, b: ir.IRBuilder, lo: ir.Value, hi: ir.Value):
        self.b, self.lo, self.hi = b, lo, hi

    def __enter__(self) -> ir.Value:
        b = self.b
        fn = b.function
        self.head = fn.append_basic_block("for")
        self.body = fn.append_basic_block("body")
        self.exit = fn.append_basic_block("end")
        with b.goto_block(fn.entry_basic_block):   # a loop in a loop: one slot, not one per pass
            self.var = b.alloca(I64)
        b.store(self.lo, self.var)
        b.branch(self.head)
        b.position_at_end(self.head)
        i = b.load(self.var)
        b.cbranch(b.icmp_signed("<", i, self.hi), self.body, self.exit)
        b.position_at_end(self.body)
        return i

    def __exit__(self, *exc) -> None:
        b = self.b
        b.store(b.add(b.load(self.var), ir.Constant(I64, 1)), self.var)
        b.branch(self.head)
        b.position_at_end(self.exit)


def pool_module(triple: str, data_layout: str) -> ir.Module:
    """The module holding ``nova_pool_worker``, ``nova_pool_launch``,
    ``nova_pool_join``, ``nova_pool_cancel``, ``nova_pool_stop`` and the step driver
    ``nova_drive`` for ``triple``."""
    module = ir.Module(name="nova_pool")
    module.triple = triple
    module.data_layout = data_layout
    pause = triple.startswith(X86)
    for build in (_worker, _launch, _join, _cancel, _stop, _drive):
        build(module, pause)
    return module


__all__ = ["X86", "emit_barrier", "emit_pause", "pool_module", "state_words", "thread_word"]

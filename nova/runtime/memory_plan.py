"""The memory plan of a compiled step: kernel order, donation, and one arena.

A step is a list of kernels, each reading some slots and writing one. Slots below
``n_args`` are the caller's buffers (parameters, optimizer state, data); slots listed as
``outputs`` escape to tensors; every other slot is an *intermediate* that dies after its
last reader. The plan decides, ahead of time and once per compiled step:

1. **Donation.** A kernel that computes a result of the same size and dtype as an
   argument it reads *pointwise* (element i of the result from element i of the
   argument — an optimizer update ``p - lr * m / ...`` is the typical case) may write
   over that argument, provided every other reader of the argument runs before it. The
   pair is only a *candidate*: at run time the caller says which arguments nobody else
   holds (see ``nova.tensor.realize``), and only those are overwritten.
2. **Order.** A list schedule over the kernels' data dependences (plus, for each
   donation, "every other reader of the argument first"). Among ready kernels it prefers
   one that writes a step result without growing memory (an optimizer update: its
   output is donated, and it frees the gradient it reads last), else the earliest in
   program order. So a parameter's update runs as soon as its gradient is complete, and
   the gradient dies there: gradients of a step are never all alive at once. (Only
   results are pulled forward: running an intermediate early would stretch its
   output's lifetime, e.g. undo rematerialization by recomputing in the forward.)
   Collectives (``nova.runtime.collectives``) are the exception that overlaps: a start
   runs as soon as it is ready, a wait only when nothing else is, and starts keep their
   program order (every rank must issue them in one order). A gradient bucket's
   all-reduce then travels while the rest of the backward runs, and the updates that
   read it follow the waits at the end.
3. **In place.** A kernel that reads an intermediate pointwise (as in 1), as that
   intermediate's last reader, with a result of the same size and dtype, writes its
   result over it: the two slots are one buffer (a chain of partial sums ``acc = p +
   acc`` then needs one accumulator, not two). Which kernels read what pointwise is the
   caller's to say (``nova.runtime.step_memory.pointwise_inputs``): element i of the
   input must be read before element i of the result is written, by the same thread.
4. **Arena.** Every intermediate (and each kernel's scratch) gets an offset in one
   allocation; two buffers may share bytes only if their lifetimes (first write to last
   read, in positions of the order) are disjoint. Offsets are assigned greedily by
   decreasing size, each buffer into the smallest gap that fits among the already placed
   buffers whose lifetimes overlap it (best fit), which packs within a few percent of the
   liveness lower bound on transformer steps.

``check_arena`` verifies the no-overlap property independently of the planner.
"""
from __future__ import annotations

from dataclasses import dataclass, field


class NovaOutOfMemoryError(MemoryError, RuntimeError):
    """A step's memory plan does not fit; the message holds the plan's report and the
    knobs that reduce it. A ``RuntimeError`` too, as PyTorch's ``OutOfMemoryError``:
    scripts that halve their batch on ``except RuntimeError`` ("out of memory" in the
    message) catch it.""" 


ALIGN = 64  # bytes: a cache line, and every vector load's natural alignment


@dataclass(frozen=True)
class KernelUse:
    """What the planner needs to know about one kernel."""

    reads: tuple[int, ...]
    writes: int
    nbytes: int                          # bytes of the written buffer
    scratch: int = 0                     # bytes of the kernel's scratch buffer (0: none)
    pointwise: frozenset[int] = frozenset()   # arguments it reads only at the output index
    dtype: str = ""
    collective: str = ""                 # "start" or "wait" of a collective, else ""


@dataclass
class MemoryPlan:
    order: list[int]                       # kernel indices in execution order
    donate: dict[int, int]                 # kernel -> argument slot it may write over
    offsets: dict[int, int]                # intermediate slot -> arena offset
    scratch_offsets: dict[int, int]        # kernel -> arena offset of its scratch
    arena_bytes: int
    release: list[list[int]]               # per position: intermediate slots dead after it
    lifetimes: dict[int, tuple[int, int]] = field(default_factory=dict)  # slot -> positions
    live_peak_bytes: int = 0               # the liveness lower bound on arena_bytes
    # slot -> the intermediate slot it is written over in place (its kernel reads that
    # one pointwise and is its last reader; step 3 of the module docstring)
    in_place: dict[int, int] = field(default_factory=dict)

    def live_lifetimes(self) -> dict[int, tuple[int, int]]:
        """``lifetimes`` with a slot written over in place ending one position before
        the kernel that overwrites it (the bytes are the new slot's from there): what
        is live, for reports."""
        out = dict(self.lifetimes)
        for old in self.in_place.values():
            first, last = out[old]
            out[old] = (first, last - 1)
        return out


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _donations(n_args: int, kernels: list[KernelUse], outputs: set[int],
               arg_nbytes: list[int], arg_dtypes: list[str]) -> dict[int, int]:
    """Kernel -> argument it may overwrite: a result written over a same-sized argument
    the kernel reads pointwise, when every other reader of the argument can run first
    (no reader depends on the kernel, through data or through the orderings that
    earlier donations already demand)."""
    readers: dict[int, list[int]] = {}
    for k, ku in enumerate(kernels):
        for s in set(ku.reads):
            readers.setdefault(s, []).append(k)
    succ: list[set[int]] = [set(readers.get(ku.writes, ())) for ku in kernels]
    taken: set[int] = set()
    donate: dict[int, int] = {}
    for k, ku in enumerate(kernels):
        if ku.writes not in outputs:
            continue
        for a in sorted(ku.pointwise):
            if (a in taken or a in outputs or a >= n_args or arg_nbytes[a] != ku.nbytes
                    or arg_dtypes[a] != ku.dtype):
                continue
            others = set(readers.get(a, ())) - {k}
            if others & _reachable(k, succ):
                continue
            for j in others:
                succ[j].add(k)
            donate[k] = a
            taken.add(a)
            break
    return donate


def _reachable(k: int, succ: list[set[int]]) -> set[int]:
    seen: set[int] = set()
    stack = list(succ[k])
    while stack:
        j = stack.pop()
        if j not in seen:
            seen.add(j)
            stack.extend(succ[j])
    return seen


def _schedule(n_args: int, kernels: list[KernelUse], outputs: set[int],
              donate: dict[int, int]) -> list[int]:
    """Topological order preferring kernels that do not grow live memory (see module)."""
    writer = {ku.writes: k for k, ku in enumerate(kernels)}
    deps: list[set[int]] = [set() for _ in kernels]
    for k, ku in enumerate(kernels):
        for s in ku.reads:
            if s in writer:
                deps[k].add(writer[s])
    for k, a in donate.items():        # every other reader of a donated argument first
        for j, kj in enumerate(kernels):
            if j != k and a in kj.reads:
                deps[k].add(j)
    starts = [k for k, ku in enumerate(kernels) if ku.collective == "start"]
    for before, k in zip(starts, starts[1:]):   # collectives issue in program order
        deps[k].add(before)
    users: list[list[int]] = [[] for _ in kernels]
    for k, d in enumerate(deps):
        for j in d:
            users[j].append(k)
    remaining = [len(d) for d in deps]
    readers_left: dict[int, int] = {}
    for ku in kernels:
        for s in set(ku.reads):
            readers_left[s] = readers_left.get(s, 0) + 1

    def growth(k: int) -> int:
        ku = kernels[k]
        alloc = 0 if k in donate else ku.nbytes
        freed = sum(kernels[writer[s]].nbytes for s in set(ku.reads)
                    if s in writer and s not in outputs and readers_left[s] == 1)
        return alloc - freed

    ready = [k for k in range(len(kernels)) if remaining[k] == 0]
    order: list[int] = []
    while ready:
        ready.sort()
        # a collective starts as soon as it can and is waited for as late as it can,
        # so the kernels between overlap the communication
        work = [k for k in ready if kernels[k].collective != "wait"] or ready
        pick = next((k for k in work if kernels[k].collective == "start"), None)
        if pick is None:
            pick = next((k for k in work if kernels[k].writes in outputs and growth(k) <= 0),
                        work[0])
        ready.remove(pick)
        order.append(pick)
        for s in set(kernels[pick].reads):
            readers_left[s] -= 1
        for u in users[pick]:
            remaining[u] -= 1
            if remaining[u] == 0:
                ready.append(u)
    if len(order) != len(kernels):
        raise AssertionError("memory plan: the kernel graph has a cycle")
    return order


def _place(buffers: list[tuple[int, int, int, object]]) -> tuple[dict[object, int], int]:
    """Best-fit offsets for (nbytes, first, last, name) buffers; returns offsets, size."""
    placed: list[tuple[int, int, int, int]] = []   # (offset, end, first, last)
    offsets: dict[object, int] = {}
    size = 0
    for nbytes, first, last, name in sorted(buffers, key=lambda b: (-b[0], b[1])):
        need = _align(max(nbytes, 1))
        busy = sorted((o, e) for o, e, f, la in placed if f <= last and first <= la)
        best, best_gap, cursor = None, None, 0
        for o, e in busy:
            gap = o - cursor
            if gap >= need and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, e)
        if best is None:
            best = cursor
        offsets[name] = best
        placed.append((best, best + need, first, last))
        size = max(size, best + need)
    return offsets, size


def plan_memory(n_args: int, kernels: list[KernelUse], outputs: tuple[int, ...],
                arg_nbytes: list[int], arg_dtypes: list[str], reorder: bool = True
                ) -> MemoryPlan:
    """The plan for one step (see the module docstring)."""
    outs = set(outputs)
    donate = _donations(n_args, kernels, outs, arg_nbytes, arg_dtypes)
    if reorder:
        order = _schedule(n_args, kernels, outs, donate)
    else:   # program order: donate only where every other reader already comes first
        order = list(range(len(kernels)))
        donate = {k: a for k, a in donate.items()
                  if all(j < k for j, kj in enumerate(kernels) if j != k and a in kj.reads)}
    position = {k: p for p, k in enumerate(order)}
    lifetimes: dict[int, tuple[int, int]] = {}
    for k in order:
        ku = kernels[k]
        if ku.writes not in outs:
            lifetimes[ku.writes] = (position[k], position[k])
    for k in order:
        for s in kernels[k].reads:
            if s in lifetimes:
                first, last = lifetimes[s]
                lifetimes[s] = (first, max(last, position[k]))
    release: list[list[int]] = [[] for _ in order]
    for s, (_, last) in lifetimes.items():
        release[last].append(s)
    size_of = {kernels[k].writes: kernels[k].nbytes for k in range(len(kernels))}
    in_place = _in_place(kernels, order, position, lifetimes)
    # a slot written in place shares its buffer with the one it overwrites (chains too)
    group: dict[int, int] = {}
    for k in order:
        s = kernels[k].writes
        if s in lifetimes:
            group[s] = group[in_place[s]] if s in in_place else s
    spans: dict[int, tuple[int, int]] = {}
    for s, g in group.items():
        f, la = lifetimes[s]
        f0, la0 = spans.get(g, (f, la))
        spans[g] = (min(f, f0), max(la, la0))
    buffers = [(size_of[g], f, la, ("slot", g)) for g, (f, la) in spans.items()]
    buffers += [(kernels[k].scratch, position[k], position[k], ("scratch", k))
                for k in order if kernels[k].scratch]
    offsets, size = _place(buffers)
    live = [0] * max(len(order), 1)
    for nbytes, f, la, _ in buffers:
        for p in range(f, la + 1):
            live[p] += _align(max(nbytes, 1))
    return MemoryPlan(order, donate,
                      {s: offsets[("slot", g)] for s, g in group.items()},
                      {name[1]: off for name, off in offsets.items() if name[0] == "scratch"},
                      size, release, lifetimes, max(live), in_place)


def _in_place(kernels: list[KernelUse], order: list[int], position: dict[int, int],
              lifetimes: dict[int, tuple[int, int]]) -> dict[int, int]:
    """Written slot -> the intermediate it may be written over (module docstring, 3):
    the kernel writing it reads that intermediate pointwise, is its last reader, and
    both have the same size and dtype. Each intermediate is overwritten at most once."""
    writer = {ku.writes: k for k, ku in enumerate(kernels)}
    out: dict[int, int] = {}
    for k in order:
        ku = kernels[k]
        if ku.writes not in lifetimes:          # a step result: a buffer of its own
            continue
        for r in sorted(ku.pointwise):
            if r in lifetimes and lifetimes[r][1] == position[k] and \
                    kernels[writer[r]].nbytes == ku.nbytes and \
                    kernels[writer[r]].dtype == ku.dtype:
                out[ku.writes] = r
                break
    return out


def check_arena(plan: MemoryPlan, kernels: list[KernelUse]) -> None:
    """Raise AssertionError if two buffers live at the same time share arena bytes.

    Lifetimes are recomputed here from the order and the kernels' reads, not taken from
    the planner, so a planner bug cannot hide itself."""
    position = {k: p for p, k in enumerate(plan.order)}
    writer = {ku.writes: k for k, ku in enumerate(kernels)}
    # a slot written over in place ends where its overwriting kernel starts, if that
    # kernel really is its last reader and reads it pointwise
    overwritten: dict[int, int] = {}
    for new, old in plan.in_place.items():
        k = writer[new]
        readers = [position[j] for j, kj in enumerate(kernels) if old in kj.reads]
        assert old in kernels[k].pointwise and max(readers) == position[k], \
            f"slot {new} is written over slot {old}, which its kernel does not read last " \
            "and pointwise"
        overwritten[old] = position[k] - 1
    spans: list[tuple[int, int, int, int, str]] = []   # first, last, offset, end, name
    for k, ku in enumerate(kernels):
        if ku.writes in plan.offsets:
            last = max([position[j] for j, kj in enumerate(kernels) if ku.writes in kj.reads],
                       default=position[k])
            last = overwritten.get(ku.writes, last)
            off = plan.offsets[ku.writes]
            spans.append((position[k], last, off, off + ku.nbytes, f"slot {ku.writes}"))
        if k in plan.scratch_offsets:
            off = plan.scratch_offsets[k]
            spans.append((position[k], position[k], off, off + ku.scratch, f"scratch {k}"))
    for i, (f1, l1, o1, e1, n1) in enumerate(spans):
        assert e1 <= plan.arena_bytes, f"{n1} ends at {e1} past the arena ({plan.arena_bytes})"
        for f2, l2, o2, e2, n2 in spans[i + 1:]:
            if f1 <= l2 and f2 <= l1 and o1 < e2 and o2 < e1:
                raise AssertionError(f"{n1} [{o1},{e1}) and {n2} [{o2},{e2}) overlap while "
                                     f"both live (positions {f1}-{l1} and {f2}-{l2})")

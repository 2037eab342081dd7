"""``torch.utils.data.dataloader``: ``DataLoader`` (and, as PyTorch's module does,
``default_collate``, ``default_convert`` and ``get_worker_info``).

``num_workers > 0`` loads in worker processes, as PyTorch does (``nova.utils.data_workers``:
``get_worker_info``, ``worker_init_fn``, ``timeout``, ``prefetch_factor``,
``persistent_workers``, ``multiprocessing_context``); ``pin_memory`` and
``pin_memory_device`` are accepted and have nothing to do (there is no GPU staging to pin
for), and ``in_order=False`` still yields the sampler's order (which it allows).
Deviation: the workers' base seed is derived from the loader's generator state and the
epoch without drawing from it (PyTorch draws it from the generator), so the shuffles are
the same with any number of workers.
"""
from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.context import BaseContext
from typing import Any, Generic, TypeVar

import numpy as np

from nova.tensor.random import Generator, default_generator
from nova.utils.data._utils.collate import default_collate, default_convert
from nova.utils.data.dataset import Dataset, IterableDataset
from nova.utils.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler
from nova.utils.data_workers import WorkerPool, get_worker_info, map_batches, stream_batches

T_co = TypeVar("T_co", covariant=True)

__all__ = ["DataLoader", "get_worker_info", "default_collate", "default_convert"]


def _start_context(spec: str | BaseContext | None, num_workers: int) -> BaseContext | None:
    """``multiprocessing_context`` as a context (None: Python's default start method, as
    PyTorch's default: fork on Linux, spawn on macOS and Windows)."""
    if spec is None:
        return None
    if num_workers == 0:
        raise ValueError("DataLoader: multiprocessing_context can only be used with "
                         f"multi-process loading (num_workers > 0), got {spec!r}")
    if isinstance(spec, str):
        methods = mp.get_all_start_methods()
        if spec not in methods:
            raise ValueError(f"DataLoader: multiprocessing_context option should specify "
                             f"a valid start method in {methods!r}, but got {spec!r}")
        return mp.get_context(spec)
    if not isinstance(spec, BaseContext):
        raise TypeError(f"DataLoader: multiprocessing_context option should be a valid "
                        f"context object or a string specifying the start method, but "
                        f"got {spec!r}")
    return spec


class DataLoader(Generic[T_co]):
    """Batches of ``dataset``: PyTorch's ``DataLoader`` arguments and semantics (see the
    module doc for the deviations). ``shuffle=True`` draws a new order every epoch from
    ``generator`` (default: Nova's default generator, so ``nv.manual_seed`` fixes it)."""

    def __init__(self, dataset: Dataset[T_co], batch_size: int | None = 1,
                 shuffle: bool | None = None, sampler: Sampler | Iterable | None = None,
                 batch_sampler: Sampler | Iterable | None = None, num_workers: int = 0,
                 collate_fn: Callable[[list], Any] | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context: str | BaseContext | None = None,
                 generator: Generator | None = None, *, prefetch_factor: int | None = None,
                 persistent_workers: bool = False, pin_memory_device: str = "",
                 in_order: bool = True):
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers should be a non-negative integer, "
                             f"got {num_workers!r}")
        if num_workers == 0 and (prefetch_factor is not None or persistent_workers):
            raise ValueError("DataLoader: prefetch_factor and persistent_workers need "
                             "num_workers > 0 (multiprocessing)")
        if prefetch_factor is not None and (not isinstance(prefetch_factor, int)
                                            or prefetch_factor < 1):
            raise ValueError(f"DataLoader: prefetch_factor should be a positive integer, "
                             f"got {prefetch_factor!r}")
        if timeout < 0:
            raise ValueError(f"DataLoader: timeout option should be non-negative, got "
                             f"{timeout!r}")
        self.multiprocessing_context = _start_context(multiprocessing_context, num_workers)
        self.pin_memory_device, self.in_order = pin_memory_device, in_order
        self.dataset = dataset
        self.num_workers = num_workers
        self.pin_memory, self.timeout = pin_memory, timeout
        self.worker_init_fn, self.prefetch_factor = worker_init_fn, prefetch_factor
        self.persistent_workers = persistent_workers
        self.generator = generator
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"shuffle option, but got shuffle={shuffle}")
            if sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 "sampler and batch_sampler options")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive "
                                 "with batch_size, shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("DataLoader: batch_size=None option disables auto-batching "
                             "and is mutually exclusive with drop_last")
        if batch_size is not None and (not isinstance(batch_size, int)
                                       or isinstance(batch_size, bool) or batch_size <= 0):
            raise ValueError(f"DataLoader: batch_size should be a positive integer, got "
                             f"{batch_size!r}")
        if sampler is None and not self._iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle \
                else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size, self.drop_last = batch_size, drop_last
        self.sampler, self.batch_sampler = sampler, batch_sampler
        self._auto_collation = batch_size is not None or batch_sampler is not None
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if self._auto_collation else default_convert)
        self._custom_collate = collate_fn is not None
        self._pool: WorkerPool | None = None      # persistent_workers: kept across epochs
        self._pool_busy = False                     # an iterator is using it
        self._epochs = 0                            # epochs loaded by workers

    def __iter__(self) -> Iterator[Any]:
        if self.num_workers > 0:
            yield from self._iterate_workers()
            return
        if self._iterable:
            yield from self._iterate_stream()
            return
        for work in (self.batch_sampler if self._auto_collation else self.sampler):
            yield self._fetch(work)

    def _fetch(self, work: Any) -> Any:
        """One batch from ``work``: a batch of indices (or one index without
        auto-batching); what the single-process loop and every worker run. A
        TensorDataset (or a Subset of one) gathers a batch in one go: the values
        default_collate gives for its samples."""
        if not self._auto_collation:
            return self.collate_fn(self.dataset[work])
        if not self._custom_collate and callable(getattr(self.dataset, "_gathers", None)) \
                and self.dataset._gathers():
            return self.dataset._batch(work)
        return self.collate_fn([self.dataset[i] for i in work])

    def _iterate_workers(self) -> Iterator[Any]:
        """The batches, loaded by ``num_workers`` processes (``nova.utils.data_workers``)."""
        prefetch = self.prefetch_factor if self.prefetch_factor is not None else 2
        if self._pool is not None and not self._pool.alive():
            self._pool.close()                # its workers ended (a Ctrl-C): start anew
            self._pool = None
        if self._pool is not None and not self._pool_busy:
            pool = self._pool
        else:
            # a second iterator alive at once gets a pool of its own: sharing the
            # persistent one would drop the other's batches in flight (and hang it)
            base_seed = self._worker_base_seed()
            stream = self._iterate_stream if self._iterable else None
            pool = WorkerPool(self.dataset, self.num_workers, self._fetch, base_seed,
                              self.worker_init_fn, self.timeout, stream,
                              self.multiprocessing_context)
            if self.persistent_workers and not self._iterable and self._pool is None:
                self._pool = pool
        if pool is self._pool:
            self._pool_busy = True
        try:
            if self._iterable:
                yield from stream_batches(pool, prefetch)
            else:
                work = iter(self.batch_sampler if self._auto_collation else self.sampler)
                yield from map_batches(pool, work, prefetch)
        except GeneratorExit:
            raise       # an early break: a persistent pool drops the epoch's in-flight batches
        except BaseException:
            if pool is self._pool:            # a failed pool is not reused
                self._pool, self._pool_busy = None, False
            pool.close()
            raise
        finally:
            if pool is self._pool:
                self._pool_busy = False
            else:
                pool.close()

    def _worker_base_seed(self) -> int:
        """The epoch's worker seeds' base: a function of the loader's generator state
        and the epoch count that draws nothing from the generator, so the sampler's
        shuffles are the same with and without workers, and each epoch's workers get
        new seeds (their random augmentations differ from epoch to epoch)."""
        seed, offset = (self.generator or default_generator).get_state()
        self._epochs += 1
        state = np.random.SeedSequence([seed, offset, self._epochs]).generate_state(
            1, np.uint64)[0]
        return int(state >> np.uint64(2))

    def __getstate__(self) -> dict[str, Any]:
        """A loader pickles without its worker pool: spawned workers receive the loader
        (its ``_fetch`` is what they run) and start none of their own."""
        state = self.__dict__.copy()
        state["_pool"], state["_pool_busy"] = None, False
        return state

    def __del__(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.close()

    def _iterate_stream(self) -> Iterator[Any]:
        if not self._auto_collation:
            for sample in self.dataset:
                yield self.collate_fn(sample)
            return
        batch: list[Any] = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)      # (TypeError if the stream has no length)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler) if self._auto_collation else len(self.sampler)

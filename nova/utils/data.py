"""``torch.utils.data`` for Nova: datasets, samplers, batching and ``DataLoader``.

The names, arguments and semantics are PyTorch's, so a training script's data code
ports by changing the import. Everything here runs on the host: indices are Python
ints or int64 arrays, shuffling draws from Nova's counter-based generator
(``nv.randperm``'s host permutation, reproducible under ``nv.manual_seed`` or a given
``nv.Generator``), and batches of realized tensors are stacked with numpy into one new
realized tensor -- loading data never compiles a step.

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

import bisect
import copy
import itertools
import math
import multiprocessing as mp
from collections.abc import (Callable, Iterable, Iterator, Mapping, MutableMapping,
                             MutableSequence, Sequence)
from multiprocessing.context import BaseContext
from typing import Any, Generic, TypeVar

import numpy as np

from nova.core.dtypes import float64
from nova.tensor.creation import tensor as _tensor
from nova.tensor.movement import stack as _stack
from nova.tensor.random import Generator, default_generator, host_permutation, host_uniform
from nova.tensor.realize import realize
from nova.tensor.tensor import Tensor
from nova.utils.data_workers import WorkerPool, get_worker_info, map_batches, stream_batches

T_co = TypeVar("T_co", covariant=True)

__all__ = ["BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset",
           "DistributedSampler", "IterableDataset", "RandomSampler", "Sampler",
           "SequentialSampler", "StackDataset", "Subset", "SubsetRandomSampler",
           "TensorDataset", "WeightedRandomSampler", "default_collate", "default_convert",
           "get_worker_info", "random_split"]


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


# ---------------------------------------------------------------- datasets


class Dataset(Generic[T_co]):
    """A map-style dataset: ``dataset[i]`` for ``0 <= i < len(dataset)``."""

    def __getitem__(self, index: int) -> T_co:
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co]):
    """A dataset that is a stream: ``iter(dataset)`` yields the samples."""

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __add__(self, other: Dataset) -> ChainDataset:
        return ChainDataset([self, other])


class ChainDataset(IterableDataset):
    """The streams of ``datasets`` one after another, chained as they are iterated (no
    sample is read ahead). ``datasets`` is kept as given and iterated each epoch, as
    PyTorch does: a one-shot iterator of datasets chains once."""

    def __init__(self, datasets: Iterable[Dataset]):
        self.datasets = datasets

    def __iter__(self) -> Iterator[Any]:
        for i, d in enumerate(self.datasets):
            yield from _chained(d, i)

    def __len__(self) -> int:
        return sum(len(_chained(d, i)) for i, d in enumerate(self.datasets))


def _chained(dataset: Any, position: int) -> IterableDataset:
    """``dataset``, checked to be a stream (PyTorch asserts the same)."""
    if not isinstance(dataset, IterableDataset):
        raise TypeError(f"ChainDataset only supports IterableDataset, got a "
                        f"{type(dataset).__name__} at position {position}")
    return dataset


class StackDataset(Dataset[Any]):
    """Datasets of the same length side by side: ``StackDataset(a, b)[i]`` is
    ``(a[i], b[i])``, ``StackDataset(x=a, y=b)[i]`` is ``{"x": a[i], "y": b[i]}``."""

    def __init__(self, *args: Dataset, **kwargs: Dataset):
        if args and kwargs:
            raise ValueError("StackDataset: supported either tuple-like (via args) or "
                             "dict-like (via kwargs) samples, but both were given")
        if not args and not kwargs:
            raise ValueError("StackDataset: at least one dataset should be passed")
        parts = list(args) if args else list(kwargs.values())
        lengths = [len(d) for d in parts]
        if len(set(lengths)) != 1:
            names = [str(i) for i in range(len(args))] if args else list(kwargs)
            raise ValueError("StackDataset: size mismatch between datasets: " +
                             ", ".join(f"{k}: {n}" for k, n in zip(names, lengths)))
        self.datasets: tuple | dict = args if args else kwargs
        self._length = lengths[0]

    def __getitem__(self, index: int) -> tuple | dict:
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __len__(self) -> int:
        return self._length


def _host(t: Tensor) -> np.ndarray:
    """A realized host copy of ``t``'s values (the tensor itself is not changed)."""
    return t.numpy()


class TensorDataset(Dataset[tuple[Tensor, ...]]):
    """Samples are ``tuple(t[i] for t in tensors)``; every tensor has the same size
    along dimension 0."""

    def __init__(self, *tensors: Tensor):
        if not tensors:
            raise ValueError("TensorDataset: needs at least one tensor")
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(f"TensorDataset: argument {i} is a {type(t).__name__}, "
                                "not a Tensor")
            if t.ndim == 0:
                raise ValueError(f"TensorDataset: tensor {i} is 0-d; samples are taken "
                                 "along dimension 0")
        sizes = [t.shape[0] for t in tensors]
        if len(set(sizes)) != 1:
            raise ValueError(f"TensorDataset: size mismatch between tensors along "
                             f"dimension 0: {sizes}")
        realize(*tensors)        # data lives on the host: samples are plain reads of it
        self.tensors = tensors
        # Host copies for batching, each with the node it copies: a tensor changed in
        # place since (a new node) is copied again.
        self._arrays: list[tuple[Any, np.ndarray]] = []

    def __getitem__(self, index: int) -> tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]

    def _batch(self, indices: Sequence[int]) -> list[Tensor]:
        """The collated batch of ``indices`` in one gather per tensor (what
        ``default_collate`` of the samples gives, without one tensor per sample)."""
        if len(self._arrays) != len(self.tensors) or any(
                node is not t.node for (node, _), t in zip(self._arrays, self.tensors)):
            self._arrays = [(t.node, _host(t)) for t in self.tensors]
        idx = np.asarray(indices, dtype=np.int64)
        return [_tensor(a[idx], dtype=t.dtype) for (_, a), t in zip(self._arrays, self.tensors)]

    def _gathers(self) -> bool:
        """Whether ``_batch`` gives what collating this dataset's samples gives: not for
        a subclass with its own ``__getitem__``, nor for tensors that require grad
        (a gather on the host would drop their graph)."""
        return type(self).__getitem__ is TensorDataset.__getitem__ and \
            not any(t.requires_grad for t in self.tensors)


class Subset(Dataset[T_co]):
    """``dataset`` seen through ``indices``: ``subset[i] = dataset[indices[i]]``."""

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]):
        self.dataset = dataset
        self.indices = [int(i) for i in indices]

    def __getitem__(self, index: int | list[int]) -> T_co:
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)

    def _gathers(self) -> bool:
        """``TensorDataset._gathers``, through a plain Subset."""
        return type(self).__getitem__ is Subset.__getitem__ and \
            callable(getattr(self.dataset, "_gathers", None)) and self.dataset._gathers()

    def _batch(self, indices: Sequence[int]) -> list[Tensor]:
        return self.dataset._batch([self.indices[i] for i in indices])


class ConcatDataset(Dataset[T_co]):
    """The datasets one after another."""

    def __init__(self, datasets: Iterable[Dataset]):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int) -> T_co:
        if index < 0:
            if -index > len(self):     # ValueError, as PyTorch's
                raise ValueError(f"ConcatDataset: absolute value of index {index} should "
                                 f"not exceed dataset length {len(self)}")
            index += len(self)
        k = bisect.bisect_right(self.cumulative_sizes, index)
        if k == len(self.datasets):
            raise IndexError(f"ConcatDataset: index {index} out of range for length "
                             f"{len(self)}")
        start = self.cumulative_sizes[k - 1] if k else 0
        return self.datasets[k][index - start]


def random_split(dataset: Dataset[T_co], lengths: Sequence[int | float],
                 generator: Generator | None = None) -> list[Subset[T_co]]:
    """Split ``dataset`` into non-overlapping random subsets of the given lengths, or
    of the given fractions of ``len(dataset)`` (floored, the remainder handed out one
    by one from the first subset on, as PyTorch does)."""
    n = len(dataset)
    if lengths and all(isinstance(x, float) for x in lengths) and \
            math.isclose(sum(lengths), 1.0) and sum(lengths) <= 1.0:
        for i, frac in enumerate(lengths):
            if not 0.0 <= frac <= 1.0:
                raise ValueError(f"random_split: fraction at index {i} is not in [0, 1]")
        counts = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    lengths = [int(x) for x in lengths]
    if any(x < 0 for x in lengths) or sum(lengths) != n:
        raise ValueError(f"random_split: sum of input lengths {sum(lengths)} does not equal "
                         f"the length of the input dataset {n} (lengths {lengths})")
    perm = host_permutation(n, generator).tolist()
    out, at = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[at:at + length]))
        at += length
    return out


# ---------------------------------------------------------------- samplers


class Sampler(Generic[T_co]):
    """Yields the indices (or index lists) a loader fetches."""

    def __init__(self, data_source: Any = None):
        pass

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class SequentialSampler(Sampler[int]):
    def __init__(self, data_source: Dataset):
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """A new random order each epoch (``replacement=False``), or ``num_samples`` draws
    with replacement; from ``generator`` (default: Nova's default generator)."""

    def __init__(self, data_source: Dataset, replacement: bool = False,
                 num_samples: int | None = None, generator: Generator | None = None):
        if not isinstance(replacement, bool):
            raise TypeError(f"RandomSampler: replacement should be a bool, got {replacement!r}")
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.num_samples, int) or isinstance(self.num_samples, bool) \
                or self.num_samples <= 0:
            raise ValueError(f"RandomSampler: num_samples should be a positive integer, "
                             f"got {self.num_samples!r}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        if self.replacement:
            yield from _uniform_indices(n, self.num_samples, self.generator).tolist()
            return
        full, rest = divmod(self.num_samples, n)
        for _ in range(full):
            yield from host_permutation(n, self.generator).tolist()
        if rest:
            yield from host_permutation(n, self.generator)[:rest].tolist()

    def __len__(self) -> int:
        return self.num_samples


def _uniform_indices(n: int, count: int, generator: Generator | None) -> np.ndarray:
    """``count`` independent uniform indices in ``[0, n)`` from one host draw."""
    u = host_uniform(count, generator)
    return np.minimum((u * n).astype(np.int64), n - 1)


class SubsetRandomSampler(Sampler[int]):
    """``indices`` in a random order each epoch."""

    def __init__(self, indices: Sequence[int], generator: Generator | None = None):
        self.indices = list(indices)
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in host_permutation(len(self.indices), self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """``num_samples`` indices into ``weights``, index ``i`` drawn with probability
    ``weights[i] / sum(weights)`` (the weights need not sum to one); without
    ``replacement`` an index is drawn at most once, each draw among those left in
    proportion to their weights. Every epoch draws anew from ``generator`` (default:
    Nova's default generator), one host draw per epoch:

    - with replacement, ``num_samples`` float64 uniforms ``u`` and index ``i`` where
      ``cumsum(w)[i-1] <= u * sum(w) < cumsum(w)[i]`` (inverse-CDF; a zero weight's
      interval is empty);
    - without, one uniform ``u_i`` per index and the ``num_samples`` smallest
      exponential arrival times ``-log1p(-u_i) / w_i`` (Efraimidis-Spirakis: the same
      law as successive draws with the chosen weight removed).

    The indices differ from PyTorch's (another generator), their distribution does not.
    As PyTorch's, the weights are checked when drawn (``sampler.weights`` may be
    replaced between epochs): negative, infinite or NaN weights, an all-zero sum, or
    fewer non-zero weights than ``num_samples`` without replacement raise RuntimeError
    (PyTorch's CPU draw picks zero-weight indices in that last case, its CUDA one
    raises)."""

    def __init__(self, weights: Sequence[float] | Tensor | np.ndarray, num_samples: int,
                 replacement: bool = True, generator: Generator | None = None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) \
                or num_samples <= 0:
            raise ValueError(f"WeightedRandomSampler: num_samples should be a positive "
                             f"integer value, but got num_samples={num_samples!r}")
        if not isinstance(replacement, bool):
            raise ValueError(f"WeightedRandomSampler: replacement should be a boolean "
                             f"value, but got replacement={replacement!r}")
        w = _weights_array(weights)
        if w.ndim != 1:
            raise ValueError(f"WeightedRandomSampler: weights should be a 1d sequence but "
                             f"given weights have shape {w.shape}")
        self.weights = _tensor(w, dtype=float64)
        self.num_samples, self.replacement, self.generator = num_samples, replacement, generator

    def __iter__(self) -> Iterator[int]:
        w = _checked_weights(_weights_array(self.weights), self.num_samples,
                             self.replacement)
        w = w / w.max()         # (the same law; a sum of huge weights stays finite)
        if self.replacement:
            cdf = np.cumsum(w)
            u = host_uniform(self.num_samples, self.generator)
            idx = np.searchsorted(cdf, u * cdf[-1], side="right")
            # u * sum rounded up to the sum: the last index with a weight
            idx = np.minimum(idx, np.flatnonzero(w)[-1])
        else:
            u = host_uniform(len(w), self.generator)
            with np.errstate(divide="ignore"):
                arrival = np.where(w > 0, -np.log1p(-u) / w, np.inf)
            idx = np.argsort(arrival, kind="stable")[:self.num_samples]
        yield from idx.tolist()

    def __len__(self) -> int:
        return self.num_samples


def _weights_array(weights: Any) -> np.ndarray:
    """``weights`` (a tensor, an array or a sequence of numbers) as float64 values."""
    if isinstance(weights, Tensor):
        return _host(weights).astype(np.float64)
    try:
        return np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"WeightedRandomSampler: weights should be a sequence of numbers, "
                        f"got {type(weights).__name__} ({e})") from None


def _checked_weights(w: np.ndarray, num_samples: int, replacement: bool) -> np.ndarray:
    """``w`` if it is a distribution ``num_samples`` draws can be taken from (the checks
    of ``torch.multinomial``), else RuntimeError."""
    where = "WeightedRandomSampler: invalid multinomial distribution"
    if w.ndim != 1 or w.size == 0:
        raise RuntimeError(f"WeightedRandomSampler: weights should be a non-empty 1d "
                           f"sequence, got shape {w.shape}")
    if not np.isfinite(w).all():
        raise RuntimeError(f"{where} (encountering probability entry = infinity or NaN)")
    if (w < 0).any():
        raise RuntimeError(f"{where} (encountering probability entry < 0)")
    if not w.max() > 0:       # (non-negative: a positive sum; max does not overflow)
        raise RuntimeError(f"{where} (sum of probabilities <= 0)")
    if not replacement:
        if num_samples > w.size:
            raise RuntimeError(f"WeightedRandomSampler: cannot sample n_sample > "
                               f"prob_dist.size(-1) samples without replacement "
                               f"({num_samples} > {w.size})")
        nonzero = int(np.count_nonzero(w))
        if num_samples > nonzero:
            raise RuntimeError(f"{where} (with replacement=False, not enough non-zero "
                               f"weights to sample: num_samples={num_samples}, "
                               f"{nonzero} non-zero)")
    return w


class DistributedSampler(Sampler[int]):
    """This rank's share of ``dataset`` (``torch.utils.data.distributed``'s sampler):
    the indices, shuffled with ``seed + epoch`` when ``shuffle`` (call ``set_epoch``
    each epoch; every rank draws the same order), padded by repeating the first ones to
    a multiple of ``num_replicas`` (or cut to one with ``drop_last``), then every
    ``num_replicas``-th from position ``rank``. ``num_replicas`` and ``rank`` default to
    the default process group's (``nova.distributed``)."""

    def __init__(self, dataset: Dataset, num_replicas: int | None = None,
                 rank: int | None = None, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False):
        if num_replicas is None or rank is None:
            from nova import distributed as dist
            if not dist.is_initialized():
                raise RuntimeError("DistributedSampler: pass num_replicas and rank, or call "
                                   "nova.distributed.init_process_group() first")
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedSampler: invalid rank {rank}, rank should be in "
                             f"the interval [0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.epoch = 0
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = n // num_replicas
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose order the next ``__iter__`` draws (``seed + epoch``)."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            order = host_permutation(n, Generator(self.seed + self.epoch)).tolist()
        else:
            order = list(range(n))
        if self.drop_last:
            order = order[:self.total_size]
        elif self.total_size > len(order):
            pad = self.total_size - len(order)
            order += (order * math.ceil(pad / max(len(order), 1)))[:pad]
        return iter(order[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list[int]]):
    """Groups ``sampler``'s indices into lists of ``batch_size`` (the last one shorter,
    or dropped with ``drop_last``)."""

    def __init__(self, sampler: Sampler[int] | Iterable[int], batch_size: int,
                 drop_last: bool):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"BatchSampler: batch_size should be a positive integer, got "
                             f"{batch_size!r}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"BatchSampler: drop_last should be a bool, got {drop_last!r}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


# ---------------------------------------------------------------- collation


def default_collate(batch: Sequence[Any]) -> Any:
    """PyTorch's ``default_collate``: tensors (and numpy arrays) are stacked along a new
    dimension 0, Python ints become an int64 tensor, floats a float64 tensor, bools a
    bool tensor, strings and bytes stay a list, and mappings, named tuples and
    sequences are collated field by field (sequences must be of equal size)."""
    if not batch:
        raise ValueError("default_collate: got an empty batch")
    elem = batch[0]
    if isinstance(elem, Tensor):
        if any(not isinstance(b, Tensor) or b.shape != elem.shape for b in batch):
            shapes = sorted({tuple(b.shape) if isinstance(b, Tensor) else type(b).__name__
                             for b in batch}, key=str)
            raise RuntimeError(f"default_collate: stack expects each tensor to be equal "
                               f"size, got {shapes}")
        if all(b.node.realized and b.node.device == "cpu" and not b.requires_grad
               for b in batch):
            return _tensor(np.stack([_host(b) for b in batch]), dtype=elem.dtype)
        return _stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "OSUV":
            raise TypeError(f"default_collate: numpy arrays of dtype {elem.dtype} cannot "
                            "become tensors")
        return _tensor(np.stack(batch))
    if isinstance(elem, np.generic):
        return _tensor(np.array(batch))
    if isinstance(elem, bool):
        return _tensor(list(batch))
    if isinstance(elem, int):
        return _tensor(np.array(batch, dtype=np.int64))
    if isinstance(elem, float):
        return _tensor(np.array(batch, dtype=np.float64))
    if isinstance(elem, (str, bytes)):
        return batch      # as given: a tuple when it is a field of a batch of tuples
    if isinstance(elem, Mapping):
        collated = {key: default_collate([d[key] for d in batch]) for key in elem}
        try:
            return type(elem)(collated)       # the mapping's own type, as torch keeps it
        except TypeError:
            return collated
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):    # a named tuple
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, Sequence):
        size = len(elem)
        if any(len(b) != size for b in batch):
            raise RuntimeError("default_collate: each element in list of batch should be "
                               "of equal size")
        return [default_collate(s) for s in zip(*batch)]   # a list, as torch's
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, "
                    f"dicts or lists; found {type(elem).__name__}")


# ---------------------------------------------------------------- the loader


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
            pool = WorkerPool(self.dataset, self.num_workers, self._fetch, base_seed, self.worker_init_fn,
                              self.timeout, stream, self.multiprocessing_context)
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


def default_convert(data: Any) -> Any:
    """PyTorch's ``default_convert``, the loader's ``collate_fn`` without auto-batching
    (``batch_size=None``): numpy arrays and numpy scalars become tensors (arrays of
    strings or objects stay as they are), mappings, named tuples and sequences are
    converted field by field keeping their type where it can be rebuilt (a plain tuple
    becomes a list, as in PyTorch), everything else passes through."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray):
        return data if data.dtype.kind in "SUO" else _tensor(data)
    if isinstance(data, np.generic) and not isinstance(data, (np.str_, np.bytes_)):
        return _tensor(np.asarray(data))
    if isinstance(data, Mapping):
        converted = {k: default_convert(data[k]) for k in data}
        try:
            if isinstance(data, MutableMapping):   # a copy keeps the mapping's extras
                clone = copy.copy(data)
                clone.update(converted)
                return clone
            return type(data)(converted)
        except TypeError:
            return converted
    if isinstance(data, tuple) and hasattr(data, "_fields"):     # a named tuple
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        converted_items = [default_convert(d) for d in data]
        try:
            if isinstance(data, MutableSequence):
                clone = copy.copy(data)
                for i, d in enumerate(converted_items):
                    clone[i] = d
                return clone
            return type(data)(converted_items)
        except TypeError:                       # (a range, a type without such a copy)
            return converted_items
    return data

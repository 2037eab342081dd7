"""``torch.utils.data.dataset``: the dataset classes and ``random_split``.

Samples are read on the host: a ``TensorDataset`` realizes its tensors once and a
loader gathers a batch of it in one numpy take (``_batch``), so loading data never
compiles a step.
"""
from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

from nova.tensor.creation import tensor as _tensor
from nova.tensor.random import Generator, host_permutation
from nova.tensor.realize import realize
from nova.tensor.tensor import Tensor

T_co = TypeVar("T_co", covariant=True)

__all__ = ["ChainDataset", "ConcatDataset", "Dataset", "IterableDataset", "StackDataset",
           "Subset", "TensorDataset", "random_split"]


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

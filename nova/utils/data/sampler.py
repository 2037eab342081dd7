"""``torch.utils.data.sampler``: the samplers a ``DataLoader`` draws indices from.

Every random order is a host draw from Nova's counter-based generator (``nv.randperm``'s
host permutation), reproducible under ``nv.manual_seed`` or a given ``nv.Generator``.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

from nova.core.dtypes import float64
from nova.tensor.creation import tensor as _tensor
from nova.tensor.random import Generator, host_permutation, host_uniform
from nova.tensor.tensor import Tensor
from nova.utils.data.dataset import Dataset, _host

T_co = TypeVar("T_co", covariant=True)

__all__ = ["BatchSampler", "RandomSampler", "Sampler", "SequentialSampler",
           "SubsetRandomSampler", "WeightedRandomSampler"]


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

"""``torch.utils.data.distributed``: ``DistributedSampler``, each rank's share of a
dataset for data-parallel training (``nova.distributed``)."""
from __future__ import annotations

import math
from collections.abc import Iterator

from nova.tensor.random import Generator, host_permutation
from nova.utils.data.dataset import Dataset
from nova.utils.data.sampler import Sampler

__all__ = ["DistributedSampler"]


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

"""``torch.utils.data`` for Nova: datasets, samplers, batching and ``DataLoader``.

The names, arguments and semantics are PyTorch's, so a training script's data code
ports by changing the import, including the submodule paths scripts import from
(``nova.utils.data.dataset``, ``.sampler``, ``.distributed``, ``.dataloader``,
``._utils.collate``, ``._utils.worker``), each holding the names PyTorch's holds.
Everything here runs on the host: indices are Python ints or int64 arrays, shuffling
draws from Nova's counter-based generator (``nv.randperm``'s host permutation,
reproducible under ``nv.manual_seed`` or a given ``nv.Generator``), and batches of
realized tensors are stacked with numpy into one new realized tensor -- loading data
never compiles a step. ``num_workers > 0`` loads in worker processes
(``nova.utils.data_workers``; see ``dataloader`` for the deviations).
"""
from nova.utils.data import _utils  # noqa: F401  (torch.utils.data._utils)
from nova.utils.data._utils.collate import default_collate, default_convert
from nova.utils.data.dataloader import DataLoader
from nova.utils.data.dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset,
                                     StackDataset, Subset, TensorDataset, random_split)
from nova.utils.data.distributed import DistributedSampler
from nova.utils.data.sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                                     SubsetRandomSampler, WeightedRandomSampler)
from nova.utils.data_workers import get_worker_info

__all__ = ["BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset",
           "DistributedSampler", "IterableDataset", "RandomSampler", "Sampler",
           "SequentialSampler", "StackDataset", "Subset", "SubsetRandomSampler",
           "TensorDataset", "WeightedRandomSampler", "default_collate", "default_convert",
           "get_worker_info", "random_split"]

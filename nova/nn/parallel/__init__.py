"""``nova.nn.parallel``: data-parallel training (``DistributedDataParallel``)."""
from nova.nn.parallel.distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]

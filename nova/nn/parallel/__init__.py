"""``nova.nn.parallel``: data-parallel training (``DistributedDataParallel``), and
``DataParallel`` for scripts that wrap their model in it."""
from nova.nn.parallel.data_parallel import DataParallel
from nova.nn.parallel.distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel"]

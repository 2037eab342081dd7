"""``torch.utils.data._utils.worker``: ``WorkerInfo`` and ``get_worker_info``, the names
scripts import from here. The worker processes themselves are
``nova.utils.data_workers``'s."""
from nova.utils.data_workers import WorkerInfo, get_worker_info

__all__ = ["WorkerInfo", "get_worker_info"]

"""``torch.utils.data._utils``: the loader's internals that scripts import by path,
``collate`` (``default_collate``, ``collate`` with a ``collate_fn_map``) and ``worker``
(``get_worker_info``)."""
from nova.utils.data._utils import collate, worker

__all__ = ["collate", "worker"]

"""``nova.distributed.nn``: collectives that autograd differentiates through, with
``torch.distributed.nn``'s names (``functional.all_reduce``)."""
from nova.distributed.nn.functional import all_reduce

__all__ = ["all_reduce"]

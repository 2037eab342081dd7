"""``torch.optim.adamw``'s place: ``from nova.optim.adamw import AdamW`` (the class
lives with ``Adam`` in ``nova.optim.adam``)."""
from nova.optim.adam import AdamW

__all__ = ["AdamW"]

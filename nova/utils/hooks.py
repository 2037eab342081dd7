"""``torch.utils.hooks``: the handle ``register_*_hook`` returns."""
from nova.core.hooks import RemovableHandle

__all__ = ["RemovableHandle"]

"""``nv.signal`` (``torch.signal``): signal-processing helpers; so far the window
functions of ``nv.signal.windows``."""
from nova.signal import windows

__all__ = ["windows"]

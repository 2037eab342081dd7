"""Whether this thread is inside a call that ``nv.compile`` is recording.

``nova.capture`` sets :data:`RECORDING` for the length of each recorded call (to the
capture's ``refuse``, which a caller uses to say the call cannot be replayed);
``nova.compiler.is_compiling`` and ``nova.compiler.disable`` read it. It lives in the
bottom layer so that the compiler package can answer without importing the tensor
layer, where the capture's own state is."""
from __future__ import annotations

import contextvars
from collections.abc import Callable

# The recorded call's ``CaptureLog.refuse`` while one is recorded in this context, else
# None (a ``ContextVar``, as the capture's own ``ACTIVE``: per thread).
RECORDING: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar(
    "nova_compiling", default=None)

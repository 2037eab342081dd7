"""Shape errors are ``ValueError`` (Nova's convention) and ``RuntimeError`` (what
PyTorch raises for the same calls), so ported code that catches either still catches
them; running out of memory is a ``MemoryError`` and a ``RuntimeError`` (PyTorch's
``OutOfMemoryError`` is one) whose message says "out of memory"."""
import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F
from nova.core.errors import ShapeError

# Each call raises RuntimeError in PyTorch 2.x (torch.ones(...) in place of nv.ones).
SHAPE_MISMATCHES = {
    "matmul": lambda: nv.ones(2, 3) @ nv.ones(2, 3),
    "linear": lambda: F.linear(nv.ones(4, 3), nv.ones(5, 4)),
    "broadcast": lambda: nv.ones(2, 3) + nv.ones(4),
    "view": lambda: nv.ones(6).view(4),
    "reshape -1": lambda: nv.ones(6).reshape(4, -1),
    "cat": lambda: nv.cat([nv.ones(2, 3), nv.ones(2, 4)]),
    "stack": lambda: nv.stack([nv.ones(2), nv.ones(3)]),
    "expand": lambda: nv.ones(2, 3).expand(4, 4),
    "permute": lambda: nv.ones(2, 3).permute(0, 0),
    "gather": lambda: nv.ones(2, 3).gather(1, nv.zeros(2, 3, 1, dtype=nv.int64)),
    "masked_fill": lambda: nv.ones(2, 3).masked_fill(nv.ones(4, dtype=nv.bool), 0.0),
    "conv2d channels": lambda: F.conv2d(nv.ones(1, 3, 8, 8), nv.ones(4, 2, 3, 3)),
}


@pytest.mark.parametrize("case", SHAPE_MISMATCHES)
def test_a_shape_mismatch_is_caught_as_runtime_error_and_as_value_error(case):
    with pytest.raises(RuntimeError) as caught:
        SHAPE_MISMATCHES[case]()
    assert isinstance(caught.value, ValueError) and type(caught.value) is ShapeError


def test_running_out_of_memory_is_a_runtime_error_saying_out_of_memory():
    x = nv.tensor(np.ones((256, 256), np.float32))
    heavy = ((x * 2).exp() @ (x + 1)).sum()
    nv.debug.set_memory_limit(200_000)
    try:
        with pytest.raises(RuntimeError, match="out of memory") as caught:
            heavy.item()
    finally:
        nv.debug.set_memory_limit(None)
    assert isinstance(caught.value, (MemoryError, nv.NovaOutOfMemoryError))
    assert heavy.item() > 0

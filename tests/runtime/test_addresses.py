"""``data_address`` must agree with numpy's own ``ctypes.data`` for every kind of array a
step passes: owning, sliced, transposed, broadcast, empty, read-only, of every dtype."""
import numpy as np
import pytest

from nova.runtime.addresses import data_address, fast_path

BASE = np.arange(240, dtype=np.float32).reshape(12, 20)


@pytest.mark.parametrize("array", [
    BASE,
    BASE[3:, 5:],
    BASE.T,
    BASE[::2, ::3],
    np.broadcast_to(np.float32(1.0), (4, 4)),
    np.empty(0, dtype=np.float64),
    np.zeros((), dtype=np.int8),
    np.arange(7, dtype=np.int64)[1:],
    np.ones((3, 3), dtype=np.float16),
], ids=["owning", "offset", "transposed", "strided", "broadcast", "empty", "0-d", "int64",
        "float16"])
def test_data_address_matches_ctypes(array):
    assert data_address(array) == array.ctypes.data


def test_read_only_view_and_fresh_arrays():
    view = BASE.view()
    view.flags.writeable = False
    assert data_address(view) == BASE.ctypes.data
    for _ in range(100):    # fresh objects, some at reused ids
        a = np.empty(np.random.randint(1, 5000), dtype=np.float32)
        assert data_address(a) == a.ctypes.data


def test_fast_path_on_cpython():
    # the header offset is found on the interpreters we ship for; if this fails the
    # engine still runs (through ctypes.data), only slower
    import sys
    if sys.implementation.name == "cpython":
        assert fast_path()

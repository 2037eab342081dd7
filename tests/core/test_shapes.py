"""Broadcasting and the live-pending set: the record-time fast paths agree with the
general rules."""
import gc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nova as nv
from nova.core.shapes import broadcast_shapes
from nova.tensor.trace import LiveSet

dims = st.lists(st.sampled_from([1, 2, 3, 5]), min_size=0, max_size=4).map(tuple)


@given(dims, dims)
def test_broadcast_shapes_matches_numpy(a, b):
    try:
        expected = np.broadcast_shapes(a, b)
    except ValueError:
        with pytest.raises(ValueError, match=r"add: shapes .* cannot be broadcast"):
            broadcast_shapes("add", a, b)
    else:
        assert broadcast_shapes("add", a, b) == expected


@given(dims, dims, dims)
def test_broadcast_shapes_of_three(a, b, c):
    try:
        expected = np.broadcast_shapes(a, b, c)
    except ValueError:
        with pytest.raises(ValueError):
            broadcast_shapes("where", a, b, c)
    else:
        assert broadcast_shapes("where", a, b, c) == expected


def test_live_set_forgets_dead_objects_and_survives_id_reuse():
    live = LiveSet()
    kept = [nv.tensor([float(i)]) for i in range(50)]
    for t in kept:
        live.add(t)
    for _ in range(200):         # short-lived objects: their ids are reused at once
        live.add(nv.tensor([1.0]))
    gc.collect()
    assert len(live) == 50 and {id(t) for t in live} == {id(t) for t in kept}
    live.discard(kept[0])
    del kept[0]
    assert len(live) == 49
    del kept, t
    gc.collect()
    assert len(live) == 0

"""Hypothesis strategies shared by the property tests."""
import numpy as np

import nova as nv
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

FLOAT_DTYPES = {"float32": np.float32, "float64": np.float64}


def shapes(min_dims=0, max_dims=4, max_side=5, min_side=1):
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                            max_side=max_side)


def arrays(shape, dtype=np.float32, lo=-3.0, hi=3.0):
    if np.dtype(dtype).kind == "b":
        return hnp.arrays(np.bool_, shape)
    if np.dtype(dtype).kind in "iu":
        return hnp.arrays(dtype, shape, elements=st.integers(int(lo), int(hi)))
    width = np.dtype(dtype).itemsize * 8
    lo, hi = float(np.dtype(dtype).type(lo)), float(np.dtype(dtype).type(hi))
    return hnp.arrays(dtype, shape, elements=st.floats(lo, hi, width=width))


@st.composite
def broadcast_pair(draw, dtype=np.float32, lo=-3.0, hi=3.0):
    a_shape, b_shape = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4,
                                                               max_side=4)).input_shapes
    return draw(arrays(a_shape, dtype, lo, hi)), draw(arrays(b_shape, dtype, lo, hi))


@st.composite
def array_and_dims(draw, dtype=np.float32, min_dims=1):
    shape = draw(shapes(min_dims=min_dims))
    x = draw(arrays(shape, dtype))
    ndim = len(shape)
    dims = draw(st.one_of(
        st.none(),
        st.integers(-ndim, ndim - 1),
        st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True).map(tuple)))
    keepdim = draw(st.booleans())
    return x, dims, keepdim


def assert_close(actual, expected, rtol=1e-5, atol=1e-6):
    a = actual.numpy() if isinstance(actual, nv.Tensor) else np.asarray(actual)
    e = np.asarray(expected)
    assert a.shape == e.shape, f"shape {a.shape} != {e.shape}"
    if a.dtype.kind == "b" or e.dtype.kind == "b":
        np.testing.assert_array_equal(a, e)
        return
    np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol,
                               equal_nan=True)


def assert_same_outputs(got, want, rtol=1e-5, atol=1e-6) -> None:
    """Another engine's or compiler's step results against Nova's: the same dtypes and
    shapes, integers and booleans exactly, floats within tolerance (NaN where NaN)."""
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, (k, g.dtype, w.dtype, g.shape, w.shape)
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"output {k}")
        else:
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                                       atol=atol, equal_nan=True, err_msg=f"output {k}")


# A step with an all-reduce: what the upstream lowerings refuse, naming the op.
COLLECTIVE_STEP = """
builtin.module {
  func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> {
    %s = nova.all_reduce_start %x group = 0 : i64 reduction = "sum" : tensor<4xf32>
    %w = nova.all_reduce_wait %s group = 0 : i64 reduction = "sum" : tensor<4xf32>
    func.return %w : tensor<4xf32>
  }
}"""


def sgd_step_losses(loss_of, params, calls=5, compiled=True, lr=0.01):
    """``calls`` SGD steps on ``loss_of()`` (zero_grad, backward, step), under
    ``nv.compile`` unless ``compiled`` is False: the losses and the replay count (None
    uncompiled). What the replay tests (a step through an op replays with the
    uncompiled losses) share."""
    opt = nv.optim.SGD(params, lr=lr)

    def step():
        opt.zero_grad()
        loss = loss_of()
        loss.backward()
        opt.step()
        return loss

    f = nv.compile(step) if compiled else step
    losses = [f().item() for _ in range(calls)]
    return losses, getattr(f, "replays", None)

"""Reading a realized host tensor (``t[i]``, iteration, ``int``, ``tolist``, ``format``)
compiles nothing: a basic index is read straight from the buffer. The values, shapes,
dtypes, errors, view semantics and gradients are those of the recorded path, which
pending tensors, tensors that record a gradient and CUDA tensors still take."""
import contextlib
import gc
import shutil

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nova as nv
from nova.runtime.cache import CACHE
from tests.helpers import arrays, assert_close, shapes
from tests.tensor.test_indexing import basic_index


@contextlib.contextmanager
def no_compiles():
    """Asserts that the block neither compiles nor runs a step (no cache lookup at
    all). Pending work left by earlier tests is computed first, so it cannot count."""
    gc.collect()
    nv.realize()
    before = (CACHE.stats.misses, CACHE.stats.hits)
    yield
    assert (CACHE.stats.misses, CACHE.stats.hits) == before, (
        f"compiled {CACHE.stats.misses - before[0]} and ran "
        f"{CACHE.stats.misses + CACHE.stats.hits - sum(before)} steps")


def pending_copy(t: nv.Tensor) -> nv.Tensor:
    """The same values as a pending tensor (two recorded reshapes), for the recorded
    path of indexing."""
    p = t.unsqueeze(0).squeeze(0)
    assert not p.node.realized
    return p


DTYPES = [np.float32, np.float64, np.int64, np.int32, np.bool_, np.float16]


def test_iterating_a_realized_500_element_tensor_compiles_nothing():
    data = np.arange(500, dtype=np.int64) * 3 - 7
    t = nv.tensor(data)
    with no_compiles():
        assert [int(v) for v in t] == data.tolist()
        assert [v.item() for v in t] == data.tolist()
        assert t.tolist() == data.tolist()
        assert len(t) == 500 and len(list(t)) == 500
        assert int(t[17]) == data[17] and int(t[-1]) == data[-1]
        assert t[10:40:7].tolist() == data[10:40:7].tolist()


def test_scalar_reads_of_realized_tensors_compile_nothing():
    f = nv.tensor(np.linspace(-1.0, 1.0, 50, dtype=np.float32))
    m = nv.tensor(np.arange(12.0).reshape(3, 4))
    b = nv.tensor([True, False, True])
    with no_compiles():
        assert float(f[3]) == pytest.approx(float(np.linspace(-1, 1, 50, dtype=np.float32)[3]))
        assert f"{f[0]:.3f}" == "-1.000" and f"{m[2, 3]:.1f}" == "11.0"
        assert bool(b[0]) and not bool(b[1]) and bool(b[-1])
        assert [row.tolist() for row in m] == np.arange(12.0).reshape(3, 4).tolist()
        assert [float(v) for row in m for v in row] == list(np.arange(12.0))
        assert m[1].shape == (4,) and m[:, 1].tolist() == [1.0, 5.0, 9.0]
        assert repr(m[0]) == "tensor([0., 1., 2., 3.], dtype=nova.float64)"
        assert [t.item() for t in m.unbind(1)[0]] == [0.0, 4.0, 8.0]


def test_format_is_torchs():
    """A 0-d tensor formats as its scalar; any other only with an empty spec."""
    t = nv.tensor([1.5, 2.25])
    assert f"{t[1]:.1f}" == "2.2" and f"{t[0]:>6}" == "   1.5" and f"{t}" == repr(t)
    with pytest.raises(TypeError, match="unsupported format string"):
        f"{t:.2f}"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("index", [
    3, -1, -6, (1, 2), (-1, -2, 0), slice(None, None, 2), slice(-3, None),
    slice(1, 100, 3), slice(4, 1), (slice(None), 1), (Ellipsis, -1), (None, 2),
    (1, None, slice(None, None, 2), None), (Ellipsis, None), (0, Ellipsis, 0, None),
    (slice(None, None, 4), slice(1, 3), slice(None, None, 2)), (), Ellipsis, None,
], ids=repr)
def test_realized_reads_match_numpy_and_the_recorded_path(dtype, index):
    x = (np.arange(6 * 3 * 4).reshape(6, 3, 4) % 5).astype(dtype)
    t = nv.tensor(x)
    with no_compiles():
        fast = t[index]
        assert fast.node.realized and fast.shape == x[index].shape and fast.dtype == t.dtype
        np.testing.assert_array_equal(fast.numpy(), x[index])
    recorded = pending_copy(t)[index]
    assert not recorded.node.realized
    assert recorded.shape == fast.shape and recorded.dtype == fast.dtype
    np.testing.assert_array_equal(recorded.numpy(), fast.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_], ids=lambda d: np.dtype(d).name)
def test_zero_dim_tensors(dtype):
    t = nv.tensor(np.array(3, dtype=dtype))
    with no_compiles():
        for index in [(), Ellipsis, None, (None, None), (Ellipsis, None)]:
            got = t[index]
            assert got.shape == np.array(3)[index].shape and got.dtype == t.dtype
            assert got.numpy().tolist() == np.array(3, dtype=dtype)[index].tolist()
        assert t.item() == dtype(3) and int(t) == (1 if dtype is np.bool_ else 3)
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(t)
    with pytest.raises(TypeError, match="len"):
        len(t)


@given(x=shapes(max_dims=4).flatmap(arrays), data=st.data())
def test_random_basic_indices_of_realized_tensors_compile_nothing(x, data):
    index = data.draw(basic_index(x.shape))
    t = nv.tensor(x)
    with no_compiles():
        got = t[index]
        np.testing.assert_array_equal(got.numpy(), x[index])
    np.testing.assert_array_equal(pending_copy(t)[index].numpy(), x[index])


def test_bfloat16_reads():
    t = nv.tensor([1.0, 2.5, -3.0], dtype=nv.bfloat16)
    with no_compiles():
        assert t[1].dtype == nv.bfloat16 and float(t[1]) == 2.5
        assert t[::2].tolist() == [1.0, -3.0] and [float(v) for v in t] == [1.0, 2.5, -3.0]


@pytest.mark.parametrize("index,error,message", [
    (3, IndexError, r"__getitem__: index 3 is out of bounds for dim 0 with size 3 "
                    r"\(shape \(3, 4\)\)"),
    (-4, IndexError, r"index -4 is out of bounds for dim 0 with size 3"),
    ((0, 4), IndexError, r"index 4 is out of bounds for dim 1 with size 4"),
    ((0, 0, 0), IndexError, r"too many indices for tensor of shape \(3, 4\): 3 given"),
    ((Ellipsis, 0, Ellipsis), IndexError, "single ellipsis"),
    (slice(None, None, -1), ValueError, "slice step must be positive"),
])
def test_errors_are_the_recorded_paths(index, error, message):
    realized = nv.tensor(np.zeros((3, 4), np.float32))
    for t in (realized, pending_copy(realized)):
        with pytest.raises(error, match=message):
            t[index]


def test_reads_of_a_realized_tensor_are_still_views():
    """Writes through ``t[i]`` reach ``t``, and a view made before an in-place update
    of its base reads the updated values, as on the recorded path."""
    t = nv.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    row = t[1]
    assert row.node.realized
    row.add_(10)
    assert t.tolist() == [[0.0, 1.0, 2.0], [13.0, 14.0, 15.0]]
    col = t[:, 0]
    t.mul_(2)
    assert col.tolist() == [0.0, 26.0]
    for r in t:
        r.sub_(1)
    assert t.tolist() == [[-1.0, 1.0, 3.0], [25.0, 27.0, 29.0]]


def test_a_read_is_read_only_and_numpy_of_it_a_writable_copy():
    t = nv.tensor(np.arange(6.0).reshape(2, 3))
    row = t[1]
    assert not row.node.buffer.flags.writeable
    arr = row.numpy()
    arr[:] = -1.0
    assert row.tolist() == [3.0, 4.0, 5.0] and t.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_a_read_is_never_overwritten_by_a_step_that_donates_its_base():
    """The read shares the base's memory: the base must then not be donated (written
    over by a result), or the read's values would change."""
    x = nv.tensor(np.arange(600.0).reshape(2, 300))
    kept = x[0].clone()
    x.mul_(2)
    nv.realize(x)
    assert kept.tolist() == list(np.arange(300.0))
    assert x[0, 5].item() == 10.0


def test_gradients_flow_through_reads_of_a_realized_leaf():
    x = nv.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4), requires_grad=True)
    y = x[1:, ::2].sum() + x[0, 1] * 3.0 + x[-1][None, 3].sum() * 2.0
    assert not x[0].node.realized           # grad mode on: the ops are recorded
    y.backward()
    expected = np.zeros((3, 4), np.float32)
    expected[1:, ::2] = 1.0
    expected[0, 1] += 3.0
    expected[2, 3] += 2.0
    assert_close(x.grad, expected)
    assert_close(y, np.arange(12.0).reshape(3, 4)[1:, ::2].sum() + 3.0 + 22.0)


def test_iterating_a_leaf_that_requires_grad_gives_per_row_gradients():
    w = nv.tensor(np.ones((3, 2), np.float32), requires_grad=True)
    loss = sum(row.sum() * float(k + 1) for k, row in enumerate(w))
    loss.backward()
    assert_close(w.grad, [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])


def test_reads_without_a_gradient_to_record_are_direct():
    """Data read from a realized tensor feeds a graph that reaches a leaf: the read is
    a constant of the step, the gradient of the leaf is unchanged."""
    w = nv.tensor(np.array([1.0, -2.0], np.float32), requires_grad=True)
    data = nv.tensor(np.array([[3.0, 4.0], [5.0, 6.0]], np.float32))
    with nv.no_grad():
        assert w[0].node.realized and float(w[1]) == -2.0
    rows = list(data)
    assert all(r.node.realized and r.grad_fn is None for r in rows)
    loss = (rows[1] * w).sum() + (data[0, 1] * w[0])
    loss.backward()
    assert_close(w.grad, [5.0 + 4.0, 6.0])


def test_pending_tensors_take_the_recorded_path():
    t = nv.tensor(np.arange(10.0, dtype=np.float32))
    p = t * 2
    first, tail = p[1], p[-3::2]
    assert not first.node.realized and not tail.node.realized
    assert first.item() == 2.0 and tail.tolist() == [14.0, 18.0]
    assert [int(v) for v in p] == [2 * k for k in range(10)]


def test_iterating_a_pending_tensor_realizes_it_once():
    """nanoGPT's get_batch: ``for i in torch.randint(...)`` then ``data[i:i + n]``. The
    tensor is computed once, and every element is read from its buffer; before, each
    ``i + n`` was a step recomputing the draw, a different one per position."""
    nv.manual_seed(3)
    ix = nv.randint(1000, (16,))
    want = ix.tolist()
    nv.manual_seed(3)
    ix = nv.randint(1000, (16,))
    assert not ix.node.realized
    before = CACHE.stats.misses + CACHE.stats.hits
    got = [int(i + 128) - 128 for i in ix]
    assert got == want
    elements = list(ix)
    assert all(e.node.realized for e in elements)
    # one step for the draw, one (the same for every element) for i + 128
    assert CACHE.stats.misses + CACHE.stats.hits - before == 1 + 16


def test_writing_numbers_into_a_realized_tensor_compiles_nothing():
    """nanoGPT's estimate_loss: ``losses[k] = loss.item()`` into ``zeros(n)``. Each
    write is a copy of the host buffer (never the buffer itself: a read of it keeps its
    values); views made before see the write, as on the recorded path."""
    losses = nv.zeros(6)
    nv.realize(losses)
    ints = nv.tensor(np.arange(4, dtype=np.int64))
    flags = nv.tensor(np.zeros(3, np.bool_))
    before = losses[1:4]
    old = losses.node.buffer
    with no_compiles():
        for k in range(6):
            losses[k] = 0.5 * k
        losses[::2] = -1
        ints[1] = 7
        flags[2] = True
    assert losses.tolist() == [-1.0, 0.5, -1.0, 1.5, -1.0, 2.5]
    assert before.tolist() == [0.5, -1.0, 1.5] and losses[0].item() == -1.0
    assert not old.any()              # the buffer the writes started from is unchanged
    assert ints.tolist() == [0, 7, 2, 3] and flags.tolist() == [False, False, True]
    assert float(losses.mean()) == pytest.approx(0.25)
    ints[2] = 2.9                     # float into int64: the recorded cast, as before
    ints[3] = 2 ** 40
    assert ints.tolist() == [0, 7, 2, 2 ** 40]


def test_writes_that_record_a_gradient_stay_recorded():
    w = nv.tensor(np.ones(3, np.float32), requires_grad=True)
    y = w * 2
    y[1] = 0.0
    y.sum().backward()
    assert_close(w.grad, [2.0, 0.0, 2.0])


def test_iteration_that_records_a_gradient_stays_recorded():
    w = nv.tensor(np.ones((3, 2), np.float32), requires_grad=True)
    rows = list(w * 2)
    assert not any(r.node.realized for r in rows)
    sum(r.sum() * float(k + 1) for k, r in enumerate(rows)).backward()
    assert_close(w.grad, [[2.0, 2.0], [4.0, 4.0], [6.0, 6.0]])


@pytest.fixture
def emulated_cuda():
    """``cuda`` served by the CPU emulator of generated kernels (no GPU needed)."""
    if shutil.which("g++") is None:
        pytest.skip("the emulator needs g++ (C++20)")
    from nova.runtime.cuda_runtime import use_backend
    from tests.runtime.emulated_cuda import EmulatorBackend
    nv.debug.reset_cache()
    with use_backend(EmulatorBackend()):
        yield
        with contextlib.suppress(Exception):
            nv.realize()
    nv.debug.reset_cache()


def test_cuda_tensors_keep_the_recorded_path(emulated_cuda, engine):
    if engine != "cpu":
        pytest.skip("the CUDA step is the same under either host engine")
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    t = nv.tensor(x).to("cuda")
    nv.realize(t)
    row = t[1, ::2]
    assert not row.node.realized and row.is_cuda
    assert row.tolist() == x[1, ::2].tolist() and float(t[2, 3]) == 11.0
    assert [r.tolist() for r in t] == x.tolist()

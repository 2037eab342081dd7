"""Probe 13 (sequence and NLP models ported by changing imports): ``F.embedding`` and
``nn.Embedding`` refuse a negative index, as PyTorch's do (``index out of range in
self``), where ``weight[input]`` wrapped it to a row from the end -- a padding id of -1
or an unmasked ``-100`` label fed to an embedding gave a silently wrong row. Known
indices fail at the call, computed ones when the step runs; valid lookups keep their
values and gradients.

References are numpy; the interpreter runs these tiny graphs."""
import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def _table(rows=5, dim=3, requires_grad=False):
    data = np.arange(rows * dim, dtype=np.float32).reshape(rows, dim) / 7
    return data, nv.tensor(data, requires_grad=requires_grad)


@pytest.mark.parametrize("index", [[-1], [[0, 2], [1, -5]], [5]])
def test_known_out_of_range_index_raises_at_the_call(index):
    _, w = _table()
    with pytest.raises(IndexError, match="embedding"):
        F.embedding(nv.tensor(index), w)


def test_module_refuses_negative_index():
    emb = nv.nn.Embedding(5, 3, padding_idx=-1)       # a negative padding_idx is fine
    assert emb.padding_idx == 4
    with pytest.raises(IndexError, match="embedding"):
        emb(nv.tensor([[1, -1]]))


@pytest.mark.filterwarnings("ignore:nova. a step computing:RuntimeWarning")
def test_computed_negative_index_fails_when_the_step_runs():
    _, w = _table()
    idx = nv.tensor([1, 3]) - 2                        # computed: -1 is not known at the call
    with pytest.raises(RuntimeError):
        F.embedding(idx, w).numpy()


@pytest.mark.parametrize("index, dtype", [([[0, 4, 4], [2, 1, 0]], nv.int64),
                                          ([3, 1], nv.int32), (2, nv.int64),
                                          (np.zeros((2, 0), np.int64), nv.int64)])
def test_valid_lookups_keep_values_and_gradients(index, dtype):
    data, w = _table(requires_grad=True)
    idx = np.asarray(index, dtype=np.int64)
    out = F.embedding(nv.tensor(idx, dtype=dtype), w)
    assert out.shape == idx.shape + (3,)
    np.testing.assert_array_equal(out.numpy(), data[idx])
    upstream = np.arange(out.numel(), dtype=np.float32).reshape(out.shape) + 1
    (out * nv.tensor(upstream)).sum().backward()
    expected = np.zeros_like(data)
    np.add.at(expected, idx.reshape(-1), upstream.reshape(-1, 3))
    np.testing.assert_allclose(w.grad.numpy(), expected, rtol=1e-6)


def test_computed_valid_index_and_padding_row_gradient():
    data, w = _table(requires_grad=True)
    idx = nv.tensor([[3, 2], [0, 2]]) + 1             # computed, all in range
    out = F.embedding(idx, w, padding_idx=3)
    np.testing.assert_array_equal(out.numpy(), data[[[4, 3], [1, 3]]])
    out.sum().backward()
    expected = np.zeros_like(data)
    expected[[4, 1]] = 1.0                            # row 3 is the padding row: no gradient
    np.testing.assert_array_equal(w.grad.numpy(), expected)


# --- cross_entropy / nll_loss: a known class index outside [0, C) that is not
# ignore_index raises IndexError at the call (PyTorch: "Target 7 is out of bounds."),
# instead of a RealizationError naming nova.gather when the step runs.

def _logits(shape):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("call", [
    lambda x, t: F.cross_entropy(x, t),
    lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
    lambda x, t: nv.nn.CrossEntropyLoss(ignore_index=0)(x, t),
    lambda x, t: F.nll_loss(F.log_softmax(x, -1 if x.ndim == 1 else 1), t),
])
@pytest.mark.parametrize("shape, target", [((3, 5), [0, 7, 1]), ((2, 5, 3), [[0, 1, 2], [4, -1, 0]]),
                                           ((5,), 5)])
def test_known_target_out_of_bounds_raises_index_error(call, shape, target):
    with pytest.raises(IndexError, match="Target .* is out of bounds"):
        call(nv.tensor(_logits(shape)), nv.tensor(target))


def test_ignore_index_outside_the_classes_is_skipped():
    x = _logits((4, 3))
    t = np.array([0, 9, 2, 9])                       # 9 is ignore_index, not a class
    loss = F.cross_entropy(nv.tensor(x), nv.tensor(t), ignore_index=9).item()
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    np.testing.assert_allclose(loss, -(logp[0, 0] + logp[2, 2]) / 2, rtol=1e-5)
    nll = F.nll_loss(nv.tensor(logp), nv.tensor(t), ignore_index=9, reduction="sum").item()
    np.testing.assert_allclose(nll, -(logp[0, 0] + logp[2, 2]), rtol=1e-5)

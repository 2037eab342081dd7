"""F.embedding_bag and nn.EmbeddingBag (nova/nn/embedding_bag.py) against a numpy
reference: fixed-length (2-D) and offset bags, sum/mean/max, padding_idx,
per_sample_weights, include_last_offset, empty bags; gradients by finite differences;
errors."""
import numpy as np
import pytest

import nova as nv
import nova.nn as nn
import nova.nn.functional as F
from nova.autograd.gradcheck import gradcheck
from tests.helpers import assert_close

RNG = np.random.default_rng(0)
W = RNG.standard_normal((6, 3)).astype(np.float32)
INPUT = np.array([1, 2, 4, 5, 4, 3, 0, 4])
OFFSETS = np.array([0, 2, 2, 5, 6])          # bags [1 2] [] [4 5 4] [3] [0 4]
PSW = RNG.standard_normal(8).astype(np.float32)


def bags_ref(bags, weight, mode, padding_idx=None, scales=None):
    """One row per bag: the sum, mean or max of its rows (scaled), padding left out;
    an empty bag gives zeros."""
    out = np.zeros((len(bags), weight.shape[1]))
    for b, bag in enumerate(bags):
        rows = [weight[i] * (1.0 if scales is None else scales[b][k])
                for k, i in enumerate(bag) if i != padding_idx]
        if rows:
            out[b] = {"sum": np.sum, "mean": np.mean, "max": np.max}[mode](rows, axis=0)
    return out


def split(values, offsets, end=None):
    ends = list(offsets[1:]) + [len(values) if end is None else end]
    return [values[s:e] for s, e in zip(offsets, ends)]


def test_bags_against_numpy():
    w, inp, offs = nv.tensor(W), nv.tensor(INPUT), nv.tensor(OFFSETS)
    two_d = INPUT.reshape(4, 2)
    cases = [
        (F.embedding_bag(inp, w, offs, mode="sum"), bags_ref(split(INPUT, OFFSETS), W, "sum")),
        (F.embedding_bag(inp, w, offs, padding_idx=4),           # mean; a bag of padding only
         bags_ref(split(INPUT, OFFSETS), W, "mean", 4)),
        (F.embedding_bag(inp, w, offs, mode="max", padding_idx=-2),
         bags_ref(split(INPUT, OFFSETS), W, "max", 4)),
        (F.embedding_bag(inp, w, offs + 0, mode="max"),           # computed offsets: read back
         bags_ref(split(INPUT, OFFSETS), W, "max")),
        (F.embedding_bag(inp, w, offs, mode="sum", per_sample_weights=nv.tensor(PSW),
                         padding_idx=4),
         bags_ref(split(INPUT, OFFSETS), W, "sum", 4, split(PSW, OFFSETS))),
        # the last offset ends the last bag; positions 6 and 7 belong to none
        (F.embedding_bag(inp, w, offs[:4].clone(), mode="mean", include_last_offset=True),
         bags_ref(split(INPUT, OFFSETS[:3], 5), W, "mean")),
        (F.embedding_bag(nv.tensor(two_d), w, mode="sum", padding_idx=4),
         bags_ref(list(two_d), W, "sum", 4)),
        (F.embedding_bag(nv.tensor(two_d), w), bags_ref(list(two_d), W, "mean")),
        (F.embedding_bag(nv.tensor(two_d), w, mode="max", padding_idx=4),
         bags_ref(list(two_d), W, "max", 4)),
        (F.embedding_bag(nv.tensor(two_d), w, mode="sum",
                         per_sample_weights=nv.tensor(PSW.reshape(4, 2))),
         bags_ref(list(two_d), W, "sum", None, PSW.reshape(4, 2))),
        (nn.EmbeddingBag.from_pretrained(w, mode="max")(nv.tensor(two_d)),
         bags_ref(list(two_d), W, "max")),
        (F.embedding_bag(inp, w, nv.tensor([0]), include_last_offset=True), np.zeros((0, 3))),
        (F.embedding_bag(nv.zeros(2, 0, dtype=nv.int64), w, mode="max"), np.zeros((2, 3))),
    ]
    nv.realize(*[got for got, _ in cases])
    for got, want in cases:
        assert got.dtype == nv.float32
        assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_gradients():
    two_d = nv.tensor(INPUT.reshape(2, 4))
    inp, offs = nv.tensor(INPUT), nv.tensor(OFFSETS)

    def bags(w, s):
        return (F.embedding_bag(inp, w, offs, mode="sum", per_sample_weights=s,
                                padding_idx=4),
                F.embedding_bag(inp, w, offs, mode="mean", padding_idx=4),
                F.embedding_bag(inp, w, offs, mode="max"),
                F.embedding_bag(two_d, w, mode="max", padding_idx=4))
    assert gradcheck(bags, [W, PSW])


def test_module():
    bag = nn.EmbeddingBag(10, 3, mode="sum", padding_idx=-1)
    assert bag.padding_idx == 9 and bag.weight.requires_grad
    assert_close(bag.weight.numpy()[9], np.zeros(3))
    assert repr(bag) == "EmbeddingBag(10, 3, mode='sum', padding_idx=9)"
    assert not nn.EmbeddingBag.from_pretrained(nv.tensor(W)).weight.requires_grad
    assert nn.EmbeddingBag.from_pretrained(nv.tensor(W), freeze=False).weight.requires_grad
    with pytest.raises(ValueError, match="padding_idx 10 must be within num_embeddings 10"):
        nn.EmbeddingBag(10, 3, padding_idx=10)
    with pytest.raises(ValueError, match="embeddings must be 2-D"):
        nn.EmbeddingBag.from_pretrained(nv.ones(3))


def test_errors():
    w, inp = nv.tensor(W), nv.tensor(INPUT)
    with pytest.raises(ValueError, match="mode has to be one of sum, mean or max"):
        F.embedding_bag(inp, w, nv.tensor([0]), mode="min")
    with pytest.raises(ValueError, match="max mode does not support sparse"):
        F.embedding_bag(inp, w, nv.tensor([0]), mode="max", sparse=True)
    with pytest.raises(NotImplementedError, match="per_sample_weights is only supported for "
                                                  "mode='sum'"):
        F.embedding_bag(inp, w, nv.tensor([0]), per_sample_weights=nv.tensor(PSW))
    with pytest.raises(ValueError, match="per_sample_weights .* must have the same shape"):
        F.embedding_bag(inp, w, nv.tensor([0]), mode="sum", per_sample_weights=nv.ones(7))
    with pytest.raises(TypeError, match="must have the weight's dtype"):
        F.embedding_bag(inp, w, nv.tensor([0]), mode="sum",
                        per_sample_weights=nv.tensor(PSW.astype(np.float64)))
    with pytest.raises(ValueError, match="offsets has to be None"):
        F.embedding_bag(inp.reshape(2, 4), w, nv.tensor([0]))
    with pytest.raises(ValueError, match="offsets has to be a 1-D tensor for a 1-D input"):
        F.embedding_bag(inp, w)
    with pytest.raises(ValueError, match=r"offsets\[0\] has to be 0"):
        F.embedding_bag(inp, w, nv.tensor([1, 3]))
    with pytest.raises(ValueError, match=r"offsets\[-1\] can not be greater than the input's "
                                         r"length 8, got 9"):
        F.embedding_bag(inp, w, nv.tensor([0, 9]))
    with pytest.raises(ValueError, match="non-decreasing"):
        F.embedding_bag(inp, w, nv.tensor([0, 3, 2]))
    with pytest.raises(ValueError, match="at least 1"):
        F.embedding_bag(inp, w, nv.tensor(np.zeros(0, np.int64)), include_last_offset=True)
    with pytest.raises(ValueError, match="input has to be a 1-D or 2-D"):
        F.embedding_bag(inp.reshape(2, 2, 2), w)
    with pytest.raises(ValueError, match="weight has to be a 2-D"):
        F.embedding_bag(inp, nv.ones(6), nv.tensor([0]))
    with pytest.raises(TypeError, match="indices must be int32 or int64"):
        F.embedding_bag(nv.ones(4, dtype=nv.int64).to(nv.float64), w, nv.tensor([0]))
    with pytest.raises(ValueError, match="padding_idx must be within the number of "
                                         "embeddings, -6 through 5, got 6"):
        F.embedding_bag(inp, w, nv.tensor([0]), padding_idx=6)
    with pytest.raises(IndexError, match="out of bounds"):
        F.embedding_bag(nv.tensor([1, -1]), w, nv.tensor([0]))
    with pytest.warns(UserWarning, match="Argument order of nn.functional.embedding_bag"):
        F.embedding_bag(w, inp.reshape(2, 4))


@pytest.mark.parametrize("mode", ["sum", "mean"])
@pytest.mark.parametrize("two_d", [False, True], ids=["offsets", "2d"])
def test_max_norm_and_scale_grad_by_freq(mode, two_d):
    """``max_norm`` renorms the weight in place (every row ``input`` names, by
    ``max_norm / (norm + 1e-7)``) before the lookup, as PyTorch's; ``scale_grad_by_freq``
    divides each row's gradient by its index's count in ``input``, as ``F.embedding``'s
    (PyTorch's CPU ``embedding_bag`` divides by another index's count: README's
    deviations)."""
    w0 = W.astype(np.float64) * 3.0
    inp = INPUT.reshape(4, 2) if two_d else INPUT
    offs = [0, 2, 4, 6] if two_d else list(OFFSETS)
    upstream = RNG.standard_normal((len(offs), 3))
    got_w = nv.tensor(w0, requires_grad=True)
    got = F.embedding_bag(nv.tensor(inp), got_w, None if two_d else nv.tensor(OFFSETS),
                          max_norm=1.5, norm_type=3.0, mode=mode, padding_idx=2,
                          scale_grad_by_freq=True)
    (got * nv.tensor(upstream)).sum().backward()
    renormed = w0.copy()
    for i in np.unique(INPUT):
        norm = np.sum(np.abs(w0[i]) ** 3) ** (1 / 3)
        if norm > 1.5:
            renormed[i] = w0[i] * (1.5 / (norm + 1e-7))
    assert not np.allclose(renormed, w0)                    # (some rows were renormed)
    np.testing.assert_allclose(got_w.detach().numpy(), renormed, rtol=1e-12)
    np.testing.assert_allclose(got.numpy(), bags_ref(split(INPUT, offs), renormed, mode, 2),
                               rtol=1e-12)
    flat, counts = INPUT, np.bincount(INPUT, minlength=6)
    grad = np.zeros_like(w0)
    for b, bag in enumerate(split(np.arange(len(flat)), offs)):
        kept = [p for p in bag if flat[p] != 2]
        for p in kept:
            share = 1.0 / max(len(kept), 1) if mode == "mean" else 1.0
            grad[flat[p]] += upstream[b] * share / counts[flat[p]]
    np.testing.assert_allclose(got_w.grad.numpy(), grad, rtol=1e-12)

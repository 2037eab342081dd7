"""F.embedding / nn.Embedding's ``max_norm`` (with ``norm_type``) and
``scale_grad_by_freq`` (nova/nn/functional.py) against numpy references written here:
the in-place renorm of the rows looked up, the gradient reaching the renormed weight,
the per-index division of the gradient, both with ``padding_idx``; a compiled training
step; and PyTorch itself where it is installed."""
import numpy as np
import pytest

import nova as nv
import nova.nn as nn
import nova.nn.functional as F

RNG = np.random.default_rng(0)
W = (RNG.standard_normal((6, 3)) * 2).astype(np.float32)
IDX = np.array([[0, 2, 5], [2, 2, 4]])
G = RNG.standard_normal(IDX.shape + (3,)).astype(np.float32)


def renorm_ref(weight, idx, max_norm, norm_type):
    """PyTorch's embedding_renorm_: rows looked up whose norm (float64) exceeds
    max_norm scaled by max_norm / (norm + 1e-7), the scale rounded to float32."""
    out = weight.copy()
    for i in np.unique(idx):
        norm = np.linalg.norm(weight[i].astype(np.float64), norm_type)
        if norm > max_norm:
            out[i] = weight[i] * np.float32(max_norm / (norm + 1e-7))
    return out


def lookup_grad_ref(idx, g, n, padding_idx=None, by_freq=False):
    """The table's gradient: every position's g added into its row, divided by the
    index's count with by_freq; the padding row gets nothing."""
    flat, rows = idx.reshape(-1), g.reshape(-1, g.shape[-1]).astype(np.float64)
    counts = np.bincount(flat, minlength=n)
    out = np.zeros((n, g.shape[-1]))
    for i, r in zip(flat, rows):
        if i != padding_idx:
            out[i] += r / (counts[i] if by_freq else 1)
    return out


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_max_norm_renorms_the_looked_up_rows_in_place(norm_type):
    w = nn.Parameter(nv.tensor(W))
    out = F.embedding(nv.tensor(IDX), w, max_norm=1.5, norm_type=norm_type)
    (out * nv.tensor(G)).sum().backward()
    want = renorm_ref(W, IDX, 1.5, norm_type)
    nv.realize(out, w, w.grad)
    np.testing.assert_allclose(w.numpy(), want, rtol=2e-7, atol=0)
    np.testing.assert_array_equal(w.numpy()[[1, 3]], W[[1, 3]])     # not looked up
    np.testing.assert_array_equal(out.numpy(), w.numpy()[IDX])
    np.testing.assert_allclose(w.grad.numpy(), lookup_grad_ref(IDX, G, 6), rtol=1e-6)
    assert w.is_leaf and w.grad_fn is None
    norms = np.linalg.norm(w.numpy()[np.unique(IDX)].astype(np.float64), norm_type, axis=1)
    assert np.all(norms <= 1.5 + 1e-6)


def test_max_norm_module_padding_and_a_non_leaf_weight():
    e = nn.Embedding(6, 3, padding_idx=2, max_norm=1.0, _weight=nv.tensor(W))
    assert repr(e) == "Embedding(6, 3, padding_idx=2, max_norm=1.0)"
    out = e(nv.tensor(IDX))
    (out * nv.tensor(G)).sum().backward()
    want = renorm_ref(W, IDX, 1.0, 2.0)        # the padding row is renormed too
    np.testing.assert_allclose(e.weight.numpy(), want, rtol=2e-7, atol=0)
    np.testing.assert_allclose(e.weight.grad.numpy(), lookup_grad_ref(IDX, G, 6, 2),
                               rtol=1e-6)
    # a computed table keeps its history: the gradient reaches what it came from
    p = nn.Parameter(nv.tensor(W))
    table = p * 2.0
    F.embedding(nv.tensor([[0, 1]]), table, max_norm=3.0).sum().backward()
    np.testing.assert_allclose(table.numpy(), renorm_ref(W * 2, np.array([0, 1]), 3.0, 2.0),
                               rtol=2e-7)
    want_grad = np.zeros_like(W)
    want_grad[[0, 1]] = 2.0
    np.testing.assert_array_equal(p.grad.numpy(), want_grad)
    np.testing.assert_array_equal(p.numpy(), W)
    with nv.no_grad():              # under no_grad the table changes all the same
        q = nv.tensor(W)
        F.embedding(nv.tensor([3]), q, max_norm=0.5)
    np.testing.assert_allclose(q.numpy(), renorm_ref(W, np.array([3]), 0.5, 2.0), rtol=2e-7)
    empty = nv.tensor(np.zeros((0,), np.int64))
    r = nv.tensor(W)
    got = F.embedding(empty, r, max_norm=0.5, scale_grad_by_freq=True)
    assert got.shape == (0, 3)
    np.testing.assert_array_equal(r.numpy(), W)
    with pytest.raises(ValueError, match="max_norm needs a 2-D weight"):
        F.embedding(nv.tensor([0]), nv.tensor(W[0]), max_norm=1.0)
    with pytest.raises(ValueError, match="padding_idx 6 must be within num_embeddings 6"):
        F.embedding(nv.tensor([0]), nv.tensor(W), padding_idx=6, max_norm=1.0)


def test_scale_grad_by_freq_divides_each_rows_gradient_by_its_count():
    w = nn.Parameter(nv.tensor(W))
    idx = nv.tensor(IDX)
    plain = F.embedding(idx, w)
    out = F.embedding(idx, w, scale_grad_by_freq=True)
    (out * nv.tensor(G)).sum().backward()
    nv.realize(plain, out, w.grad)
    np.testing.assert_array_equal(out.numpy(), plain.numpy())     # the values, bit for bit
    np.testing.assert_allclose(w.grad.numpy(), lookup_grad_ref(IDX, G, 6, by_freq=True),
                               rtol=1e-6)
    e = nn.Embedding(6, 3, padding_idx=2, scale_grad_by_freq=True, _weight=nv.tensor(W))
    assert repr(e) == "Embedding(6, 3, padding_idx=2, scale_grad_by_freq=True)"
    (e(idx) * nv.tensor(G)).sum().backward()
    np.testing.assert_allclose(e.weight.grad.numpy(),
                               lookup_grad_ref(IDX, G, 6, padding_idx=2, by_freq=True),
                               rtol=1e-6)
    # both options together, with padding_idx
    v = nn.Parameter(nv.tensor(W))
    (F.embedding(idx, v, padding_idx=5, max_norm=1.2, scale_grad_by_freq=True)
     * nv.tensor(G)).sum().backward()
    np.testing.assert_allclose(v.numpy(), renorm_ref(W, IDX, 1.2, 2.0), rtol=2e-7, atol=0)
    np.testing.assert_allclose(v.grad.numpy(),
                               lookup_grad_ref(IDX, G, 6, padding_idx=5, by_freq=True),
                               rtol=1e-6)


def test_a_compiled_step_with_both_options_replays_the_recorded_loop():
    """The renorm is an in-place write and the gradient scaling a pure_backward
    Function: ``nv.compile`` replays the step, bit for bit."""
    batches = [RNG.integers(0, 6, (2, 3)) for _ in range(5)]

    def train(compiled):
        e = nn.Embedding(6, 3, max_norm=1.0, scale_grad_by_freq=True, _weight=nv.tensor(W))
        opt = nv.optim.SGD(e.parameters(), lr=0.5)
        g = nv.tensor(G[:, :1])

        def step(i):
            opt.zero_grad()
            loss = (e(i) * g).sum()
            loss.backward()
            opt.step()
            return loss
        run = nv.compile(step) if compiled else step
        losses = [run(nv.tensor(b)).item() for b in batches]
        return losses, e.weight.numpy(), getattr(run, "replays", 0)
    ref, ref_w, _ = train(False)
    got, got_w, replays = train(True)
    assert replays >= 2 and got == ref
    np.testing.assert_array_equal(got_w, ref_w)


def test_against_torch():
    torch = pytest.importorskip("torch")
    for kw in (dict(max_norm=1.5, padding_idx=2, scale_grad_by_freq=True),
               dict(max_norm=2.0, norm_type=1.0), dict(scale_grad_by_freq=True)):
        tw = torch.tensor(W, requires_grad=True)
        tout = torch.nn.functional.embedding(torch.tensor(IDX), tw, **kw)
        (tout * torch.tensor(G)).sum().backward()
        w = nn.Parameter(nv.tensor(W))
        out = F.embedding(nv.tensor(IDX), w, **kw)
        (out * nv.tensor(G)).sum().backward()
        np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-6, atol=1e-7)

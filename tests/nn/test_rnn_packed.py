"""Packed sequences (``nv.nn.utils.rnn``) and RNN/LSTM/GRU on packed input: layouts
against numpy index arithmetic written here, the layers against the float64 numpy
recurrence of tests/nn/test_rnn.py run on each sequence alone, gradients against the
same module run on each sequence alone, and PyTorch when installed."""
import numpy as np
import pytest

import nova as nv
import nova.nn as nn
from nova.nn.utils.rnn import (
    PackedSequence, invert_permutation, pack_padded_sequence, pack_sequence,
    pad_packed_sequence, pad_sequence, unpack_sequence, unpad_sequence,
)
from tests.helpers import assert_close
from tests.nn.test_rnn import _np_rnn


def _np_pack(x, lengths, batch_first):
    """Packed data, batch_sizes and the sort order of a padded numpy batch, by loops."""
    x = x.transpose(1, 0, *range(2, x.ndim)) if batch_first else x
    order = sorted(range(len(lengths)), key=lambda b: -lengths[b])   # stable
    sizes = [sum(n > t for n in lengths) for t in range(max(lengths))]
    rows = [x[t, b] for t in range(max(lengths)) for b in order if lengths[b] > t]
    return np.stack(rows), np.array(sizes), np.array(order)


def test_pack_pad_round_trips_in_both_layouts():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3, 2)).astype(np.float32)        # (T, B, *)
    cases = [([4, 2, 1], True, False), ([2, 4, 3], False, False), ([3, 1, 3], False, True),
             ([4, 4, 4], True, False)]
    got, want, packs = [], [], []
    for lengths, enforce_sorted, batch_first in cases:
        xi = x.transpose(1, 0, 2) if batch_first else x
        packed = pack_padded_sequence(nv.tensor(xi), nv.tensor(lengths), batch_first,
                                      enforce_sorted)
        data, sizes, order = _np_pack(xi, lengths, batch_first)
        assert packed.batch_sizes.dtype == nv.int64 and not packed.batch_sizes.is_cuda
        assert packed.batch_sizes.numpy().tolist() == sizes.tolist()
        if enforce_sorted:
            assert packed.sorted_indices is None and packed.unsorted_indices is None
        else:
            assert packed.sorted_indices.numpy().tolist() == order.tolist()
            assert packed.unsorted_indices.numpy().tolist() == np.argsort(order).tolist()
        valid = np.arange(6)[:, None] < np.array(lengths)            # (total_length, B)
        padded = np.where(valid[..., None], np.concatenate([x, x[:2]]), -1.5)
        out, lens = pad_packed_sequence(packed, batch_first, -1.5, total_length=6)
        assert lens.dtype == nv.int64 and lens.numpy().tolist() == lengths
        short, _ = pad_packed_sequence(packed, padding_value=-1.5)  # T = max length
        seqs = [x[:n, b] for b, n in enumerate(lengths)]
        unpacked = unpack_sequence(packed)
        repacked = pack_sequence([nv.tensor(s) for s in seqs], enforce_sorted)
        unpadded = unpad_sequence(nv.tensor(xi), lengths, batch_first)
        got += [packed.data, out, short, repacked.data, *unpacked, *unpadded]
        want += [data, padded.transpose(1, 0, 2) if batch_first else padded,
                 padded[:max(lengths)], data, *seqs, *seqs]
        packs.append(repacked)
    ints = pack_sequence([nv.tensor([1, 2, 3]), nv.tensor([4, 5]), nv.tensor([6])])
    got += [ints.data, pad_packed_sequence(ints, True, padding_value=-1.5)[0]]
    want += [[1, 4, 6, 2, 5, 3], [[1, 2, 3], [4, 5, -1], [6, -1, -1]]]   # -1.5 truncates
    nv.realize(*got)
    for g, w in zip(got, want):
        assert_close(g, np.asarray(w), rtol=0, atol=0)
    assert [p.batch_sizes.numpy().tolist() for p in packs] == [
        [3, 2, 1, 1], [3, 3, 2, 1], [3, 2, 2], [3, 3, 3, 3]]
    assert ints.data.dtype == nv.int64
    assert pad_sequence(unpack_sequence(ints)).shape == (3, 3)


def test_packed_sequence_class():
    data, sizes = nv.tensor([[1.0], [2.0], [3.0]]), nv.tensor([2, 1])
    p = PackedSequence(data, sizes, nv.tensor([1, 0]))
    q = PackedSequence((data, sizes))
    d, b, s, u = p                                                 # a named tuple
    assert d is data and b is sizes and q.sorted_indices is None and q.unsorted_indices is None
    inverse = invert_permutation(nv.tensor([2, 0, 3, 1]))
    nv.realize(u, inverse)
    assert u.numpy().tolist() == [1, 0] and inverse.numpy().tolist() == [1, 3, 0, 2]
    assert invert_permutation(None) is None
    assert p.float() is p and p.to("cpu") is p and not p.is_cuda
    wide = p.double()
    assert wide.data.dtype == nv.float64 and wide.batch_sizes is sizes
    assert wide.sorted_indices.dtype == nv.int64 and p.to(nv.int32).data.dtype == nv.int32
    assert isinstance(p.half().cpu(), PackedSequence) and p.long().data.dtype == nv.int64
    assert repr(q).startswith("PackedSequence(data=")
    with pytest.raises(TypeError, match="expected data and batch_sizes, or one"):
        PackedSequence(data)
    with pytest.raises(ValueError, match="batch_sizes should always be a CPU tensor, got list"):
        PackedSequence(data, [2, 1])
    with pytest.raises(TypeError, match="invert_permutation: expected a 1-D int32/int64"):
        invert_permutation(nv.tensor([[0]]))


def test_packing_errors():
    x = nv.zeros(3, 2, 4)
    with pytest.raises(RuntimeError, match=r"must be sorted in decreasing order when "
                                           r"`enforce_sorted` is True, got \[2, 3\]"):
        pack_padded_sequence(x, [2, 3])
    with pytest.raises(RuntimeError, match=r"Length of all samples has to be greater than 0.*"
                                           r"\[3, 0\]"):
        pack_padded_sequence(x, [3, 0])
    with pytest.raises(RuntimeError, match="greater than 0"):
        pack_padded_sequence(x, [-1, 2], enforce_sorted=False)
    with pytest.raises(RuntimeError, match=r"lengths \[4, 2\] exceed the input's 3 steps \(input "
                                           r"shape \(3, 2, 4\), batch_first=False\)"):
        pack_padded_sequence(x, [4, 2])
    with pytest.raises(RuntimeError, match=r"Expected `len\(lengths\)` to be equal to "
                                           r"batch_size, but got 2 \(batch_size=3\)"):
        pack_padded_sequence(x, [3, 3], batch_first=True)
    with pytest.raises(RuntimeError, match="Cannot pack empty tensors"):
        pack_padded_sequence(nv.zeros(3, 0, 4), [])
    with pytest.raises(RuntimeError, match="'lengths' argument should be a 1D CPU int64 tensor, "
                                           "but got a 2-D cpu int64 tensor"):
        pack_padded_sequence(x, nv.tensor([[3, 2]]))
    with pytest.raises(IndexError, match=r"input must have at least 2 dims .* shape \(3,\)"):
        pack_padded_sequence(nv.zeros(3), [3])
    with pytest.raises(RuntimeError, match="pad_sequence: received an empty list"):
        pack_sequence([])
    p = pack_padded_sequence(x, [3, 1])
    with pytest.raises(ValueError, match="Expected total_length to be at least the length of "
                                         "the longest sequence in input, but got "
                                         "total_length=2 and max sequence length being 3"):
        pad_packed_sequence(p, total_length=2)
    bad = PackedSequence(p.data, nv.tensor([1, 2, 1]))
    with pytest.raises(RuntimeError, match=r"unpack_sequence: batch_sizes \[1, 2, 1\] must be "
                                           r"positive and non-increasing and add up to the 4 "
                                           r"rows of data"):
        unpack_sequence(bad)
    with pytest.raises(TypeError, match="pad_packed_sequence: expected a PackedSequence"):
        pad_packed_sequence(x)
    with pytest.raises(ValueError, match=r"unpad_sequence: lengths \[3, 4\] must give one "
                                         r"length in \[0, 3\]"):
        unpad_sequence(x, [3, 4])
    lstm = nn.LSTM(4, 3)
    with pytest.raises(RuntimeError, match=r"LSTM: input.size\(-1\) must be equal to "
                                           r"input_size. Expected 4, got packed data"):
        lstm(pack_padded_sequence(nv.zeros(3, 2, 5), [3, 1]))
    with pytest.raises(RuntimeError, match=r"expected h_0 of shape \(1, 2, 3\) for batched "
                                           r"input \(batch 2\), got \(1, 3, 3\)"):
        lstm(p, (nv.zeros(1, 3, 3), nv.zeros(1, 2, 3)))
    with pytest.raises(RuntimeError, match="LSTM: input has dtype float64"):
        lstm(p.double())
    with pytest.raises(RuntimeError, match="packed input data must have 2 dimensions"):
        lstm(pack_padded_sequence(nv.zeros(3, 2, 4, 1), [3, 1]))


def _as_tuple(state):
    return state if isinstance(state, tuple) else (state,)


def test_layers_on_packed_input_match_each_sequence_alone():
    """h_n holds each sequence's state at its own last step, in the batch's order; the
    reverse direction starts at each sequence's own last element."""
    rng = np.random.default_rng(1)
    cases = [  # (module, lengths, enforce_sorted, with hx)
        (nn.LSTM(2, 4, num_layers=2, bidirectional=True, proj_size=2), [2, 4, 1], False, True),
        (nn.GRU(2, 3, bidirectional=True), [4, 3, 1], True, False),
        (nn.RNN(2, 3, nonlinearity="relu", batch_first=True), [3, 1, 3], False, True),
    ]
    got, want = [], []
    for m, lengths, enforce_sorted, with_hx in cases:
        x = rng.standard_normal((max(lengths), len(lengths), 2)).astype(np.float32)
        hx = None
        if with_hx:
            rows = m.num_layers * (2 if m.bidirectional else 1)
            sizes = [m.proj_size or m.hidden_size] + ([m.hidden_size] if m.mode == "LSTM" else [])
            hx = tuple(rng.standard_normal((rows, len(lengths), s)).astype(np.float32)
                       for s in sizes)
        packed = pack_padded_sequence(nv.tensor(x), lengths, enforce_sorted=enforce_sorted)
        nv_hx = None if hx is None else tuple(nv.tensor(h) for h in hx)
        out, state = m(packed, nv_hx if m.mode == "LSTM" or nv_hx is None else nv_hx[0])
        assert isinstance(out, PackedSequence) and out.batch_sizes is packed.batch_sizes
        assert out.sorted_indices is packed.sorted_indices
        got += [*unpack_sequence(out), *_as_tuple(state)]
        finals = []
        for b, n in enumerate(lengths):
            h_b = None if hx is None else tuple(h[:, b] for h in hx)
            o, s = _np_rnn(m, x[:n, b], h_b if m.mode == "LSTM" or h_b is None else h_b[0])
            want.append(o)
            finals.append(_as_tuple(s))
        want += [np.stack(f, 1) for f in zip(*finals)]
    nv.realize(*got)
    for g, w in zip(got, want):
        assert_close(g, w, rtol=1e-5, atol=1e-6)


def test_gradient_matches_each_sequence_alone():
    """The gradient of a loss on the packed output's data and h_n with respect to the
    padded input, against the same module run on each sequence alone."""
    rng = np.random.default_rng(2)
    m = nn.RNN(2, 3, bidirectional=True)
    lengths = [1, 3]
    x = rng.standard_normal((3, 2, 2)).astype(np.float32)
    w_data = nv.tensor(rng.standard_normal((4, 6)).astype(np.float32))
    w_h = nv.tensor(rng.standard_normal((2, 2, 3)).astype(np.float32))
    xp = nv.tensor(x, requires_grad=True)
    out, h_n = m(pack_padded_sequence(xp, lengths, enforce_sorted=False))
    grad, = nv.autograd.grad((out.data * w_data).sum() + (h_n * w_h).sum(), [xp])
    xs = nv.tensor(x, requires_grad=True)
    alone = [m(xs[:n, b]) for b, n in enumerate(lengths)]          # unbatched runs
    data = pack_sequence([o for o, _ in alone], enforce_sorted=False).data
    h_alone = nv.stack([h for _, h in alone], 1)
    ref, = nv.autograd.grad((data * w_data).sum() + (h_alone * w_h).sum(), [xs])
    nv.realize(grad, ref)
    assert np.abs(grad.numpy()[1:, 0]).max() == 0                   # padding: no gradient
    assert np.abs(grad.numpy()[:, 1]).min() > 0 and np.abs(grad.numpy()[0, 0]).min() > 0
    assert_close(grad, ref.numpy(), rtol=1e-5, atol=1e-6)


def test_matches_torch_packed_lstm():
    torch = pytest.importorskip("torch")
    trnn = torch.nn.utils.rnn
    torch.manual_seed(0)
    rng = np.random.default_rng(3)
    tm, m = torch.nn.LSTM(2, 3, bidirectional=True), nn.LSTM(2, 3, bidirectional=True)
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    x = rng.standard_normal((3, 3, 2)).astype(np.float32)         # batch_first
    lengths = [1, 3, 2]
    tx, nx = torch.tensor(x, requires_grad=True), nv.tensor(x, requires_grad=True)
    t_out, (t_h, t_c) = tm(trnn.pack_padded_sequence(tx, lengths, True, False))
    n_out, (n_h, n_c) = m(pack_padded_sequence(nx, lengths, True, False))
    t_pad, t_len = trnn.pad_packed_sequence(t_out, True)
    n_pad, n_len = pad_packed_sequence(n_out, True)
    (t_pad.square().sum() + t_h.sum() + 2 * t_c.sum()).backward()
    n_grad, = nv.autograd.grad(n_pad.square().sum() + n_h.sum() + 2 * n_c.sum(), [nx])
    nv.realize(n_pad, n_h, n_c, n_grad)
    for a, b in ((n_out.data, t_out.data), (n_pad, t_pad), (n_h, t_h), (n_c, t_c)):
        assert_close(a, b.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert n_out.batch_sizes.numpy().tolist() == t_out.batch_sizes.tolist()
    assert n_len.numpy().tolist() == t_len.tolist()
    assert_close(n_grad, tx.grad.numpy(), rtol=1e-4, atol=1e-5)

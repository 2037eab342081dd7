"""RNN, LSTM, GRU and their cells against a float64 numpy recurrence written here from
the modules' own parameters (by PyTorch's names), and against PyTorch when installed."""
import math

import numpy as np
import pytest

import nova as nv
import nova.nn as nn
from nova.autograd.gradcheck import gradcheck
from tests.helpers import assert_close


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _np_step(mode, x, state, p, w_hr=None):
    """One step of PyTorch's recurrences: p = (w_ih, w_hh, b_ih, b_hh)."""
    w_ih, w_hh, b_ih, b_hh = p
    h = state[0]
    gx, gh = x @ w_ih.T + b_ih, h @ w_hh.T + b_hh
    if mode == "LSTM":
        i, f, g, o = np.split(gx + gh, 4, -1)
        c = _sigmoid(f) * state[1] + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        return (h if w_hr is None else h @ w_hr.T), c
    if mode == "GRU":
        xr, xz, xn = np.split(gx, 3, -1)
        hr, hz, hn = np.split(gh, 3, -1)
        r, z = _sigmoid(xr + hr), _sigmoid(xz + hz)
        n = np.tanh(xn + r * hn)
        return ((1 - z) * n + z * h,)
    return (np.tanh(gx + gh) if mode == "RNN_TANH" else np.maximum(gx + gh, 0),)


def _np_rnn(m, x, hx=None):
    """The module ``m``'s forward in float64 numpy, read from its parameters by name."""
    p = {k: v.numpy().astype(np.float64) for k, v in m.named_parameters()}
    batched = x.ndim == 3
    x = x.astype(np.float64) if batched else x[:, None].astype(np.float64)
    if batched and m.batch_first:
        x = x.transpose(1, 0, 2)
    dirs = 2 if m.bidirectional else 1
    out_size = m.proj_size or m.hidden_size
    sizes = [out_size] + ([m.hidden_size] if m.mode == "LSTM" else [])
    if hx is None:
        hx = [np.zeros((m.num_layers * dirs, x.shape[1], s)) for s in sizes]
    else:
        hx = [np.asarray(h, np.float64) if batched else np.asarray(h, np.float64)[:, None]
              for h in (hx if m.mode == "LSTM" else (hx,))]
    finals = [[] for _ in sizes]
    for layer in range(m.num_layers):
        outs = []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            gates = p["weight_ih" + sfx].shape[0]
            w = (p["weight_ih" + sfx], p["weight_hh" + sfx],
                 p.get("bias_ih" + sfx, np.zeros(gates)), p.get("bias_hh" + sfx, np.zeros(gates)))
            state = tuple(h[layer * dirs + d] for h in hx)
            out = [None] * len(x)
            for t in (range(len(x) - 1, -1, -1) if d else range(len(x))):
                state = _np_step(m.mode, x[t], state, w, p.get("weight_hr" + sfx))
                out[t] = state[0]
            outs.append(np.stack(out))
            for f, s in zip(finals, state):
                f.append(s)
        x = np.concatenate(outs, -1)
    finals = [np.stack(f) for f in finals]
    if batched and m.batch_first:
        x = x.transpose(1, 0, 2)
    if not batched:
        x, finals = x[:, 0], [f[:, 0] for f in finals]
    return x, (tuple(finals) if m.mode == "LSTM" else finals[0])


def _flat(result):
    """(output, h_n) or (output, (h_n, c_n)) as a flat list."""
    out, state = result
    return [out] + (list(state) if isinstance(state, tuple) else [state])


def test_sequence_layers_match_numpy_recurrence():
    rng = np.random.default_rng(0)
    cases = [
        (nn.RNN(3, 4, num_layers=2), (3, 2, 3), True),
        (nn.RNN(3, 4, nonlinearity="relu", bidirectional=True, batch_first=True), (2, 3, 3),
         False),
        (nn.LSTM(3, 5, num_layers=2, bidirectional=True, batch_first=True, proj_size=2),
         (2, 4, 3), True),
        (nn.LSTM(3, 4), (4, 3), True),                                # unbatched
        (nn.GRU(3, 4, num_layers=2, bidirectional=True, bias=False), (3, 2, 3), True),
        (nn.GRU(3, 4, batch_first=True), (4, 3), False),              # unbatched
    ]
    got, want = [], []
    for m, shape, with_hx in cases:
        x = rng.standard_normal(shape).astype(np.float32)
        hx = None
        if with_hx:
            rows = m.num_layers * (2 if m.bidirectional else 1)
            sizes = [m.proj_size or m.hidden_size]
            if m.mode == "LSTM":
                sizes.append(m.hidden_size)
            batch = () if len(shape) == 2 else (shape[0] if m.batch_first else shape[1],)
            hs = [rng.standard_normal((rows,) + batch + (s,)).astype(np.float32) for s in sizes]
            hx = tuple(hs) if m.mode == "LSTM" else hs[0]
        nv_hx = None if hx is None else (tuple(nv.tensor(h) for h in hx) if m.mode == "LSTM"
                                         else nv.tensor(hx))
        got += _flat(m(nv.tensor(x), nv_hx))
        want += _flat(_np_rnn(m, x, hx))
    nv.realize(*got)
    for g, w in zip(got, want):
        assert_close(g, w, rtol=1e-5, atol=1e-6)


def test_cells_match_numpy_step_and_saturate_without_nan():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    h, c = (rng.standard_normal((2, 4)).astype(np.float32) for _ in range(2))
    cells = [(nn.RNNCell(3, 4), "RNN_TANH"), (nn.RNNCell(3, 4, nonlinearity="relu"), "RNN_RELU"),
             (nn.LSTMCell(3, 4, bias=False), "LSTM"), (nn.GRUCell(3, 4), "GRU")]
    got, want = [], []
    for cell, mode in cells:
        p = [cell.weight_ih.numpy(), cell.weight_hh.numpy(),
             *(np.zeros(cell.weight_ih.shape[0]) if b is None else b.numpy()
               for b in (cell.bias_ih, cell.bias_hh))]
        p = [a.astype(np.float64) for a in p]
        state = (h, c) if mode == "LSTM" else (h,)
        nv_state = tuple(nv.tensor(s) for s in state)
        new = cell(nv.tensor(x), nv_state if mode == "LSTM" else nv_state[0])
        got += list(new) if mode == "LSTM" else [new]
        want += list(_np_step(mode, x, state, p))
        # no hx: zeros; a 1-D input: one unbatched step
        zero = tuple(np.zeros_like(s) for s in state)
        new = cell(nv.tensor(x[0]))
        got += list(new) if mode == "LSTM" else [new]
        want += [s[0] for s in _np_step(mode, x[:1], tuple(z[:1] for z in zero), p)]
    # saturated gates: sigmoid/tanh at +-1e30 give exact 0/1, never nan
    lstm = nn.LSTMCell(2, 3)
    big = lstm(nv.tensor([[1e30, -1e30], [-1e30, 1e30]]))
    gru = nn.GRUCell(2, 3)(nv.tensor([[1e30, -1e30]]))
    nv.realize(*got, *big, gru)
    for g, w in zip(got, want):
        assert_close(g, w, rtol=1e-5, atol=1e-6)
    for t in (*big, gru):
        assert np.isfinite(t.numpy()).all()
    assert np.abs(big[0].numpy()).max() <= 1.0


def test_parameters_names_shapes_init_and_repr():
    m = nn.LSTM(3, 6, num_layers=2, bidirectional=True, proj_size=2)
    shapes = {k: v.shape for k, v in m.state_dict().items()}
    assert list(shapes)[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                                "weight_hr_l0"]
    assert shapes["weight_ih_l0"] == (24, 3) and shapes["weight_hh_l0"] == (24, 2)
    assert shapes["weight_ih_l1_reverse"] == (24, 4) and shapes["weight_hr_l1_reverse"] == (2, 6)
    assert len(shapes) == 20 and len(m.all_weights) == 4 and len(m.all_weights[0]) == 5
    bound = 1 / math.sqrt(6)
    values = np.concatenate([p.numpy().ravel() for p in m.parameters()])
    assert np.abs(values).max() <= bound and values.std() > bound / 3
    gru = nn.GRU(4, 3, bias=False)
    assert list(gru.state_dict()) == ["weight_ih_l0", "weight_hh_l0"]
    assert gru.weight_ih_l0.shape == (9, 4)
    cell = nn.GRUCell(2, 5, bias=False)
    assert cell.weight_hh.shape == (15, 5) and cell.bias_ih is None
    assert repr(m) == "LSTM(3, 6, proj_size=2, num_layers=2, bidirectional=True)"
    assert repr(nn.RNN(2, 3, nonlinearity="relu", batch_first=True)) == \
        "RNN(2, 3, nonlinearity='relu', batch_first=True)"
    assert nn.LSTM(2, 3, dtype=nv.float64).weight_hh_l0.dtype == nv.float64
    m.flatten_parameters()


def test_dropout_between_layers_only_in_training():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 2, 2)).astype(np.float32)
    m = nn.GRU(2, 3, num_layers=2, dropout=1.0)
    # p = 1 zeroes the second layer's input: it runs the recurrence on zeros
    top = nn.GRU(3, 3)
    top.load_state_dict({k.replace("_l1", "_l0"): v for k, v in m.state_dict().items()
                         if "_l1" in k})
    train_out, _ = m(nv.tensor(x))
    zero_in, _ = top(nv.zeros(3, 2, 3))
    m.eval()
    eval_out, _ = m(nv.tensor(x))
    nv.realize(train_out, zero_in, eval_out)
    assert_close(train_out, zero_in.numpy())
    assert_close(eval_out, _np_rnn(m, x)[0], rtol=1e-5)


def test_bad_arguments_raise():
    lstm = nn.LSTM(3, 4)
    with pytest.raises(ValueError, match=r"LSTM: expected input to be 2-D .* got \(1, 2, 3, 3\)"):
        lstm(nv.zeros(1, 2, 3, 3))
    with pytest.raises(RuntimeError, match="LSTM: input.size\\(-1\\) must be equal to "
                                           "input_size. Expected 3, got input of shape"):
        lstm(nv.zeros(5, 2, 4))
    with pytest.raises(RuntimeError, match=r"expected h_0 of shape \(1, 2, 4\) for batched "
                                           r"input \(batch 2\), got \(1, 3, 4\)"):
        lstm(nv.zeros(5, 2, 3), (nv.zeros(1, 3, 4), nv.zeros(1, 2, 4)))
    with pytest.raises(RuntimeError, match=r"expected c_0 of shape \(1, 4\) for unbatched"):
        lstm(nv.zeros(5, 3), (nv.zeros(1, 4), nv.zeros(1, 2, 4)))
    with pytest.raises(TypeError, match="LSTM: hx must be a tuple"):
        lstm(nv.zeros(5, 2, 3), nv.zeros(1, 2, 4))
    with pytest.raises(RuntimeError, match="LSTM: input has dtype float64 but the weights are "
                                           "float32"):
        lstm(nv.zeros(5, 2, 3, dtype=nv.float64))
    with pytest.raises(RuntimeError, match="GRU: expected a sequence length larger than 0"):
        nn.GRU(3, 4)(nv.zeros(0, 2, 3))
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        nn.GRU(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM"):
        nn.RNNBase("GRU", 3, 4, proj_size=2)
    with pytest.raises(ValueError, match="proj_size must be >= 0 .* smaller than hidden_size=4"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="hidden_size and num_layers must be greater than zero"):
        nn.RNN(3, 0)
    with pytest.raises(TypeError, match="hidden_size should be of type int, got float"):
        nn.RNN(3, 4.0)
    with pytest.raises(ValueError, match="RNN: unknown nonlinearity 'sigmoid'"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.warns(UserWarning, match="dropout applies between layers"):
        nn.LSTM(3, 4, dropout=0.5)
    cell = nn.LSTMCell(3, 4)
    with pytest.raises(ValueError, match="LSTMCell: expected input to be 1-D .* or 2-D"):
        cell(nv.zeros(1, 2, 3))
    with pytest.raises(RuntimeError, match="LSTMCell: input has inconsistent input_size"):
        cell(nv.zeros(2, 5))
    with pytest.raises(RuntimeError, match=r"LSTMCell: hidden state 1 must have shape \(2, 4\)"):
        cell(nv.zeros(2, 3), (nv.zeros(2, 4), nv.zeros(3, 4)))
    with pytest.raises(ValueError, match="RNNCell: unknown nonlinearity"):
        nn.RNNCell(3, 4, nonlinearity="gelu")


def test_empty_batch():
    out, (h, c) = nn.LSTM(3, 4, bidirectional=True)(nv.zeros(5, 0, 3))
    assert out.shape == (5, 0, 8) and h.shape == (2, 0, 4) and c.shape == (2, 0, 4)
    assert out.numpy().shape == (5, 0, 8)


def _use_params(m, params):
    """Run ``m`` with the tensors ``params`` in place of its parameters (by order), so
    gradcheck can perturb them."""
    for name, p in zip([n for n, _ in m.named_parameters()], params):
        m._parameters[name] = p
    return m


def test_lstm_and_gru_gradients_by_finite_differences():
    rng = np.random.default_rng(3)
    lstm = nn.LSTM(2, 3, proj_size=2).double()
    params = [p.numpy() for p in lstm.parameters()]
    assert gradcheck(lambda x, h0, c0, *p: _flat(_use_params(lstm, p)(x, (h0, c0))),
                     [rng.standard_normal((3, 2, 2)), rng.standard_normal((1, 2, 2)),
                      rng.standard_normal((1, 2, 3))] + params)
    gru = nn.GRU(2, 2, bidirectional=True).double()
    params = [p.numpy() for p in gru.parameters()]
    assert gradcheck(lambda x, *p: _flat(_use_params(gru, p)(x)),
                     [rng.standard_normal((3, 2))] + params)


@pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")
def test_matches_torch_outputs_and_gradients():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    rng = np.random.default_rng(4)
    kw = dict(num_layers=2, bidirectional=True, proj_size=2, batch_first=True)
    tm, m = torch.nn.LSTM(3, 4, **kw), nn.LSTM(3, 4, **kw)
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    x = rng.standard_normal((2, 3, 3)).astype(np.float32)
    tx, nx = torch.tensor(x, requires_grad=True), nv.tensor(x, requires_grad=True)
    t_out, n_out = _flat(tm(tx)), _flat(m(nx))
    sum(o.sum() * (k + 1) for k, o in enumerate(t_out)).backward()
    sum(o.sum() * (k + 1) for k, o in enumerate(n_out)).backward()
    for a, b in zip(n_out, t_out):
        assert_close(a, b.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert_close(nx.grad, tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    for (name, p), (_, tp) in zip(m.named_parameters(), tm.named_parameters()):
        assert_close(p.grad, tp.grad.numpy(), rtol=1e-4, atol=1e-5)

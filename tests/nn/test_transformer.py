"""MultiheadAttention and the Transformer family against float64 numpy references written
here from the modules' own parameters (by PyTorch's names), and against PyTorch when
installed."""
import math

import numpy as np
import pytest
from scipy.special import erf

import nova as nv
import nova.nn as nn
from nova.autograd.gradcheck import gradcheck
from nova.nn.transformer import multi_head_attention_forward
from tests.helpers import assert_close


def _params(m):
    return {k: v.numpy().astype(np.float64) for k, v in m.state_dict().items()}


def _sub(p, prefix):
    return {k[len(prefix):]: v for k, v in p.items() if k.startswith(prefix)}


def _softmax(x):
    """A row that masks every key is NaN, as PyTorch's explicit softmax gives."""
    with np.errstate(invalid="ignore"):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)


def _np_mha(p, q, k, v, heads, attn_mask=None, kpm=None, zero_attn=False):
    """PyTorch's attention in numpy: q (L, N, E), k (S, N, kdim), v (S, N, vdim); masks
    in the module's convention (bool True: masked out, float: added). Returns the
    output (L, N, E) and the weights (N, heads, L, S + extra key slots)."""
    (L, N, E), hd = q.shape, q.shape[-1] // heads
    if "in_proj_weight" in p:
        wq, wk, wv = np.split(p["in_proj_weight"], 3)
    else:
        wq, wk, wv = p["q_proj_weight"], p["k_proj_weight"], p["v_proj_weight"]
    bq, bk, bv = np.split(p.get("in_proj_bias", np.zeros(3 * E)), 3)
    Q, K, V = q @ wq.T + bq, k @ wk.T + bk, v @ wv.T + bv
    if "bias_k" in p:
        K = np.concatenate([K, np.broadcast_to(p["bias_k"], (1, N, E))])
        V = np.concatenate([V, np.broadcast_to(p["bias_v"], (1, N, E))])
    Q, K, V = (t.reshape(len(t), N, heads, hd).transpose(1, 2, 0, 3) for t in (Q, K, V))
    if zero_attn:
        K, V = (np.concatenate([t, np.zeros((N, heads, 1, hd))], 2) for t in (K, V))
    mask = np.zeros((N, heads, L, K.shape[2]))
    if attn_mask is not None:
        am = np.where(attn_mask, -np.inf, 0.0) if attn_mask.dtype == bool else attn_mask
        mask[..., :am.shape[-1]] += am.reshape((N, heads) + am.shape[1:]) if am.ndim == 3 else am
    if kpm is not None:
        mask[..., :kpm.shape[-1]] += np.where(kpm, -np.inf, 0.0)[:, None, None, :]
    w = _softmax(Q @ K.transpose(0, 1, 3, 2) / math.sqrt(hd) + mask)
    out = (w @ V).transpose(2, 0, 1, 3).reshape(L, N, E) @ p["out_proj.weight"].T
    return out + p.get("out_proj.bias", 0.0), w


def _np_ln(x, p, name, eps=1e-5):
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * p[name + ".weight"] + p.get(name + ".bias", 0.0)


def _relu(x):
    return np.maximum(x, 0.0)


def _gelu(x):
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def _np_ff(x, p, act):
    h = act(x @ p["linear1.weight"].T + p.get("linear1.bias", 0.0))
    return h @ p["linear2.weight"].T + p.get("linear2.bias", 0.0)


def _np_encoder_layer(p, x, heads, norm_first, act, mask=None, kpm=None):
    def sa(y):
        return _np_mha(_sub(p, "self_attn."), y, y, y, heads, mask, kpm)[0]
    if norm_first:
        x = x + sa(_np_ln(x, p, "norm1"))
        return x + _np_ff(_np_ln(x, p, "norm2"), p, act)
    x = _np_ln(x + sa(x), p, "norm1")
    return _np_ln(x + _np_ff(x, p, act), p, "norm2")


def _np_decoder_layer(p, x, mem, heads, norm_first, act, tgt_mask=None, mem_kpm=None):
    def sa(y):
        return _np_mha(_sub(p, "self_attn."), y, y, y, heads, tgt_mask)[0]

    def ca(y):
        return _np_mha(_sub(p, "multihead_attn."), y, mem, mem, heads, None, mem_kpm)[0]
    if norm_first:
        x = x + sa(_np_ln(x, p, "norm1"))
        x = x + ca(_np_ln(x, p, "norm2"))
        return x + _np_ff(_np_ln(x, p, "norm3"), p, act)
    x = _np_ln(x + sa(x), p, "norm1")
    x = _np_ln(x + ca(x), p, "norm2")
    return _np_ln(x + _np_ff(x, p, act), p, "norm3")


def _t(a):
    return None if a is None else nv.tensor(a)


def test_multihead_attention_matches_numpy_reference():
    rng = np.random.default_rng(0)
    E, H, L, S, N = 8, 2, 3, 4, 2
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    kpm = np.array([[False, False, True, False], [True, False, False, False]])
    bool_mask = np.array([[False, True, False, True], [False] * 4, [True, True, False, False]])
    got, want = [], []

    # self-attention (one packed projection), bool masks, per-head weights; query 2 of
    # batch 0 sees no key (NaN row, as in PyTorch)
    m = nn.MultiheadAttention(E, H)
    x = f32(L, N, E)
    out, w = m(_t(x), _t(x), _t(x), key_padding_mask=_t(kpm[:, :3]),
               attn_mask=_t(bool_mask[:, :3]), average_attn_weights=False)
    ref = _np_mha(_params(m), x, x, x, H, bool_mask[:, :3], kpm[:, :3])
    got += [out, w]
    want += list(ref)
    # cross-attention through scaled_dot_product_attention: a float 3-D mask, no weights
    q, k, v = f32(L, N, E), f32(S, N, E), f32(S, N, E)
    float_mask = f32(N * H, L, S)
    out, w = m(_t(q), _t(k), _t(v), key_padding_mask=_t(kpm), attn_mask=_t(float_mask),
               need_weights=False)
    assert w is None
    got.append(out)
    want.append(_np_mha(_params(m), q, k, v, H, float_mask, kpm)[0])

    # kdim/vdim (separate projections), bias_k/bias_v, a zero-attention slot, batch_first
    m = nn.MultiheadAttention(E, H, kdim=5, vdim=3, add_bias_kv=True, add_zero_attn=True,
                              batch_first=True)
    q, k, v = f32(N, L, E), f32(N, S, 5), f32(N, S, 3)
    out, w = m(_t(q), _t(k), _t(v), key_padding_mask=_t(kpm), attn_mask=_t(bool_mask))
    ref_out, ref_w = _np_mha(_params(m), *(a.transpose(1, 0, 2) for a in (q, k, v)), H,
                             bool_mask, kpm, zero_attn=True)
    got += [out, w]
    want += [ref_out.transpose(1, 0, 2), ref_w.mean(1)]

    # unbatched, no biases, a (heads, L, S) mask and a 1-D key padding mask
    m = nn.MultiheadAttention(E, H, bias=False)
    q, k = f32(L, E), f32(S, E)
    float_mask = f32(H, L, S)
    out, w = m(_t(q), _t(k), _t(k), key_padding_mask=_t(kpm[0]), attn_mask=_t(float_mask))
    ref_out, ref_w = _np_mha(_params(m), q[:, None], k[:, None], k[:, None], H, float_mask,
                             kpm[:1])
    got += [out, w]
    want += [ref_out[:, 0], ref_w.mean(1)[0]]

    # the functional form with precomputed (N * heads, S, head_dim) keys and values
    p = _params(m)
    static_k, static_v = f32(N * H, S, E // H), f32(N * H, S, E // H)
    q = f32(L, N, E)
    out, w = multi_head_attention_forward(
        _t(q), _t(q), _t(q), E, H, m.in_proj_weight, None, None, None, False, 0.0,
        m.out_proj.weight, None, static_k=_t(static_k), static_v=_t(static_v))
    Q = (q @ np.split(p["in_proj_weight"], 3)[0].T).reshape(L, N, H, E // H)
    att = _softmax(np.einsum("lnhd,nhsd->nhls", Q, static_k.reshape(N, H, S, -1))
                   / math.sqrt(E // H))
    ref = np.einsum("nhls,nhsd->lnhd", att, static_v.reshape(N, H, S, -1)).reshape(L, N, E)
    got += [out, w]
    want += [ref @ p["out_proj.weight"].T, att.mean(1)]

    nv.realize(*got)
    for g, r in zip(got, want):
        assert_close(g, r, rtol=1e-5, atol=1e-6)


def test_causal_hint_and_dropout():
    rng = np.random.default_rng(1)
    m = nn.MultiheadAttention(4, 2, dropout=0.5)
    x = rng.standard_normal((3, 2, 4)).astype(np.float32)
    causal = nn.Transformer.generate_square_subsequent_mask(3)
    hinted, _ = m(_t(x), _t(x), _t(x), attn_mask=causal, is_causal=True, need_weights=False)
    m.eval()  # dropout only in training
    evaluated, _ = m(_t(x), _t(x), _t(x), attn_mask=causal)
    m.train()
    nv.manual_seed(0)
    _, dropped = m(_t(x), _t(x), _t(x), attn_mask=causal, average_attn_weights=False)
    nv.realize(causal, hinted, evaluated, dropped)
    np.testing.assert_array_equal(causal.numpy(), np.triu(np.full((3, 3), -np.inf), 1))
    ref_out, ref_w = _np_mha(_params(m), x, x, x, 2, causal.numpy())
    assert_close(evaluated, ref_out, rtol=1e-5, atol=1e-6)
    # the returned weights are the dropped-out ones, as PyTorch returns them
    d = dropped.numpy()
    kept = d != 0
    assert 0 < kept.sum() < kept.size
    assert_close(d[kept], 2 * ref_w[kept], rtol=1e-5)
    # training with dropout draws masks: the hinted (causal kernel) output differs from
    # evaluation's but stays finite
    assert np.isfinite(hinted.numpy()).all()


def test_parameters_names_shapes_and_init():
    m = nn.MultiheadAttention(6, 3)
    assert [(k, v.shape) for k, v in m.state_dict().items()] == [
        ("in_proj_weight", (18, 6)), ("in_proj_bias", (18,)), ("out_proj.weight", (6, 6)),
        ("out_proj.bias", (6,))]
    assert m.q_proj_weight is None and m.head_dim == 2 and m._qkv_same_embed_dim
    w = m.in_proj_weight.numpy()
    bound = math.sqrt(6 / (6 + 18))  # xavier-uniform of (3E, E)
    assert np.abs(w).max() <= bound and w.std() > bound / 3
    assert not m.in_proj_bias.numpy().any() and not m.out_proj.bias.numpy().any()
    m = nn.MultiheadAttention(4, 2, bias=False, add_bias_kv=True, kdim=3, vdim=5)
    assert {k: v.shape for k, v in m.state_dict().items()} == {
        "q_proj_weight": (4, 4), "k_proj_weight": (4, 3), "v_proj_weight": (4, 5),
        "bias_k": (1, 1, 4), "bias_v": (1, 1, 4), "out_proj.weight": (4, 4)}
    assert m.in_proj_weight is None and m.in_proj_bias is None and m.out_proj.bias is None
    assert nn.MultiheadAttention(4, 2, dtype=nv.float64).in_proj_weight.dtype == nv.float64
    layer = nn.TransformerDecoderLayer(4, 2, 8, bias=False)
    assert sorted(layer.state_dict()) == sorted(
        [f"{a}.{p}" for a in ("self_attn", "multihead_attn")
         for p in ("in_proj_weight", "out_proj.weight")]
        + ["linear1.weight", "linear2.weight", "norm1.weight", "norm2.weight", "norm3.weight"])
    model = nn.Transformer(8, 2, 2, 1, 16)
    keys = list(model.state_dict())
    assert "encoder.layers.1.self_attn.in_proj_weight" in keys and "encoder.norm.bias" in keys
    assert "decoder.layers.0.multihead_attn.out_proj.bias" in keys and len(keys) == 46
    # re-initialized xavier-uniform: wider than Linear's own U(-1/sqrt(8), 1/sqrt(8))
    ff = np.abs(model.encoder.layers[0].linear1.weight.numpy())
    assert 1 / math.sqrt(8) < ff.max() <= math.sqrt(6 / (8 + 16))


def test_attention_bad_arguments_raise():
    m = nn.MultiheadAttention(4, 2)
    x = nv.zeros(3, 2, 4)
    with pytest.raises(ValueError, match=r"embed_dim 6 must be divisible by num_heads 4"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(ValueError, match="embed_dim and num_heads must be greater than 0"):
        nn.MultiheadAttention(0, 1)
    with pytest.raises(ValueError, match=r"query should be unbatched 2-D .* got shape \(4,\)"):
        m(nv.zeros(4), nv.zeros(4), nv.zeros(4))
    with pytest.raises(ValueError, match=r"for batched \(3-D\) query, expected key and value to "
                                         r"be 3-D, got shapes \(3, 4\)"):
        m(x, nv.zeros(3, 4), x)
    with pytest.raises(ValueError, match=r"was expecting embedding dimension of 4, but got "
                                         r"query \(3, 2, 5\)"):
        m(nv.zeros(3, 2, 5), x, x)
    with pytest.raises(ValueError, match=r"key shape \(3, 2, 4\) does not match value shape "
                                         r"\(5, 2, 4\)"):
        m(x, x, nv.zeros(5, 2, 4))
    with pytest.raises(RuntimeError, match=r"the shape of the 2-D attn_mask is \(3, 4\), but "
                                           r"should be \(3, 3\)"):
        m(x, x, x, attn_mask=nv.zeros(3, 4))
    with pytest.raises(RuntimeError, match=r"3-D attn_mask is \(2, 3, 3\), but should be "
                                           r"\(4, 3, 3\)"):
        m(x, x, x, attn_mask=nv.zeros(2, 3, 3))
    with pytest.raises(ValueError, match=r"for unbatched query, a 3-D attn_mask must have "
                                         r"shape \(2, 3, 3\)"):
        m(nv.zeros(3, 4), nv.zeros(3, 4), nv.zeros(3, 4), attn_mask=nv.zeros(4, 3, 3))
    with pytest.raises(ValueError, match=r"expecting key_padding_mask shape of \(2, 3\), but "
                                         r"got \(2, 4\)"):
        m(x, x, x, key_padding_mask=nv.zeros(2, 4, dtype=nv.bool))
    with pytest.raises(TypeError, match="only bool and floating types of key_padding_mask"):
        m(x, x, x, key_padding_mask=nv.zeros(2, 3, dtype=nv.int64))
    with pytest.raises(RuntimeError, match="need attn_mask if specifying the is_causal hint"):
        m(x, x, x, is_causal=True)
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(4, 2, activation="tanh")
    model = nn.Transformer(4, 2, 1, 1, 8)
    with pytest.raises(RuntimeError, match=r"the batch number of src \(3, 2, 4\) and tgt "
                                           r"\(3, 1, 4\) must be equal"):
        model(nv.zeros(3, 2, 4), nv.zeros(3, 1, 4))
    with pytest.raises(RuntimeError, match="must be equal to d_model=4"):
        model(nv.zeros(3, 2, 4), nv.zeros(3, 2, 6))


def test_encoder_decoder_and_transformer_match_numpy_reference():
    rng = np.random.default_rng(2)
    E, H, N = 8, 2, 2
    src = rng.standard_normal((4, N, E)).astype(np.float32)
    tgt = rng.standard_normal((3, N, E)).astype(np.float32)
    kpm = np.array([[False, False, False, True], [False, True, False, False]])
    causal = np.triu(np.full((3, 3), -np.inf, np.float32), 1)
    got, want = [], []

    # post-norm encoder stack (relu) with a key padding mask and a final norm
    layer = nn.TransformerEncoderLayer(E, H, 16, dropout=0.0)
    enc = nn.TransformerEncoder(layer, 2, nn.LayerNorm(E))
    got.append(enc(_t(src), src_key_padding_mask=_t(kpm)))
    p, ref = _params(enc), src.astype(np.float64)
    for i in range(2):
        ref = _np_encoder_layer(_sub(p, f"layers.{i}."), ref, H, False, _relu, kpm=kpm)
    want.append(_np_ln(ref, p, "norm"))

    # pre-norm batch_first encoder layer (gelu) with a causal mask
    layer = nn.TransformerEncoderLayer(E, H, 16, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=True)
    got.append(layer(_t(tgt.transpose(1, 0, 2)), src_mask=_t(causal), is_causal=True))
    want.append(_np_encoder_layer(_params(layer), tgt, H, True, _gelu,
                                  mask=causal).transpose(1, 0, 2))

    # pre-norm decoder layer without biases, callable activation
    layer = nn.TransformerDecoderLayer(E, H, 16, dropout=0.0, activation=nn.functional.gelu,
                                       norm_first=True, bias=False)
    got.append(layer(_t(tgt), _t(src), tgt_mask=_t(causal), memory_key_padding_mask=_t(kpm)))
    want.append(_np_decoder_layer(_params(layer), tgt, src, H, True, _gelu, causal, kpm))

    # the whole model: encoder (2 layers) and decoder (1 layer), each closing with a norm
    model = nn.Transformer(E, H, 2, 1, 16, dropout=0.0)
    got.append(model(_t(src), _t(tgt), tgt_mask=_t(causal), src_key_padding_mask=_t(kpm),
                     memory_key_padding_mask=_t(kpm)))
    p, mem = _params(model), src.astype(np.float64)
    for i in range(2):
        mem = _np_encoder_layer(_sub(p, f"encoder.layers.{i}."), mem, H, False, _relu, kpm=kpm)
    mem = _np_ln(mem, p, "encoder.norm")
    out = _np_decoder_layer(_sub(p, "decoder.layers.0."), tgt, mem, H, False, _relu, causal, kpm)
    want.append(_np_ln(out, p, "decoder.norm"))
    # unbatched
    got.append(model(_t(src[:, 0]), _t(tgt[:, 0])))

    nv.realize(*got)
    for g, r in zip(got[:-1], want):
        assert_close(g, r, rtol=1e-4, atol=1e-5)
    mem = _np_ln(_np_encoder_layer(_sub(p, "encoder.layers.1."), _np_encoder_layer(
        _sub(p, "encoder.layers.0."), src[:, :1], H, False, _relu), H, False, _relu),
        p, "encoder.norm")
    out = _np_decoder_layer(_sub(p, "decoder.layers.0."), tgt[:, :1], mem, H, False, _relu)
    assert_close(got[-1], _np_ln(out, p, "decoder.norm")[:, 0], rtol=1e-4, atol=1e-5)


def test_encoder_layers_are_independent_copies():
    layer = nn.TransformerEncoderLayer(4, 2, 8)
    enc = nn.TransformerEncoder(layer, 2)
    a, b = enc.layers[0].linear1.weight, enc.layers[1].linear1.weight
    assert a is not b and a is not layer.linear1.weight and a.requires_grad
    np.testing.assert_array_equal(a.numpy(), layer.linear1.weight.numpy())
    np.testing.assert_array_equal(b.numpy(), layer.linear1.weight.numpy())
    with nv.no_grad():
        a.add_(1.0)
    assert_close(b, layer.linear1.weight.numpy())
    assert len(list(enc.parameters())) == 2 * len(list(layer.parameters()))


def _use_params(m, params):
    """Run ``m`` with the tensors ``params`` in place of its parameters (by order), so
    gradcheck can perturb them."""
    for (name, _), p in zip(list(m.named_parameters()), params):
        *path, leaf = name.split(".")
        owner = m
        for part in path:
            owner = getattr(owner, part)
        owner._parameters[leaf] = p
    return m


def test_attention_gradients_by_finite_differences():
    rng = np.random.default_rng(3)
    # separate projections, bias_k/bias_v, the explicit-softmax path with its weights
    m = nn.MultiheadAttention(4, 2, kdim=3, vdim=2, add_bias_kv=True).double()
    params = [p.numpy() for p in m.parameters()]
    mask = np.array([[0.0, -1.0, 0.5], [0.0, 0.0, -np.inf]])
    assert gradcheck(lambda q, k, v, *p: _use_params(m, p)(q, k, v, attn_mask=_t(mask)),
                     [rng.standard_normal(s) for s in ((2, 1, 4), (3, 1, 3), (3, 1, 2))]
                     + params)
    # packed self-attention through scaled_dot_product_attention, key padding
    m = nn.MultiheadAttention(4, 2).double()
    kpm = _t(np.array([[False, True, False]]))
    assert gradcheck(lambda x, w, b: _use_params(m, [w, b])(x, x, x, key_padding_mask=kpm,
                                                           need_weights=False)[0],
                     [rng.standard_normal((3, 1, 4)), m.in_proj_weight.numpy(),
                      m.in_proj_bias.numpy() + 0.1])


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
def test_matches_torch_outputs_and_gradients():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    rng = np.random.default_rng(4)

    def load(m, tm):
        assert list(m.state_dict()) == list(tm.state_dict())
        m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})

    E, H = 8, 2
    tm = torch.nn.MultiheadAttention(E, H, kdim=5, vdim=3, add_bias_kv=True, batch_first=True)
    m = nn.MultiheadAttention(E, H, kdim=5, vdim=3, add_bias_kv=True, batch_first=True)
    load(m, tm)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, E), (2, 4, 5), (2, 4, 3)))
    kpm = np.array([[False, True, False, False], [False, False, False, True]])
    t_out, t_w = tm(*(torch.tensor(a) for a in (q, k, v)), key_padding_mask=torch.tensor(kpm))
    n_out, n_w = m(_t(q), _t(k), _t(v), key_padding_mask=_t(kpm))
    assert_close(n_out, t_out.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert_close(n_w, t_w.detach().numpy(), rtol=1e-5, atol=1e-6)

    tm = torch.nn.Transformer(E, H, 1, 1, 16, dropout=0.0, norm_first=True, activation="gelu")
    m = nn.Transformer(E, H, 1, 1, 16, dropout=0.0, norm_first=True, activation="gelu")
    load(m, tm)
    src, tgt = rng.standard_normal((4, 2, E)).astype(np.float32), \
        rng.standard_normal((3, 2, E)).astype(np.float32)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(3)
    t_src, t_tgt = torch.tensor(src, requires_grad=True), torch.tensor(tgt, requires_grad=True)
    n_src, n_tgt = nv.tensor(src, requires_grad=True), nv.tensor(tgt, requires_grad=True)
    t_out = tm(t_src, t_tgt, tgt_mask=causal, src_key_padding_mask=torch.tensor(kpm),
               tgt_is_causal=True)
    n_out = m(n_src, n_tgt, tgt_mask=_t(causal.numpy()), src_key_padding_mask=_t(kpm),
              tgt_is_causal=True)
    (t_out * t_out).sum().backward()
    (n_out * n_out).sum().backward()
    assert_close(n_out, t_out.detach().numpy(), rtol=1e-5, atol=1e-5)
    assert_close(n_src.grad, t_src.grad.numpy(), rtol=1e-4, atol=1e-5)
    assert_close(n_tgt.grad, t_tgt.grad.numpy(), rtol=1e-4, atol=1e-5)
    for (name, p), (_, tp) in zip(m.named_parameters(), tm.named_parameters()):
        assert_close(p.grad, tp.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_sdpa_gives_a_query_that_sees_no_key_zero_weights_and_finite_gradients():
    """As PyTorch's safe softmax: was NaN, and the NaN reached every gradient (for an
    additive mask through q and k too)."""
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((1, 2, 3, 4)) for _ in range(3))
    hidden = np.array([[False, False, False], [True, False, True], [True, True, True]])
    for mask in (~hidden, np.where(hidden, -np.inf, 0.0)):     # (bool: True attends)
        leaves = [nv.tensor(a, requires_grad=True) for a in (q, k, v)]
        out = nn.functional.scaled_dot_product_attention(*leaves, attn_mask=nv.tensor(mask))
        (out * out).sum().backward()
        s = q @ k.transpose(0, 1, 3, 2) / 2.0
        s = np.where(hidden, -np.inf, s)
        with np.errstate(invalid="ignore"):
            p = np.exp(s - s.max(-1, keepdims=True))
            p = np.nan_to_num(p / p.sum(-1, keepdims=True))
        np.testing.assert_allclose(out.numpy(), p @ v, rtol=1e-12, atol=1e-12)
        assert (out.numpy()[:, :, 2] == 0).all()
        assert all(np.isfinite(t.grad.numpy()).all() for t in leaves)
        assert (leaves[0].grad.numpy()[:, :, 2] == 0).all()


def test_sdpa_grouped_query_attention_repeats_each_key_head_for_its_query_heads():
    """enable_gqa (PyTorch 2.5+): 4 query heads over 2 key/value heads read heads
    0, 0, 1, 1; gradients reach the shared heads summed."""
    rng = np.random.default_rng(5)
    q = rng.standard_normal((1, 4, 3, 2))
    k, v = rng.standard_normal((1, 2, 3, 2)), rng.standard_normal((1, 2, 3, 2))
    out = nn.functional.scaled_dot_product_attention(nv.tensor(q), nv.tensor(k), nv.tensor(v),
                                                     is_causal=True, enable_gqa=True)
    full = nn.functional.scaled_dot_product_attention(
        nv.tensor(q), nv.tensor(np.repeat(k, 2, 1)), nv.tensor(np.repeat(v, 2, 1)),
        is_causal=True)
    np.testing.assert_array_equal(out.numpy(), full.numpy())
    assert gradcheck(lambda a, b, c: nn.functional.scaled_dot_product_attention(
        a, b, c, enable_gqa=True), [q, k, v])
    with pytest.raises(ValueError, match="enable_gqa needs key and value with the same"):
        nn.functional.scaled_dot_product_attention(nv.tensor(q), nv.tensor(q[:, :3]),
                                                   nv.tensor(q[:, :3]), enable_gqa=True)

"""torch's top-level names for ``nn.functional``'s ops and for Tensor methods
(``nv.conv1d``, ``nv.layer_norm``, ``nv.dropout(x, p, train)``, ``nv.embedding(weight,
indices)``, ``nv.exp_(x)``...), with ATen's signatures, and the utilities
``unravel_index``, ``dsplit``, ``is_nonzero``/``is_same_size``/``is_signed``/
``is_complex``. References are numpy (the ops themselves are tested against references
in tests/nn; here the argument mapping is what is under test), so on the reference
interpreter only: these are Python-level mappings."""
import warnings

import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F
from nova.tensor import torch_aliases

R = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def engine():
    with nv.engine("interp"):
        yield "interp"


def _f32(*shape):
    return R.standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------- in-place functions

@pytest.mark.parametrize("name,ref", [
    ("exp_", np.exp), ("sigmoid_", lambda a: 1 / (1 + np.exp(-a))), ("tanh_", np.tanh),
    ("relu_", lambda a: np.maximum(a, 0)), ("neg_", np.negative), ("floor_", np.floor),
    ("square_", np.square), ("abs_", np.abs), ("trunc_", np.trunc),
])
def test_top_level_inplace_function_updates_and_returns_its_input(name, ref):
    a = _f32(2, 3)
    x = nv.tensor(a)
    out = getattr(nv, name)(x)
    assert out is x
    np.testing.assert_allclose(x.numpy(), ref(a), rtol=1e-6, atol=1e-6)


def test_inplace_function_takes_the_methods_arguments_and_writes_through_views():
    base = nv.tensor([[-2.0, 0.5, 3.0], [1.0, -1.0, 4.0]])
    row = base[1]
    nv.clamp_(row, min=0.0, max=2.0)
    nv.fill_(base[0], 7.0)
    np.testing.assert_array_equal(base.numpy(), [[7, 7, 7], [1, 0, 2]])
    z = nv.tensor([1.0, 2.0])
    assert nv.zero_(z) is z and z.tolist() == [0.0, 0.0]


def test_every_inplace_function_is_exported_and_backed_by_a_method():
    for name in torch_aliases.INPLACE_FUNCTIONS:
        fn = getattr(nv, name)
        assert fn.__name__ == name and hasattr(nv.Tensor, name), name
    with pytest.raises(TypeError, match="exp_.*must be a Tensor"):
        nv.exp_([1.0, 2.0])


# ---------------------------------------------------------------- dropout

def test_dropout_takes_p_and_train_positionally_with_no_defaults():
    x = nv.tensor(np.ones((4, 8), np.float32))
    assert nv.dropout(x, 0.5, False) is x            # not training: the input itself
    kept = nv.dropout(x, 0.5, train=True).numpy()
    assert set(np.unique(kept)) <= {0.0, 2.0}
    with pytest.raises(TypeError):
        nv.dropout(x, 0.5)
    with pytest.raises(ValueError, match="probability"):
        nv.dropout(x, 1.5, True)


def test_dropout_inplace_forms_rebind_the_input():
    for fn in (nv.dropout_, nv.alpha_dropout_, nv.feature_alpha_dropout_,
               nv.feature_dropout_):
        x = nv.tensor(np.ones((2, 3, 4), np.float32))
        assert fn(x, 1.0, True) is x
        np.testing.assert_array_equal(x.numpy(), 0.0)


def test_feature_dropout_drops_whole_channels_of_dim_1():
    out = nv.feature_dropout(nv.tensor(np.ones((3, 5, 4), np.float32)), 0.5, True).numpy()
    assert set(np.unique(out)) <= {0.0, 2.0}
    np.testing.assert_array_equal(out, np.repeat(out[:, :, :1], 4, axis=2))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        nv.feature_dropout(nv.ones(4), 0.5, True)


def test_alpha_dropout_keeps_affine_images_of_the_input():
    a = _f32(64)
    p = 0.5
    out = nv.alpha_dropout(nv.tensor(a), p, True).numpy()
    alpha = 1.7580993408473766
    scale = 1.0 / np.sqrt((alpha ** 2 * p + 1) * (1 - p))
    kept = np.isclose(out, scale * a + scale * alpha * p, atol=1e-5)
    dropped = np.isclose(out, scale * alpha * (p - 1), atol=1e-5)
    assert np.all(kept | dropped) and kept.any() and dropped.any()
    assert nv.feature_alpha_dropout(nv.tensor(a.reshape(8, 8)), p, False).shape == (8, 8)


# ---------------------------------------------------------------- activations

def _selu(a):
    return 1.0507009873554805 * np.where(a > 0, a, 1.6732632423543772 * np.expm1(a))


def test_selu_celu_threshold_values_and_inplace_forms():
    a = _f32(3, 4)
    np.testing.assert_allclose(nv.selu(nv.tensor(a)).numpy(), _selu(a), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(nv.celu(nv.tensor(a), 2.0).numpy(),
                               np.where(a > 0, a, 2.0 * np.expm1(a / 2.0)), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_array_equal(nv.threshold(nv.tensor(a), 0.1, -3.0).numpy(),
                                  np.where(a > 0.1, a, -3.0))
    for fn, ref in ((nv.selu_, _selu), (lambda t: nv.celu_(t), lambda v: np.where(
            v > 0, v, np.expm1(v))), (lambda t: nv.threshold_(t, 0.0, 9.0),
                                      lambda v: np.where(v > 0, v, 9.0))):
        x = nv.tensor(a)
        assert fn(x) is x
        np.testing.assert_allclose(x.numpy(), ref(a), rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError):
        nv.threshold(nv.tensor(a), 0.0)                 # value is required


def test_rrelu_evaluation_slope_and_generator_draws():
    a = -np.abs(_f32(5, 6)) - 0.1
    np.testing.assert_allclose(nv.rrelu(nv.tensor(a)).numpy(), a * (1 / 8 + 1 / 3) / 2,
                               rtol=1e-6)
    draws = []
    for _ in range(2):
        g = nv.Generator().manual_seed(5)
        draws.append(nv.rrelu(nv.tensor(a), 0.1, 0.3, True, g).numpy())
    np.testing.assert_array_equal(draws[0], draws[1])       # the generator's stream
    slopes = draws[0] / a
    assert np.all((slopes >= 0.1 - 1e-6) & (slopes <= 0.3 + 1e-6))
    x = nv.tensor(a)
    assert nv.rrelu_(x, 0.2, 0.2) is x
    np.testing.assert_allclose(x.numpy(), 0.2 * a, rtol=1e-6)


# ---------------------------------------------------------------- normalization

def test_layer_norm_and_group_norm_take_the_cudnn_flag():
    a = _f32(2, 4, 6)
    w, b = _f32(6), _f32(6)
    mean, var = a.mean(-1, keepdims=True), a.var(-1, keepdims=True)
    ref = (a - mean) / np.sqrt(var + 1e-3) * w + b
    got = nv.layer_norm(nv.tensor(a), [6], nv.tensor(w), nv.tensor(b), 1e-3, False)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=1e-5)
    g = a.reshape(2, 2, 12)
    ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    got = nv.group_norm(nv.tensor(a), 2, None, None, 1e-5, True)
    np.testing.assert_allclose(got.numpy(), ref.reshape(2, 4, 6), rtol=1e-4, atol=1e-5)


def test_batch_norm_takes_aten_order_and_updates_running_stats():
    a = _f32(3, 2, 5)
    w, b = np.array([2.0, 0.5], np.float32), np.array([0.1, -1.0], np.float32)
    rm, rv = np.array([0.5, -0.5], np.float32), np.array([2.0, 3.0], np.float32)
    ev = nv.batch_norm(nv.tensor(a), nv.tensor(w), nv.tensor(b), nv.tensor(rm),
                       nv.tensor(rv), False, 0.1, 1e-5, True)
    ref = (a - rm[:, None]) / np.sqrt(rv[:, None] + 1e-5) * w[:, None] + b[:, None]
    np.testing.assert_allclose(ev.numpy(), ref, rtol=1e-5, atol=1e-5)
    run_m, run_v = nv.tensor(rm), nv.tensor(rv)
    nv.batch_norm(nv.tensor(a), None, None, run_m, run_v, True, 0.25, 1e-5, False)
    np.testing.assert_allclose(run_m.numpy(), 0.75 * rm + 0.25 * a.mean((0, 2)),
                               rtol=1e-5)
    np.testing.assert_allclose(run_v.numpy(), 0.75 * rv + 0.25 * a.var((0, 2), ddof=1),
                               rtol=1e-5)
    with pytest.raises(TypeError):
        nv.batch_norm(nv.tensor(a), None, None, None, None, True)   # all are required


def test_instance_norm_takes_aten_order():
    a = _f32(2, 3, 5)
    w = np.array([1.0, 2.0, 3.0], np.float32)
    got = nv.instance_norm(nv.tensor(a), nv.tensor(w), None, None, None, True, 0.1, 1e-5,
                           False)
    ref = (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got.numpy(), ref * w[:, None], rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- embedding

def test_embedding_takes_the_weight_first_and_atens_padding_idx():
    w = _f32(5, 3)
    idx = np.array([[0, 2], [2, 4]])
    np.testing.assert_array_equal(nv.embedding(nv.tensor(w), nv.tensor(idx)).numpy(), w[idx])
    grads = {}
    for pad in (-1, -3, 2, 7):       # only 0 <= pad < 5 names a row, as in ATen
        weight = nv.tensor(w, requires_grad=True)
        nv.embedding(weight, nv.tensor(idx), pad).sum().backward()
        grads[pad] = weight.grad.numpy()[:, 0].tolist()
    assert grads[-1] == grads[-3] == grads[7] == [1.0, 0.0, 2.0, 0.0, 1.0]
    assert grads[2] == [1.0, 0.0, 0.0, 0.0, 1.0]


def test_embedding_renorm_scales_the_looked_up_rows_in_place():
    w = _f32(5, 3) * 10
    weight = nv.tensor(w)
    assert nv.embedding_renorm_(weight, nv.tensor([1, 1, 3]), 1.0, 2.0) is weight
    ref = w.copy()
    for r in (1, 3):
        norm = np.linalg.norm(w[r].astype(np.float64))
        if norm > 1.0:
            ref[r] = w[r] * (1.0 / (norm + 1e-7))
    np.testing.assert_allclose(weight.numpy(), ref, rtol=1e-6)
    with pytest.raises(ValueError, match="2-dimensional"):
        nv.embedding_renorm_(nv.ones(4), nv.tensor([1]), 1.0, 2.0)


# ---------------------------------------------------------------- pooling and conv

def _windows(a, k, s):
    n = (a.shape[-1] - k) // s + 1
    return np.stack([a[..., i * s:i * s + k] for i in range(n)], -2)


def test_pools_have_no_return_indices_and_an_empty_stride_is_the_kernel():
    a = _f32(2, 3, 8)
    for stride in ((), [], None):
        np.testing.assert_array_equal(nv.max_pool1d(nv.tensor(a), 2, stride).numpy(),
                                      _windows(a, 2, 2).max(-1))
    np.testing.assert_allclose(nv.avg_pool1d(nv.tensor(a), 3, 2).numpy(),
                               _windows(a, 3, 2).mean(-1), rtol=1e-6)
    vals, idx = nv.max_pool1d_with_indices(nv.tensor(a), 2)
    np.testing.assert_array_equal(idx.numpy(), _windows(a, 2, 2).argmax(-1) +
                                  2 * np.arange(4))
    vals, idx = nv.adaptive_max_pool1d(nv.tensor(a), 4)
    np.testing.assert_array_equal(vals.numpy(), _windows(a, 2, 2).max(-1))
    with pytest.raises(TypeError):
        nv.max_pool1d(nv.tensor(a), 2, return_indices=True)
    b = _f32(1, 2, 4, 4)
    np.testing.assert_array_equal(nv.max_pool2d(nv.tensor(b), 2).numpy(),
                                  b.reshape(1, 2, 2, 2, 2, 2).max((3, 5)))
    c = _f32(1, 1, 2, 2, 2)
    np.testing.assert_array_equal(nv.max_pool3d(nv.tensor(c), 2).numpy(),
                                  c.max((2, 3, 4), keepdims=True))


def test_functional_aliases_are_the_same_functions():
    for name in ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                 "conv_transpose3d", "bilinear", "cosine_similarity", "pairwise_distance",
                 "pdist", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
                 "adaptive_avg_pool1d"):
        assert getattr(nv, name) is getattr(F, name), name
    assert nv.native_channel_shuffle is F.channel_shuffle


def test_conv1d_values():
    x, w, b = _f32(2, 3, 7), _f32(4, 3, 3), _f32(4)
    ref = np.einsum("nckt,ock->not", _windows(np.pad(x, ((0, 0), (0, 0), (1, 1))), 3, 1)
                    .transpose(0, 1, 3, 2), w) + b[:, None]
    np.testing.assert_allclose(nv.conv1d(nv.tensor(x), nv.tensor(w), nv.tensor(b), 1, 1)
                               .numpy(), ref, rtol=1e-4, atol=1e-5)


def test_conv_tbc_is_a_time_batch_channel_convolution():
    x, w, b = _f32(6, 2, 3), _f32(3, 3, 4), _f32(4)
    xp = np.pad(x, ((1, 1), (0, 0), (0, 0)))
    ref = np.stack([np.einsum("knc,kco->no", xp[t:t + 3], w) for t in range(6)]) + b
    got = nv.conv_tbc(nv.tensor(x), nv.tensor(w), nv.tensor(b), 1)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="conv_tbc"):
        nv.conv_tbc(nv.tensor(x), nv.tensor(w[:, :2]), nv.tensor(b))


# ---------------------------------------------------------------- losses

def test_kl_div_takes_atens_int_reduction_defaulting_to_none():
    x, t = _f32(3, 4), np.abs(_f32(3, 4)) + 0.1
    pointwise = t * (np.log(t) - x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # no 'batchmean' warning, as ATen's
        for args, ref in (((), pointwise), ((0,), pointwise), ((1,), pointwise.mean()),
                          ((2,), pointwise.sum())):
            np.testing.assert_allclose(nv.kl_div(nv.tensor(x), nv.tensor(t), *args).numpy(),
                                       ref, rtol=1e-5)
    lt = nv.kl_div(nv.tensor(x), nv.tensor(np.log(t)), 2, log_target=True)
    np.testing.assert_allclose(lt.item(), pointwise.sum(), rtol=1e-5)
    with pytest.raises(TypeError, match="int"):
        nv.kl_div(nv.tensor(x), nv.tensor(t), reduction="sum")
    with pytest.raises(ValueError, match="reduction"):
        nv.kl_div(nv.tensor(x), nv.tensor(t), 3)


def test_bce_with_logits_puts_pos_weight_before_reduction():
    x = _f32(3, 4)
    y = (R.random((3, 4)) > 0.5).astype(np.float32)
    pw = np.array([1.0, 2.0, 3.0, 0.5], np.float32)
    sig = 1 / (1 + np.exp(-x.astype(np.float64)))
    ref = -(pw * y * np.log(sig) + (1 - y) * np.log(1 - sig))
    got = nv.binary_cross_entropy_with_logits(nv.tensor(x), nv.tensor(y), None,
                                              nv.tensor(pw), 2)
    np.testing.assert_allclose(got.item(), ref.sum(), rtol=1e-5)
    assert nv.binary_cross_entropy_with_logits(nv.tensor(x), nv.tensor(y)).shape == (3, 4)


def test_the_other_losses_map_the_int_reduction():
    x1, x2 = _f32(4, 5), _f32(4, 5)
    sign = np.where(R.random((4, 5)) > 0.5, 1.0, -1.0).astype(np.float32)
    hinge = np.where(sign == 1, x1, np.maximum(0, 1.0 - x1))
    np.testing.assert_allclose(nv.hinge_embedding_loss(nv.tensor(x1), nv.tensor(sign))
                               .numpy(), hinge, rtol=1e-6)
    rank = np.maximum(0, -sign * (x1 - x2) + 0.2)
    np.testing.assert_allclose(nv.margin_ranking_loss(nv.tensor(x1), nv.tensor(x2),
                                                      nv.tensor(sign), 0.2, 1).item(),
                               rank.mean(), rtol=1e-5)
    cos = (x1 * x2).sum(1) / np.sqrt((x1 ** 2).sum(1) * (x2 ** 2).sum(1))
    tgt = sign[:, 0]
    emb = np.where(tgt == 1, 1 - cos, np.maximum(0, cos))
    np.testing.assert_allclose(nv.cosine_embedding_loss(nv.tensor(x1), nv.tensor(x2),
                                                        nv.tensor(tgt), 0.0, 2).item(),
                               emb.sum(), rtol=1e-4)
    neg = _f32(4, 5)
    d = lambda a, b: np.sqrt(((a - b + 1e-6) ** 2).sum(1))      # noqa: E731
    trip = np.maximum(d(x1, x2) - d(x1, neg) + 1.0, 0)
    np.testing.assert_allclose(nv.triplet_margin_loss(nv.tensor(x1), nv.tensor(x2),
                                                      nv.tensor(neg)).numpy(), trip,
                               rtol=1e-4)
    rate = np.abs(x2) + 0.5
    pnll = np.exp(x1) - rate * x1
    np.testing.assert_allclose(nv.poisson_nll_loss(nv.tensor(x1), nv.tensor(rate), True,
                                                   False, 1e-8, 1).item(), pnll.mean(),
                               rtol=1e-5)


def test_ctc_loss_maps_the_int_reduction():
    lp = np.log(np.abs(_f32(6, 2, 4)) + 0.1)
    args = (nv.tensor(lp), nv.tensor([[1, 2], [1, 1]]), [6, 5], [2, 2])
    per = F.ctc_loss(*args, reduction="none").numpy()
    np.testing.assert_allclose(nv.ctc_loss(*args).numpy(), per, rtol=1e-6)
    np.testing.assert_allclose(nv.ctc_loss(*args, 0, 2).item(), per.sum(), rtol=1e-6)


# ---------------------------------------------------------------- utilities

def test_unravel_index_matches_numpy_in_range_and_wraps_outside():
    flat = np.array([[5, 0], [3, 4]])
    got = nv.unravel_index(nv.tensor(flat), (2, 3))
    for g, r in zip(got, np.unravel_index(flat, (2, 3))):
        assert g.dtype == nv.int64 and g.shape == (2, 2)
        np.testing.assert_array_equal(g.numpy(), r)
    # outside [0, 6): (i // stride) % size per dim, as torch's, so -1 is the last element
    wrapped = nv.unravel_index(nv.tensor([-1, 6, -7]), [2, 3])
    assert [t.tolist() for t in wrapped] == [[1, 0, 1], [2, 0, 2]]
    zero_d = nv.unravel_index(nv.tensor(4, dtype=nv.int32), nv.Size([3, 2]))
    assert [t.item() for t in zero_d] == [2, 0] and zero_d[0].dtype == nv.int64
    assert nv.unravel_index(nv.tensor([5], dtype=nv.uint8), 4)[0].tolist() == [1]
    assert nv.unravel_index(nv.tensor([0]), ()) == ()


def test_unravel_index_refuses_what_torch_refuses():
    with pytest.raises(TypeError, match="integer dtype"):
        nv.unravel_index(nv.tensor([1.0]), (2, 3))
    with pytest.raises(TypeError, match="integer dtype"):
        nv.unravel_index(nv.tensor([True]), (2, 3))
    with pytest.raises(TypeError, match="only contain ints"):
        nv.unravel_index(nv.tensor([1]), (2.0, 3))
    with pytest.raises(ValueError, match="negative"):
        nv.unravel_index(nv.tensor([1]), (3, -2))
    with pytest.raises(ValueError, match="no elements"):
        nv.unravel_index(nv.tensor([0]), (3, 0))
    with pytest.raises(TypeError, match="Tensor"):
        nv.unravel_index(4, (3, 2))


def test_dsplit_function_and_method():
    a = np.arange(24.0).reshape(2, 2, 6)
    x = nv.tensor(a)
    for got, ref in ((nv.dsplit(x, 3), np.dsplit(a, 3)), (x.dsplit([1, 4]),
                                                          np.dsplit(a, [1, 4])),
                     (nv.dsplit(x, (-1,)), np.dsplit(a, [5]))):
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            np.testing.assert_array_equal(g.numpy(), r)
    with pytest.raises(ValueError, match="not divisible"):
        nv.dsplit(x, 4)
    with pytest.raises(ValueError, match="not divisible"):
        nv.dsplit(x, 0)
    with pytest.raises(ValueError, match="at least 3 dimensions"):
        nv.dsplit(nv.ones(2, 6), 2)
    with pytest.raises(TypeError):
        nv.dsplit(x, 2.0)


def test_query_functions():
    assert nv.is_nonzero(nv.tensor([3])) and not nv.is_nonzero(nv.tensor(0.0))
    with pytest.raises(RuntimeError, match="ambiguous"):
        nv.is_nonzero(nv.tensor([1, 2]))
    assert nv.is_same_size(nv.ones(2, 3), nv.zeros(2, 3))
    assert not nv.is_same_size(nv.ones(2, 3), nv.ones(3, 2))
    signed = {d: nv.is_signed(nv.zeros(2, dtype=d)) for d in
              (nv.float32, nv.int8, nv.int64, nv.uint8, nv.bool)}
    assert signed == {nv.float32: True, nv.int8: True, nv.int64: True, nv.uint8: False,
                      nv.bool: False}
    assert nv.zeros(1, dtype=nv.uint8).is_signed() is False
    assert nv.zeros(1, dtype=nv.int16).is_signed() is True
    assert nv.is_complex(nv.ones(2)) is False and nv.ones(2).is_complex() is False
    with pytest.raises(TypeError, match="Tensor"):
        nv.is_complex(1.0)

"""nv.nn.utils: gradient clipping and norms, parameter vectors, pad_sequence,
parametrizations (weight_norm, spectral_norm), the hook-based weight_norm, BatchNorm
fusion and skip_init. References are numpy formulas written here."""
import copy

import numpy as np
import pytest

import nova as nv
import nova.nn as nn
from nova.autograd import gradcheck
from nova.func import functional_call
from nova.nn import utils
from nova.nn.utils import parametrizations, parametrize

RNG = np.random.default_rng(0)


def _param_with_grad(grad, dtype=nv.float32):
    p = nn.Parameter(nv.zeros(*np.shape(grad), dtype=dtype))
    p.grad = nv.tensor(grad, dtype=dtype)
    return p


# ---------------------------------------------------------------- clipping and norms

def test_get_total_norm_is_the_norm_of_the_per_tensor_norms():
    g = [np.array([3.0, -4.0, 0.0]), np.array([[0.5, -12.0]]), np.zeros(2)]
    tensors = [nv.tensor(x) for x in g]
    orders = [2.0, 1.0, 3.0, float("inf"), float("-inf"), 0.0]
    totals = [utils.get_total_norm(tensors, p) for p in orders]
    nv.realize(*totals)
    for p, total in zip(orders, totals):
        per_tensor = np.array([np.linalg.norm(x.ravel(), p) for x in g])
        assert total.item() == pytest.approx(np.linalg.norm(per_tensor, p), rel=1e-6), p
    # order 0 counts the tensors whose norm is nonzero, as PyTorch's composition gives
    assert totals[-1].item() == 2.0
    assert utils.get_total_norm([]).item() == 0.0
    assert utils.get_total_norm(nv.tensor([6.0, 8.0])).item() == pytest.approx(10.0)


def test_get_total_norm_dtypes_and_errors():
    half = nv.tensor([300.0, 400.0], dtype=nv.float16)     # squares overflow float16
    mixed = utils.get_total_norm([half, nv.tensor([1200.0])])
    wide = utils.get_total_norm([nv.tensor([1e-200, 1e-200], dtype=nv.float64)])
    only_half = utils.get_total_norm([half])
    nv.realize(mixed, wide, only_half)
    assert mixed.dtype == nv.float32 and mixed.item() == pytest.approx(1300.0, rel=1e-6)
    assert wide.dtype == nv.float64 and wide.item() == pytest.approx(np.sqrt(2) * 1e-200)
    assert only_half.dtype == nv.float16 and only_half.item() == 500.0
    assert utils.get_total_norm([nv.tensor([-3.0, 2.0])], "inf").item() == 3.0
    with pytest.raises(ValueError, match="norm_type must be a number or 'inf', got 'fro'"):
        utils.get_total_norm([half], "fro")
    with pytest.raises(TypeError, match="norm_type must be a number"):
        utils.get_total_norm([half], None)
    with pytest.raises(TypeError, match="expected Tensors, got list"):
        utils.get_total_norm([[1.0]])
    with pytest.raises(RuntimeError, match="non-finite"):
        utils.get_total_norm([nv.tensor([1.0, float("inf")])], error_if_nonfinite=True)


def test_clip_grad_norm_scales_in_place_in_the_graph():
    a, b = _param_with_grad([3.0, 0.0]), _param_with_grad([[4.0]])
    c = nn.Parameter(nv.zeros(2))                     # no gradient: skipped
    grad_a = a.grad
    total = utils.clip_grad_norm_([a, b, c], max_norm=1.0, foreach=True)
    assert not total.node.realized and not a.grad.node.realized   # recorded, no sync
    assert a.grad is grad_a and c.grad is None                    # in place, as torch
    nv.realize(total, a.grad, b.grad)
    coef = 1.0 / (5.0 + 1e-6)
    np.testing.assert_allclose(a.grad.numpy(), [3 * coef, 0.0], rtol=1e-6)
    np.testing.assert_allclose(b.grad.numpy(), [[4 * coef]], rtol=1e-6)
    assert total.item() == pytest.approx(5.0)
    # below the limit: unchanged (the coefficient is clamped to 1); inf norm; float64
    d = _param_with_grad([-0.3, 0.4], nv.float64)
    e = _param_with_grad([-7.0, 2.0])
    t_d = utils.clip_grad_norm_(d, 1.0)
    t_e = utils.clip_grad_norm_(iter([e]), 2.0, norm_type=float("inf"))
    nv.realize(t_d, t_e, d.grad, e.grad)
    assert d.grad.dtype == nv.float64 and t_d.dtype == nv.float64
    np.testing.assert_array_equal(d.grad.numpy(), [-0.3, 0.4])
    assert t_e.item() == 7.0
    np.testing.assert_allclose(e.grad.numpy(), np.array([-7.0, 2.0]) * 2 / (7 + 1e-6),
                               rtol=1e-6)


def test_clip_grads_with_norm_and_nonfinite_norms():
    a = _param_with_grad([1.0, 2.0])
    utils.clip_grads_with_norm_([a], 1.0, nv.tensor(4.0))
    np.testing.assert_allclose(a.grad.numpy(), np.array([1.0, 2.0]) / (4 + 1e-6), rtol=1e-6)
    with pytest.raises(TypeError, match="total_norm must be a Tensor"):
        utils.clip_grads_with_norm_([a], 1.0, 4.0)
    b = _param_with_grad([float("nan"), 1.0])
    with pytest.raises(RuntimeError, match="order 2.0 .* non-finite"):
        utils.clip_grad_norm_([b], 1.0, error_if_nonfinite=True)
    utils.clip_grad_norm_([b], 1.0)                   # scales by the NaN norm, as torch
    assert np.isnan(b.grad.numpy()).all()
    with pytest.warns(UserWarning, match="empty generator"):
        utils.clip_grad_norm_((p for p in []), 1.0)
    with pytest.warns(FutureWarning, match="deprecated"):
        utils.clip_grad_norm([a], 1.0)


def test_clip_grad_value():
    a = _param_with_grad([-3.0, -0.5, 0.0, 2.5, float("nan"), float("inf")])
    b = nn.Parameter(nv.zeros(1))
    utils.clip_grad_value_([a, b], 1.5)
    np.testing.assert_array_equal(a.grad.numpy(), [-1.5, -0.5, 0.0, 1.5, np.nan, 1.5])
    assert b.grad is None


# ---------------------------------------------------------------- parameter vectors

def test_parameters_to_vector_and_back():
    lin = nn.Linear(3, 2)
    vec = utils.parameters_to_vector(lin.parameters())
    expected = np.concatenate([lin.weight.numpy().ravel(), lin.bias.numpy()])
    (g_w, g_b) = nv.autograd.grad((vec * nv.arange(8.0)).sum(), [lin.weight, lin.bias])
    nv.realize(vec, g_w, g_b)
    np.testing.assert_array_equal(vec.numpy(), expected)
    np.testing.assert_array_equal(g_w.numpy(), np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(g_b.numpy(), [6.0, 7.0])
    weight = lin.weight
    utils.vector_to_parameters(nv.arange(10.0), lin.parameters())   # extra elements ignored
    assert lin.weight is weight and lin.weight.requires_grad
    np.testing.assert_array_equal(lin.weight.numpy(), np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(lin.bias.numpy(), [6.0, 7.0])
    with pytest.raises(TypeError, match="expected a Tensor, but got: list"):
        utils.vector_to_parameters([1.0], lin.parameters())
    with pytest.raises(RuntimeError, match="must be 1-D"):
        utils.vector_to_parameters(nv.zeros(2, 4), lin.parameters())
    with pytest.raises(RuntimeError, match="7 elements is too short: .* need 8"):
        utils.vector_to_parameters(nv.zeros(7), lin.parameters())
    with pytest.raises(ValueError, match="at least one parameter"):
        utils.parameters_to_vector([])


# ---------------------------------------------------------------- pad_sequence

def test_pad_sequence_layouts_values_and_gradient():
    seqs = [RNG.standard_normal((3, 2)), RNG.standard_normal((1, 2)), np.zeros((0, 2))]
    ts = [nv.tensor(s, requires_grad=True) for s in seqs]

    def reference(batch_first, value, side):
        out = np.full((3, 3, 2), value)
        for i, s in enumerate(seqs):
            if side == "right":
                out[i, :len(s)] = s
            else:
                out[i, 3 - len(s):] = s
        return out if batch_first else out.transpose(1, 0, 2)

    cases = [(False, 0.0, "right"), (True, -1.5, "right"), (True, 7.0, "left")]
    outs = [utils.rnn.pad_sequence(ts, batch_first=bf, padding_value=v, padding_side=s)
            for bf, v, s in cases]
    weights = nv.tensor(RNG.standard_normal((3, 3, 2)).astype(np.float32))
    grads = nv.autograd.grad((outs[2] * weights).sum(), ts[:2])
    ints = utils.rnn.pad_sequence([nv.tensor([1, 2]), nv.tensor([3.9])], True, 0.5)
    nv.realize(*outs, *grads, ints)
    for (bf, v, s), out in zip(cases, outs):
        np.testing.assert_allclose(out.numpy(), reference(bf, v, s), rtol=1e-6)
    w = weights.numpy()
    np.testing.assert_allclose(grads[0].numpy(), w[0], rtol=1e-6)        # left padding
    np.testing.assert_allclose(grads[1].numpy(), w[1, 2:], rtol=1e-6)
    # the first sequence's dtype: 3.9 truncates, 0.5 pads as 0
    assert ints.dtype == nv.int64 and ints.tolist() == [[1, 2], [3, 0]]
    # a tensor is a sequence of its rows
    assert utils.rnn.pad_sequence(nv.ones(2, 3)).shape == (3, 2)


def test_pad_sequence_errors():
    with pytest.raises(RuntimeError, match="empty list"):
        utils.rnn.pad_sequence([])
    with pytest.raises(ValueError, match="padding_side .* left or right, but got 'middle'"):
        utils.rnn.pad_sequence([nv.ones(1)], padding_side="middle")
    with pytest.raises(RuntimeError, match=r"sequence 1 has shape \(2, 4\)"):
        utils.rnn.pad_sequence([nv.ones(2, 3), nv.ones(2, 4)])
    with pytest.raises(ValueError, match="sequence 0 is 0-d"):
        utils.rnn.pad_sequence([nv.tensor(1.0)])


# ---------------------------------------------------------------- parametrize

class Symmetric(nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).T

    def right_inverse(self, a):
        return a.triu()


class Double(nn.Module):
    def forward(self, x):
        return x * 2


def test_register_parametrization_values_assignment_and_removal():
    lin = nn.Linear(3, 3)
    w0 = lin.weight.numpy()
    original = lin.weight
    parametrize.register_parametrization(lin, "weight", Symmetric())
    assert type(lin).__name__ == "ParametrizedLinear"
    assert parametrize.type_before_parametrizations(lin) is nn.Linear
    assert isinstance(lin, nn.Linear)
    assert parametrize.is_parametrized(lin) and parametrize.is_parametrized(lin, "weight")
    assert not parametrize.is_parametrized(lin, "bias")
    assert lin.parametrizations.weight.original is original       # identity kept
    assert list(lin.state_dict()) == ["bias", "parametrizations.weight.original"]
    sym = np.triu(w0) + np.triu(w0, 1).T
    (g,) = nv.autograd.grad((lin.weight * nv.arange(9.0).reshape(3, 3)).sum(), [original])
    nv.realize(lin.weight, original, g)
    np.testing.assert_array_equal(lin.weight.numpy(), sym)
    np.testing.assert_array_equal(original.numpy(), np.triu(w0))
    k = np.arange(9.0).reshape(3, 3)
    np.testing.assert_array_equal(g.numpy(), np.triu(k + k.T, 1) + np.diag(np.diag(k)))
    # assignment goes through right_inverse; a Parameter is refused, as in PyTorch
    a = RNG.standard_normal((3, 3)).astype(np.float32)
    lin.weight = nv.tensor(a + a.T)
    np.testing.assert_allclose(lin.weight.numpy(), a + a.T, rtol=1e-6)
    with pytest.raises(KeyError, match="attribute 'weight' already exists"):
        lin.weight = nn.Parameter(nv.zeros(3, 3))
    # chaining, then a parametrization without right_inverse refuses assignment
    parametrize.register_parametrization(lin, "weight", Double())
    np.testing.assert_allclose(lin.weight.numpy(), 2 * (a + a.T), rtol=1e-6)
    with pytest.raises(RuntimeError, match="Double does not implement right_inverse"):
        lin.weight = nv.zeros(3, 3)
    parametrize.remove_parametrizations(lin, "weight")            # leave_parametrized
    assert type(lin) is nn.Linear and not parametrize.is_parametrized(lin)
    assert lin.weight is original and isinstance(lin.weight, nn.Parameter)
    assert list(lin.state_dict()) == ["bias", "weight"]
    np.testing.assert_allclose(lin.weight.numpy(), 2 * (a + a.T), rtol=1e-6)
    bias = lin.bias.numpy()
    parametrize.register_parametrization(lin, "bias", Double())
    parametrize.remove_parametrizations(lin, "bias", leave_parametrized=False)
    np.testing.assert_array_equal(lin.bias.numpy(), bias)
    assert type(lin) is nn.Linear


def test_parametrize_errors_and_cache():
    lin = nn.Linear(2, 3)
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a "
                                         "parametrized element with name 'nope'"):
        parametrize.register_parametrization(lin, "nope", Double())

    class Transpose(nn.Module):
        def forward(self, x):
            return x.T

    with pytest.raises(ValueError, match=r"may not change the shape.*\n.*\(3, 2\)"):
        parametrize.register_parametrization(lin, "weight", Transpose())
    assert not parametrize.is_parametrized(lin)
    parametrize.register_parametrization(lin, "weight", Transpose(), unsafe=True)
    assert lin.weight.shape == (2, 3)
    with pytest.raises(ValueError, match="does not have a parametrization on bias"):
        parametrize.remove_parametrizations(lin, "bias")
    lin2 = nn.Linear(2, 2)
    parametrize.register_parametrization(lin2, "weight", Double())
    assert lin2.weight is not lin2.weight
    with parametrize.cached():
        first = lin2.weight
        with parametrize.cached():
            assert lin2.weight is first
        assert lin2.weight is first
    assert lin2.weight is not first
    # a deep copy gets a class of its own: removing from it leaves the original alone
    twin = copy.deepcopy(lin2)
    assert type(twin).__name__ == "ParametrizedLinear" and type(twin) is not type(lin2)
    assert twin.parametrizations.weight.original is not lin2.parametrizations.weight.original
    parametrize.remove_parametrizations(twin, "weight")
    assert type(twin) is nn.Linear and lin2.weight.shape == (2, 2)


# ---------------------------------------------------------------- weight_norm

def test_weight_norm_parametrization_names_values_and_gradient():
    lin = nn.Linear(3, 2).double()
    w = lin.weight.numpy()
    parametrizations.weight_norm(lin)
    assert list(lin.state_dict()) == ["bias", "parametrizations.weight.original0",
                                      "parametrizations.weight.original1"]
    assert [n for n, _ in lin.named_parameters()] == list(lin.state_dict())
    g, v = lin.parametrizations.weight.original0, lin.parametrizations.weight.original1
    conv = nn.Conv2d(2, 3, 2)
    parametrizations.weight_norm(conv, dim=1)
    whole = nn.Linear(2, 2)
    parametrizations.weight_norm(whole, dim=None)
    nv.realize(g, v, lin.weight, conv.parametrizations.weight.original0)
    np.testing.assert_allclose(g.numpy(), np.linalg.norm(w, axis=1, keepdims=True), rtol=1e-14)
    np.testing.assert_array_equal(v.numpy(), w)
    np.testing.assert_allclose(lin.weight.numpy(), w, rtol=1e-14)
    cw = conv.parametrizations.weight.original1.numpy()
    np.testing.assert_allclose(conv.parametrizations.weight.original0.numpy(),
                               np.sqrt((cw ** 2).sum(axis=(0, 2, 3), keepdims=True)),
                               rtol=1e-6)
    assert conv.parametrizations.weight.original0.shape == (1, 2, 1, 1)
    assert whole.parametrizations.weight.original0.shape == ()
    rows = parametrizations.weight_norm(nn.Linear(2, 4), dim=-2)   # only -1 means "all"
    assert rows.parametrizations.weight.original0.shape == (4, 1)
    # d/dg and d/dv of the module's output, by finite differences
    x = nv.tensor(RNG.standard_normal((4, 3)))
    keys = ("parametrizations.weight.original0", "parametrizations.weight.original1")
    assert gradcheck(lambda g_, v_: functional_call(lin, dict(zip(keys, (g_, v_))), x),
                     [g.numpy() * 1.5, v.numpy()])
    parametrize.remove_parametrizations(lin, "weight")
    np.testing.assert_allclose(lin.weight.numpy(), w, rtol=1e-14)
    assert list(lin.state_dict()) == ["bias", "weight"]


def test_weight_norm_hook_api():
    lin = nn.Linear(3, 2)
    w = lin.weight.numpy()
    with pytest.warns(FutureWarning, match="parametrizations.weight_norm"):
        utils.weight_norm(lin)
    assert list(lin.state_dict()) == ["bias", "weight_g", "weight_v"]
    assert lin.weight_g.shape == (2, 1) and lin.weight_v.shape == (2, 3)
    with pytest.warns(FutureWarning), pytest.raises(RuntimeError, match="two weight_norm hooks"):
        utils.weight_norm(lin)
    with nv.no_grad():
        lin.weight_g.mul_(nv.tensor([[2.0], [3.0]]))
    x = nv.tensor(RNG.standard_normal((1, 3)).astype(np.float32))
    out = lin(x)                                  # the pre-hook recomputes the weight
    np.testing.assert_allclose(out.numpy(), x.numpy() @ (w * [[2.0], [3.0]]).T
                               + lin.bias.numpy(), rtol=1e-5)
    utils.remove_weight_norm(lin)
    assert list(lin.state_dict()) == ["bias", "weight"]
    assert isinstance(lin.weight, nn.Parameter)
    np.testing.assert_allclose(lin.weight.numpy(), w * [[2.0], [3.0]], rtol=1e-6)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found in Linear"):
        utils.remove_weight_norm(lin)
    whole = nn.Linear(2, 2)
    with pytest.warns(FutureWarning):
        utils.weight_norm(whole, dim=None)
    assert whole.weight_g.shape == ()


# ---------------------------------------------------------------- spectral_norm

def _normalized(x):
    return x / max(np.linalg.norm(x), 1e-12)


def test_spectral_norm_power_iteration_in_the_training_step():
    lin = nn.Linear(4, 3)
    parametrizations.spectral_norm(lin)
    assert list(lin.state_dict()) == ["bias", "parametrizations.weight.original",
                                      "parametrizations.weight.0._u",
                                      "parametrizations.weight.0._v"]
    sn = lin.parametrizations.weight[0]
    w, u, v = (t.numpy().astype(np.float64) for t in
               (lin.parametrizations.weight.original, sn._u, sn._v))
    # one training step: the forward runs one power iteration and updates the buffers
    opt = nv.optim.SGD(lin.parameters(), lr=0.1)
    x = nv.tensor(RNG.standard_normal((2, 4)).astype(np.float32))
    lin(x).sum().backward()
    assert not sn._u.node.realized                # recorded into the step
    opt.step()
    u1 = _normalized(w @ v)
    v1 = _normalized(w.T @ u1)
    np.testing.assert_allclose(sn._u.numpy(), u1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sn._v.numpy(), v1, rtol=1e-5, atol=1e-6)
    # eval: the buffers are read, not updated; sigma = u . W v
    lin.eval()
    w2 = lin.parametrizations.weight.original.numpy().astype(np.float64)
    weight = lin.weight
    nv.realize(weight, sn._u)
    np.testing.assert_allclose(weight.numpy(), w2 / (u1 @ w2 @ v1), rtol=1e-5)
    np.testing.assert_allclose(sn._u.numpy(), u1, rtol=1e-5, atol=1e-6)
    # the estimate converges to the largest singular value
    lin.train()
    for _ in range(30):
        lin.weight
    assert np.linalg.svd(lin.weight.numpy(), compute_uv=False)[0] == pytest.approx(1, 1e-4)


def test_spectral_norm_vectors_defaults_and_errors():
    vec = nn.Module()
    vec.weight = nn.Parameter(nv.tensor([3.0, 4.0]))
    parametrizations.spectral_norm(vec)
    np.testing.assert_allclose(vec.weight.numpy(), [0.6, 0.8], rtol=1e-6)
    assert list(vec.state_dict()) == ["parametrizations.weight.original"]
    deconv = nn.ConvTranspose2d(2, 3, 2)          # weight (2, 3, 2, 2): dim 1 by default
    parametrizations.spectral_norm(deconv)
    sn = deconv.parametrizations.weight[0]
    assert sn.dim == 1 and sn._u.shape == (3,) and sn._v.shape == (8,)
    with pytest.raises(ValueError, match="n_power_iterations to be positive"):
        parametrizations.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)
    with pytest.raises(IndexError, match=r"range of \[-2, 1\] but got 2"):
        parametrizations.spectral_norm(nn.Linear(2, 2), dim=2)
    with pytest.raises(ValueError, match="no parameter or buffer with name 'w'"):
        parametrizations.spectral_norm(nn.Linear(2, 2), "w")


# ---------------------------------------------------------------- fusion, skip_init

def test_fuse_conv_and_linear_with_batchnorm():
    conv, bn = nn.Conv2d(2, 3, 2), nn.BatchNorm2d(3)
    with pytest.raises(AssertionError, match="fusion only for eval"):
        utils.fuse_conv_bn_eval(conv, bn)
    conv.eval(), bn.eval()
    rm, rv = np.array([0.1, -0.2, 0.3]), np.array([0.5, 2.0, 1.5])
    bn_w, bn_b = np.array([1.5, -0.5, 2.0]), np.array([0.2, 0.0, -1.0])
    for t, value in ((bn.running_mean, rm), (bn.running_var, rv), (bn.weight, bn_w),
                     (bn.bias, bn_b)):
        with nv.no_grad():
            t.copy_(nv.tensor(value.astype(np.float32)))
    fused = utils.fuse_conv_bn_eval(conv, bn)
    x = nv.tensor(RNG.standard_normal((1, 2, 3, 3)).astype(np.float32))
    want, got = bn(conv(x)), fused(x)
    nv.realize(want, got, fused.weight, fused.bias)
    scale = bn_w / np.sqrt(rv + bn.eps)
    w = conv.weight.numpy().astype(np.float64)
    np.testing.assert_allclose(fused.weight.numpy(), w * scale[:, None, None, None], rtol=1e-6)
    np.testing.assert_allclose(fused.bias.numpy(),
                               (conv.bias.numpy() - rm) * scale + bn_b, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    assert fused is not conv and fused.weight.requires_grad
    # no conv bias, no affine, transposed layout: the scale runs along dim 1
    w_t, b_t = utils.fuse_conv_bn_weights(nv.ones(2, 3, 1), None, nv.tensor(rm),
                                          nv.tensor(rv), 1e-5, None, None, transpose=True)
    np.testing.assert_allclose(w_t.numpy(), np.broadcast_to(
        (1 / np.sqrt(rv + 1e-5))[None, :, None], (2, 3, 1)), rtol=1e-6)
    np.testing.assert_allclose(b_t.numpy(), -rm / np.sqrt(rv + 1e-5), rtol=1e-6)
    assert w_t.requires_grad is False and not b_t.requires_grad
    lin, bn1 = nn.Linear(2, 3).eval(), nn.BatchNorm1d(3).eval()
    for t, value in ((bn1.running_mean, rm), (bn1.running_var, rv)):
        with nv.no_grad():
            t.copy_(nv.tensor(value.astype(np.float32)))
    fl = utils.fuse_linear_bn_eval(lin, bn1)
    scale1 = 1 / np.sqrt(rv + bn1.eps)
    np.testing.assert_allclose(fl.weight.numpy(), lin.weight.numpy() * scale1[:, None],
                               rtol=1e-6)
    np.testing.assert_allclose(fl.bias.numpy(), (lin.bias.numpy() - rm) * scale1, rtol=1e-6)
    with pytest.raises(AssertionError, match="out_features=2 and bn.num_features=3"):
        utils.fuse_linear_bn_eval(nn.Linear(2, 2).eval(), bn1)


def test_skip_init():
    state = nv.get_rng_state().numpy()
    lin = utils.skip_init(nn.Linear, 3, 4, bias=True, device="cpu")
    np.testing.assert_array_equal(nv.get_rng_state().numpy(), state)   # drew nothing
    assert lin.weight.shape == (4, 3) and lin.bias.shape == (4,)
    assert isinstance(lin.weight, nn.Parameter) and lin.weight.requires_grad
    bn = utils.skip_init(nn.BatchNorm1d, 2)
    assert bn.num_batches_tracked.dtype == nv.int64
    with pytest.raises(RuntimeError, match="expected a Module class"):
        utils.skip_init(nv.tensor, 3)


# ---------------------------------------------------------------- against PyTorch

def test_names_and_values_match_torch():
    torch = pytest.importorskip("torch")
    tlin = torch.nn.Linear(3, 2)
    lin = nn.Linear(3, 2)
    lin.load_state_dict({k: nv.tensor(v.detach().numpy()) for k, v in
                         tlin.state_dict().items()})
    torch.nn.utils.parametrizations.weight_norm(tlin, dim=1)
    parametrizations.weight_norm(lin, dim=1)
    assert list(lin.state_dict()) == list(tlin.state_dict())
    for k, v in tlin.state_dict().items():
        np.testing.assert_allclose(lin.state_dict()[k].numpy(), v.numpy(), rtol=1e-6)
    tsn, sn = torch.nn.Conv2d(2, 3, 2), nn.Conv2d(2, 3, 2)
    torch.nn.utils.parametrizations.spectral_norm(tsn)
    parametrizations.spectral_norm(sn)
    assert list(sn.state_dict()) == list(tsn.state_dict())

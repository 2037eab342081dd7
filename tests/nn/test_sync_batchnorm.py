"""nn.SyncBatchNorm in one process (the 2-rank checks are tests/distributed/
test_sync_batchnorm.py): convert_sync_batchnorm's structure and shared tensors, the
fallback to batch_norm without a group or in a world of one (bit-identical to
BatchNorm, as PyTorch's), evaluation, the synchronized path's math through the
world-of-one identity collective, the differentiable all_reduce, and errors."""
import numpy as np
import pytest

import nova as nv
import nova.distributed as dist
import nova.nn as nn
from nova.distributed.nn import functional as dnn
from nova.nn.normalization import batch_norm
from nova.nn.sync_batchnorm import SyncBatchNorm, _sync_batch_norm

RNG = np.random.default_rng(3)


@pytest.fixture(autouse=True)
def interp():
    with nv.engine("interp"):
        yield


@pytest.fixture
def world():
    dist.init_process_group("mpi")
    yield
    dist.destroy_process_group()


def _pair(cls=nn.BatchNorm2d, **kw):
    """A BatchNorm and a SyncBatchNorm with the same (non-trivial) affine parameters."""
    bn, sbn = cls(3, momentum=0.2, **kw), SyncBatchNorm(3, momentum=0.2, **kw)
    if bn.affine:
        with nv.no_grad():
            for m in (bn, sbn):
                m.weight.copy_(nv.tensor([1.5, -0.5, 2.0]))
                m.bias.copy_(nv.tensor([0.1, 0.2, -0.3]))
    return bn, sbn


def _run(m, x: np.ndarray, g: np.ndarray) -> dict:
    """Output and gradients of ``sum(m(x) * g)``, and ``m``'s buffers afterwards."""
    xt = nv.tensor(x, requires_grad=True)
    out = m(xt)
    (out * nv.tensor(g)).sum().backward()
    got = {"out": out.numpy(), "x": xt.grad.numpy()}
    got.update({k: v.numpy() for k, v in m.state_dict().items()})
    if m.weight is not None:
        got.update(w=m.weight.grad.numpy(), b=m.bias.grad.numpy())
    return got


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k], b[k]), k


@pytest.mark.parametrize("initialized", [False, True])
def test_without_peers_it_is_batchnorm_bit_for_bit(initialized):
    """No default group, or a world of one: PyTorch's fallback to plain batch norm, in
    training (twice: the running statistics) and in evaluation."""
    if initialized:
        dist.init_process_group("mpi")
    try:
        bn, sbn = _pair()
        for step in range(2):
            x = RNG.standard_normal((2, 3, 2, 3)).astype(np.float32) * (step + 1)
            g = RNG.standard_normal(x.shape).astype(np.float32)
            _same(_run(bn, x, g), _run(sbn, x, g))
        bn.eval(), sbn.eval()
        _same(_run(bn, x, g), _run(sbn, x, g))
        assert int(sbn.num_batches_tracked) == 2
    finally:
        if initialized:
            dist.destroy_process_group()


def test_eval_uses_running_statistics_or_the_batch_without_them():
    x = RNG.standard_normal((4, 3, 5)).astype(np.float32)
    _, sbn = _pair()
    with nv.no_grad():
        sbn.running_mean.copy_(nv.tensor([1.0, -1.0, 0.5]))
        sbn.running_var.copy_(nv.tensor([4.0, 0.25, 1.0]))
    sbn.eval()
    ref = (x - np.array([1.0, -1.0, 0.5])[:, None]) / np.sqrt(
        np.array([4.0, 0.25, 1.0])[:, None] + 1e-5)
    ref = ref * np.array([1.5, -0.5, 2.0])[:, None] + np.array([0.1, 0.2, -0.3])[:, None]
    np.testing.assert_allclose(sbn(nv.tensor(x)).numpy(), ref, rtol=1e-5, atol=1e-6)
    assert sbn.running_mean.tolist() == [1.0, -1.0, 0.5]       # left alone
    untracked = SyncBatchNorm(3, affine=False, track_running_stats=False).eval()
    mean, var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    np.testing.assert_allclose(untracked(nv.tensor(x)).numpy(),
                               (x - mean[:, None]) / np.sqrt(var[:, None] + 1e-5),
                               rtol=1e-5, atol=1e-5)


def test_momentum_none_is_a_cumulative_average():
    bn, sbn = nn.BatchNorm1d(2, momentum=None), SyncBatchNorm(2, momentum=None)
    for _ in range(3):
        x = RNG.standard_normal((5, 2)).astype(np.float32)
        bn(nv.tensor(x)), sbn(nv.tensor(x))
    assert np.array_equal(bn.running_mean.numpy(), sbn.running_mean.numpy())
    assert np.array_equal(bn.running_var.numpy(), sbn.running_var.numpy())


def test_the_synchronized_path_is_batch_norm_with_its_gradients(world):
    """``_sync_batch_norm`` through the world of one's identity collectives: the
    two-pass statistics, the running update and the gradients through the
    differentiable all_reduce equal batch_norm's (float64), float16 input included."""
    x = RNG.standard_normal((3, 2, 4)) * np.array([1.0, 5.0])[:, None] + 100.0
    g = RNG.standard_normal(x.shape)
    got = []
    for fn in (lambda *a: batch_norm(*a[:5], True, 0.3, 1e-5),
               lambda *a: _sync_batch_norm(*a[:5], 0.3, 1e-5, None)):
        xt = nv.tensor(x, requires_grad=True)
        w = nv.tensor([0.5, -2.0], dtype=nv.float64, requires_grad=True)
        b = nv.tensor([1.0, 0.0], dtype=nv.float64, requires_grad=True)
        rm, rv = nv.zeros(2, dtype=nv.float64), nv.ones(2, dtype=nv.float64)
        out = fn(xt, rm, rv, w, b)
        (out * nv.tensor(g)).sum().backward()
        got.append([out.numpy(), xt.grad.numpy(), w.grad.numpy(), b.grad.numpy(),
                    rm.numpy(), rv.numpy()])
    for a, b in zip(*got):
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12)
    xh = x.astype(np.float16)
    half = _sync_batch_norm(nv.tensor(xh), None, None, None, None, 0.1, 1e-5, None)
    assert half.dtype == nv.float16             # statistics in float32, as batch_norm's
    xh = xh.astype(np.float64)
    ref = (xh - xh.mean(axis=(0, 2))[:, None]) / np.sqrt(xh.var(axis=(0, 2))[:, None] + 1e-5)
    np.testing.assert_allclose(half.numpy().astype(np.float64), ref, atol=5e-3)


def test_convert_sync_batchnorm_replaces_every_batchnorm_sharing_its_tensors():
    inner = nn.Sequential(nn.Conv2d(3, 3, 1), nn.BatchNorm2d(3, momentum=0.3, eps=1e-3))
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3, affine=False), inner,
                          nn.InstanceNorm2d(3))
    model[1].eval()
    old = [model[1], inner[1]]
    group = object()                        # any group object is kept as given
    out = SyncBatchNorm.convert_sync_batchnorm(model, group)
    assert out is model and out[2] is inner and type(out[0]) is nn.Linear
    assert type(out[3]) is nn.InstanceNorm2d
    for new, bn in zip([out[1], inner[1]], old):
        assert type(new) is SyncBatchNorm and new.process_group is group
        assert (new.num_features, new.eps, new.momentum, new.affine, new.training) == \
            (bn.num_features, bn.eps, bn.momentum, bn.affine, bn.training)
        for name in ("weight", "bias", "running_mean", "running_var", "num_batches_tracked"):
            assert getattr(new, name) is getattr(bn, name), name
    assert inner[1].weight is old[1].weight and inner[1].weight is not None
    assert list(out.state_dict()) == ["0.weight", "0.bias", "1.running_mean",
                                      "1.running_var", "1.num_batches_tracked",
                                      "2.0.weight", "2.0.bias", "2.1.weight", "2.1.bias",
                                      "2.1.running_mean", "2.1.running_var",
                                      "2.1.num_batches_tracked"]
    single = nn.BatchNorm3d(2)
    converted = SyncBatchNorm.convert_sync_batchnorm(single)
    assert type(converted) is SyncBatchNorm and converted is not single
    assert converted.process_group is None and converted.bias is single.bias


def test_constructor_arguments_and_repr():
    m = SyncBatchNorm(4, eps=1e-3, momentum=None, bias=False, dtype=nv.float64, device="cpu")
    assert m.bias is None and m.weight.dtype == nv.float64 and m.running_var.dtype == nv.float64
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    assert repr(m) == ("SyncBatchNorm(4, eps=0.001, momentum=None, affine=True, "
                       "bias=False, track_running_stats=True)")
    assert m(nv.ones(2, 4, 3, 2, 2, dtype=nv.float64)).shape == (2, 4, 3, 2, 2)   # any N-D


def test_exported_as_nn_sync_batchnorm():
    assert nn.SyncBatchNorm is SyncBatchNorm and "SyncBatchNorm" in nn.__all__


def test_errors_name_what_is_wrong():
    m = SyncBatchNorm(3)
    with pytest.raises(ValueError, match=r"expected at least 2D input \(got 1D input of "
                                         r"shape \(3,\)\)"):
        m(nv.ones(3))
    with pytest.raises(TypeError, match="SyncBatchNorm: expected a Tensor, got list"):
        m([[1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="number of input channels should be non-zero"):
        SyncBatchNorm(0)(nv.ones(2, 0))
    with pytest.raises(ValueError, match="expected more than 1 value per channel"):
        m(nv.ones(1, 3))


def test_the_synchronized_path_refuses_integer_input(world):
    with pytest.raises(TypeError, match=r"SyncBatchNorm: expected floating point input, got "
                                        r"int64 of shape \(2, 3\)"):
        _sync_batch_norm(nv.ones(2, 3, dtype=nv.int64), None, None, None, None, 0.1, 1e-5,
                         None)


def test_the_differentiable_all_reduce_in_a_world_of_one(world):
    x = nv.tensor([1.0, -2.0], requires_grad=True)
    y = dnn.all_reduce(x * 3.0)
    (y * nv.tensor([2.0, 5.0])).sum().backward()
    assert y.tolist() == [3.0, -6.0] and x.grad.tolist() == [6.0, 15.0]
    z = nv.tensor([4.0], requires_grad=True)
    dnn.all_reduce(z, dist.ReduceOp.AVG).sum().backward()
    assert z.grad.tolist() == [1.0]
    top = dnn.all_reduce(nv.tensor([1.0, 2.0], requires_grad=True), dist.ReduceOp.MAX)
    assert top.tolist() == [1.0, 2.0]                   # the forward is fine ...
    with pytest.raises(RuntimeError, match="backward through an all_reduce with op 'max' is "
                                           "not supported"):
        top.sum().backward()                            # ... its gradient is not
    with pytest.raises(TypeError, match="all_reduce: expected a Tensor, got list"):
        dnn.all_reduce([1.0])


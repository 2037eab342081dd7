"""BatchNorm1d/2d, GroupNorm and F.normalize on both engines: forward against numpy
written from PyTorch's definitions (biased variance to normalize, unbiased for the
running update, cumulative averaging with momentum=None), gradients by float64 finite
differences, running statistics through training and nv.compile, and errors."""
import numpy as np
import pytest

import nova as nv
import nova.nn as nn
import nova.nn.functional as F
import nova.optim as optim
from nova.autograd.gradcheck import gradcheck
from tests.helpers import assert_close

RNG = np.random.default_rng(1)


@pytest.fixture(autouse=True, params=["cpu", "interp"])
def engine(request):
    with nv.engine(request.param):
        yield request.param


def _bn_reference(x, mean, var, w, b, eps=1e-5):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * w.reshape(shape) \
        + b.reshape(shape)


@pytest.mark.parametrize("cls,shape", [(nn.BatchNorm1d, (6, 3)), (nn.BatchNorm1d, (4, 3, 5)),
                                       (nn.BatchNorm2d, (2, 3, 4, 5))])
def test_batch_norm_trains_on_batch_statistics_and_evaluates_on_running_ones(cls, shape):
    bn = cls(3, momentum=0.2)
    with nv.no_grad():
        bn.weight.copy_(nv.tensor([1.5, -0.5, 2.0]))
        bn.bias.copy_(nv.tensor([0.1, 0.2, -0.3]))
    w, b = bn.weight.numpy(), bn.bias.numpy()
    axes = (0,) + tuple(range(2, len(shape)))
    run_mean, run_var = np.zeros(3), np.ones(3)
    for step in range(3):
        x = (RNG.standard_normal(shape) * (step + 1) + step).astype(np.float32)
        mean, var = x.mean(axes), x.var(axes)
        assert_close(bn(nv.tensor(x)), _bn_reference(x, mean, var, w, b), rtol=1e-4, atol=1e-5)
        n = x.size // 3
        run_mean = 0.8 * run_mean + 0.2 * mean
        run_var = 0.8 * run_var + 0.2 * var * n / (n - 1)
        assert_close(bn.running_mean, run_mean, rtol=1e-5, atol=1e-6)
        assert_close(bn.running_var, run_var, rtol=1e-5, atol=1e-6)
    assert int(bn.num_batches_tracked) == 3
    bn.eval()
    x = RNG.standard_normal(shape).astype(np.float32)
    assert_close(bn(nv.tensor(x)), _bn_reference(x, run_mean, run_var, w, b), rtol=1e-4,
                 atol=1e-5)
    assert int(bn.num_batches_tracked) == 3           # evaluation leaves the stats alone
    assert_close(bn.running_mean, run_mean, rtol=1e-5, atol=1e-6)


def test_batch_norm_cumulative_average_and_untracked_statistics():
    bn = nn.BatchNorm1d(2, momentum=None, affine=False)
    xs = [RNG.standard_normal((5, 2)).astype(np.float32) for _ in range(3)]
    for x in xs:
        bn(nv.tensor(x))
    assert_close(bn.running_mean, np.mean([x.mean(0) for x in xs], 0), rtol=1e-5, atol=1e-6)
    assert_close(bn.running_var, np.mean([x.var(0, ddof=1) for x in xs], 0), rtol=1e-5,
                 atol=1e-6)
    free = nn.BatchNorm2d(2, track_running_stats=False).eval()
    assert free.running_mean is None and "running_mean" not in free.state_dict()
    x = RNG.standard_normal((2, 2, 3, 3)).astype(np.float32)
    ref = (x - x.mean((0, 2, 3), keepdims=True)) / np.sqrt(x.var((0, 2, 3), keepdims=True) + 1e-5)
    assert_close(free(nv.tensor(x)), ref, rtol=1e-4, atol=1e-5)   # batch stats even in eval
    bn.reset_running_stats()
    assert_close(bn.running_var, np.ones(2))
    assert int(bn.num_batches_tracked) == 0


def test_batch_norm_with_tracking_turned_off_later_keeps_pytorchs_use_of_the_buffers():
    # PyTorch decides by the buffers, not the flag: evaluation normalizes by the running
    # statistics while they exist, and training without tracking neither reads nor
    # updates them (Nova normalized by the batch in evaluation, and updated them)
    x = np.array([[1.0, 2.0], [3.0, 5.0], [0.0, -1.0]], np.float32)
    bn = nn.BatchNorm1d(2, affine=False)
    bn.track_running_stats = False
    bn.eval()
    assert_close(bn(nv.tensor(x)), x / np.sqrt(1 + 1e-5), rtol=1e-6, atol=1e-7)
    bn.train()
    batch = (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5)
    assert_close(bn(nv.tensor(x)), batch, rtol=1e-5, atol=1e-6)
    assert bn.running_mean.tolist() == [0.0, 0.0] and bn.running_var.tolist() == [1.0, 1.0]
    assert int(bn.num_batches_tracked) == 0


def test_batch_and_group_norm_gradients_match_finite_differences():
    x = RNG.standard_normal((3, 4, 2, 2))
    w, b = RNG.standard_normal(4), RNG.standard_normal(4)
    assert gradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                     [x, w, b], atol=1e-4)
    mean, var = RNG.standard_normal(4), RNG.uniform(0.5, 2.0, 4)
    assert gradcheck(lambda x, w: F.batch_norm(x, nv.tensor(mean), nv.tensor(var), w,
                                               training=False), [x, w])
    assert gradcheck(lambda x, w, b: F.group_norm(x, 2, w, b), [x, w, b], atol=1e-4)
    assert gradcheck(lambda x: F.normalize(x, dim=1), [x])


def test_group_norm_and_normalize_match_numpy():
    x = RNG.standard_normal((2, 6, 3, 2)).astype(np.float32)
    gn = nn.GroupNorm(3, 6)
    with nv.no_grad():
        gn.weight.copy_(nv.tensor(np.arange(1, 7, dtype=np.float32)))
    g = x.reshape(2, 3, -1)
    ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    ref = ref.reshape(x.shape) * np.arange(1, 7).reshape(1, 6, 1, 1)
    assert_close(gn(nv.tensor(x)), ref, rtol=1e-4, atol=1e-5)
    assert_close(F.normalize(nv.tensor(x), dim=1),
                 x / np.maximum(np.sqrt((x ** 2).sum(1, keepdims=True)), 1e-12), rtol=1e-5)
    assert_close(F.normalize(nv.tensor(x), p=1, dim=-1),
                 x / np.maximum(np.abs(x).sum(-1, keepdims=True), 1e-12), rtol=1e-5)
    zero = F.normalize(nv.zeros(2, 3))
    np.testing.assert_array_equal(zero.numpy(), np.zeros((2, 3)))   # eps keeps 0/0 away


def test_batch_norm_running_stats_under_nv_compile_match_the_recorded_loop():
    def make():
        nv.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(),
                              nn.Flatten(), nn.Linear(2 * 4 * 4, 3))
        return model, optim.SGD(model.parameters(), lr=0.1)
    data = [(nv.tensor(RNG.standard_normal((4, 1, 6, 6)).astype(np.float32)),
             nv.tensor(RNG.integers(0, 3, 4))) for _ in range(5)]

    def train(compiled):
        model, opt = make()

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        fn = nv.compile(step) if compiled else step
        losses = [float(fn(x, y)) for x, y in data]
        if compiled:
            assert fn.replays >= 2, fn.replays
        return losses, {k: v.numpy() for k, v in model.state_dict().items()}
    plain, compiled = train(False), train(True)
    assert plain[0] == compiled[0]
    for k in plain[1]:
        np.testing.assert_array_equal(plain[1][k], compiled[1][k], err_msg=k)
    assert int(compiled[1]["1.num_batches_tracked"]) == 5


def test_normalization_errors():
    with pytest.raises(ValueError, match="expected more than 1 value per channel when training"):
        nn.BatchNorm1d(3)(nv.zeros(1, 3))
    with pytest.raises(ValueError, match=r"BatchNorm2d: expected a 4-D input, got \(2, 3\)"):
        nn.BatchNorm2d(3)(nv.zeros(2, 3))
    with pytest.raises(ValueError, match=r"batch_norm: running_mean must have shape \(3,\)"):
        F.batch_norm(nv.zeros(2, 3), nv.zeros(4), nv.ones(3))
    with pytest.raises(ValueError, match="running_mean and running_var are needed"):
        F.batch_norm(nv.zeros(2, 3), None, None)
    with pytest.raises(ValueError, match=r"group_norm: 6 channels of input \(2, 6\) are not "
                                         r"divisible into num_groups=4"):
        F.group_norm(nv.zeros(2, 6), 4)
    with pytest.raises(ValueError, match="GroupNorm: num_channels"):
        nn.GroupNorm(4, 6)

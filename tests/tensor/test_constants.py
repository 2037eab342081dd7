"""Host-made constants kept per content (``nova.tensor.constants``), and the steps they
let ``nv.compile`` replay: ops that turned a fresh numpy array into a tensor on every
call (interpolation indices and weights, pad indices, pooling bins, fold and
grid_sample tables) made every step through them record again, with a warning."""
import warnings

import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F
from nova.runtime.cache import RecompileWarning
from nova.tensor import constants
from tests.helpers import sgd_step_losses


@pytest.fixture(autouse=True)
def engine():
    """The compiled cpu engine only: replaying is nv.compile's, whatever runs the
    kernels (and three engines tripled the suite's time for nothing more)."""
    with nv.engine("cpu"):
        yield


def test_equal_arrays_share_one_tensor_and_the_cache_is_bounded(monkeypatch):
    a = constants.constant(np.arange(4), device="cpu")
    assert constants.constant(np.arange(4), device="cpu") is a
    assert constants.constant(np.arange(4).astype(np.int32)) is not a
    assert constants.constant(np.arange(5)) is not a
    assert constants.constant(np.arange(4), dtype=nv.float32) is not a
    np.testing.assert_array_equal(a.numpy(), np.arange(4))
    big = np.zeros(constants.MAX_BYTES // 8 + 1)
    assert constants.constant(big) is not constants.constant(big)       # not kept
    monkeypatch.setattr(constants, "MAX_ENTRIES", 2)
    first = constants.constant(np.array([9, 9, 1]))
    constants.constant(np.array([9, 9, 2]))
    constants.constant(np.array([9, 9, 3]))
    assert len(constants._KEPT) <= 2
    assert constants.constant(np.array([9, 9, 1])) is not first         # dropped


X = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
TARGETS = nv.tensor([[1, 2, 3], [4, 5, 0]])
CASES = {
    "nearest": lambda x: F.interpolate(x, size=(5, 7)),
    "bilinear": lambda x: F.interpolate(x, size=(5, 7), mode="bilinear"),
    "bicubic": lambda x: F.interpolate(x, scale_factor=1.5, mode="bicubic"),
    "antialias": lambda x: F.interpolate(x, size=(3, 5), mode="bilinear", antialias=True),
    "reflect pad": lambda x: F.pad(x, (1, 2, 2, 1), mode="reflect"),
    "adaptive avg": lambda x: F.adaptive_avg_pool2d(x, (3, 5)),
    "adaptive max": lambda x: F.adaptive_max_pool2d(x, (3, 5)),
    "fold": lambda x: F.fold(F.unfold(x, 2, stride=2), (8, 8), 2, stride=2),
    "grid_sample": lambda x: F.grid_sample(x, nv.zeros(2, 4, 4, 2), align_corners=False),
    "pdist": lambda x: F.pdist(x.reshape(6, -1)),
    "diag": lambda x: x.reshape(-1)[:5].diag(1),
    "repeat_interleave": lambda x: x.repeat_interleave([1, 2, 0], dim=1),
    "ctc": lambda x: F.ctc_loss(F.log_softmax(x.reshape(16, 3, 8)[:, :2], -1), TARGETS,
                                [16, 16], [3, 2]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_compiled_step_through_the_op_replays_with_the_recorded_losses(name):
    def run(compiled):
        w = nv.nn.Parameter(nv.ones(2, 3, 8, 8))
        x = nv.tensor(X)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RecompileWarning)
            losses, replays = sgd_step_losses(lambda: CASES[name](x * w).pow(2).mean(), [w],
                                              compiled=compiled)
        assert not [w for w in caught if "never agreed" in str(w.message)]
        return losses, replays

    plain, _ = run(False)
    compiled, replays = run(True)
    assert replays >= 3, replays
    np.testing.assert_allclose(compiled, plain, rtol=1e-6)

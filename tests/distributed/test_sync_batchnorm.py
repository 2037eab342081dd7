"""SyncBatchNorm and the differentiable all_reduce on 2 ranks (``mpiexec``, skipped where
it is missing): each rank holds its share of one global batch (2 and 3 samples; then 0
and 5, as PyTorch allows a rank an empty share), and what each rank ends with equals
batch normalization over the whole batch, written here in numpy from PyTorch's
definitions (forward, running statistics with the unbiased variance, input gradient;
weight and bias gradients are each rank's share, summing to the whole batch's, as
PyTorch's). A DDP-wrapped MLP whose BatchNorm was converted trains as the one-process
model does on the whole batch (its DDP broadcasts the 0-d ``num_batches_tracked``,
which the last test checks in one process)."""
from __future__ import annotations

import numpy as np
import pytest

import nova as nv
import nova.distributed as dist
from tests.distributed import worker
from tests.distributed.test_distributed import _params, _ranks

EPS = 1e-5


def _batch_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray):
    """Training batch norm of ``(N, C, L)`` ``x``: output, mean, biased variance, xhat."""
    mean, var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    xhat = (x - mean[:, None]) / np.sqrt(var[:, None] + EPS)
    return xhat * w[:, None] + b[:, None], mean, var, xhat


def _batch_norm_grads(x: np.ndarray, g: np.ndarray, w: np.ndarray):
    """Gradients of ``sum(batch_norm(x) * g)`` for input, weight and bias."""
    _, _, var, xhat = _batch_norm(x, w, np.zeros_like(w))
    n = x.shape[0] * x.shape[2]
    dxhat = g * w[:, None]
    dx = (n * dxhat - dxhat.sum(axis=(0, 2))[:, None]
          - xhat * (dxhat * xhat).sum(axis=(0, 2))[:, None]) / (n * np.sqrt(var[:, None] + EPS))
    return dx, (g * xhat).sum(axis=(0, 2)), g.sum(axis=(0, 2))


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict[str, np.ndarray]]:
    """What each of the 2 ranks of ``worker.sync_batchnorm`` ended with (one run)."""
    out = tmp_path_factory.mktemp("sync_bn")
    done = _ranks("sync-batchnorm", out)
    assert done.returncode == 0, done.stderr[-3000:]
    return [_params(out / f"rank{r}.npz") for r in range(2)]


@pytest.mark.slow      # (one 2-rank run, ~13 s, shared by the three)
def test_sync_batchnorm_on_two_ranks_is_batchnorm_over_the_global_batch(ranks):
    d = worker.sync_batchnorm_data()
    cuts, cuts2 = np.cumsum((0,) + worker.SYNC_SHARES), np.cumsum((0,) + worker.SYNC_SHARES2)
    parts = [slice(cuts[r], cuts[r + 1]) for r in range(2)]
    parts2 = [slice(cuts2[r], cuts2[r + 1]) for r in range(2)]

    y, mean1, var1, _ = _batch_norm(d["x"], d["w"], d["b"])
    y2, mean2, var2, _ = _batch_norm(d["x2"], d["w"], d["b"])
    n = d["x"].shape[0] * d["x"].shape[2]
    run_mean, run_var = np.zeros(3), np.ones(3)
    for mean, var in ((mean1, var1), (mean2, var2)):
        run_mean = 0.7 * run_mean + 0.3 * mean
        run_var = 0.7 * run_var + 0.3 * var * n / (n - 1)
    dx, dw, db = _batch_norm_grads(d["x"], d["g"], d["w"])
    ye = (d["x2"] - run_mean[:, None]) / np.sqrt(run_var[:, None] + EPS) * d["w"][:, None] \
        + d["b"][:, None]

    for got, part, part2 in zip(ranks, parts, parts2):
        np.testing.assert_allclose(got["y"], y[part], rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(got["y2"], y2[part2], rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(got["x_grad"], dx[part], rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(got["running_mean"], run_mean, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got["running_var"], run_var, rtol=1e-12, atol=1e-12)
        assert int(got["batches"]) == 2
        np.testing.assert_allclose(got["ye"], ye[part], rtol=1e-10, atol=1e-10)
        assert int(got["eval_collectives"]) == 0          # evaluation exchanges nothing
    # weight and bias gradients: each rank's share of the whole batch's
    np.testing.assert_allclose(ranks[0]["w_grad"] + ranks[1]["w_grad"], dw, rtol=1e-10)
    np.testing.assert_allclose(ranks[0]["b_grad"] + ranks[1]["b_grad"], db, rtol=1e-10)
    assert not np.allclose(ranks[0]["w_grad"], dw)


@pytest.mark.slow      # (one 2-rank run, ~13 s, shared by the three)
def test_the_differentiable_all_reduce_sends_the_summed_gradient_back(ranks):
    """Rank r: ``a_r = r' * arange(3)`` (r' = r + 1), loss ``sum(all_reduce(2 a) * c * r')
    + sum(all_reduce(a, AVG)^2)``: d/da_r = 2 c (1 + 2) + 2 avg / 2 * 2 ranks."""
    base = np.arange(3.0)
    for got in ranks:
        np.testing.assert_array_equal(got["summed"], 2 * base + 4 * base)
        np.testing.assert_array_equal(got["avg"], 1.5 * base)
        np.testing.assert_allclose(got["a_grad"], 6 * np.array([1.0, 2.0, 3.0]) + 3 * base)


@pytest.mark.slow      # (one 2-rank run, ~13 s, shared by the three)
def test_ddp_over_a_converted_model_trains_as_one_process_on_the_whole_batch(ranks):
    d = worker.sync_batchnorm_data()
    one = worker.train_sync_bn_mlp(worker.sync_bn_mlp(False), d["mlp_x"], d["mlp_y"],
                                   ddp=False)
    for got in ranks:
        for k, v in one.items():
            np.testing.assert_allclose(got[f"mlp/{k}"], v, rtol=1e-9, atol=1e-12, err_msg=k)


def test_a_zero_dim_tensor_keeps_its_shape_through_the_host_collectives():
    """The host copy of a 0-d tensor used to come back 1-d, so all_gather (here) and
    broadcast on a receiving rank (DDP's of BatchNorm's ``num_batches_tracked``, in the
    DDP test above) failed to write it back."""
    dist.init_process_group("mpi")
    try:
        out = [nv.zeros(())]
        dist.all_gather(out, nv.tensor(3.0))
        assert out[0].shape == () and out[0].item() == 3.0
    finally:
        dist.destroy_process_group()

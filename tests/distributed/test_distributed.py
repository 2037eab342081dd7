"""nova.distributed and DistributedDataParallel.

In this process: a world of one (no library), errors, the sampler, the IR a collective
records, fusion and the schedule around it. Across processes: 2 ranks started by
``mpiexec`` (``tests/distributed/worker.py``), skipped with the reason where mpiexec or
mpi4py is missing."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import nova as nv
import nova.distributed as dist
from nova.compiler.pipeline import compile_step, front
from nova.nn.parallel import DistributedDataParallel as DDP
from nova.runtime.memory_plan import KernelUse, plan_memory
from nova.tensor.realize import pending_graph
from nova.utils.data import DistributedSampler

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def world():
    dist.init_process_group("mpi", timeout=30)
    yield
    dist.destroy_process_group()


# ---------------------------------------------------------------- one process

def test_a_world_of_one_without_mpiexec(world):
    assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1
    assert dist.get_backend() == "mpi"
    x = nv.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = x * 2.0
    dist.all_reduce(y)
    assert y.tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
    assert dist.reduced(x, dist.ReduceOp.AVG).tolist() == x.tolist()
    work = dist.all_reduce(x, async_op=True)
    assert not work.is_completed() and work.wait() and work.is_completed()
    out = [nv.zeros(3)]
    dist.all_gather(out, nv.ones(3))
    assert out[0].tolist() == [1.0, 1.0, 1.0]
    dist.broadcast(x, 0)
    dist.barrier()


def test_an_all_reduce_records_a_start_and_a_wait(world):
    x = nv.tensor(np.ones((2, 3), np.float32))
    text = nv.debug.dump_ir(dist.reduced(x * 3.0, dist.ReduceOp.MAX))
    gid = dist._group(None, "test").gid
    assert text.splitlines()[4:7] == [
        f'    %3 = nova.all_reduce_start %2 group = {gid} : i64 reduction = "max" : '
        "tensor<2x3xf32>",
        f'    %4 = nova.all_reduce_wait %3 group = {gid} : i64 reduction = "max" : '
        "tensor<2x3xf32>",
        "    func.return %4 : tensor<2x3xf32>"]


def test_a_collective_is_a_kernel_of_its_own_and_nothing_fuses_into_it(world):
    x = nv.tensor(np.ones((4, 8), np.float32))
    y = (dist.reduced(x * 2.0) + 1.0).exp()
    step = compile_step(front(pending_graph(y)), "cpu")
    kinds = [(p.kind, [type(op).__name__ for op in p.fusion.body.block.ops]) for p in step.plans]
    assert kinds == [("elementwise", ["ConstantOp", "MulOp", "YieldOp"]),
                     ("collective", ["AllReduceStartOp", "YieldOp"]),
                     ("collective", ["AllReduceWaitOp", "YieldOp"]),
                     ("elementwise", ["ConstantOp", "AddOp", "ExpOp", "YieldOp"])]
    assert y.tolist() == np.exp(np.full((4, 8), 3.0, np.float32)).tolist()


def test_the_interpreter_runs_collectives_too(world):
    with nv.engine("interp"):
        y = dist.reduced(nv.tensor([1.0, 2.0]) * 2.0)
        assert y.tolist() == [2.0, 4.0]


def test_a_collective_nobody_holds_is_still_computed(world):
    x = nv.tensor(np.ones(3, np.float32))
    dist.reduced(x * 5.0)              # dropped at once: every rank must still issue it
    from nova.tensor.trace import live_pending
    assert len(live_pending.required) == 1
    nv.realize()
    assert live_pending.required == []


def test_errors_name_the_op_and_what_is_valid(world):
    with pytest.raises(RuntimeError, match="already initialized"):
        dist.init_process_group("mpi")
    with pytest.raises(TypeError, match=r"all_reduce: ReduceOp.AVG needs a floating tensor, "
                                        r"got int64 of shape \(2,\)"):
        dist.reduced(nv.tensor([1, 2]), dist.ReduceOp.AVG)
    with pytest.raises(TypeError, match="cannot reduce a bool tensor of shape"):
        dist.all_reduce(nv.tensor([True]))
    with pytest.raises(ValueError, match="op 'mean' is not one of"):
        dist.all_reduce(nv.ones(2), op="mean")
    with pytest.raises(ValueError, match="src 3 is not a rank of the group"):
        dist.broadcast(nv.ones(2), 3)
    with pytest.raises(ValueError, match="tensor_list must be a list of 1 tensors"):
        dist.all_gather([], nv.ones(2))
    with pytest.raises(ValueError, match=r"tensor_list\[0\] must be a float32 tensor of shape"):
        dist.all_gather([nv.zeros(3)], nv.ones(2))


def test_only_the_thread_that_created_the_group_records_its_collectives(world):
    import threading
    errors = []

    def other():
        try:
            dist.all_reduce(nv.ones(2))
        except RuntimeError as e:
            errors.append(str(e))
    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(errors) == 1 and "initialized in another thread" in errors[0]
    dist.barrier()          # this thread still can


def test_errors_before_init():
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="get_rank: the default process group is not "
                                           "initialized"):
        dist.get_rank()
    with pytest.raises(RuntimeError, match="all_reduce: the default process group"):
        dist.all_reduce(nv.ones(2))
    if not dist.is_nccl_available():
        with pytest.raises(RuntimeError, match="backend 'nccl' is not available: "):
            dist.init_process_group("nccl")
    with pytest.raises(ValueError, match="unknown backend 'gloo'"):
        dist.init_process_group("gloo")
    with pytest.raises(ValueError, match="timeout must be positive"):
        dist.init_process_group("mpi", timeout=0)
    with pytest.raises(ValueError, match="world_size 2 .* but MPI started 1|needs mpi4py"):
        dist.init_process_group("mpi", world_size=2)
    assert not dist.is_initialized()


def test_destroying_a_group_runs_what_was_recorded_and_later_steps_on_it_fail_clearly():
    dist.init_process_group("mpi")
    group = dist._group(None, "test")
    y = dist.reduced(nv.ones(2) * 2.0)
    dist.destroy_process_group()
    assert y.node.realized and y.tolist() == [2.0, 2.0]
    z = dist.reduced(nv.ones(2), group=group)
    with pytest.raises(dist.CollectiveError, match=f"process group {group.gid} does not exist"):
        z.tolist()


def test_the_schedule_starts_collectives_early_waits_late_and_keeps_their_order():
    """Kernels (program order): 0 grad a, 1 start(a), 2 grad b, 3 start(b), 4 wait(a),
    5 wait(b), 6 more backward, 7 update(a), 8 update(b). Starts run once ready, waits
    only when nothing else is, and start(b) never before start(a)."""
    n_args = 2
    a, sa, b, sb, wa, wb, more = (n_args + k for k in range(7))
    kernels = [KernelUse((0,), a, 64), KernelUse((a,), sa, 64, collective="start"),
               KernelUse((1,), b, 64), KernelUse((b,), sb, 64, collective="start"),
               KernelUse((sa,), wa, 64, collective="wait"),
               KernelUse((sb,), wb, 64, collective="wait"),
               KernelUse((1,), more, 64), KernelUse((wa, more), n_args + 7, 64),
               KernelUse((wb,), n_args + 8, 64)]
    plan = plan_memory(n_args, kernels, (n_args + 7, n_args + 8), [64, 64],
                       ["float32"] * 2)
    assert plan.order == [0, 1, 2, 3, 6, 4, 7, 5, 8]
    # start(b) waits for start(a) even when its data is ready first
    kernels[0] = KernelUse((0, more), a, 64)
    plan = plan_memory(n_args, kernels, (n_args + 7, n_args + 8), [64, 64], ["float32"] * 2)
    assert plan.order.index(1) < plan.order.index(3)


def test_ddp_in_a_world_of_one_trains_bit_identically_to_the_plain_model(world):
    from tests.distributed import worker
    results = []
    for wrap in (False, True):
        model, opt = worker.model_and_optimizer()
        net = DDP(model, bucket_cap_mb=0.05) if wrap else model
        for x, y in worker.batches(2, 4):
            opt.zero_grad()
            _, loss = net(nv.tensor(x), nv.tensor(y))
            loss.backward()
            opt.step()
        results.append({k: v.numpy() for k, v in model.state_dict().items()})
    assert len(net._buckets) > 2       # several buckets, the first one smaller
    for k in results[0]:
        assert np.array_equal(results[0][k], results[1][k]), k
    assert list(net.state_dict())[0].startswith("module.")


def test_ddp_keeps_each_grad_tensor_across_accumulation_and_the_reduction(world):
    """As PyTorch's DDP: the all-reduce writes the mean into the existing ``p.grad``, so
    a reference held from a ``no_sync`` backward follows the synced sum."""
    lin = nv.nn.Linear(2, 1)
    net = DDP(lin)
    x = nv.tensor([[1.0, 2.0]])
    with net.no_sync():
        net(x).sum().backward()
    held = lin.weight.grad
    net(x).sum().backward()
    assert lin.weight.grad is held and held.tolist() == [[2.0, 4.0]]


def test_distributed_sampler_splits_pads_and_shuffles_like_pytorchs():
    data = list(range(10))
    parts = [list(DistributedSampler(data, 3, r, shuffle=False)) for r in range(3)]
    assert parts == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
    cut = [list(DistributedSampler(data, 3, r, shuffle=False, drop_last=True)) for r in range(3)]
    assert cut == [[0, 3, 6], [1, 4, 7], [2, 5, 8]] and len(DistributedSampler(data, 3, 0,
                                                                               drop_last=True)) == 3
    s0, s1 = DistributedSampler(data, 2, 0, seed=5), DistributedSampler(data, 2, 1, seed=5)
    first = list(s0) + list(s1)
    assert sorted(first) == data and list(s0) == list(DistributedSampler(data, 2, 0, seed=5))
    s0.set_epoch(1)
    s1.set_epoch(1)
    assert sorted(list(s0) + list(s1)) == data and list(s0) + list(s1) != first
    with pytest.raises(ValueError, match=r"invalid rank 2, rank should be in the interval \[0, 1\]"):
        DistributedSampler(data, 2, 2)
    with pytest.raises(RuntimeError, match="pass num_replicas and rank"):
        DistributedSampler(data)


def test_a_data_loader_takes_the_distributed_sampler(world):
    from nova.utils.data import DataLoader, TensorDataset
    data = TensorDataset(nv.tensor(np.arange(10)), nv.tensor(np.arange(10) * 2))
    loader = DataLoader(data, batch_size=4, sampler=DistributedSampler(data, shuffle=False))
    assert [(x.tolist(), y.tolist()) for x, y in loader] == [
        ([0, 1, 2, 3], [0, 2, 4, 6]), ([4, 5, 6, 7], [8, 10, 12, 14]), ([8, 9], [16, 18])]


# ---------------------------------------------------------------- 2 ranks

def _mpiexec() -> str:
    found = shutil.which("mpiexec", path=os.path.dirname(sys.executable) + os.pathsep
                         + os.environ.get("PATH", ""))
    if found is None:
        pytest.skip("mpiexec not found (pip install -e .[distributed] brings Open MPI)")
    if not dist.is_mpi_available():
        pytest.skip("mpi4py is not installed (pip install -e .[distributed])")
    return found


def _ranks(mode: str, out: Path, n: int = 2, timeout: float = 240, test_timeout: float = 60
           ) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               NOVA_TEST_TIMEOUT=str(test_timeout), PYTHONPATH=str(ROOT),
               OMPI_MCA_rmaps_base_oversubscribe="1", PRTE_MCA_rmaps_default_mapping_policy=":oversubscribe")
    return subprocess.run([_mpiexec(), "-n", str(n), sys.executable, "-m",
                           "tests.distributed.worker", mode, str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, errors="replace",
                          timeout=timeout)


def _single(mode: str, out: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "tests.distributed.worker", mode, str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]


def _params(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def test_two_ranks_all_reduce_broadcast_and_all_gather(tmp_path):
    done = _ranks("collectives", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    for r in range(2):
        got = _params(tmp_path / f"rank{r}.npz")
        np.testing.assert_array_equal(got["y"], base * 2 + base * 4)
        np.testing.assert_array_equal(got["feeds"], (base * 2 + 1).sum(axis=1))
        np.testing.assert_array_equal(got["avg"], (base + base * 2) / 2)
        assert got["prod"].tolist() == [6, 6, 6] and got["low"].tolist() == [0, 0]
        assert got["realized"].tolist() == [3.0] * 5 and got["b"].tolist() == [1, 1, 1]
        assert got["gathered"].tolist() == [[0.0, 0.0], [1.0, 1.0]]
        assert got["empty"].shape == (0,)
        a16 = np.array([0.1, 1000.0, -2.5], np.float16)
        want = (a16.astype(np.float32) + (a16 * 2).astype(np.float32)).astype(np.float16)
        assert got["halves"].dtype == np.float16
        np.testing.assert_array_equal(got["halves"], want)      # one rounding, in float32
        bf = nv.tensor(np.array([0.2, 6.0], np.float32)).to(nv.bfloat16).float().numpy()
        np.testing.assert_array_equal(got["bhalves"], bf)
        assert got["u8"].tolist() == [144, 6, 254] and got["u8"].dtype == np.uint8   # wraps
        assert got["i8"].tolist() == [-128, -5] and got["flags"].tolist() == [True, True, False]
        assert got["hb"].tolist() == [1.5, -2.0]
        assert got["g16"].tolist() == [[0, 0, 0], [1, -1, 300]]


def _ddp_against_one_process(tmp_path: Path, mode: str) -> tuple[dict, dict, dict]:
    """Run ``mode`` on 2 ranks and the one-process whole-batch reference; check that the
    ranks end bit-identical and within float32 summation-order error of the reference;
    return the two ranks' and the reference's results."""
    (tmp_path / "ddp").mkdir()
    (tmp_path / "one").mkdir()
    done = _ranks(mode, tmp_path / "ddp")
    assert done.returncode == 0, done.stderr[-3000:]
    _single("single", tmp_path / "one")
    r0, r1 = _params(tmp_path / "ddp/rank0.npz"), _params(tmp_path / "ddp/rank1.npz")
    one = _params(tmp_path / "one/rank0.npz")
    for k in one:
        if k.startswith("p/"):
            assert np.array_equal(r0[k], r1[k]), k
            np.testing.assert_allclose(r0[k], one[k], rtol=0, atol=2e-5, err_msg=k)
    return r0, r1, one


def test_ddp_on_the_cuda_engine_reduces_through_mpi_like_the_cpu(tmp_path):
    """The CUDA engine's launch loop runs the same start/wait kernels (the test's
    emulator backend for the GPU, each bucket staged through host memory)."""
    done = _ranks("cuda-emulated", tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    r0, r1 = _params(tmp_path / "rank0.npz"), _params(tmp_path / "rank1.npz")
    base = np.arange(4, dtype=np.float32)
    for got in (r0, r1):
        np.testing.assert_array_equal(got["reduced_cuda"], base * 3)
        np.testing.assert_array_equal(got["reduced_cpu"], base * 3)
    for k in r0:
        if k.startswith("cuda/"):
            assert np.array_equal(r0[k], r1[k]), k
            # the CUDA engine's matmuls are TF32 (10 mantissa bits of each operand)
            np.testing.assert_allclose(r0[k], r0["cpu/" + k[5:]], rtol=3e-3, atol=3e-3)


def test_ddp_ranks_stay_bit_identical_and_match_one_process_on_the_whole_batch(tmp_path):
    r0, r1, one = _ddp_against_one_process(tmp_path, "ddp")
    # each rank's loss is the mean over its half: their mean is the whole batch's
    np.testing.assert_allclose((r0["losses"] + r1["losses"]) / 2, one["losses"], rtol=1e-5)
    assert not np.allclose(r0["losses"], r1["losses"])     # the halves did differ


def test_no_sync_accumulation_equals_one_big_batch(tmp_path):
    _ddp_against_one_process(tmp_path, "ddp-accumulate")


@pytest.mark.parametrize("mode, message", [
    ("hang", "CollectiveTimeout: nova.distributed: .* did not complete within 3 s on rank 0 "
             "of 2"),
    ("die", "RuntimeError: rank 1 fails on purpose"),
    ("mismatch", "CollectiveError: nova.distributed: rank [01]'s step issues 1 collectives on "
                 "group 0 \\(all_reduce\\(sum\\) of [45] f32 elements"),
])
def test_a_rank_that_hangs_dies_or_differs_ends_the_job_with_a_clear_error(
        tmp_path, mode, message):
    start = time.monotonic()
    done = _ranks(mode, tmp_path, test_timeout=3, timeout=120)
    assert done.returncode != 0
    assert time.monotonic() - start < 60          # bounded: nobody waits for the lost rank
    assert re.search(message, done.stderr), done.stderr[-3000:]
    assert "aborting every rank" in done.stderr


def _train_cli(tmp_path: Path, name: str, ranks: int, *extra: str) -> subprocess.CompletedProcess:
    args = ["-m", "models.train", "--preset", "tiny", "--steps", "4", "--batch-size", "4",
            "--eval-interval", "2", "--max-bytes", "100000", "--quiet",
            "--out", str(tmp_path / name), *extra]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONPATH=str(ROOT))
    cmd = ([_mpiexec(), "-n", str(ranks)] if ranks > 1 else []) + [sys.executable, *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                          errors="replace", timeout=300)


def test_train_ddp_on_two_ranks_logs_once_and_matches_one_process(tmp_path):
    two = _train_cli(tmp_path, "two", 2, "--ddp", "--save", str(tmp_path / "two.nova"))
    assert two.returncode == 0, two.stderr[-3000:]
    one = _train_cli(tmp_path, "one", 1)
    assert one.returncode == 0, one.stderr[-3000:]
    done = [ln for ln in two.stdout.splitlines() if ln.startswith("done:")]
    assert len(done) == 1                       # rank 0 alone reports
    assert "data-parallel over 2 ranks, 2 sequences each" in two.stdout
    ref = [ln for ln in one.stdout.splitlines() if ln.startswith("done:")][0]
    losses = re.compile(r"done: loss [0-9.]+, val [0-9.]+")
    assert losses.match(done[0]).group() == losses.match(ref).group()   # the same digits
    lines = (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 4 and (tmp_path / "two.nova").exists()


def test_train_ddp_refuses_a_batch_the_ranks_cannot_share(tmp_path):
    bad = _train_cli(tmp_path, "bad", 2, "--ddp", "--batch-size", "3")
    assert bad.returncode != 0
    assert "--batch-size 3 is the global batch and must divide among the 2 ranks" in bad.stderr


def test_a_forward_that_raised_or_a_backward_elsewhere_reduces_nothing(world):
    """DDP reduces after a backward that reaches its parameters, once per forward: a
    forward that raised, or another model's backward, records no collective."""
    from tests.distributed import worker
    from nova.tensor.trace import live_pending
    model, _ = worker.model_and_optimizer()
    net = DDP(model)
    with pytest.raises(ValueError):
        net(nv.zeros(1, 99, dtype=nv.int64))           # longer than the context: raises
    other = nv.nn.Linear(3, 1)
    other(nv.ones(2, 3)).sum().backward()
    assert live_pending.required == []                  # nothing was reduced
    x = nv.tensor(np.zeros((1, 4), np.int64))
    _, loss = net(x, x)
    other(nv.ones(2, 3)).sum().backward()                # not through the DDP model
    assert live_pending.required == []
    loss.backward()
    assert len(live_pending.required) == len(net._buckets)


@pytest.mark.cuda
def test_nccl_in_a_world_of_one_reduces_on_the_device_and_ddp_trains_as_the_plain_model():
    """On a GPU: the nccl backend's start/wait run on a communication stream; a world
    of one reduces to the identity, so DDP trains bit-identically to the plain model."""
    from nova.runtime.collectives import nccl_unavailable_reason
    reason = nccl_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    from tests.distributed import worker
    dist.init_process_group("nccl", timeout=60)
    try:
        assert dist.get_backend() == "nccl" and dist.get_world_size() == 1
        t = nv.tensor(np.arange(6, dtype=np.float32), device="cuda") * 2.0
        dist.all_reduce(t)
        assert t.device == nv.device("cuda") and t.cpu().tolist() == [0, 2, 4, 6, 8, 10]
        with pytest.raises(RuntimeError, match="the nccl backend reduces cuda tensors"):
            dist.all_reduce(nv.ones(2))
        ddp, _ = worker.mlp_on("cuda", True)
    finally:
        dist.destroy_process_group()
    plain, _ = worker.mlp_on("cuda", False)
    for k in plain:
        assert np.array_equal(ddp[k], plain[k]), k

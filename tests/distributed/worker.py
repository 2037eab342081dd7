"""One rank of the distributed tests (``tests/distributed/test_ddp.py`` starts it with
``mpiexec -n N python -m tests.distributed.worker MODE OUT``, or alone for the
one-process references). Each rank writes what it ends with to ``OUT/rank<r>.npz``."""
from __future__ import annotations

import contextlib
import os
import sys
import time

import numpy as np

import nova as nv
import nova.distributed as dist
from models.gpt import GPT, preset
from nova.nn.parallel import DistributedDataParallel as DDP
from nova.nn.sync_batchnorm import SyncBatchNorm

BATCH, BLOCK, STEPS = 8, 16, 4


def batches(steps: int, batch: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The global batches every run sees (the same on every rank)."""
    rng = np.random.default_rng(7)
    out = []
    for _ in range(steps):
        x = rng.integers(0, 256, (batch, BLOCK + 1))
        out.append((x[:, :-1], x[:, 1:]))
    return out


def model_and_optimizer(dropout: float = 0.0):
    nv.manual_seed(1234 + 0)     # the same weights on every rank (DDP broadcasts anyway)
    model = GPT(preset("tiny", block=BLOCK, dropout=dropout))
    opt = nv.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    return model, opt


def save(out: str, rank: int, model, losses: list[float], **extra) -> None:
    arrays = {f"p/{k}": v.numpy() for k, v in model.state_dict().items()}
    np.savez(os.path.join(out, f"rank{rank}.npz"), losses=np.array(losses), **arrays, **extra)


def train(out: str, ddp: bool, accumulate: int = 1) -> None:
    """STEPS AdamW steps of the tiny GPT on the global batches; with ``ddp`` each rank
    takes its contiguous share of every batch; with ``accumulate`` k, each share is
    split in k micro-batches, the first k - 1 under ``no_sync``."""
    rank, size = (dist.get_rank(), dist.get_world_size()) if ddp else (0, 1)
    model, opt = model_and_optimizer()
    net = DDP(model, bucket_cap_mb=0.05) if ddp else model
    losses = []
    for x, y in batches(STEPS, BATCH):
        share = BATCH // size
        x, y = x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]
        micro = share // accumulate
        opt.zero_grad()
        total = 0.0
        for k in range(accumulate):
            xs, ys = nv.tensor(x[k * micro:(k + 1) * micro]), nv.tensor(y[k * micro:(k + 1) * micro])
            sync = k == accumulate - 1
            with (net.no_sync() if ddp and not sync else contextlib.nullcontext()):
                _, loss = net(xs, ys)
                (loss / accumulate).backward()
            total += loss
        opt.step()
        losses.append(float(total / accumulate))
    save(out, rank, model, losses)


def collectives(out: str) -> None:
    """all_reduce (every op, in place and functional, of pending and realized tensors,
    results that escape the step and ones that feed more kernels), broadcast and
    all_gather."""
    rank, size = dist.get_rank(), dist.get_world_size()
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = nv.tensor(base * (rank + 1))
    y = x * 2.0
    dist.all_reduce(y)                              # pending input, escaping result
    feeds = dist.reduced(x + 1.0, dist.ReduceOp.MAX).sum(dim=1)   # result read by a kernel
    avg = dist.reduced(x, dist.ReduceOp.AVG)
    prod = dist.reduced(nv.tensor(np.full(3, rank + 2, np.int64)), dist.ReduceOp.PRODUCT)
    low = dist.reduced(nv.tensor(np.full(2, rank, np.int32)), dist.ReduceOp.MIN)
    realized = nv.tensor(np.ones(5, np.float64) * (rank + 1))
    nv.realize(realized)
    dist.all_reduce(realized)                       # a realized (argument) input
    empty = dist.reduced(nv.ones(0) * 2.0)          # nothing to exchange
    unheld = dist.reduced(x)                        # nobody keeps it: still issued
    del unheld
    b = nv.tensor(np.full(3, rank, np.int64))
    dist.broadcast(b, size - 1)
    gathered = [nv.zeros(2) for _ in range(size)]
    dist.all_gather(gathered, nv.ones(2) * rank)
    # the narrow dtypes: reduced in a wider type, moved as bytes
    halves = dist.reduced(nv.tensor(np.array([0.1, 1000.0, -2.5], np.float16) * (rank + 1)))
    bhalves = dist.reduced(nv.tensor(np.array([0.1, 3.0], np.float32) * (rank + 1))
                           .to(nv.bfloat16), dist.ReduceOp.MAX)
    u8 = nv.tensor(np.array([200, 3, 255], np.uint8))
    dist.all_reduce(u8)
    i8 = dist.reduced(nv.tensor(np.array([-128 + rank, 5 - 10 * rank], np.int8)),
                      dist.ReduceOp.MIN)
    flags = nv.tensor(np.array([rank == 1, True, False]))
    dist.broadcast(flags, size - 1)
    hb = nv.tensor(np.array([1.5, -2.0], np.float32) * rank).to(nv.bfloat16)
    dist.broadcast(hb, size - 1)
    g16 = [nv.zeros(3, dtype=nv.int16) for _ in range(size)]
    dist.all_gather(g16, nv.tensor(np.array([rank, -rank, 300 * rank], np.int16)))
    dist.barrier()
    np.savez(os.path.join(out, f"rank{rank}.npz"), y=y.numpy(), feeds=feeds.numpy(),
             avg=avg.numpy(), prod=prod.numpy(), low=low.numpy(), realized=realized.numpy(),
             b=b.numpy(), gathered=np.stack([g.numpy() for g in gathered]),
             empty=empty.numpy(), halves=halves.numpy(), bhalves=bhalves.float().numpy(),
             u8=u8.numpy(), i8=i8.numpy(), flags=flags.numpy(), hb=hb.float().numpy(),
             g16=np.stack([g.numpy() for g in g16]))


def mlp_on(device: str, ddp: bool):
    """A small MLP's 2 AdamW steps on ``device`` (each rank its own half of the batch
    under ``ddp``): the final weights and the all-reduced sum of a tensor."""
    rank, size = (dist.get_rank(), dist.get_world_size()) if ddp else (0, 1)
    nv.manual_seed(5)
    model = nv.nn.Sequential(nv.nn.Linear(6, 8), nv.nn.Tanh(), nv.nn.Linear(8, 1)).to(device)
    net = DDP(model) if ddp else model
    opt = nv.optim.AdamW(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(3)
    for _ in range(2):
        x, y = rng.standard_normal((8, 6)).astype(np.float32), rng.standard_normal((8, 1))
        share = 8 // size
        x, y = x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]
        loss = ((net(nv.tensor(x).to(device)) - nv.tensor(y.astype(np.float32)).to(device))
                ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    t = nv.tensor(np.arange(4, dtype=np.float32) * (rank + 1)).to(device)
    if ddp:
        dist.all_reduce(t)
    return {k: v.cpu().numpy() for k, v in model.state_dict().items()}, t.cpu().numpy()


def cuda_emulated(out: str) -> None:
    """The same DDP training on the CUDA engine (the test emulator backend, staging
    buckets through MPI) and on the CPU."""
    from nova.runtime.cuda_runtime import use_backend
    from tests.runtime.emulated_cuda import EmulatorBackend
    rank = dist.get_rank()
    with use_backend(EmulatorBackend()):
        cuda, reduced_cuda = mlp_on("cuda", True)
    cpu, reduced_cpu = mlp_on("cpu", True)
    np.savez(os.path.join(out, f"rank{rank}.npz"), reduced_cuda=reduced_cuda,
             reduced_cpu=reduced_cpu, **{f"cuda/{k}": v for k, v in cuda.items()},
             **{f"cpu/{k}": v for k, v in cpu.items()})


def hang(out: str) -> None:
    """Rank 1 never joins rank 0's all_reduce: rank 0 must time out, not hang."""
    rank = dist.get_rank()
    if rank == 1:
        time.sleep(60)
        return
    t = nv.ones(4)
    dist.all_reduce(t)
    t.numpy()


def die(out: str) -> None:
    """Rank 1 raises before its all_reduce: the job must end, naming it."""
    if dist.get_rank() == 1:
        raise RuntimeError("rank 1 fails on purpose")
    t = nv.ones(4)
    dist.all_reduce(t)
    t.numpy()


def mismatch(out: str) -> None:
    """The ranks record different collectives: both must fail saying so."""
    rank = dist.get_rank()
    t = nv.ones(4 + rank)
    dist.all_reduce(t)
    t.numpy()


# rank r's samples of SyncBatchNorm's global batches: uneven, then none on rank 0
SYNC_SHARES, SYNC_SHARES2 = (2, 3), (0, 5)


def sync_batchnorm_data() -> dict[str, np.ndarray]:
    """The global batches of the SyncBatchNorm test (the same on every rank): two
    training steps' inputs, the gradient of the first output, the affine parameters,
    and a small MLP's batch for the DDP run."""
    rng = np.random.default_rng(11)
    scale = np.array([1.0, 3.0, 0.5])[:, None]
    return {"x": rng.standard_normal((5, 3, 4)) * scale + 2.0,
            "x2": rng.standard_normal((5, 3, 4)) * scale - 1.0,
            "g": rng.standard_normal((5, 3, 4)), "w": rng.standard_normal(3),
            "b": rng.standard_normal(3), "mlp_x": rng.standard_normal((8, 4)),
            "mlp_y": rng.standard_normal((8, 1))}


def sync_bn_mlp(sync: bool):
    """Linear, BatchNorm1d, Tanh, Linear in float64; with ``sync`` its BatchNorm
    converted by ``SyncBatchNorm.convert_sync_batchnorm``."""
    nv.manual_seed(21)
    model = nv.nn.Sequential(nv.nn.Linear(4, 6), nv.nn.BatchNorm1d(6, momentum=0.5),
                             nv.nn.Tanh(), nv.nn.Linear(6, 1)).to(nv.float64)
    return SyncBatchNorm.convert_sync_batchnorm(model) if sync else model


def train_sync_bn_mlp(model, x: np.ndarray, y: np.ndarray, ddp: bool) -> dict[str, np.ndarray]:
    """2 SGD steps of ``model`` (in DDP when ``ddp``) on ``x, y`` (this rank's share),
    mean squared error; the final state."""
    net = DDP(model) if ddp else model
    opt = nv.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        loss = ((net(nv.tensor(x)) - nv.tensor(y)) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    return {k: v.numpy() for k, v in model.state_dict().items()}


def sync_batchnorm(out: str) -> None:
    """SyncBatchNorm with each rank holding its share of a global batch: two training
    forwards (the first differentiated, the second with rank 0 holding no samples),
    one in evaluation (which must exchange nothing); the differentiable all_reduce;
    DDP over a converted MLP."""
    from nova.distributed.nn import functional as dnn
    from nova.tensor.trace import live_pending
    rank = dist.get_rank()
    d = sync_batchnorm_data()
    lo = sum(SYNC_SHARES[:rank])
    part = slice(lo, lo + SYNC_SHARES[rank])
    bn = SyncBatchNorm(3, momentum=0.3, dtype=nv.float64)
    with nv.no_grad():
        bn.weight.copy_(nv.tensor(d["w"]))
        bn.bias.copy_(nv.tensor(d["b"]))
    x = nv.tensor(d["x"][part], requires_grad=True)
    y = bn(x)
    (y * nv.tensor(d["g"][part])).sum().backward()
    lo2 = sum(SYNC_SHARES2[:rank])
    y2 = bn(nv.tensor(d["x2"][lo2:lo2 + SYNC_SHARES2[rank]]))
    nv.realize()
    bn.eval()
    ye = bn(nv.tensor(d["x2"][part]))
    eval_collectives = len(live_pending.required)
    a = nv.tensor(np.arange(3.0) * (rank + 1), requires_grad=True)
    summed = dnn.all_reduce(a * 2.0)
    avg = dnn.all_reduce(a, dist.ReduceOp.AVG)
    ((summed * nv.tensor([1.0, 2.0, 3.0]) * (rank + 1)).sum() + (avg * avg).sum()).backward()
    m = d["mlp_x"].shape[0] // 2
    mlp = train_sync_bn_mlp(sync_bn_mlp(True), d["mlp_x"][rank * m:(rank + 1) * m],
                            d["mlp_y"][rank * m:(rank + 1) * m], ddp=True)
    np.savez(os.path.join(out, f"rank{rank}.npz"), y=y.numpy(), y2=y2.numpy(),
             ye=ye.numpy(), x_grad=x.grad.numpy(), w_grad=bn.weight.grad.numpy(),
             b_grad=bn.bias.grad.numpy(), running_mean=bn.running_mean.numpy(),
             running_var=bn.running_var.numpy(), batches=bn.num_batches_tracked.numpy(),
             eval_collectives=eval_collectives, summed=summed.numpy(), avg=avg.numpy(),
             a_grad=a.grad.numpy(), **{f"mlp/{k}": v for k, v in mlp.items()})


def main(argv: list[str]) -> None:
    mode, out = argv[0], argv[1]
    if mode == "single":
        return train(out, ddp=False)
    if mode == "single-accumulate":
        return train(out, ddp=False, accumulate=2)
    timeout = float(os.environ.get("NOVA_TEST_TIMEOUT", "60"))
    dist.init_process_group("mpi", timeout=timeout)
    try:
        {"ddp": lambda o: train(o, ddp=True),
         "ddp-accumulate": lambda o: train(o, ddp=True, accumulate=2),
         "collectives": collectives, "cuda-emulated": cuda_emulated, "hang": hang, "die": die,
         "mismatch": mismatch, "sync-batchnorm": sync_batchnorm}[mode](out)
    finally:
        if mode not in ("hang", "die", "mismatch"):
            dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])

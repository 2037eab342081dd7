"""Train a GPT preset on a byte-level corpus: ``python -m models.train``.

Each step (forward, backward, AdamW update) is one compiled Nova function; the
warmup + cosine learning rate enters it as a runtime input, so the loop compiles once.
Metrics go to ``<out>/metrics.jsonl``, one flushed line per step; ``--save`` writes a
checkpoint (model, optimizer, scheduler, RNG, step and the schedule's arguments) that
``--resume`` continues bit-identically.

The run stops with an error at the first NaN or infinite loss (``--allow-nonfinite``
keeps going), and a checkpoint is never written from parameters that are not finite,
so a diverged run cannot replace a good checkpoint.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any, NoReturn

import numpy as np
from tqdm import tqdm

import nova as nv
from models.data import ByteCorpus
from models.gpt import GPT, PRESETS, GPTConfig, preset
from nova import distributed as dist
from nova.nn import StateDictError
from nova.nn.parallel import DistributedDataParallel as DDP

# The arguments that define the learning-rate schedule and the update; a checkpoint
# records them so that --resume can tell when they change.
SCHEDULE_ARGS = ("steps", "warmup", "lr", "min_lr", "weight_decay")


class ResumeError(ValueError):
    """A --resume checkpoint cannot continue this run (unreadable, or another model)."""


class NonFiniteError(FloatingPointError):
    """A loss or the state about to be saved holds NaN or infinity."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line on stderr and exit status 2: the whole usage block would bury the
        one thing that is wrong."""
        self.exit(2, f"train: error: {message} (see python -m models.train --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m models.train", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="small", choices=sorted(PRESETS))
    p.add_argument("--steps", type=int, default=200,
                   help="the total number of optimizer steps, counted from step 0 of the "
                        "original run: --resume continues from the checkpoint's step up to "
                        "this one. It also sets the length of the warmup + cosine schedule, "
                        "so a different value on --resume changes the learning rate from the "
                        "resumed step on (a warning says so)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--block", type=int, default=None, help="context length (default: preset)")
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    p.add_argument("--min-lr", type=float, default=None,
                   help="final learning rate (default: --lr / 10)")
    p.add_argument("--warmup", type=int, default=None,
                   help="warmup steps (default: 5%% of --steps)")
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0, help="0 disables clipping")
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--eval-interval", type=int, default=50,
                   help="evaluate every N steps (and after the last)")
    p.add_argument("--eval-batches", type=int, default=4)
    p.add_argument("--data", default=None, help="a text file (default: Python's stdlib source)")
    p.add_argument("--max-bytes", type=int, default=None, help="use only the first N bytes")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--remat", default=None, choices=["off", "default", "aggressive"],
                   help="how much of the forward the backward recomputes (nv.set_remat)")
    p.add_argument("--out", default="runs/latest", help="directory for metrics and checkpoints")
    p.add_argument("--save", default=None, help="checkpoint path written at the end")
    p.add_argument("--save-every", type=int, default=0,
                   help="also checkpoint every N steps (needs --save; 0: only at the end)")
    p.add_argument("--resume", default=None, help="checkpoint to continue from")
    p.add_argument("--allow-nonfinite", action="store_true",
                   help="keep training after a NaN or infinite loss instead of stopping with "
                        "an error (checkpoints are still never written from non-finite "
                        "parameters)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--no-compile", action="store_true",
                   help="record every step instead of replaying it with nv.compile")
    p.add_argument("--ddp", action="store_true",
                   help="data-parallel over the ranks mpiexec started (mpiexec -n N python "
                        "-m models.train --ddp ...): --batch-size is the global batch, each "
                        "rank trains on its share, gradients are averaged in the step; rank 0 "
                        "alone logs, evaluates and checkpoints")
    p.add_argument("--bucket-mb", type=float, default=2.0,
                   help="--ddp's gradient bucket size in MiB (DistributedDataParallel's "
                        "bucket_cap_mb; PyTorch's 25 leaves the medium preset one bucket "
                        "that completes with the backward, nothing to overlap: "
                        "benchmarks/results/ddp_small_medium*.md)")
    return p


def _path_problem(path: str, want_dir: bool) -> str | None:
    """Why ``path`` cannot be written as a file (or created as a directory), if it cannot:
    found before training instead of when the results are ready."""
    if os.path.isdir(path) and not want_dir:
        return "is a directory"
    if os.path.exists(path) and want_dir and not os.path.isdir(path):
        return "exists and is not a directory"
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return f"cannot be created: {parent} is not a directory"
    if not os.access(parent if not os.path.exists(path) else path, os.W_OK):
        return "is not writable"
    return None


def check_args(p: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """Reject values that would crash or misbehave later in the run (ZeroDivisionError at
    the first evaluation, a save that fails after the last step, a schedule that rises)."""
    def need(ok: bool, message: str) -> None:
        if not ok:
            p.error(message)

    for flag in ("steps", "batch_size", "eval_interval", "eval_batches"):
        value = getattr(a, flag)
        need(value >= 1, f"--{flag.replace('_', '-')} must be at least 1, got {value}")
    for flag in ("block", "max_bytes"):
        value = getattr(a, flag)
        need(value is None or value >= 1,
             f"--{flag.replace('_', '-')} must be at least 1, got {value}")
    for flag in ("warmup", "save_every", "seed"):
        value = getattr(a, flag)
        need(value is None or value >= 0,
             f"--{flag.replace('_', '-')} must be non-negative, got {value}")
    for flag in ("lr", "min_lr", "weight_decay", "grad_clip", "dropout", "bucket_mb"):
        value = getattr(a, flag)
        need(value is None or math.isfinite(value),
             f"--{flag.replace('_', '-')} must be a finite number, got {value}")
    need(a.lr > 0, f"--lr must be positive, got {a.lr}")
    need(a.min_lr is None or 0 <= a.min_lr <= a.lr,
         f"--min-lr must be between 0 and --lr {a.lr} (the cosine decays to it), got {a.min_lr}")
    need(a.weight_decay >= 0, f"--weight-decay must be non-negative, got {a.weight_decay}")
    need(a.grad_clip >= 0, f"--grad-clip must be non-negative (0 disables), got {a.grad_clip}")
    need(a.bucket_mb > 0, f"--bucket-mb must be positive, got {a.bucket_mb}")
    need(0 <= a.dropout < 1, f"--dropout must be in [0, 1), got {a.dropout}")
    need(not a.save_every or a.save is not None,
         f"--save-every {a.save_every} needs --save PATH to say where the checkpoints go")
    for flag in ("data", "resume"):
        path = getattr(a, flag)
        need(path is None or os.path.isfile(path),
             f"--{flag} {path}: " + ("is a directory, not a file" if path and os.path.isdir(path)
                                     else "no such file"))
    for flag, want_dir in (("save", False), ("out", True)):
        path = getattr(a, flag)
        problem = path is not None and _path_problem(path, want_dir)
        need(not problem, f"--{flag} {path} {problem}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = build_parser()
    args = p.parse_args(argv)
    check_args(p, args)
    return args


def model_config(args: argparse.Namespace) -> GPTConfig:
    overrides: dict[str, Any] = {"dropout": args.dropout}
    if args.block is not None:
        overrides["block"] = args.block
    return preset(args.preset, **overrides)


def load_corpus(args: argparse.Namespace, block: int) -> ByteCorpus:
    """The run's corpus, checked to hold a full context in both splits (else a short file
    fails at the first evaluation, possibly after the whole run)."""
    corpus = ByteCorpus.load(args.data, args.max_bytes, seed=args.seed)
    try:
        corpus.check_context(block)
    except ValueError as e:
        source = f"--data {args.data}" if args.data else "the default corpus"
        if args.max_bytes:
            source += f" (first {args.max_bytes} bytes)"
        raise ValueError(f"{source}: {e}; use more data or a smaller --block") from None
    return corpus


def schedule_args(args: argparse.Namespace) -> dict[str, Any]:
    """The resolved values of SCHEDULE_ARGS (defaults filled in) for this run."""
    warmup = args.warmup if args.warmup is not None else max(1, args.steps // 20)
    min_lr = args.min_lr if args.min_lr is not None else args.lr / 10
    return {"steps": args.steps, "warmup": warmup, "lr": args.lr, "min_lr": min_lr,
            "weight_decay": args.weight_decay}


def make_schedule(opt: nv.optim.Optimizer, steps: int, warmup: int, lr: float,
                  min_lr: float) -> nv.optim.lr_scheduler.LRScheduler:
    """Linear warmup from lr/100, then cosine decay to ``min_lr``."""
    sched = nv.optim.lr_scheduler
    warm = sched.LinearLR(opt, start_factor=0.01, end_factor=1.0, total_iters=max(warmup, 1))
    cos = sched.CosineAnnealingLR(opt, T_max=max(steps - warmup, 1), eta_min=min_lr)
    return sched.SequentialLR(opt, [warm, cos], milestones=[warmup])


def evaluate(model: GPT, corpus: ByteCorpus, batches: int, batch_size: int, block: int) -> float:
    model.eval()
    total = 0.0
    with nv.no_grad():
        for i in range(batches):
            x, y = corpus.batch("val", i, batch_size, block)
            _, loss = model(nv.tensor(x), nv.tensor(y))
            total += loss.item()
    model.train()
    return total / batches


def nonfinite_entries(obj: Any, prefix: str = "") -> list[str]:
    """Paths (``model.h.0.attn.c_attn.weight``) of the floating-point tensors in a nested
    state that hold NaN or infinity."""
    if isinstance(obj, dict):
        return [n for k, v in obj.items() for n in nonfinite_entries(v, f"{prefix}{k}.")]
    if isinstance(obj, (list, tuple)):
        return [n for i, v in enumerate(obj) for n in nonfinite_entries(v, f"{prefix}{i}.")]
    if isinstance(obj, nv.Tensor) and obj.dtype.is_floating_point:
        values = obj.numpy()
        return [] if np.isfinite(values.astype(np.float32, copy=False)).all() else [prefix[:-1]]
    if isinstance(obj, float) and not math.isfinite(obj):
        return [prefix[:-1]]
    return []


class Trainer:
    """Owns the model, optimizer, schedule and data for one run."""

    def __init__(self, args: argparse.Namespace, corpus: ByteCorpus | None = None):
        self.args = args
        self.rank, self.world = ((dist.get_rank(), dist.get_world_size())
                                 if getattr(args, "ddp", False) else (0, 1))
        nv.manual_seed(args.seed)
        if args.remat is not None:
            nv.set_remat(args.remat)
        self.cfg = model_config(args)
        self.corpus = corpus if corpus is not None else load_corpus(args, self.cfg.block)
        self.model = GPT(self.cfg)
        # what the step calls: the model, or its DistributedDataParallel wrapper (which
        # starts every rank from rank 0's weights and averages the gradients)
        self.net = (DDP(self.model, bucket_cap_mb=args.bucket_mb) if self.world > 1
                    else self.model)
        if self.world > 1:
            nv.manual_seed(args.seed + self.rank)    # each rank its own dropout masks
        decay = [p for n, p in self.model.named_parameters() if p.ndim >= 2]
        no_decay = [p for n, p in self.model.named_parameters() if p.ndim < 2]
        self.opt = nv.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr, betas=(0.9, 0.95))
        self.schedule = schedule_args(args)
        s = self.schedule
        self.sched = make_schedule(self.opt, s["steps"], s["warmup"], s["lr"], s["min_lr"])
        self.step = 0
        self._step_fn = self._update if args.no_compile else nv.compile(self._update)
        self.resume_changes: dict[str, tuple[Any, Any]] = {}
        if args.resume:
            self.load(args.resume)

    def state(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "optimizer": self.opt.state_dict(),
                "scheduler": self.sched.state_dict(), "rng": list(nv.default_generator.get_state()),
                "step": self.step, "config": self.model.config_dict(),
                "schedule": dict(self.schedule)}

    def save(self, path: str) -> None:
        """Write a checkpoint, refusing state with NaN or infinity: a diverged model is
        worth nothing, and writing it would replace the last good checkpoint."""
        state = self.state()
        bad = nonfinite_entries({"model": state["model"], "optimizer": state["optimizer"]})
        if bad:
            shown = ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
            raise NonFiniteError(f"not saving {path}: after step {self.step}, {shown} "
                                 f"hold{'s' if len(bad) == 1 else ''} NaN or infinity")
        nv.save(state, path)

    def _read_checkpoint(self, path: str) -> dict[str, Any]:
        """The checkpoint at ``path``, checked to be a training checkpoint of this model;
        every way it can fail is a ResumeError naming the file."""
        try:
            ck = nv.load(path)
        except (ValueError, OSError) as e:   # CheckpointError (corrupted), or unopenable
            raise ResumeError(f"resume: {e}") from e
        needed = {"model", "optimizer", "step", "rng", "config"}
        if not isinstance(ck, dict) or not needed <= set(ck):
            raise ResumeError(f"resume: {path} is not a training checkpoint (it needs the "
                              f"entries {', '.join(sorted(needed))})")
        if ck["config"] != self.model.config_dict():
            raise ResumeError(f"resume: {path} was trained with config {ck['config']}, "
                              f"this run uses {self.model.config_dict()}")
        return ck

    def load(self, path: str) -> None:
        ck = self._read_checkpoint(path)
        try:
            self.model.load_state_dict(ck["model"])
            self.opt.load_state_dict(ck["optimizer"])
        except (ValueError, KeyError, StateDictError) as e:
            raise ResumeError(f"resume: {path}: {e}") from e
        self.step = int(ck["step"])
        # This run's arguments define the schedule and the decay from the resumed step on;
        # the optimizer's groups carry the checkpoint's weight decay, and the scheduler's
        # saved milestones the checkpoint's warmup, so restoring either would mix two runs.
        for group, decay in zip(self.opt.param_groups, (self.args.weight_decay, 0.0)):
            group["weight_decay"] = decay
            group["initial_lr"] = self.args.lr
        recorded = ck.get("schedule") or {}
        self.resume_changes = {k: (recorded.get(k), v) for k, v in self.schedule.items()
                               if recorded.get(k) != v}
        if set(self.resume_changes) & {"steps", "warmup", "lr", "min_lr"}:
            # this run's schedule at the resumed step, its rate written into the groups
            rates = self.sched.lr_at(self.step)
            self.sched.load_state_dict({"last_epoch": self.step, "_last_lr": list(rates)})
            for group, rate in zip(self.opt.param_groups, rates):
                group["lr"] = rate
        else:
            # the same schedule: the scheduler's state, and the rate the optimizer's
            # groups brought back, continue the run bit for bit
            self.sched.load_state_dict(ck["scheduler"])
        nv.default_generator.set_state(tuple(ck["rng"]))

    def _update(self, x: nv.Tensor, y: nv.Tensor) -> nv.Tensor:
        """One optimizer step on a batch: forward, backward, clipping, AdamW, schedule.
        Compiled with ``nv.compile`` unless ``--no-compile``: after two recorded steps
        it replays without running this Python."""
        _, loss = self.net(x, y)
        loss.backward()
        if self.args.grad_clip > 0:
            nv.nn.utils.clip_grad_norm_(self.model.parameters(), self.args.grad_clip)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.sched.step()
        if self.world > 1:      # the loss of the whole global batch, as one process's
            loss = dist.reduced(loss, dist.ReduceOp.AVG)
        return loss

    def train_step(self) -> float:
        a = self.args
        x, y = self.corpus.batch("train", self.step, a.batch_size, self.cfg.block)
        if self.world > 1:      # this rank's share of the global batch
            share = a.batch_size // self.world
            x = x[self.rank * share:(self.rank + 1) * share]
            y = y[self.rank * share:(self.rank + 1) * share]
        loss = self._step_fn(nv.tensor(x), nv.tensor(y))
        self.step += 1
        return loss.item()


def _warn(message: str) -> None:
    print(f"train: warning: {message}", file=sys.stderr, flush=True)


def _show(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _resume_warning(trainer: Trainer, path: str) -> str | None:
    changes = trainer.resume_changes
    if not changes:
        return None
    if all(old is None for old, _ in changes.values()):
        return (f"{path} does not record the schedule it was trained with; from step "
                f"{trainer.step} on, this run's --steps {trainer.args.steps} warmup + cosine "
                f"schedule applies (next lr {trainer.sched.get_last_lr()[0]:.3g})")
    listed = ", ".join(f"--{k.replace('_', '-')} {_show(old)} -> {_show(new)}"
                       for k, (old, new) in changes.items())
    return (f"resuming {path} (step {trainer.step}) with different training arguments: "
            f"{listed}; from step {trainer.step} on this run's values apply, so the learning "
            f"rate follows the warmup + cosine schedule over --steps {trainer.args.steps} "
            f"(next lr {trainer.sched.get_last_lr()[0]:.3g}), not the checkpoint's")


def prepare_metrics(path: str, step: int) -> int:
    """Keep one record per step for steps 1..``step`` (what the run being continued has
    done) and drop the rest: records past a resumed checkpoint, a fresh run's
    predecessor, a line torn by a kill. Appending after that never repeats a step number.
    Returns how many lines were dropped."""
    if not os.path.exists(path):
        return 0
    by_step: dict[int, str] = {}
    total = 0
    with open(path) as f:
        for line in f:
            total += 1
            try:
                s = int(json.loads(line)["step"])
            except (ValueError, KeyError, TypeError):
                continue
            if 1 <= s <= step:
                by_step[s] = line if line.endswith("\n") else line + "\n"
    dropped = total - len(by_step)
    if dropped:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.writelines(by_step[s] for s in sorted(by_step))
        os.replace(tmp, path)
    return dropped


def _json_number(value: float) -> float | None:
    """JSON has no NaN or infinity; a non-finite value is written as null."""
    return value if math.isfinite(value) else None


def setup(argv: list[str] | None = None) -> tuple[argparse.Namespace, Trainer, str]:
    """Parse and check the arguments, load the data and the checkpoint, and prepare the
    metrics file: everything that can fail on the user's input fails here, before the
    first step, as one ``train: error:`` line (exit status 2)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    check_args(parser, args)
    if args.ddp:
        if not dist.is_initialized():
            dist.init_process_group("mpi")
        world = dist.get_world_size()
        if args.batch_size % world:
            parser.error(f"--batch-size {args.batch_size} is the global batch and must "
                         f"divide among the {world} ranks")
        if dist.get_rank() != 0:
            args.quiet = True
    try:
        corpus = load_corpus(args, model_config(args).block)
    except ValueError as e:   # unreadable, or too short for one context
        parser.error(str(e))
    try:
        trainer = Trainer(args, corpus)
    except ResumeError as e:
        parser.error(str(e))
    lead = trainer.rank == 0        # the other ranks of --ddp write nothing
    if lead and args.resume and (message := _resume_warning(trainer, args.resume)):
        _warn(message)
    os.makedirs(args.out, exist_ok=True)
    metrics_path = os.path.join(args.out, "metrics.jsonl")
    if lead and (dropped := prepare_metrics(metrics_path, trainer.step)):
        kept = (f"the file continues after step {trainer.step}, the checkpoint's"
                if trainer.step else "a fresh run starts the file anew")
        _warn(f"dropped {dropped} line(s) of {metrics_path} left by an earlier or "
              f"interrupted run; {kept}")
    return args, trainer, metrics_path


def _nonfinite(loss: float, record: dict[str, Any], val_loss: float) -> list[str]:
    bad = [] if math.isfinite(loss) else [f"loss is {loss}"]
    if "val_loss" in record and not math.isfinite(val_loss):
        bad.append(f"validation loss is {val_loss}")
    return bad


def _save(trainer: Trainer, args: argparse.Namespace) -> None:
    """Checkpoint unless the state is not finite; under --allow-nonfinite that skips the
    save with a warning (the previous checkpoint stays), otherwise it stops the run."""
    try:
        trainer.save(args.save)
    except NonFiniteError as e:
        if not args.allow_nonfinite:
            raise
        _warn(f"{e}; {args.save} was left as it was")


def train(args: argparse.Namespace, trainer: Trainer, metrics_path: str
          ) -> tuple[list[float], float, list[float]]:
    """The loop: steps, metrics lines (flushed, so a killed run keeps them), evaluation,
    checkpoints. Non-finite values are checked where the loop reads them anyway (the loss
    once per step, the validation loss per evaluation) and before every save, so the check
    adds no host synchronization. Returns (losses, last validation loss, step times)."""
    tokens_per_step = args.batch_size * trainer.cfg.block
    lead = trainer.rank == 0      # the rank that evaluates, logs and checkpoints
    if not lead:
        metrics_path = os.devnull
    losses: list[float] = []
    val_loss = float("nan")
    step_times: list[float] = []
    warned = False
    bar = tqdm(total=args.steps, initial=trainer.step, disable=args.quiet, unit="step",
               dynamic_ncols=True, file=sys.stdout)
    with bar, open(metrics_path, "a") as metrics:
        while trainer.step < args.steps:
            lr = trainer.sched.get_last_lr()[0]   # the rate this step uses
            t0 = time.perf_counter()
            loss = trainer.train_step()
            dt_s = time.perf_counter() - t0
            step_times.append(dt_s)
            losses.append(loss)
            record = {"step": trainer.step, "loss": _json_number(loss), "lr": lr,
                      "step_s": dt_s, "tokens_per_s": tokens_per_step / dt_s}
            if lead and (trainer.step % args.eval_interval == 0 or trainer.step == args.steps):
                val_loss = evaluate(trainer.model, trainer.corpus, args.eval_batches,
                                    args.batch_size, trainer.cfg.block)
                record["val_loss"] = _json_number(val_loss)
            metrics.write(json.dumps(record, allow_nan=False) + "\n")
            metrics.flush()
            bar.set_postfix(loss=f"{loss:.3f}", val=f"{val_loss:.3f}",
                            tok_s=f"{tokens_per_step / dt_s:,.0f}")
            bar.update(1)
            if bad := _nonfinite(loss, record, val_loss):
                where = f"{' and '.join(bad)} at step {trainer.step} (lr {lr:.3g})"
                if not args.allow_nonfinite:
                    raise NonFiniteError(f"{where}; stopping. Lower --lr, or pass "
                                         "--allow-nonfinite to continue")
                if not warned:
                    _warn(f"{where}; continuing (--allow-nonfinite)")
                    warned = True
            if lead and args.save and args.save_every and trainer.step % args.save_every == 0:
                _save(trainer, args)
    if lead and args.save:
        _save(trainer, args)
    return losses, val_loss, step_times


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args, trainer, metrics_path = setup(argv)
    cfg = trainer.cfg
    tokens_per_step = args.batch_size * cfg.block
    say = print if trainer.rank == 0 else (lambda *a, **k: None)
    if trainer.world > 1:
        say(f"nova: data-parallel over {trainer.world} ranks, "
            f"{args.batch_size // trainer.world} sequences each", flush=True)
    say(f"nova: GPT {args.preset} ({trainer.model.num_parameters() / 1e6:.2f}M parameters), "
          f"corpus {len(trainer.corpus.train) / 1e6:.1f}M train bytes, "
          f"{tokens_per_step} tokens/step, steps {trainer.step}..{args.steps}", flush=True)
    try:
        losses, val_loss, step_times = train(args, trainer, metrics_path)
    except NonFiniteError as e:
        kept = f" ({args.save} was left as it was)" if args.save else ""
        raise SystemExit(f"train: error: {e}{kept}") from None
    steady = step_times[1:] or step_times
    stats = nv.debug.cache_stats()
    summary = {
        "preset": args.preset, "steps": trainer.step, "final_loss": losses[-1] if losses else None,
        "val_loss": val_loss, "uniform_loss": math.log(cfg.vocab),
        "first_step_s": step_times[0] if step_times else None,
        "median_tokens_per_s": tokens_per_step / float(np.median(steady)) if steady else None,
        "compiles": stats.misses, "cache_hits": stats.hits, "losses": losses,
    }
    say(f"done: loss {summary['final_loss']:.4f}, val {val_loss:.4f} (uniform "
          f"{summary['uniform_loss']:.4f}), {summary['median_tokens_per_s']:,.0f} tokens/s, "
          f"{stats.misses} compiles / {stats.hits} cache hits; metrics in {metrics_path}"
          if losses else "done: nothing to do (already at --steps)")
    return summary


if __name__ == "__main__":
    main()

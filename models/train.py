"""Train a GPT preset on a byte-level corpus: ``python -m models.train``.

Each step (forward, backward, AdamW update) is one compiled Nova function; the
warmup + cosine learning rate enters it as a runtime input, so the loop compiles once.
Metrics go to ``<out>/metrics.jsonl``; ``--save`` writes a checkpoint (model,
optimizer, scheduler, RNG and step) that ``--resume`` continues bit-identically.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any

import numpy as np
from tqdm import tqdm

import nova as nv
from models.data import ByteCorpus
from models.gpt import GPT, PRESETS, preset


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m models.train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="small", choices=sorted(PRESETS))
    p.add_argument("--steps", type=int, default=200, help="optimizer steps in total")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--block", type=int, default=None, help="context length (default: preset)")
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    p.add_argument("--min-lr", type=float, default=3e-4, help="final learning rate")
    p.add_argument("--warmup", type=int, default=None, help="warmup steps (default: 5%%)")
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0, help="0 disables clipping")
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--eval-interval", type=int, default=50)
    p.add_argument("--eval-batches", type=int, default=4)
    p.add_argument("--data", default=None, help="a text file (default: Python's stdlib source)")
    p.add_argument("--max-bytes", type=int, default=None, help="use only the first N bytes")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--remat", default=None, choices=["off", "default", "aggressive"],
                   help="how much of the forward the backward recomputes (nv.set_remat)")
    p.add_argument("--out", default="runs/latest", help="directory for metrics and checkpoints")
    p.add_argument("--save", default=None, help="checkpoint path written at the end")
    p.add_argument("--save-every", type=int, default=0, help="also checkpoint every N steps")
    p.add_argument("--resume", default=None, help="checkpoint to continue from")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    if args.steps < 1 or args.batch_size < 1:
        p.error("--steps and --batch-size must be positive")
    return args


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


class Trainer:
    """Owns the model, optimizer, schedule and data for one run."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        nv.manual_seed(args.seed)
        if args.remat is not None:
            nv.set_remat(args.remat)
        overrides: dict[str, Any] = {"dropout": args.dropout}
        if args.block is not None:
            overrides["block"] = args.block
        self.cfg = preset(args.preset, **overrides)
        self.corpus = ByteCorpus.load(args.data, args.max_bytes, seed=args.seed)
        self.model = GPT(self.cfg)
        decay = [p for n, p in self.model.named_parameters() if p.ndim >= 2]
        no_decay = [p for n, p in self.model.named_parameters() if p.ndim < 2]
        self.opt = nv.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr, betas=(0.9, 0.95))
        warmup = args.warmup if args.warmup is not None else max(1, args.steps // 20)
        self.sched = make_schedule(self.opt, args.steps, warmup, args.lr, args.min_lr)
        self.step = 0
        if args.resume:
            self.load(args.resume)

    def state(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "optimizer": self.opt.state_dict(),
                "scheduler": self.sched.state_dict(), "rng": list(nv.default_generator.get_state()),
                "step": self.step, "config": self.model.config_dict()}

    def save(self, path: str) -> None:
        nv.save(self.state(), path)

    def load(self, path: str) -> None:
        ck = nv.load(path)
        if ck.get("config") != self.model.config_dict():
            raise ValueError(f"resume: {path} was trained with config {ck.get('config')}, "
                             f"this run uses {self.model.config_dict()}")
        self.model.load_state_dict(ck["model"])
        self.opt.load_state_dict(ck["optimizer"])
        self.sched.load_state_dict(ck["scheduler"])
        nv.default_generator.set_state(tuple(ck["rng"]))
        self.step = int(ck["step"])

    def train_step(self) -> float:
        a = self.args
        x, y = self.corpus.batch("train", self.step, a.batch_size, self.cfg.block)
        _, loss = self.model(nv.tensor(x), nv.tensor(y))
        loss.backward()
        if a.grad_clip > 0:
            nv.nn.utils.clip_grad_norm_(self.model.parameters(), a.grad_clip)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.sched.step()
        self.step += 1
        return loss.item()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    metrics_path = os.path.join(args.out, "metrics.jsonl")
    trainer = Trainer(args)
    cfg = trainer.cfg
    tokens_per_step = args.batch_size * cfg.block
    print(f"nova: GPT {args.preset} ({trainer.model.num_parameters() / 1e6:.2f}M parameters), "
          f"corpus {len(trainer.corpus.train) / 1e6:.1f}M train bytes, "
          f"{tokens_per_step} tokens/step, steps {trainer.step}..{args.steps}", flush=True)
    losses: list[float] = []
    val_loss = float("nan")
    step_times: list[float] = []
    bar = tqdm(total=args.steps, initial=trainer.step, disable=args.quiet, unit="step",
               dynamic_ncols=True, file=sys.stdout)
    with open(metrics_path, "a") as metrics:
        while trainer.step < args.steps:
            t0 = time.perf_counter()
            loss = trainer.train_step()
            dt_s = time.perf_counter() - t0
            step_times.append(dt_s)
            losses.append(loss)
            record = {"step": trainer.step, "loss": loss, "lr": trainer.sched.get_last_lr()[0],
                      "step_s": dt_s, "tokens_per_s": tokens_per_step / dt_s}
            if trainer.step % args.eval_interval == 0 or trainer.step == args.steps:
                val_loss = evaluate(trainer.model, trainer.corpus, args.eval_batches,
                                    args.batch_size, cfg.block)
                record["val_loss"] = val_loss
            metrics.write(json.dumps(record) + "\n")
            bar.set_postfix(loss=f"{loss:.3f}", val=f"{val_loss:.3f}",
                            tok_s=f"{tokens_per_step / dt_s:,.0f}")
            bar.update(1)
            if args.save and args.save_every and trainer.step % args.save_every == 0:
                trainer.save(args.save)
    bar.close()
    if args.save:
        trainer.save(args.save)
    steady = step_times[1:] or step_times
    stats = nv.debug.cache_stats()
    summary = {
        "preset": args.preset, "steps": trainer.step, "final_loss": losses[-1] if losses else None,
        "val_loss": val_loss, "uniform_loss": math.log(cfg.vocab),
        "first_step_s": step_times[0] if step_times else None,
        "median_tokens_per_s": tokens_per_step / float(np.median(steady)) if steady else None,
        "compiles": stats.misses, "cache_hits": stats.hits, "losses": losses,
    }
    print(f"done: loss {summary['final_loss']:.4f}, val {val_loss:.4f} (uniform "
          f"{summary['uniform_loss']:.4f}), {summary['median_tokens_per_s']:,.0f} tokens/s, "
          f"{stats.misses} compiles / {stats.hits} cache hits; metrics in {metrics_path}"
          if losses else "done: nothing to do (already at --steps)")
    return summary


if __name__ == "__main__":
    main()

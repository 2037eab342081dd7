"""Nova: the GPT of ``models/gpt.py`` with ``nv.optim.AdamW``; one compiled step."""
from __future__ import annotations

import nova as nv
from benchmarks.common import BETAS, EPS, LR, WEIGHT_DECAY, Timer, Work
from models.gpt import GPT


def build(work: Work) -> GPT:
    nv.manual_seed(work.seed)
    return GPT(work.config)


def train(work: Work, model: GPT | None = None) -> tuple[list[float], list[float]]:
    model = model or build(work)
    opt = nv.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS,
                         weight_decay=WEIGHT_DECAY)
    batches = work.batches()
    timer, losses = Timer(), []
    for step in range(work.steps):
        x, y = batches(step)
        with timer:
            _, loss = model(nv.tensor(x), nv.tensor(y))
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
    return timer.times, losses

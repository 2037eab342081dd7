"""IREE: Nova's GPT training step exported as StableHLO (``nv.export.stablehlo``) and
compiled by IREE for this CPU -- an MLIR-based compiler measured on the same step.

The step is Nova's model (same initial weights as the ``nova`` peer), its forward and
backward as Nova records them, and AdamW's update written out with the optimizer's
runtime scalars (step size, bias correction, decay) as inputs, so one compiled module
serves every step: each call takes the batch, the parameters and both moments (as
IREE device arrays, fed back without a host copy) and this step's scalars, and returns
the loss and the new parameters and moments. The first step includes the export and
IREE's compile. No dropout (its keys would be per-step inputs too; the JAX peer has
none either).
"""
from __future__ import annotations

import math

import numpy as np

import nova as nv
from benchmarks.common import BETAS, EPS, LR, WEIGHT_DECAY, Timer, Work
from benchmarks.peers import iree_module, nova_gpt
from nova.tensor.realize import pending_graph


def _step_graph(work: Work):
    """The exported step's text and, per argument, where a call takes it from:
    ("x"|"y"), ("param"|"m"|"v", i), ("scalar", name) or ("fixed", array)."""
    model = nova_gpt.build(work)
    params = list(model.parameters())
    x0, y0 = work.batches()(0)
    x, y = nv.tensor(x0), nv.tensor(y0)
    ms = [nv.zeros(*p.shape) for p in params]
    vs = [nv.zeros(*p.shape) for p in params]
    scalars = {name: nv.tensor(np.float32(1.0)) for name in ("step_size", "bc2", "decay")}
    nv.realize(x, y, *ms, *vs, *scalars.values(), *params)
    start = [np.array(p.numpy()) for p in params]   # (before the step is recorded: a
    _, loss = model(x, y)                              # host read realizes what is pending)
    loss.backward()
    b1, b2 = BETAS
    outputs = [loss]
    new_p, new_m, new_v = [], [], []
    with nv.no_grad():
        for p, m, v in zip(params, ms, vs):        # Nova's AdamW (optim/adam.py)
            g = p.grad
            p1 = p * scalars["decay"]
            m1 = m * b1 + g * (1.0 - b1)
            v1 = v * b2 + g * g * (1.0 - b2)
            denom = nv.sqrt(v1) / scalars["bc2"] + EPS
            new_p.append(p1 - scalars["step_size"] * (m1 / denom))
            new_m.append(m1)
            new_v.append(v1)
    outputs += new_p + new_m + new_v
    roles: dict[int, tuple] = {id(x.node): ("x",), id(y.node): ("y",)}
    for i, (p, m, v) in enumerate(zip(params, ms, vs)):
        roles[id(p.node)], roles[id(m.node)], roles[id(v.node)] = \
            ("param", i), ("m", i), ("v", i)
    for name, t in scalars.items():
        roles[id(t.node)] = ("scalar", name)
    graph = pending_graph(*outputs)
    sources = [roles.get(id(n), ("fixed", np.array(b)))
               for n, b in zip(graph.arg_nodes, graph.arg_buffers)]
    del graph
    text = nv.export.stablehlo(*outputs)
    return text, sources, start


def train(work: Work) -> tuple[list[float], list[float]]:
    """Train ``work.steps`` steps through IREE; returns (step seconds, losses)."""
    import iree.runtime as rt
    timer, losses = Timer(), []
    batches = work.batches()
    with timer:                           # the first step: export, compile, run
        text, sources, start = _step_graph(work)
        call = iree_module.load(iree_module.compile_module(text), threads=2)
        fn = call.context.modules.module["main"]
        device = call.context.config.device
        state = {"param": [rt.asdevicearray(device, a) for a in start],
                 "m": [rt.asdevicearray(device, np.zeros_like(a)) for a in start],
                 "v": [rt.asdevicearray(device, np.zeros_like(a)) for a in start]}
        n = len(start)
        losses.append(_run(fn, sources, state, batches(0), 1, n))
    for i in range(1, work.steps):
        with timer:
            losses.append(_run(fn, sources, state, batches(i), i + 1, n))
    return timer.times, losses


def _run(fn, sources: list[tuple], state: dict, batch: tuple, t: int, n: int) -> float:
    """One step: the arguments by source, the outputs fed back; returns the loss."""
    b1, b2 = BETAS
    scalars = {"step_size": np.array(LR / (1.0 - b1 ** t), np.float32),
               "bc2": np.array(math.sqrt(1.0 - b2 ** t), np.float32),
               "decay": np.array(1.0 - LR * WEIGHT_DECAY, np.float32)}
    x, y = batch
    args = []
    for src in sources:
        kind = src[0]
        if kind == "x":
            args.append(x)
        elif kind == "y":
            args.append(y)
        elif kind == "scalar":
            args.append(scalars[src[1]])
        elif kind == "fixed":
            args.append(src[1])
        else:
            args.append(state[kind][src[1]])
    out = fn(*args)
    state["param"], state["m"], state["v"] = (list(out[1:1 + n]), list(out[1 + n:1 + 2 * n]),
                                              list(out[1 + 2 * n:1 + 3 * n]))
    return float(np.asarray(out[0]))

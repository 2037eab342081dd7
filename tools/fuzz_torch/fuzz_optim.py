"""optimizer/scheduler/clipping differential fuzzer. usage: python fuzz_optim.py START N"""
import sys, random, warnings
warnings.filterwarnings("ignore")
import numpy as np
import torch
import nova as nv
from common import run_seeds


def gen(r):
    opt = r.choice(["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"])
    lr = r.choice([0.1, 0.01, 0.5])
    kw = {"lr": lr}
    if opt == "SGD":
        mom = r.choice([0.0, 0.9, 0.5])
        kw["momentum"] = mom
        if mom and r.random() < 0.5:
            kw["nesterov"] = True
        elif mom:
            kw["dampening"] = r.choice([0.0, 0.3])
        kw["weight_decay"] = r.choice([0.0, 0.1])
        if r.random() < 0.2:
            kw["maximize"] = True
    elif opt in ("Adam", "AdamW"):
        kw["amsgrad"] = r.random() < 0.5
        kw["weight_decay"] = r.choice([0.0, 0.1, 0.01])
        kw["betas"] = r.choice([(0.9, 0.999), (0.5, 0.9)])
        kw["eps"] = r.choice([1e-8, 1e-3])
        if r.random() < 0.2:
            kw["maximize"] = True
    elif opt == "RMSprop":
        kw["centered"] = r.random() < 0.5
        kw["momentum"] = r.choice([0.0, 0.9])
        kw["alpha"] = r.choice([0.99, 0.9])
        kw["weight_decay"] = r.choice([0.0, 0.1])
    elif opt == "Adagrad":
        kw["lr_decay"] = r.choice([0.0, 0.1])
        kw["weight_decay"] = r.choice([0.0, 0.1])
        kw["initial_accumulator_value"] = r.choice([0.0, 0.5])
    sched = r.choice([None, "StepLR", "CosineAnnealingLR", "OneCycleLR", "LambdaLR", "ExponentialLR", "MultiStepLR", "LinearLR"])
    clip = r.choice([None, "norm2", "norminf", "value", "norm1"])
    groups = r.random() < 0.3
    return opt, kw, sched, clip, groups


def sched_make(L, name, o, steps):
    S = L.optim.lr_scheduler
    if name == "StepLR":
        return S.StepLR(o, step_size=2, gamma=0.5)
    if name == "CosineAnnealingLR":
        return S.CosineAnnealingLR(o, T_max=3, eta_min=0.001)
    if name == "OneCycleLR":
        return S.OneCycleLR(o, max_lr=0.3, total_steps=steps + 1)
    if name == "LambdaLR":
        return S.LambdaLR(o, lambda e: 1.0 / (1 + e))
    if name == "ExponentialLR":
        return S.ExponentialLR(o, gamma=0.8)
    if name == "MultiStepLR":
        return S.MultiStepLR(o, milestones=[1, 3], gamma=0.3)
    if name == "LinearLR":
        return S.LinearLR(o, start_factor=0.2, total_iters=3)
    return None


def run(L, seed, opt, kw, sched, clip, groups, steps=5):
    rng = np.random.default_rng(seed)
    p0 = [rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4,)).astype(np.float32)]
    X = rng.standard_normal((steps, 5, 4)).astype(np.float32)
    ps = [L.tensor(a, requires_grad=True) for a in p0]
    if groups:
        params = [{"params": [ps[0]]}, {"params": [ps[1]], "lr": kw["lr"] * 2}]
    else:
        params = ps
    o = getattr(L.optim, opt)(params, **kw)
    s = sched_make(L, sched, o, steps)
    hist = []
    for t in range(steps):
        o.zero_grad()
        x = L.tensor(X[t])
        y = L.tanh(x @ ps[0].t()).sum(-1) * ps[1].sum() + (ps[0] ** 2).sum() * 0.1
        y.pow(2).mean().backward()
        if clip == "norm2":
            L.nn.utils.clip_grad_norm_(ps, 0.5)
        elif clip == "norminf":
            L.nn.utils.clip_grad_norm_(ps, 0.3, norm_type=float("inf"))
        elif clip == "norm1":
            L.nn.utils.clip_grad_norm_(ps, 0.7, norm_type=1.0)
        elif clip == "value":
            L.nn.utils.clip_grad_value_(ps, 0.2)
        o.step()
        if s is not None:
            s.step()
        hist.append([p.detach().numpy().copy() for p in ps] + [np.array([g["lr"] for g in o.param_groups], dtype=np.float64)])
    return hist


def check(seed):
    r = random.Random(seed)
    cfg = gen(r)
    try:
        th = run(torch, seed, *cfg)
    except Exception:
        return "torch_err"
    try:
        nh = run(nv, seed, *cfg)
    except Exception as e:
        print("SEED", seed, cfg, "NOVA EXC", type(e).__name__, str(e)[:300])
        return "err"
    for t, (a, b) in enumerate(zip(th, nh)):
        for i, (x, y) in enumerate(zip(a, b)):
            if not np.allclose(x, y, rtol=1e-4, atol=1e-5):
                print("=" * 60)
                print("SEED", seed, cfg, "step", t, "item", i, "maxdiff", np.abs(x - y).max())
                print("  torch", x.ravel()[:6], "\n  nova ", y.ravel()[:6])
                return "bad"
    return "ok"


if __name__ == "__main__":
    run_seeds(check, int(sys.argv[1]), int(sys.argv[2]))

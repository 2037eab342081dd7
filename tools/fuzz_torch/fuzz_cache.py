"""Cache-conflation differential fuzzer: families of programs that differ in one detail,
run in one process in shuffled order (so every cache is hot), each member compared with
PyTorch; a mismatch is confirmed against the same member run alone in a fresh process
with ``NOVA_CACHE=0`` (``cold``): only ``hot != cold`` is a cache bug, ``cold != torch``
is an ordinary deviation (printed in one line, judged by hand).

usage: python fuzz_cache.py START N [mode,...]      (START 1: replay one case)
modes (default: all, one picked per seed):
  hot      a family in this process, shuffled, some members twice; sometimes with a
           tiny in-memory step cache (evictions mid-family)
  grad     the same with a backward pass (backward templates, stamped functions)
  compile  one ``nv.compile``d function called with variants of its arguments, each
           several times (replays), against the uncompiled Nova call
  optim    optimizers of one class differing in one hyperparameter, params of one
           shape, in one process; 3 steps each, against PyTorch
  disk     process A runs the family with NOVA_CACHE_DIR=<fresh dir> (and the step disk
           cache on for small steps: ``step_cache.MIN_OPS = 1``), process B runs it in
           another order over the same dir (disk-cache key conflation)
  fault    like disk, but the cache files are damaged between A and B (truncated,
           bit-flipped, emptied, swapped between two siblings' entries, a step entry
           replaced by a sibling's or its kernels deleted, run concurrently, a tiny
           step-disk limit): B must match or raise a clear error, never be wrong.
           (Kernel-entry truncation/bit flips/random payloads/links/FIFOs are
           tests/runtime/test_kernel_cache_faults.py's: here only the step entries and
           cross-sibling swaps.)
  random   random ops (dropout p, seeds, generators, bernoulli p): every member twice
           in shuffled order must repeat bit for bit, and each must show its own p

Bugs it found, fixed on 2026-12-07 (``tests/test_capture_guards.py``): ``nv.compile``'s
guard keyed Python float arguments by ``==``, so ``f(x, -0.0)`` replayed the steps
recorded for ``f(x, 0.0)``; and it left out the default dtype and the autocast state, so
a replay recorded under one ``nv.set_default_dtype``/``nv.autocast`` returned the other's
dtype. Not cache bugs, printed as deviations: the gradient of the values of
``index_put``/``scatter`` at duplicate indices (Nova gives the overwritten ones 0).
A crafted step entry (another step's payload under a recomputed header) is loaded:
outside the cache's trust model, reported as "B raised" or a mismatch labelled crafted.

Environment: FUZZ_CACHE_SCRATCH (temporary cache dirs, default $TMPDIR/fuzz_cache),
FUZZ_CACHE_VERBOSE=1 (disk/fault: print both processes' cache statistics).
"""
import json
import os
import pickle
import random
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

warnings.filterwarnings("ignore")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import numpy as np  # noqa: E402

WORKER = "--worker" in sys.argv
if not WORKER:
    import torch  # noqa: E402
import nova as nv  # noqa: E402

MODES = ["hot", "grad", "compile", "optim", "disk", "fault", "random"]
WEIGHTS = {"hot": 5, "grad": 3, "compile": 3, "optim": 2, "disk": 1, "fault": 1, "random": 2}
F32_ONE_PLUS = 1.0 + 2.0 ** -30          # float32-equal to 1.0, float64 not
BIG = 2 ** 53


# ------------------------------------------------------------------ families
# A family: {"inputs": {name: ndarray}, "members": [code, ...], "grad": [names],
#            "signzero": bool, "tol": float}. A code is an expression in L (torch or
# nova), F (L.nn.functional) and the inputs, or statements that set ``out``.

def arr(rng, shape, dtype="float32", lo=-3, hi=3, special=False):
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("int") or dtype.startswith("uint"):
        lo2 = 0 if dtype.startswith("uint") else lo
        return rng.integers(lo2, hi + 1, size=shape).astype(dtype)
    a = rng.standard_normal(shape) * (hi - lo) / 4
    if rng.random() < 0.3:
        a = np.round(a * 2) / 2
    if special and a.size:
        flat = a.reshape(-1)
        for _ in range(rng.integers(1, 3)):
            flat[rng.integers(0, flat.size)] = rng.choice([np.nan, np.inf, -np.inf, 0.0, -0.0])
    return a.astype(dtype)


def shp(r):
    return r.choice([(3, 4), (2, 3), (4, 3), (2, 2, 3), (5,), (3, 1)])


CONST_SETS = [
    [2.0, 3.0, 0.5], [0.0, -0.0], [1.0, F32_ONE_PLUS], [float("nan"), float("inf"), -float("inf")],
    [1e-8, 1e-7, 0.0], [2.5, -2.5], [1, 1.0], [0.1, 0.1 + 2 ** -40], [-1.0, -0.0, 0.0, 1.0],
]
CONST_OPS = [  # (code with C, needs nonneg/other, signzero matters)
    ("x * C", False), ("x + C", False), ("C - x", False), ("x / C", True), ("C / x", True),
    ("L.atan2(x * 0 + C, x)", True), ("x.clamp(min=C)", False), ("x.clamp(max=C)", False),
    ("L.where(x > 0, x, C)", True), ("x.masked_fill(x < 0, C)", True), ("x.pow(C)", False),
    ("L.pow(C, x)", False), ("x.fmod(C)", False), ("x.remainder(C)", False),
    ("F.leaky_relu(x, C)", True), ("x.lerp(y, C)", False), ("F.pad(x, (1, 1), value=C)", True),
    ("L.nan_to_num(x, nan=C)", True), ("x.eq(C)", False), ("x.gt(C)", False),
    ("L.maximum(x, L.full_like(x, C))", True), ("F.elu(x, alpha=C)", False),
    ("x.add(y, alpha=C)", False), ("x.addcmul(y, x, value=C)", False), ("L.full_like(x, C)", True),
    ("F.hardtanh(x, min_val=-abs(C) - 1, max_val=abs(C) + 1)", False), ("x.copysign(C)", True),
    ("1 / (x * 0 + C)", True), ("L.sign(x * 0 + C)", True), ("x.new_full((2,), C)", True),
]


def fam_const(r, rng):
    code, sz = r.choice(CONST_OPS)
    consts = r.choice(CONST_SETS)
    if code in ("x.pow(C)", "L.pow(C, x)") and r.random() < 0.5:
        consts = r.choice([[2, 3, 2.0, 0.5], [-1, -2.0, 0], [0.5, 0.5 + 2 ** -40]])
    s = shp(r)
    inp = {"x": arr(rng, s, special=r.random() < 0.3), "y": arr(rng, s)}
    if r.random() < 0.3:
        for k in inp:
            inp[k] = inp[k].astype("float64")
    return {"inputs": inp, "members": [code.replace("C", repr(c)) for c in consts],
            "signzero": sz, "tol": 1e-5}


INT_OPS = ["x + C", "x * C", "x - C", "x // C", "x % C", "x & C", "x | C", "x ^ C", "x << C",
           "x >> C", "x == C", "L.where(x > 0, x, C)", "x.clamp(min=C)", "L.full_like(x, C)",
           "x.masked_fill(x < 0, C)", "L.div(x, C, rounding_mode='floor')",
           "L.div(x, C, rounding_mode='trunc')", "L.div(x, C)"]


def fam_int_const(r, rng):
    code = r.choice(INT_OPS)
    dt = r.choice(["int64", "int32", "int16", "uint8", "int8"])
    if code in ("x // C", "x % C", "L.div(x, C, rounding_mode='floor')",
                "L.div(x, C, rounding_mode='trunc')", "L.div(x, C)"):
        consts = r.choice([[3, -3], [2, 5, 7], [1, -1]])
    elif code in ("x << C", "x >> C"):
        consts = [1, 2, 3]
    elif dt == "int64" and code in ("x + C", "x - C", "x == C", "L.full_like(x, C)",
                                    "L.where(x > 0, x, C)", "x.masked_fill(x < 0, C)"):
        consts = r.choice([[BIG, BIG + 1, BIG + 3], [2 ** 62, 2 ** 62 + 1], [-BIG - 1, -BIG]])
    else:
        consts = r.choice([[1, 2, 3], [0, True, 1], [-1, 1], [5, 7]])
        if dt.startswith("uint"):
            consts = [c for c in consts if c >= 0] or [1, 2]
    if code in ("x << C", "x >> C", "x & C", "x | C", "x ^ C") and any(type(c) is bool for c in consts):
        consts = [1, 2]
    s = shp(r)
    inp = {"x": arr(rng, s, dt, -5, 5)}
    if code == "x.masked_fill(x < 0, C)" or code == "L.where(x > 0, x, C)":
        if dt.startswith("uint") or dt in ("int8", "int16", "int32"):
            consts = [c for c in consts if -100 < c < 100] or [1, 2]
    return {"inputs": inp, "members": [code.replace("C", repr(c)) for c in consts], "tol": 0}


DT_EXPRS = ["x.to(L.DT) * 3 + 1", "(x.to(L.DT) + y.to(L.DT)).sum(0)", "x.to(L.DT).exp().sum()",
            "(x.to(L.DT) / 3).to(L.float64)", "x.to(L.DT).cumsum(0)", "x.to(L.DT).abs().max(0)[0]",
            "L.where(x > 0, x.to(L.DT), y.to(L.DT))", "x.to(L.DT).mean(-1)", "(x.to(L.DT) * 2.5).to(L.float32)",
            "x.to(L.DT).sort(-1)[0]", "x.to(L.DT) // 2", "x.to(L.DT).neg().to(L.int64)"]


def fam_dtype(r, rng):
    e = r.choice(DT_EXPRS)
    dts = r.sample(["float32", "float64", "float16", "bfloat16", "int32", "int64", "int16",
                    "uint8", "bool"], r.choice([3, 4, 5]))
    if "mean" in e or "exp" in e:
        dts = [d for d in dts if d.startswith("float") or d == "bfloat16"] or ["float32", "float64"]
    if "// 2" in e or "neg" in e:
        dts = [d for d in dts if d != "bool"] or ["int32", "int64"]
    s = shp(r)
    inp = {"x": arr(rng, s, lo=-4, hi=4), "y": arr(rng, s)}
    if r.random() < 0.5:
        inp["x"] = np.round(inp["x"] * 4) / 4
    return {"inputs": inp, "members": [e.replace("DT", d) for d in dts], "tol": 2e-2}


VIEWS = ["x[1:]", "x[:-1]", "x[::2]", "x[1::2]", "x.t()", "x.flip(0)", "x[:, 1:]", "x[:, :-1]",
         "x.narrow(1, 1, 2)", "x.narrow(1, 0, 2)", "x.narrow(0, 1, 2)", "x.as_strided((2, 2), (1, 4), 0)",
         "x.as_strided((2, 2), (1, 4), 1)", "x.as_strided((2, 2), (4, 1), 1)",
         "x.as_strided((2, 2), (4, 1), 2)", "x.as_strided((3,), (5,), 0)", "x.as_strided((3,), (4,), 1)",
         "x[0]", "x[1]", "x[:, 0]", "x[:, 2]", "x.unsqueeze(0).expand(2, 3, 4)[1]",
         "x[None].expand(2, 3, 4).sum(0)", "x.reshape(4, 3)", "x.reshape(2, 6)", "x.view(12)[3:9]",
         "x.t()[1:]", "x.t()[:, 1:]", "x.diagonal()", "x.diagonal(1)", "x.diagonal(-1)",
         "x.unfold(1, 2, 1)", "x.unfold(1, 2, 2)", "x[x.shape[0] - 1:]", "x.roll(1, 1)", "x.roll(-1, 1)"]
VIEW_POST = ["V * 2 + 1", "V.sum(0)", "V.cumsum(-1)", "V.contiguous()", "V.exp()", "(V - V.mean()).abs()",
             "V.sort(-1)[0]", "V.max(-1)[0]", "V.clone().add_(1)", "V.argmax()"]


def fam_view(r, rng):
    post = r.choice(VIEW_POST)
    views = r.sample(VIEWS, r.choice([3, 4, 6]))
    inp = {"x": arr(rng, (3, 4))}
    return {"inputs": inp, "members": [post.replace("V", "(" + v + ")") for v in views], "tol": 1e-5}


INPLACE = ["out = x.clone(); out[W].mul_(2); out", "out = x.clone(); out[W] = 7.0",
           "out = x.clone(); out[W].add_(out[W]); out", "out = x.clone(); out[W].zero_()",
           "out = x.clone(); v = out[W]; v.mul_(-1); out = out + v.sum()",
           "out = x.clone(); out[W].copy_(y[W]); out", "out = x.clone(); out.t()[W].add_(1.5)",
           "out = x.clone(); out[W].clamp_(min=0)", "out = x.clone(); out[W].fill_(-0.0); out = 1 / out"]
WINDOWS = ["1:", ":-1", "::2", "1::2", ":, 1:", ":, :-1", "0", "1", ":, 0", ":, 2", "1:2, 1:3", "0:2, 2:",
           "..., 1", "-1"]


def fam_inplace(r, rng):
    code = r.choice(INPLACE)
    ws = r.sample(WINDOWS, r.choice([3, 5]))
    if "out.t()" in code:
        ws = [w for w in ws if "," not in w and "..." not in w] or ["0", "1:"]
    inp = {"x": arr(rng, (3, 4)), "y": arr(rng, (3, 4))}
    return {"inputs": inp, "members": [code.replace("W", w) for w in ws], "tol": 1e-5, "signzero": True}


BCAST = [(3, 4), (4,), (3, 1), (1, 4), (1, 1), (), (2, 3, 4), (2, 1, 4), (2, 3, 1)]
BCAST_OPS = ["x + y", "x * y - y", "L.maximum(x, y)", "L.where(x > y, x, y)", "L.atan2(x, y)",
             "(x + y).sum(-1)", "(x * y).amax(0)", "x.lerp(y, 0.3)", "L.minimum(y, x) * 2"]


def fam_bcast(r, rng):
    code = r.choice(BCAST_OPS)
    xs = r.choice([(3, 4), (2, 3, 4)])
    ys = r.sample([s for s in BCAST if len(s) <= len(xs) or xs == (2, 3, 4)], 4)
    inp = {"x": arr(rng, xs)}
    members = []
    for k, s in enumerate(ys):
        inp[f"y{k}"] = arr(rng, s)
        members.append(code.replace("y", f"y{k}"))
    return {"inputs": inp, "members": members, "tol": 1e-5}


RED_OPS = ["x.sum(D)", "x.mean(D)", "x.amax(D)", "x.amin(D)", "x.prod(D)", "x.std(D)", "x.var(D, correction=0)",
           "x.logsumexp(D)", "x.norm(dim=D)", "x.sum(D, keepdim=True)", "x.amax(D, keepdim=True)",
           "x.argmax(D)", "x.argmin(D, keepdim=True)", "x.cumsum(D)", "x.cumprod(D)", "x.cummax(D)[0]",
           "x.softmax(D)", "x.log_softmax(D)", "x.any(D)", "x.all(D)", "x.count_nonzero(D)"]


def fam_red(r, rng):
    code = r.choice(RED_OPS)
    dims = [0, 1, -1, (0, 1), (1,), (-2, -1), 2] if "cum" not in code and "softmax" not in code \
        and "arg" not in code else [0, 1, 2, -1]
    s = r.choice([(2, 3, 4), (3, 3, 2)])
    ms = [code.replace("D", repr(d)) for d in r.sample(dims, 4)]
    x = arr(rng, s)
    if "any" in code or "all" in code:
        x = (x > 0.5).astype(np.float32)
    return {"inputs": {"x": x}, "members": ms, "tol": 1e-4}


ATTR_FAMS = [
    ["x.sort(-1)[0]", "x.sort(-1, descending=True)[0]", "x.sort(0)[1]", "x.sort(0, descending=True, stable=True)[1]"],
    ["x.topk(2)[0]", "x.topk(2, largest=False)[0]", "x.topk(2, dim=0)[0]", "x.topk(1, sorted=False)[0]", "x.topk(3)[1]"],
    ["x.argmax(0)", "x.argmax(1)", "x.argmax()", "x.argmax(1, keepdim=True)", "x.argmin(0)"],
    ["L.div(x, y)", "L.div(x, y, rounding_mode='floor')", "L.div(x, y, rounding_mode='trunc')", "L.div(y, x)"],
    ["F.gelu(x)", "F.gelu(x, approximate='tanh')", "F.silu(x)", "F.mish(x)"],
    ["F.mse_loss(x, y)", "F.mse_loss(x, y, reduction='sum')", "F.mse_loss(x, y, reduction='none')",
     "F.l1_loss(x, y, reduction='sum')", "F.smooth_l1_loss(x, y, beta=0.5)", "F.smooth_l1_loss(x, y, beta=2.0)",
     "F.huber_loss(x, y, delta=0.5)", "F.huber_loss(x, y, delta=2.0)"],
    ["F.cross_entropy(x, t)", "F.cross_entropy(x, t, reduction='sum')", "F.cross_entropy(x, t, ignore_index=1)",
     "F.cross_entropy(x, t, ignore_index=2)", "F.cross_entropy(x, t, label_smoothing=0.1)",
     "F.cross_entropy(x, t, reduction='none', ignore_index=0)", "F.nll_loss(x.log_softmax(1), t, ignore_index=1)"],
    ["F.pad(x, (1, 2))", "F.pad(x, (2, 1))", "F.pad(x[None], (1, 2), mode='reflect')", "F.pad(x[None], (1, 2), mode='replicate')",
     "F.pad(x[None], (1, 2), mode='circular')", "F.pad(x, (1, 1, 1, 0), value=2.0)", "F.pad(x, (0, 0, 1, 0))"],
    ["x.std(1)", "x.std(1, correction=0)", "x.std(1, correction=2)", "x.var(0)", "x.var(0, unbiased=False)"],
    ["x.norm()", "x.norm(p=1)", "x.norm(p=3)", "x.norm(p=float('inf'))", "x.norm(p=-float('inf'))", "x.norm(p=0)"],
    ["x.round()", "x.round(decimals=1)", "x.round(decimals=2)", "x.round(decimals=-1)"],
    ["F.softplus(x)", "F.softplus(x, beta=2.0)", "F.softplus(x, beta=2.0, threshold=1.0)", "F.softplus(x, threshold=0.5)"],
    ["F.layer_norm(x, (4,))", "F.layer_norm(x, (4,), eps=1e-1)", "F.layer_norm(x, (3, 4))", "F.layer_norm(x, (4,), weight=y[0])"],
    ["F.normalize(x)", "F.normalize(x, dim=0)", "F.normalize(x, p=1.0)", "F.normalize(x, eps=10.0)"],
    ["x.quantile(0.25, dim=1)", "x.quantile(0.75, dim=1)", "x.quantile(0.25, dim=1, interpolation='lower')",
     "x.quantile(0.25, dim=1, interpolation='nearest')", "x.quantile(0.25, dim=1, interpolation='midpoint')"],
    ["x.cumsum(0)", "x.cumsum(1)", "x.cumprod(1)", "x.flip(1).cumsum(1)", "L.logcumsumexp(x, 1)"],
    ["x.clamp(-1, 1)", "x.clamp(-1.0, 1.0)", "x.clamp(-0.5, 1)", "x.clamp(min=-1)", "x.clamp(max=1)", "x.clamp(1, -1)"],
    ["L.tril(x)", "L.tril(x, 1)", "L.triu(x)", "L.triu(x, -1)", "L.tril(x, -1)"],
    ["x.repeat(2, 1)", "x.repeat(1, 2)", "x.repeat_interleave(2, 0)", "x.repeat_interleave(2, 1)", "x.tile((2,))"],
    ["L.cat([x, y])", "L.cat([y, x])", "L.cat([x, y], 1)", "L.stack([x, y])", "L.stack([y, x], 1)", "L.cat([x, x])"],
    ["x @ y.t()", "y @ x.t()", "x.t() @ y", "y.t() @ x", "x @ x.t()"],
    ["x - y", "y - x", "x / y", "y / x", "L.atan2(x, y)", "L.atan2(y, x)", "x.fmod(y)", "y.fmod(x)",
     "L.pow(x.abs(), y)", "L.pow(y.abs(), x)", "L.hypot(x, y)", "L.copysign(x, y)", "L.copysign(y, x)"],
    ["L.where(x > 0, x, y)", "L.where(x > 0, y, x)", "L.where(x > y, x, y)", "L.where(y > x, x, y)"],
    ["x.unique()", "x.unique(sorted=True, return_counts=True)[1]", "x.unique(return_inverse=True)[1]"],
    ["x.kthvalue(1, 1)[0]", "x.kthvalue(2, 1)[0]", "x.kthvalue(2, 0)[0]", "x.median(1)[0]", "x.nanmedian(1)[0]"],
    ["F.softmax(x, 0)", "F.softmax(x, 1)", "F.softmax(x, 1, dtype=L.float64)", "F.log_softmax(x, 0)", "F.softmin(x, 1)"],
    ["F.hardshrink(x, 0.5)", "F.hardshrink(x, 1.5)", "F.softshrink(x, 0.5)", "F.softshrink(x, 1.5)", "F.threshold(x, 0.5, -1.0)", "F.threshold(x, 0.5, 2.0)"],
    ["F.max_pool1d(x[None], 2)", "F.max_pool1d(x[None], 2, stride=1)", "F.avg_pool1d(x[None], 2)", "F.avg_pool1d(x[None], 3, stride=1, padding=1)",
     "F.avg_pool1d(x[None], 3, stride=1, padding=1, count_include_pad=False)", "F.lp_pool1d(x[None].abs(), 2.0, 2)"],
    ["x.index_select(1, i)", "x.index_select(0, i.clamp(max=2))", "x[:, i]", "x.gather(1, i[None].expand(3, 4).clamp(max=3))",
     "x.take(i)", "x[i.clamp(max=2)]"],
    ["F.embedding(i.clamp(max=2), x)", "F.embedding(i.clamp(max=2), x, max_norm=1.0)", "F.embedding(i.clamp(max=2), x, padding_idx=1)"],
    ["L.diff(x)", "L.diff(x, dim=0)", "L.diff(x, n=2)", "L.diff(x, prepend=x[:, :1])"],
    ["F.glu(x)", "F.glu(x, 0)", "F.hardsigmoid(x)", "F.hardswish(x)", "F.relu6(x)", "F.celu(x, 0.5)", "F.selu(x)"],
]


def fam_attr(r, rng):
    ms = list(r.choice(ATTR_FAMS))
    if len(ms) > 5:
        ms = r.sample(ms, 5)
    x = arr(rng, (3, 4))
    if r.random() < 0.3:
        x = np.round(x)            # ties
    inp = {"x": x, "y": arr(rng, (3, 4)), "t": rng.integers(0, 4, size=(3,)), "i": rng.integers(0, 4, size=(4,))}
    if any("kthvalue" in m or "median" in m or "sort" in m or "topk" in m or "argm" in m or "unique" in m
           for m in ms):
        inp["x"] = rng.permutation(12).reshape(3, 4).astype(np.float32) - 5   # no ties: no unspecified indices
    return {"inputs": inp, "members": ms, "tol": 1e-4}


ALIAS_FAMS = [
    ["a * 2 + b", "a * 2 + a", "b * 2 + a", "b * 2 + b"],
    ["out = a.clone(); out.add_(b); out", "out = a.clone(); out.add_(out)", "out = b.clone(); out.add_(a)"],
    ["L.cat([a, b]) * a.sum()", "L.cat([a, a]) * a.sum()", "L.cat([b, a]) * b.sum()"],
    ["a @ b.t()", "a @ a.t()", "b @ a.t()", "b @ b.t()"],
    ["L.where(a > b, a, b)", "L.where(a > a, a, b)", "L.where(a > b, b, b)"],
    ["out = a.clone(); out.mul_(out.sum())", "out = a.clone(); out.mul_(b.sum())", "out = a.clone(); s = out.sum(); out.mul_(s); out = out + s"],
]


def fam_alias(r, rng):
    inp = {"a": arr(rng, (3, 4)), "b": arr(rng, (3, 4))}
    if r.random() < 0.3:
        inp["b"] = inp["a"].copy()          # equal values, separate tensors
    return {"inputs": inp, "members": list(r.choice(ALIAS_FAMS)), "tol": 1e-5}


FAMILIES = [fam_const, fam_int_const, fam_dtype, fam_view, fam_inplace, fam_bcast, fam_red, fam_attr, fam_alias]
FAM_WEIGHTS = [5, 3, 3, 3, 2, 2, 2, 5, 1]

GRAD_FAMS = [fam_const, fam_view, fam_bcast, fam_red, fam_attr, fam_alias]
GRAD_EXTRA = [  # members differing where only the backward differs (index values, dims, saved values)
    ["x[i]", "x[j]", "x[k]"],
    ["x.index_select(0, i)", "x.index_select(0, j)", "x.index_select(0, k)"],
    ["x.gather(0, i[:, None].expand(-1, 4))", "x.gather(0, j[:, None].expand(-1, 4))"],
    ["x.index_put((i,), y[:3], accumulate=True)", "x.index_put((j,), y[:3], accumulate=True)",
     "x.index_put((i,), y[:3])", "x.index_put((k,), y[:3])"],
    ["x.scatter_add(0, i[:, None].expand(-1, 4), y[:3])", "x.scatter_add(0, j[:, None].expand(-1, 4), y[:3])",
     "x.scatter(0, k[:, None].expand(-1, 4), y[:3])"],
    ["x.amax(0)", "x.amax(1)", "x.max(0)[0]", "x.max()", "x.amin(0)"],
    ["F.linear(x, y)", "F.linear(x, y, z)", "F.linear(x, x)", "F.linear(y, x, z)", "F.linear(x, y, y[0])"],
    ["F.layer_norm(x, (4,))", "F.layer_norm(x, (4,), z, z)", "F.layer_norm(x, (4,), eps=0.5)", "F.layer_norm(x, (3, 4))"],
    ["F.scaled_dot_product_attention(x[None], y[None], x[None])", "F.scaled_dot_product_attention(x[None], y[None], x[None], is_causal=True)",
     "F.scaled_dot_product_attention(x[None], y[None], x[None], scale=0.3)", "F.scaled_dot_product_attention(x[None], x[None], x[None])",
     "F.scaled_dot_product_attention(x[None], y[None], x[None], attn_mask=m[None])",
     "F.scaled_dot_product_attention(x[None], y[None], x[None], attn_mask=y[None, :, :3])"],
    ["F.softmax(x, 0)", "F.softmax(x, 1)", "F.log_softmax(x, 1)", "F.gelu(x)", "F.gelu(x, approximate='tanh')"],
    ["F.cross_entropy(x, t, ignore_index=1)", "F.cross_entropy(x, t, ignore_index=2)", "F.cross_entropy(x, t)",
     "F.cross_entropy(x, t, reduction='sum')", "F.cross_entropy(x, u)", "F.nll_loss(x, t)", "F.nll_loss(x, u)"],
    ["x.sort(0)[0]", "x.sort(0, descending=True)[0]", "x.topk(2, 0)[0]", "x.topk(2, 0, largest=False)[0]", "x.cummax(0)[0]"],
    ["x.prod(0)", "x.prod(1)", "x.cumprod(0)", "x.cumprod(1)"],
    ["F.conv1d(x[None], y[None, :, :2])", "F.conv1d(x[None], y[None, :, :2], padding=1)", "F.conv1d(x[None], y[None, :, :2], stride=2)",
     "F.conv1d(x[None], y[None, :, :2], dilation=2)", "F.conv1d(x[None], y[:, :, None][:, :2, :2].reshape(3, 1, 4)[:, :, :2].expand(3, 3, 2).contiguous())"],
    ["x.clamp(-1, 1)", "x.clamp(-0.5, 0.5)", "x.clamp(min=0)", "F.relu(x)", "F.hardtanh(x)", "x.abs()"],
    ["x.norm(p=2)", "x.norm(p=1)", "x.norm(p=3)", "x.norm(p=float('inf'))", "x.pow(3).sum()"],
    ["F.conv2d(c, w)", "F.conv2d(c, w, padding=1)", "F.conv2d(c, w, stride=2)", "F.conv2d(c, w, dilation=2)",
     "F.conv2d(c, w, padding=(1, 0))", "F.conv2d(c, w2, groups=2)", "F.conv2d(c, w, padding='same')",
     "F.conv2d(c, w, stride=(1, 2), padding=1)", "F.conv_transpose2d(c, w.transpose(0, 1))",
     "F.conv_transpose2d(c, w.transpose(0, 1), stride=2)", "F.conv2d(c, w[:, :, :2, :])"],
    ["F.max_pool2d(c, 2)", "F.max_pool2d(c, 2, 1)", "F.max_pool2d(c, 3, 1, 1)", "F.avg_pool2d(c, 2)",
     "F.avg_pool2d(c, 3, 1, 1)", "F.avg_pool2d(c, 3, 1, 1, count_include_pad=False)", "F.adaptive_avg_pool2d(c, 2)",
     "F.adaptive_max_pool2d(c, 2)", "F.interpolate(c, scale_factor=2)", "F.interpolate(c, size=(3, 4), mode='bilinear')",
     "F.interpolate(c, size=(3, 4), mode='bilinear', align_corners=True)"],
]


def fam_grad_extra(r, rng):
    ms = list(r.choice(GRAD_EXTRA))
    x = rng.permutation(12).reshape(3, 4).astype(np.float32) / 3 - 2
    inp = {"x": x, "y": arr(rng, (3, 4)), "z": arr(rng, (3,)) if any("linear" in m for m in ms) else arr(rng, (4,)),
           "i": np.array([0, 1, 2]), "j": np.array([1, 1, 0]), "k": np.array([2, 0, 2]),
           "t": rng.integers(0, 4, size=(3,)), "u": np.array([3, 3, 3]), "m": rng.random((3, 3)) < 0.7,
           "c": arr(rng, (1, 2, 5, 5)), "w": arr(rng, (3, 2, 3, 3)), "w2": arr(rng, (2, 1, 3, 3))}
    inp["m"][:, 0] = True
    return {"inputs": inp, "members": ms, "tol": 1e-4}


def make_family(seed, mode):
    r = random.Random(seed * 7919 + 17)
    rng = np.random.default_rng(seed)
    if mode == "grad":
        if r.random() < 0.5:
            fam = fam_grad_extra(r, rng)
        else:
            fam = r.choice(GRAD_FAMS)(r, rng)
        fam["grad"] = [k for k, v in fam["inputs"].items() if v.dtype.kind == "f"
                       and k in ("x", "y", "z", "a", "b", "c", "w", "w2")]
        return fam
    return r.choices(FAMILIES, FAM_WEIGHTS)[0](r, rng)


# ------------------------------------------------------------------ running a member

def lib_ns(L, inputs, grad=()):
    ns = {"L": L, "F": L.nn.functional, "np": np, "math": __import__("math")}
    for k, a in inputs.items():
        t = L.tensor(np.array(a, copy=True))
        if k in grad and t.is_floating_point():
            t.requires_grad_(True)
        ns[k] = t
    return ns


def as_np(o):
    o = o.detach()
    if str(o.dtype).endswith("bfloat16"):
        o = o.float()
    return np.array(o.numpy(), copy=True)


def run_member(L, inputs, code, grad=()):
    """{"out<i>": ndarray or ("py", value), "g_<name>": gradient} of one member."""
    ns = lib_ns(L, inputs, grad)
    if "out =" in code:
        exec(code, ns)
        out = ns["out"]
    else:
        out = eval(code, ns)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    res = {}
    for i, o in enumerate(outs):
        if hasattr(o, "shape") and hasattr(o, "dtype"):
            res[f"out{i}"] = (str(o.dtype).split(".")[-1], tuple(o.shape), as_np(o))
        else:
            res[f"out{i}"] = ("py", type(o).__name__, o)
    if grad:
        g = np.random.default_rng(5)
        loss = None
        for o in outs:
            if hasattr(o, "requires_grad") and o.requires_grad and o.dtype in (L.float32, L.float64):
                w = L.tensor(g.standard_normal(tuple(o.shape))).to(o.dtype)
                term = (o * w).sum()
                loss = term if loss is None else loss + term
        if loss is not None:
            loss.backward()
            for k in grad:
                t = ns.get(k)
                if t is not None and getattr(t, "grad", None) is not None:
                    res["g_" + k] = (str(t.grad.dtype).split(".")[-1], tuple(t.grad.shape), as_np(t.grad))
    return res


def safe_run(L, inputs, code, grad=()):
    try:
        return run_member(L, inputs, code, grad)
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {str(e)[:200]}"}


def differs(a, b, tol, signzero=False):
    """None if results ``a`` (reference) and ``b`` agree, else a short reason."""
    if "error" in a or "error" in b:
        if "error" in a and "error" in b:
            return None
        return f"error: ref {a.get('error', 'ok')!r} got {b.get('error', 'ok')!r}"
    for k in sorted(set(a) | set(b)):
        x, y = a.get(k), b.get(k)
        if x is None or y is None:
            z = x if y is None else y
            if k.startswith("g_") and z[0] != "py" and np.all(z[2] == 0):
                continue
            return f"{k}: missing in {'got' if y is None else 'ref'}"
        if x[0] == "py" or y[0] == "py":
            if x[0] != y[0] or (x[2] != y[2] and not (x[2] != x[2] and y[2] != y[2])):
                return f"{k}: {x!r} vs {y!r}"
            continue
        if x[0] != y[0]:
            return f"{k}: dtype {x[0]} vs {y[0]}"
        if x[1] != y[1]:
            return f"{k}: shape {x[1]} vs {y[1]}"
        p, q = np.asarray(x[2]), np.asarray(y[2])
        if p.dtype.kind in "biu" or q.dtype.kind in "biu":
            if not np.array_equal(p, q):
                i = np.argwhere(p != q)[:3].tolist()
                return f"{k}: values differ at {i}: ref {p[tuple(np.array(i).T)]} got {q[tuple(np.array(i).T)]}"
            continue
        p, q = p.astype(np.float64), q.astype(np.float64)
        if not np.array_equal(np.isnan(p), np.isnan(q)):
            return f"{k}: NaN pattern differs: ref {p.ravel()[:6]} got {q.ravel()[:6]}"
        fin = np.isfinite(p) & np.isfinite(q)
        inf = ~np.isnan(p) & ~fin
        if not np.array_equal(p[inf], q[inf]):
            return f"{k}: inf differs: ref {p.ravel()[:6]} got {q.ravel()[:6]}"
        if fin.any():
            scale = max(1.0, np.abs(p[fin]).max())
            d = np.abs(p[fin] - q[fin]).max()
            if d > tol * scale:
                j = np.argmax(np.where(fin, np.abs(p - q), -1))
                return (f"{k}: maxdiff {d:.3g} at {np.unravel_index(j, p.shape)}: ref {p.flat[j]!r} "
                        f"got {q.flat[j]!r}")
        if signzero:
            z = (p == 0) & (q == 0) & (np.signbit(p) != np.signbit(q))
            if z.any():
                return f"{k}: signed zero differs at {np.argwhere(z)[:3].tolist()}"
    return None


# ------------------------------------------------------------------ subprocess workers

def worker_main(spec_path, out_path):
    spec = json.load(open(spec_path))
    if spec.get("min_ops1"):
        from nova.runtime import step_cache
        step_cache.MIN_OPS = 1
    if spec.get("step_limit") is not None:
        nv.debug.set_step_cache_limit(spec["step_limit"])
    fam = make_family(spec["seed"], spec["mode"])
    grad = fam.get("grad", ())
    res = []
    for m in spec["order"]:
        res.append((m, safe_run(nv, fam["inputs"], fam["members"][m], grad)))
    from nova.runtime import step_cache
    from nova.runtime.kernel_cache import KERNELS
    stats = {"step": vars(step_cache.STATS).copy(), "kernel": {k: v for k, v in vars(KERNELS.stats).items()}}
    with open(out_path, "wb") as f:
        pickle.dump({"results": res, "stats": stats}, f)


def run_worker(seed, mode, order, env=None, min_ops1=False, step_limit=None, wait=True, timeout=300):
    d = tempfile.mkdtemp(prefix="fc-", dir=SCRATCH)
    spec = os.path.join(d, "spec.json")
    out = os.path.join(d, "out.pkl")
    json.dump({"seed": seed, "mode": mode, "order": order, "min_ops1": min_ops1,
               "step_limit": step_limit}, open(spec, "w"))
    e = {**os.environ, "NOVA_ENGINE": "cpu", **(env or {})}
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", spec, out], env=e,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=HERE)
    if not wait:
        return p, out, d

    return finish_worker(p, out, d, timeout)


def finish_worker(p, out, d, timeout=300):
    try:
        so, se = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        shutil.rmtree(d, ignore_errors=True)
        return {"crash": "timeout"}
    if p.returncode != 0 or not os.path.exists(out):
        shutil.rmtree(d, ignore_errors=True)
        return {"crash": f"rc {p.returncode}: {se[-600:]}"}
    got = pickle.load(open(out, "rb"))
    shutil.rmtree(d, ignore_errors=True)
    return got


def cold(seed, mode, member):
    """Member alone, fresh process, no disk cache: what Nova computes without any cache."""
    got = run_worker(seed, mode, [member], env={"NOVA_CACHE": "0"})
    if "crash" in got:
        return {"error": "cold run crashed: " + got["crash"][:200]}
    return got["results"][0][1]


# ------------------------------------------------------------------ reporting

def snippet(fam, order, bad_pos, extra=""):
    lines = ["import numpy as np, torch, nova as nv"]
    lines.append("inputs = {" + ", ".join(f"{k!r}: np.array({v.tolist()!r}, dtype=np.{v.dtype})"
                                         for k, v in fam["inputs"].items()) + "}")
    codes = [fam["members"][m] for m in order[:bad_pos + 1]]
    lines.append(f"codes = {codes!r}   # the last one comes out wrong")
    grad = fam.get("grad", ())
    lines += ["for L in (nv, torch):",
              "    for code in codes:",
              "        ns = {'L': L, 'F': L.nn.functional}",
              "        for k, a in inputs.items():",
              "            ns[k] = L.tensor(a.copy())" + (f"\n            if k in {tuple(grad)!r}: ns[k].requires_grad_(True)" if grad else ""),
              "        if 'out =' in code: exec(code, ns); out = ns['out']",
              "        else: out = eval(code, ns)"]
    if grad:
        lines += ["        o = out[0] if isinstance(out, tuple) else out",
                  "        g = np.random.default_rng(5)",
                  "        (o * L.tensor(g.standard_normal(tuple(o.shape))).to(o.dtype)).sum().backward()",
                  f"        out = [ns[k].grad for k in {tuple(grad)!r}]"]
    lines += ["    print(L.__name__, out)"]
    return "\n".join(lines) + (("\n" + extra) if extra else "")


class Reporter:
    """common.Reporter's behaviour (a snippet optional): defined here because common.py
    imports torch, which this fuzzer's worker processes must not."""

    def __init__(self):
        self.seen = {}

    def report(self, seed, sig, header, details, snip):
        print("=" * 60)
        if sig in self.seen:
            print(f"SEED {seed} {header}  (same failure as SEED {self.seen[sig]})")
            return
        self.seen[sig] = seed
        print(f"SEED {seed} {header}")
        for d in details:
            print("  ->", d)
        if snip:
            print("  ---- snippet ----")
            print("  " + snip.replace("\n", "\n  "))
        sys.stdout.flush()


REP = Reporter()


def minimize_pair(seed, mode, order, pos, fam, tol, sz, ref, env, min_ops1=False):
    """An earlier member p such that running [p, bad] in a fresh process reproduces."""
    bad = order[pos]
    for p in list(dict.fromkeys(order[:pos][::-1]))[:4]:
        if p == bad:
            continue
        got = run_worker(seed, mode, [p, bad], env=env, min_ops1=min_ops1)
        if "crash" in got:
            continue
        if differs(ref, got["results"][1][1], tol, sz):
            return [p, bad]
    return None


# ------------------------------------------------------------------ modes

def check_hot(seed, mode, r):
    fam = make_family(seed, mode)
    n = len(fam["members"])
    grad = tuple(fam.get("grad", ()))
    tol, sz = fam.get("tol", 1e-5), fam.get("signzero", False)
    order = list(range(n)) + [r.randrange(n) for _ in range(r.randint(1, n))]
    r.shuffle(order)
    limit = r.choice([None, None, None, 0])
    if limit is not None:
        nv.debug.set_step_cache_limit(limit)
    try:
        refs = [safe_run(torch, fam["inputs"], c, grad) for c in fam["members"]]
        status = "ok"
        for pos, m in enumerate(order):
            got = safe_run(nv, fam["inputs"], fam["members"][m], grad)
            why = differs(refs[m], got, tol, sz)
            if why is None:
                continue
            if "error" in refs[m] and "error" not in got:
                continue     # torch refuses: not judged
            c = cold(seed, mode, m)
            cwhy = differs(c, got, tol, sz)
            if cwhy is None:
                print(f"SEED {seed} {mode} deviation (cold Nova agrees): {fam['members'][m]}: {why}")
                status = "deviation" if status == "ok" else status
                continue
            pair = minimize_pair(seed, mode, order, pos, fam, tol, sz, c, {"NOVA_CACHE": "0"})
            o2 = pair if pair else order[:pos + 1]
            REP.report(seed, ("hot", fam["members"][m][:25], fam["members"][o2[0]][:25] if pair else None),
                       f"{mode} CACHE BUG: {fam['members'][m]!r} after {[fam['members'][k] for k in o2[:-1]][-3:]}",
                       [f"hot vs cold Nova: {cwhy}", f"hot vs torch: {why}",
                        f"cold vs torch: {differs(refs[m], c, tol, sz)}", f"step cache limit {limit}"],
                       snippet(fam, o2, len(o2) - 1))
            return "bad"
        return status
    finally:
        if limit is not None:
            nv.debug.set_step_cache_limit(1 << 30)


def check_disk(seed, mode, r, fault=False):
    fam_mode = r.choice(["hot", "hot", "grad"])
    fam = make_family(seed, fam_mode)
    n = len(fam["members"])
    grad = tuple(fam.get("grad", ()))
    tol, sz = fam.get("tol", 1e-5), fam.get("signzero", False)
    refs = [safe_run(torch, fam["inputs"], c, grad) for c in fam["members"]]
    oa = list(range(n))
    r.shuffle(oa)
    ob = list(range(n))
    r.shuffle(ob)
    if ob == oa and n > 1:
        ob = ob[::-1]
    cache = tempfile.mkdtemp(prefix="fc-dir-", dir=SCRATCH)
    env = {"NOVA_CACHE_DIR": cache, "NOVA_CACHE": "1"}
    what = "none"
    try:
        concurrent = fault and r.random() < 0.2
        if concurrent:
            what = "A and B concurrently on one empty dir"
            pa = run_worker(seed, fam_mode, oa, env=env, min_ops1=True, wait=False)
            pb = run_worker(seed, fam_mode, ob, env=env, min_ops1=True, wait=False)
            ga = finish_worker(*pa)
            gb = finish_worker(*pb)
        else:
            ga = run_worker(seed, fam_mode, oa, env=env, min_ops1=True)
            if fault:
                what = damage(cache, r)
            envb = dict(env)
            if fault and what.startswith("tiny"):
                envb["NOVA_STEP_DISK_CACHE_MB"] = "0.001"
            gb = run_worker(seed, fam_mode, ob, env=envb, min_ops1=True, step_limit=r.choice([None, 0]))
        if os.environ.get("FUZZ_CACHE_VERBOSE"):
            print(f"SEED {seed} {mode} ({what}) A {ga.get('stats', ga)} B {gb.get('stats', gb)}")
        status = "ok"
        for label, g in (("A", ga), ("B", gb)):
            if "crash" in g:
                REP.report(seed, (mode, "crash", label), f"{mode}: process {label} crashed ({what})",
                           [g["crash"][-500:]], None)
                return "bad"
            for pos, (m, got) in enumerate(g["results"]):
                why = differs(refs[m], got, tol, sz)
                if why is None or ("error" in refs[m] and "error" not in got):
                    continue
                if fault and label == "B" and "error" in got and "error" not in refs[m]:
                    print(f"SEED {seed} {mode} B raised ({what}): {got['error']}")
                    status = "raised"
                    continue
                c = cold(seed, fam_mode, m)
                cwhy = differs(c, got, tol, sz)
                if cwhy is None:
                    print(f"SEED {seed} {mode} deviation (cold Nova agrees): {fam['members'][m]}: {why}")
                    continue
                order = oa if label == "A" else ob
                REP.report(seed, (mode, label, fam["members"][m][:25]),
                           f"{mode} CACHE BUG in process {label} ({what}): {fam['members'][m]!r}; "
                           f"A ran {[fam['members'][k] for k in oa]}, B ran {[fam['members'][k] for k in ob]}",
                           [f"hot vs cold Nova: {cwhy}", f"vs torch: {why}",
                            f"stats A {ga.get('stats')} B {gb.get('stats')}"],
                           snippet(fam, order, pos, "# run it twice with NOVA_CACHE_DIR=<empty dir> and "
                                   "nova.runtime.step_cache.MIN_OPS = 1; A's order first"))
                return "bad"
        return status
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _entries(cache, suffix):
    out = []
    for d, _, fs in os.walk(cache):
        out += [os.path.join(d, f) for f in fs if f.endswith(suffix) and not f.startswith(".tmp")]
    return sorted(out)


def damage(cache, r):
    """Damage the populated cache one way; returns what was done."""
    from nova.runtime import disk_cache
    steps, kernels = _entries(cache, ".step"), [p for p in _entries(cache, ".o")
                                                if os.path.basename(p).startswith("nova_k_")]
    choices = ["tiny step disk limit"]
    if steps:
        choices += ["truncate step", "flip step", "empty step", "swap steps", "step re-keyed",
                    "delete kernels keep steps", "step payload other pickle"]
    if len(kernels) > 1:
        choices += ["swap kernels", "kernel re-keyed (other kernel's object, good header)"]
    c = r.choice(choices)
    if c == "truncate step":
        p = r.choice(steps)
        b = open(p, "rb").read()
        open(p, "wb").write(b[: r.randrange(1, len(b))])
    elif c == "flip step":
        p = r.choice(steps)
        b = bytearray(open(p, "rb").read())
        b[r.randrange(len(b))] ^= 1 << r.randrange(8)
        open(p, "wb").write(bytes(b))
    elif c == "empty step":
        open(r.choice(steps), "wb").close()
    elif c == "swap steps" and len(steps) > 1:
        a, b = r.sample(steps, 2)
        ta, tb = open(a, "rb").read(), open(b, "rb").read()
        open(a, "wb").write(tb)
        open(b, "wb").write(ta)
    elif c == "swap kernels":
        a, b = r.sample(kernels, 2)
        ta, tb = open(a, "rb").read(), open(b, "rb").read()
        open(a, "wb").write(tb)
        open(b, "wb").write(ta)
    elif c in ("step re-keyed", "kernel re-keyed (other kernel's object, good header)") or \
            (c == "swap steps" and len(steps) <= 1):
        pool = steps if c.startswith("step") or c == "swap steps" else kernels
        if len(pool) < 2:
            return c + " (skipped: one entry)"
        a, b = r.sample(pool, 2)
        ha, _ = disk_cache.decode_entry(open(a, "rb").read())
        hb, pb = disk_cache.decode_entry(open(b, "rb").read())
        header = dict(hb)
        for k in ("key", "symbol", "symbols"):
            if k in ha:
                header[k] = ha[k]
        open(a, "wb").write(disk_cache.encode_entry({k: v for k, v in header.items() if k != "size"}, pb))
        c += " [crafted: outside the trust model]"
    elif c == "step payload other pickle":
        p = r.choice(steps)
        h, _ = disk_cache.decode_entry(open(p, "rb").read())
        open(p, "wb").write(disk_cache.encode_entry({k: v for k, v in h.items() if k != "size"},
                                                    pickle.dumps((None, None))))
        c += " [crafted]"
    elif c == "delete kernels keep steps":
        for p in kernels:
            os.unlink(p)
    return c


# --- nv.compile families: one compiled function, variants of its arguments

COMPILE_FAMS = [
    ("lambda x, c: L.atan2(x * 0 + c, x)", "scalar", [0.0, -0.0]),
    ("lambda x, c: 1 / (x * 0 + c)", "scalar", [0.0, -0.0, 2.0]),
    ("lambda x, c: x * c", "scalar", [2, 2.0, True, 3]),
    ("lambda x, c: x + c", "scalar", [1, True, 1.0]),
    ("lambda x, c: x.clamp(min=c)", "scalar", [0.0, -0.0, 1.0, F32_ONE_PLUS]),
    ("lambda x, c: L.full_like(x, c)", "scalar", [BIG, BIG + 1, BIG + 2]),
    ("lambda x, c: x + c", "scalar", [float("nan"), float("inf")]),
    ("lambda x, c: x.sum(c)", "scalar", [0, 1, -1]),
    ("lambda x, c: x.sort(-1, descending=c)[0]", "scalar", [True, False, 1, 0]),
    ("lambda x, c: F.gelu(x, approximate=c)", "scalar", ["none", "tanh"]),
    ("lambda x, c: x.pow(c)", "scalar", [2, 2.0, 0.5, -0.0, 0.0]),
    ("lambda x, c: x[c]", "scalar", [0, 1, -1, (0, 1), (1, 0)]),
    ("lambda x, c: x.reshape(c).cumsum(0)", "scalar", [(12,), (3, 4), (4, 3), [3, 4]]),
    ("lambda x, c: x.transpose(*c) * 2", "scalar", [(0, 1), (1, 0)]),
    ("lambda x, c: F.pad(x, c, value=-0.0)", "scalar", [(1, 0), (0, 1), (1, 1)]),
    ("lambda x, c: x.clamp(*c)", "scalar", [(0.0, 1.0), (-0.0, 1.0), (-1.0, 0.0), (-1.0, -0.0)]),
    ("lambda x, c: x.round(decimals=c)", "scalar", [0, 1, 2]),
    ("lambda x, c: x * c", "scalar", [np.float64(0.0), np.float64(-0.0), np.float32(2.0)]),
    ("lambda x, c: L.nn.functional.leaky_relu(x, c) * 1", "scalar", [0.5, 0.25, 0.5 + 2 ** -40]),
    ("lambda x, c: x.masked_fill(x < 0, c[0]) + c[1]", "scalar", [(0.0, 1), (-0.0, 1), (0.0, True), (1, 1.0)]),
    ("lambda x, c: L.where(x > 0, x, L.tensor(c))", "scalar", [1.5, -2.5]),
    ("lambda x, c: (x * 2).to(c)", "scalar", ["float64", "float16", "int32"]),
    ("lambda x, c: x.new_full((2,), c)", "scalar", [1, 1.0, True, -0.0, 0.0]),
    ("lambda x, c: x.sum(dim=c, keepdim=True)", "scalar", [0, 1, (0, 1), [1]]),
    ("lambda x, y: x * 2 + y", "tensor", ["a,b", "a,a", "b,a", "aT,b", "a1,b1"]),
    ("lambda x, y: x.add_(y) * 1", "tensor", ["ac,b", "ac,ac"]),
    ("lambda x, y: (x - y).sum(0)", "tensor", ["a,b", "b,a", "a32,b", "a64,b64", "aT,bT"]),
]


CTX_FAMS = [  # (function, contexts): the same call under global modes a replay must honour
    ("lambda x: x / 3", ["f32", "f64"]),
    ("lambda x: x.float() + L.ones(3)", ["f32", "f64"]),
    ("lambda x: x.float() @ L.ones(3, 3)", ["plain", "autocast"]),
    ("lambda x: (x.float() * 2).sum()", ["plain", "no_grad"]),
]


def _ctx(name):
    import contextlib
    if name == "f64":
        @contextlib.contextmanager
        def f64():
            nv.set_default_dtype(nv.float64)
            try:
                yield
            finally:
                nv.set_default_dtype(nv.float32)
        return f64()
    if name == "autocast":
        return nv.autocast("cpu", dtype=nv.bfloat16)
    if name == "no_grad":
        return nv.no_grad()
    return contextlib.nullcontext()


def check_compile_ctx(seed, r):
    code, ctxs = r.choice(CTX_FAMS)
    x = nv.tensor(np.array([1, 2, 3]))
    fn = eval(code, {"L": nv})
    comp = nv.compile(fn)
    calls = [c for c in ctxs for _ in range(r.randint(2, 4))]
    r.shuffle(calls)
    for i, c in enumerate(calls):
        with _ctx(c):
            ref = fn(x)
            ref = {"o": (str(ref.dtype), tuple(ref.shape), as_np(ref))}   # realized first
            got = comp(x)
            got = {"o": (str(got.dtype), tuple(got.shape), as_np(got))}
        why = differs(ref, got, 1e-6)
        if why:
            REP.report(seed, ("compile-ctx", code, c), f"compile CACHE BUG: nv.compile({code}) under {c} "
                       f"after calls under {calls[:i]}", [f"compiled vs uncompiled Nova: {why}"],
                       f"# f = nv.compile({code}); call it 3 times, then under {c!r} (see _ctx)")
            return "bad"
    return "ok"


def check_compile(seed, r):
    rng = np.random.default_rng(seed)
    if r.random() < 0.3:
        return check_compile_ctx(seed, r)
    code, kind, variants = r.choice(COMPILE_FAMS)
    a = arr(rng, (3, 4), special=False)
    a[0, 0] = -1.5
    b = arr(rng, (3, 4))
    calls = [v for v in range(len(variants)) for _ in range(r.randint(2, 4))]
    r.shuffle(calls)
    runs = r.randint(1, 3)
    calls = sum(([v] * runs for v in calls), [])

    def args(L, v):
        if kind == "scalar":
            c = variants[v]
            if "to(c)" in code:
                c = getattr(L, c)
            return (L.tensor(a.copy()), c)
        names = variants[v].split(",")
        base = {"a": L.tensor(a.copy()), "b": L.tensor(b.copy())}
        out = []
        for nm in names:
            if nm in base:
                out.append(base[nm])
            elif nm == "ac":
                out.append(base["a"])
            elif nm == "aT":
                out.append(L.tensor(a.T.copy()).t())
            elif nm == "bT":
                out.append(L.tensor(b.T.copy()).t())
            elif nm == "a1":
                out.append(L.tensor(np.concatenate([a, a])).narrow(0, 3, 3))
            elif nm == "b1":
                out.append(L.tensor(np.concatenate([b, b])).narrow(0, 1, 3))
            elif nm == "a32":
                out.append(L.tensor(a.copy()))
            elif nm == "a64":
                out.append(L.tensor(a.astype(np.float64)))
            elif nm == "b64":
                out.append(L.tensor(b.astype(np.float64)))
        return tuple(out)

    fn = eval(code, {"L": nv, "F": nv.nn.functional})
    comp = nv.compile(fn)
    for i, v in enumerate(calls):
        try:
            ref = fn(*args(nv, v))
            ref = {"out0": (str(ref.dtype).split(".")[-1], tuple(ref.shape), as_np(ref))}
        except Exception as e:  # noqa: BLE001
            ref = {"error": f"{type(e).__name__}: {e}"[:200]}
        try:
            got = comp(*args(nv, v))
            got = {"out0": (str(got.dtype).split(".")[-1], tuple(got.shape), as_np(got))}
        except Exception as e:  # noqa: BLE001
            got = {"error": f"{type(e).__name__}: {e}"[:200]}
        why = differs(ref, got, 1e-6, signzero=True)
        if why:
            prev = [variants[w] for w in calls[:i]]
            snip = "\n".join([
                "import numpy as np, nova as nv",
                f"a = np.array({a.tolist()!r}, dtype=np.float32)",
                f"b = np.array({b.tolist()!r}, dtype=np.float32)",
                f"fn = {code.replace('L.', 'nv.').replace('F.', 'nv.nn.functional.')}",
                "comp = nv.compile(fn)",
                f"for c in {list(dict.fromkeys(prev))[-2:] * 2!r}: comp(nv.tensor(a), c)   # recorded, then replayed"
                if kind == "scalar" else f"# calls before: {prev[-6:]}",
                f"print(comp(nv.tensor(a), {variants[v]!r}), fn(nv.tensor(a), {variants[v]!r}))"
                if kind == "scalar" else ""])
            REP.report(seed, ("compile", code, repr(variants[v])),
                       f"compile CACHE BUG: nv.compile({code}) called with {variants[v]!r} after {prev[-6:]}",
                       [f"compiled vs uncompiled Nova: {why}"], snip)
            return "bad"
    return "ok"


# --- optimizers: several configs of one class differing in one hyperparameter

OPT_FAMS = [
    ("SGD", "momentum", [0.0, 0.9, 0.5], {"lr": 0.1}),
    ("SGD", "nesterov", [False, True], {"lr": 0.1, "momentum": 0.9}),
    ("SGD", "dampening", [0.0, 0.3], {"lr": 0.1, "momentum": 0.9}),
    ("SGD", "weight_decay", [0.0, 0.1, 0.2, -0.0], {"lr": 0.1}),
    ("SGD", "maximize", [False, True], {"lr": 0.1, "momentum": 0.5}),
    ("Adam", "eps", [1e-8, 1e-3, 1e-1], {"lr": 0.1}),
    ("Adam", "amsgrad", [False, True], {"lr": 0.1}),
    ("Adam", "weight_decay", [0.0, 0.1, 0.3], {"lr": 0.1}),
    ("Adam", "betas", [(0.9, 0.999), (0.5, 0.9), (0.0, 0.5)], {"lr": 0.1}),
    ("AdamW", "weight_decay", [0.0, 0.1, 0.5], {"lr": 0.1}),
    ("AdamW", "lr", [0.1, 0.01, 0.5], {}),
    ("RMSprop", "alpha", [0.99, 0.5], {"lr": 0.01}),
    ("RMSprop", "centered", [False, True], {"lr": 0.01}),
    ("RMSprop", "momentum", [0.0, 0.9], {"lr": 0.01}),
    ("RMSprop", "eps", [1e-8, 1e-1], {"lr": 0.01}),
    ("Adagrad", "lr_decay", [0.0, 0.1], {"lr": 0.1}),
    ("Adagrad", "initial_accumulator_value", [0.0, 0.5], {"lr": 0.1}),
    ("Adagrad", "eps", [1e-10, 1e-1], {"lr": 0.1}),
    ("Adamax", "eps", [1e-8, 1e-1], {"lr": 0.1}),
    ("Adamax", "weight_decay", [0.0, 0.2], {"lr": 0.1}),
    ("NAdam", "momentum_decay", [4e-3, 0.1], {"lr": 0.1}),
    ("NAdam", "weight_decay", [0.0, 0.2], {"lr": 0.1}),
    ("RAdam", "weight_decay", [0.0, 0.2], {"lr": 0.1}),
    ("Adadelta", "rho", [0.9, 0.5], {"lr": 1.0}),
    ("Adadelta", "eps", [1e-6, 1e-2], {"lr": 1.0}),
    ("ASGD", "lambd", [1e-4, 0.1], {"lr": 0.1}),
    ("ASGD", "t0", [1.0, 1e6], {"lr": 0.1}),
    ("Rprop", "etas", [(0.5, 1.2), (0.3, 1.5)], {"lr": 0.1}),
    ("Rprop", "step_sizes", [(1e-6, 50), (1e-3, 0.05)], {"lr": 0.1}),
]


def run_opt(L, name, kw, p0s, gs, change=None, groups=False):
    ps = [L.tensor(p.copy(), requires_grad=True) for p in p0s]
    if groups:
        params = [{"params": [ps[0]]}, {"params": ps[1:], **(change[1] if change else {})}]
    else:
        params = ps
    o = getattr(L.optim, name)(params, **kw)
    for step, g in enumerate(gs):
        for p, gg in zip(ps, g):
            (p * L.tensor(gg)).sum().backward() if step != 1 else ((p * p).sum() * 0.5 + (p * L.tensor(gg)).sum()).backward()
        o.step()
        o.zero_grad()
        if change is not None and not groups and step == 0:
            o.param_groups[0].update(change[1])
    return [as_np(p) for p in ps]


def check_optim(seed, r):
    rng = np.random.default_rng(seed)
    name, hp, vals, base = r.choice(OPT_FAMS)
    members = [dict(base, **{hp: v}) for v in vals]
    s = r.choice([(3,), (2, 3)])
    p0s = [rng.standard_normal(s).astype(np.float32) for _ in range(r.randint(1, 3))]
    gs = [[rng.standard_normal(s).astype(np.float32) for _ in p0s] for _ in range(3)]
    mid = r.random() < 0.3 and hp not in ("amsgrad", "centered", "nesterov", "initial_accumulator_value")
    groups = mid and len(p0s) > 1 and r.random() < 0.5
    order = list(range(len(members))) * 2
    r.shuffle(order)
    for pos, m in enumerate(order):
        kw = members[m]
        change = (hp, {hp: vals[(m + 1) % len(vals)]}) if mid else None
        if name == "SGD" and hp == "nesterov" and not kw.get("momentum"):
            continue
        if change and name == "SGD" and hp == "dampening" and kw.get("nesterov"):
            continue
        try:
            ref = run_opt(torch, name, kw, p0s, gs, change, groups)
        except Exception:  # noqa: BLE001
            continue
        try:
            got = run_opt(nv, name, kw, p0s, gs, change, groups)
        except Exception as e:  # noqa: BLE001
            print(f"SEED {seed} optim nova raised {type(e).__name__}: {str(e)[:200]} ({name} {kw} change {change})")
            return "err"
        for k, (x, y) in enumerate(zip(ref, got)):
            why = differs({"p": ("float32", x.shape, x)}, {"p": ("float32", y.shape, y)}, 1e-4)
            if why:
                # cold: the same member alone in a fresh process
                code = (f"import sys; sys.path.insert(0, {HERE!r}); import numpy as np, nova as nv, pickle; "
                        f"import fuzz_cache as fc; print(pickle.dumps(fc.run_opt(nv, {name!r}, {kw!r}, "
                        f"pickle.loads({pickle.dumps(p0s)!r}), pickle.loads({pickle.dumps(gs)!r}), {change!r}, {groups!r})).hex())")
                out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                     env={**os.environ, "NOVA_CACHE": "0"}, cwd=HERE)
                try:
                    c = pickle.loads(bytes.fromhex(out.stdout.strip().splitlines()[-1]))[k]
                except Exception:  # noqa: BLE001
                    c = None
                if c is not None and differs({"p": ("f", c.shape, c)}, {"p": ("f", y.shape, y)}, 1e-6) is None:
                    print(f"SEED {seed} optim deviation (cold Nova agrees): {name} {kw} change {change}: {why}")
                    return "deviation"
                REP.report(seed, ("optim", name, hp), f"optim CACHE BUG: {name}({kw}) param {k} "
                           f"after {[members[j] for j in order[:pos]]} (mid-run change {change}, groups {groups})",
                           [f"vs torch: {why}", f"cold Nova: {None if c is None else c.ravel()[:4]}"],
                           f"# fuzz_cache.run_opt(nv, {name!r}, kw, ...) for kw in {[members[j] for j in order[:pos + 1]]}")
                return "bad"
    return "ok"


# --- random ops

RANDOM_FAMS = [
    ("F.dropout(x, p=P)", [0.1, 0.5, 0.7]),
    ("F.dropout(x, p=P, training=True) * 0 + L.rand(3, 4)", [0.2, 0.2000001]),
    ("L.bernoulli(x * 0 + P)", [0.2, 0.8]),
    ("L.rand(3, 4, generator=L.Generator().manual_seed(P))", [1, 2, 3]),
    ("L.randn(3, 4, generator=L.Generator().manual_seed(P)) * 2", [5, 6]),
    ("x.clone().uniform_(-P, P)", [1.0, 2.0]),
    ("L.randint(0, P, (3, 4))", [3, 100]),
    ("L.multinomial(x.abs() + P, 2)", [0.1, 5.0]),
    ("L.randperm(P)", [5, 6]),
]


def check_random(seed, r):
    rng = np.random.default_rng(seed)
    code, ps = r.choice(RANDOM_FAMS)
    x = (rng.random((3, 4)) + 0.5).astype(np.float32)
    order = list(range(len(ps))) * 2
    r.shuffle(order)
    seen = {}
    for pos, m in enumerate(order):
        nv.manual_seed(1234 + m)
        ns = {"L": nv, "F": nv.nn.functional, "x": nv.tensor(x.copy())}
        c = code.replace("P", repr(ps[m]))
        try:
            got = as_np(eval(c, ns))
        except Exception as e:  # noqa: BLE001
            print(f"SEED {seed} random: {c} raised {type(e).__name__}: {str(e)[:150]}")
            return "err"
        if "dropout(x, p=" in code and "rand(" not in code:
            p = ps[m]
            kept = got != 0
            want = x / (1 - p)
            if not np.allclose(got[kept], want[kept], rtol=1e-6):
                REP.report(seed, ("random", code), f"random CACHE BUG: {c} scaled as another p",
                           [f"kept {got[kept][:4]} want {want[kept][:4]}",
                            f"order {[ps[k] for k in order[:pos + 1]]}"], None)
                return "bad"
        if m in seen and not np.array_equal(seen[m], got, equal_nan=True):
            REP.report(seed, ("random", code), f"random CACHE BUG: {c} with the same seed differs when run "
                       f"again after {[ps[k] for k in order[:pos]]}",
                       [f"first {seen[m].ravel()[:5]} now {got.ravel()[:5]}"],
                       f"# nv.manual_seed(1234 + member); {code} for P in {[ps[k] for k in order[:pos + 1]]}")
            return "bad"
        seen[m] = got
    return "ok"


# ------------------------------------------------------------------ main

SCRATCH = os.environ.get("FUZZ_CACHE_SCRATCH", os.path.join(tempfile.gettempdir(), "fuzz_cache"))


def check(seed, modes):
    r = random.Random(seed)
    mode = r.choices(modes, [WEIGHTS[m] for m in modes])[0]
    if mode in ("hot", "grad"):
        return check_hot(seed, mode, r)
    if mode == "compile":
        return check_compile(seed, r)
    if mode == "optim":
        return check_optim(seed, r)
    if mode == "random":
        return check_random(seed, r)
    return check_disk(seed, mode, r, fault=(mode == "fault"))


def main():
    from collections import Counter
    sys.stdout.reconfigure(line_buffering=True)
    start, n = int(sys.argv[1]), int(sys.argv[2])
    modes = sys.argv[3].split(",") if len(sys.argv) > 3 else MODES
    os.makedirs(SCRATCH, exist_ok=True)
    cnt = Counter()
    t0 = time.time()
    for s in range(start, start + n):
        try:
            cnt[check(s, modes)] += 1
        except Exception as e:  # noqa: BLE001
            cnt["harness"] += 1
            import traceback
            print("SEED", s, "HARNESS", type(e).__name__, str(e)[:300])
            traceback.print_exc(limit=3)
    print(dict(cnt), f"{time.time() - t0:.0f} s")


if __name__ == "__main__":
    if WORKER:
        i = sys.argv.index("--worker")
        worker_main(sys.argv[i + 1], sys.argv[i + 2])
    else:
        main()

"""``nv.compile`` differential fuzzer: a compiled step against the same step run plainly.

usage: python fuzz_compile.py START N [show] [--known] [--strict]   (``SEED 1`` replays one
case; ``show`` prints every case's program, failing or not)

Each case is a small random program -- a model (MLP, LayerNorm, BatchNorm, conv,
embedding, a custom module with a Python setting and a buffer), a loss, SGD / Adam /
AdamW / RMSprop with or without a scheduler, a step function (a training step with
zero_grad first or last, set_to_none True or False, clipping, gradient accumulation
across calls or inside the call, an evaluation function, global and closure values it
reads, a global tensor or its input it updates in place, returned views) -- and a
sequence of 6-12 calls with changes between them (new Python scalar arguments, a new
batch size, train()/eval(), the learning rate in ``param_groups``, Dropout.p,
``requires_grad_`` toggles, a swapped layer or parameter, a new optimizer, hooks,
``nv.no_grad()`` calls, ``f(x, x)`` aliasing, passing the global it writes as an
argument, ``nv.manual_seed``, ``zero_grad`` outside, in-place edits of parameters and
inputs, references kept to gradients and views). The program runs twice from the same
seed, plainly and through ``nv.compile``; after every call (or, in "lazy" cases, once
at the end, so nothing is realized between calls) everything is compared bit for bit:
the returned values, the parameters, their gradients and buffers, the optimizer's
state and learning rates, the scheduler, the inputs, the globals and the references
kept. At the end an extra plain (uncompiled) call and a draw from the generator check
the Python-side state replays leave behind. A case whose last calls change nothing must
replay; where none of them did, a low-priority NOTE prints the compile log.

The ground truth is Nova run uncompiled (PyTorch is not involved: its differences are
the other fuzzers' business). Each distinct failure prints a standalone snippet that
runs both and names the first call that differs. Set ``NOVA_CACHE_DIR`` to keep the
fuzzer's compiled kernels apart.

Not bugs (README, "nv.compile"): Python state reached through the user's own non-module
objects is baked in at recording, as with ``jax.jit``; the generator never changes such
state. Accepted and filtered (``--strict`` shows it): a returned tensor whose graph the
call's ``backward`` released (``return loss``) comes back from a replay with
``requires_grad`` False, from a recorded call with True (same values).

Bugs it found (2026-12-07; seeds 0..199 had SEED 56 and SEED 110), all fixed the same
day with regression tests in ``tests/test_capture_guards.py``: a returned view of a
parameter (``return w.detach()[0]``) was a stale copy when the call replayed (such a
function now runs recorded); a new input replayed into the old input's ``.grad``; two
tensors the function writes by itself passed in turn as its argument replayed as the
first; a module attribute holding a function (``self.act = F.relu``) was not guarded;
autocast and ``nv.set_default_dtype`` were not guarded; an optimizer state's ``step``
set to a tensor was counted twice by a replay that gave up. ``--known`` makes the
programs that hit the last ones more likely.
Low-priority, never replaying (correct values): a training step whose
input requires grad (``x.grad`` of a new tensor each call: "results went to different
places"), and one that writes a new argument in place each call.
"""
import gc
import random
import sys
import textwrap
import time
import traceback
import warnings

warnings.filterwarnings("ignore")

import nova as nv  # noqa: E402

# Known bugs (see the docstring): the generator leaves out what triggers them unless
# ``--known`` is given.
KNOWN = "--known" in sys.argv
from nova.runtime.cache import CACHE  # noqa: E402

HEADER = '''\
import weakref, numpy as np, nova as nv
import nova.nn as nn, nova.nn.functional as F
import warnings; warnings.filterwarnings("ignore")

def call(fn, *a):
    try:
        return fn(*a)
    except Exception as e:          # compared by type
        return e

def _put(d, k, v):
    if isinstance(v, nv.Tensor):
        d[k] = ("T", str(v.dtype), tuple(v.shape), v.detach().numpy().tobytes())
        d[k + ".requires_grad"] = v.requires_grad
    elif isinstance(v, (list, tuple)):
        d[k] = type(v).__name__ + str(len(v))
        for i, u in enumerate(v):
            _put(d, f"{k}[{i}]", u)
    elif isinstance(v, dict):
        d[k] = "dict" + str(sorted(map(str, v)))
        for i, u in v.items():
            _put(d, f"{k}.{i}", u)
    elif isinstance(v, BaseException):
        d[k] = "raised " + type(v).__name__
    else:
        d[k] = repr(v)

_GRADS = {}
def snap(out):
    """Everything a call can change, as comparable values."""
    g, d = globals(), {}
    _put(d, "out", out)
    named = {"x": g.get("x"), "y": g.get("y"), "z": g.get("z"), "G": g.get("G")}
    d["out is"] = [k for k, t in named.items()
                   if any(o is t for o in (out if isinstance(out, (tuple, list)) else [out]))]
    for n, p in model.named_parameters():
        _put(d, "param." + n, p)
        _put(d, "grad." + n, p.grad)
        w = _GRADS.get(n)          # does p.grad stay the same tensor across calls?
        d["grad_same." + n] = p.grad is not None and w is not None and w() is p.grad
        _GRADS[n] = weakref.ref(p.grad) if p.grad is not None else None
    for n, b in model.named_buffers():
        _put(d, "buffer." + n, b)
    d["training"] = [m.training for m in model.modules()]
    for i, grp in enumerate(opt.param_groups):
        _put(d, f"lr{i}", grp["lr"])
        for j, p in enumerate(grp["params"]):
            _put(d, f"state{i}.{j}", dict(opt.state.get(p, {})))
    if g.get("sched") is not None:
        _put(d, "sched", (sched.last_epoch, sched.get_last_lr()))
    for k in ("x", "y", "z", "G", "KEEP_GRAD", "KEEP_VIEW", "KEEP_OUT"):
        if isinstance(g.get(k), nv.Tensor):
            _put(d, k, g[k])
            _put(d, k + ".grad", g[k].grad)
    return d

S, OUTS, R, E = [], [], [], []
def rec(out, lazy=False):
    """After a call: its snapshot (or, lazily, keep the result for the end)."""
    R.append(getattr(f, "replays", 0) + getattr(g_ev, "replays", 0))
    E.append(isinstance(out, BaseException))
    if lazy:
        OUTS.append(out)
    else:
        S.append(snap(out))
g_ev = None
'''

SNIPPET_FOOT = '''\
    RUNS[COMPILED] = S
    print("compiled" if COMPILED else "plain", "replays per call:", R)
for i, (a, b) in enumerate(zip(RUNS[False], RUNS[True])):
    bad = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    if bad:
        print("snapshot", i, "differs:", bad[:8])
        for k in bad[:3]:
            print("  ", k, "plain:", str(a.get(k))[:150], " compiled:", str(b.get(k))[:150])
        break
else:
    print("same")
'''


# ------------------------------------------------------------------ program generator

class Case:
    def __init__(self, seed):
        self.seed = seed
        self.r = random.Random(seed)
        self.setup = []          # lines
        self.calls = []          # (label, [lines]) per call, the last line being rec(...)
        self.expect_replay = True
        self.features = []


def gen(seed):
    r = random.Random(seed)
    c = Case(seed)
    L = c.setup
    D, H, C, T, V = 4, 5, 3, 3, 7
    kind = r.choice(["mlp", "mlp", "ln", "bn", "conv", "emb", "net", "net"])
    act = r.choice(["nn.ReLU()", "nn.GELU()", "nn.Tanh()", "nn.SiLU()"])
    drop = r.random() < 0.4
    dp = r.choice([0.2, 0.5])
    c.features.append(kind)
    L.append(f"nv.manual_seed({seed})")
    if kind == "mlp":
        layers = [f"nn.Linear({D}, {H})", act] + ([f"nn.Dropout({dp})"] if drop else []) + [f"nn.Linear({H}, {C})"]
        L.append(f"model = nn.Sequential({', '.join(layers)})")
    elif kind == "ln":
        layers = [f"nn.Linear({D}, {H})", f"nn.LayerNorm({H})", act] + ([f"nn.Dropout({dp})"] if drop else []) + [f"nn.Linear({H}, {C})"]
        L.append(f"model = nn.Sequential({', '.join(layers)})")
    elif kind == "bn":
        layers = [f"nn.Linear({D}, {H})", f"nn.BatchNorm1d({H})", act] + ([f"nn.Dropout({dp})"] if drop else []) + [f"nn.Linear({H}, {C})"]
        L.append(f"model = nn.Sequential({', '.join(layers)})")
    elif kind == "conv":
        bn = r.random() < 0.4
        pool = r.random() < 0.5
        layers = ["nn.Conv2d(1, 2, 3, padding=1)"] + (["nn.BatchNorm2d(2)"] if bn else []) + [act] + \
            (["nn.MaxPool2d(2)"] if pool else []) + ([f"nn.Dropout({dp})"] if drop else []) + \
            ["nn.Flatten()", f"nn.Linear({2 * 2 * 2 if pool else 2 * 4 * 4}, {C})"]
        L.append(f"model = nn.Sequential({', '.join(layers)})")
    elif kind == "emb":
        drop = False
        L.append(f"model = nn.Sequential(nn.Embedding({V}, {D}), nn.Flatten(), {act}, nn.Linear({T * D}, {C}))")
    else:
        L += ["class Net(nn.Module):",
              "    def __init__(self):",
              "        super().__init__()",
              f"        self.fc1 = nn.Linear({D}, {H})",
              f"        self.fc2 = nn.Linear({H}, {C})",
              f"        self.drop = nn.Dropout({dp if drop else 0.0})",
              "        self.scale = 1.0",
              "        self.act = F.relu",
              "        self.register_buffer('count', nv.zeros(()))",
              "    def forward(self, x):",
              "        with nv.no_grad():",
              "            self.count.add_(1)",
              "        return self.fc2(self.drop(self.act(self.fc1(x)))) * self.scale",
              "model = Net()"]
        drop = True
    first = "model.fc1" if kind == "net" else "model[0]"
    last = "model.fc2" if kind == "net" else "model[-1]"
    last_in = {"conv": None, "emb": T * D}.get(kind, H)
    dropmod = ("model.drop" if kind == "net" else
               "[m for m in model if isinstance(m, nn.Dropout)][0]") if drop else None

    # optimizer and scheduler
    o = r.choice(["SGD", "SGDm", "Adam", "AdamW", "RMSprop"])
    lr = r.choice([0.1, 0.01, 0.05])
    if o == "SGD":
        L.append(f"opt = nv.optim.SGD(model.parameters(), lr={lr}{', weight_decay=0.01' if r.random() < 0.3 else ''})")
    elif o == "SGDm":
        L.append(f"opt = nv.optim.SGD(model.parameters(), lr={lr}, momentum=0.9"
                 f"{', nesterov=True' if r.random() < 0.4 else ''})")
    elif o == "Adam":
        L.append(f"opt = nv.optim.Adam(model.parameters(), lr={lr}{', amsgrad=True' if r.random() < 0.3 else ''})")
    elif o == "AdamW":
        L.append(f"opt = nv.optim.AdamW(model.parameters(), lr={lr}, weight_decay=0.1)")
    else:
        L.append(f"opt = nv.optim.RMSprop(model.parameters(), lr={lr}{', momentum=0.5' if r.random() < 0.4 else ''})")
    c.features.append(o)
    sched = r.choice([None, None, "StepLR", "CosineAnnealingLR", "LambdaLR", "ExponentialLR", "OneCycleLR"])
    S_ = "nv.optim.lr_scheduler."
    L.append("sched = " + {None: "None", "StepLR": S_ + "StepLR(opt, step_size=2, gamma=0.5)",
                          "CosineAnnealingLR": S_ + "CosineAnnealingLR(opt, T_max=5)",
                          "LambdaLR": S_ + "LambdaLR(opt, lambda e: 1.0 / (1 + e))",
                          "ExponentialLR": S_ + "ExponentialLR(opt, gamma=0.8)",
                          "OneCycleLR": S_ + "OneCycleLR(opt, max_lr=0.1, total_steps=60)"}[sched])
    if sched:
        c.features.append(sched)

    # data
    classify = r.random() < 0.55
    xshape = {"conv": "(B, 1, 4, 4)", "emb": f"(B, {T})"}.get(kind, f"(B, {D})")
    xint = kind == "emb"
    use_z = not xint and r.random() < 0.3
    xrg = not xint and r.random() < 0.15
    B0 = r.choice([2, 3, 4])
    L.append(f"B = {B0}")
    L.append(f"rng = np.random.default_rng({seed})")
    L.append("s = 1.0")
    if xrg:
        L.append("XRG = True")
    if xint:
        xline = f"x = nv.tensor(rng.integers(0, {V}, {xshape}))"
    else:
        xline = f"x = nv.tensor(rng.standard_normal({xshape}).astype(np.float32))"
    data = [xline]
    if xrg:
        data.append("x.requires_grad_(XRG)")
    if use_z:
        data.append(f"z = nv.tensor(rng.standard_normal({xshape}).astype(np.float32))")
    if classify:
        data.append(f"y = nv.tensor(rng.integers(0, {C}, (B,)))")
        loss_e = r.choice(["F.cross_entropy(out, y)", "F.cross_entropy(out, y, label_smoothing=0.1)",
                           "F.nll_loss(F.log_softmax(out, 1), y)", "F.cross_entropy(out, y, reduction='sum')",
                           "F.cross_entropy(out, y)"])
    else:
        data.append(f"y = nv.tensor(rng.standard_normal((B, {C})).astype(np.float32))")
        loss_e = r.choice(["F.mse_loss(out, y)", "F.l1_loss(out, y)", "F.smooth_l1_loss(out, y)",
                           "F.huber_loss(out, y, delta=0.5)", "((out - y) ** 2).sum()", "(out ** 2).mean()"])

    # the step function
    style = r.choice(["train", "train", "train", "accum", "inner", "eval"])
    if style == "inner" and use_z:
        style = "train"
    c.features.append(style)
    use_scale = r.random() < 0.3
    use_mode = r.random() < 0.2
    use_closure = r.random() < 0.25
    use_G = r.random() < 0.3
    x_inplace = not xint and not xrg and r.random() < 0.12
    zn = r.choice([True, False])
    zero = r.choice(["first", "first", "last", "none_outside"])
    clip = r.choice([None, None, None, "norm", "value"])
    with_ev = style != "eval" and r.random() < 0.25
    if use_scale:
        L.append("SCALE = 1.0")
    if use_mode:
        L.append('MODE = "a"')
    if use_G:
        L.append(f"G = nv.zeros({C})")
    inp = "x + 0.1 * z" if use_z else "x"
    sig = ["x"] + (["z"] if use_z else []) + ["y", "s"] + (["do_step"] if style == "accum" else [])
    body = []
    lossline = f"loss = {loss_e} * s" + (" * SCALE" if use_scale else "") + (" * factor" if use_closure else "")
    clipl = {None: [], "norm": ["nn.utils.clip_grad_norm_(model.parameters(), 0.5)"],
             "value": ["nn.utils.clip_grad_value_(model.parameters(), 0.1)"]}[clip]
    schedl = ["sched.step()"] if sched else []
    zl = [f"opt.zero_grad(set_to_none={zn})"]
    if style == "train":
        if zero == "first":
            body += zl
        body += [f"out = model({inp})", lossline]
        if use_mode:
            body += ['if MODE == "a":', "    loss = loss + out.abs().mean()"]
        body += ["loss.backward()"] + clipl + ["opt.step()"] + schedl
        if zero == "last":
            body += zl
    elif style == "accum":
        body += [f"out = model({inp})", lossline, "(loss / 2).backward()", "if do_step:"]
        body += ["    " + ln for ln in clipl + ["opt.step()"] + schedl + zl]
    elif style == "inner":
        body += zl + ["for k in range(2):",
                      "    out = model(x[k::2])",
                      "    " + lossline.replace("(out, y", "(out, y[k::2]").replace("- y)", "- y[k::2])"),
                      "    loss.backward()"] + clipl + ["opt.step()"] + schedl
    else:  # eval
        c.expect_replay = True
        inner_ng = r.random() < 0.6
        pre = "    " if inner_ng else ""
        if inner_ng:
            body.append("with nv.no_grad():")
        body += [pre + f"out = model({inp})", pre + lossline]
    use_H = use_z and r.random() < 0.5
    if use_H:      # tensors the function writes by itself, passed as its argument z too
        L += [f"H1 = nv.zeros({xshape.replace('B', str(B0))})", f"H2 = nv.ones({xshape.replace('B', str(B0))})"]
        body += ["with nv.no_grad():", "    H1.add_(z)", "    H2.mul_(0.5)"]
        own = ["H1", "H2"] if KNOWN else [r.choice(["H1", "H2"])]
        c.features.append("H")
    if use_G:
        body += ["with nv.no_grad():", "    G.mul_(0.5).add_(out.detach().mean(0))"]
        c.features.append("G")
    if style == "accum":
        c.expect_replay = False          # two keys alternate: the tail is too short
    if x_inplace:
        body += ["with nv.no_grad():", "    x.mul_(0.5)"]
        c.features.append("x_inplace")
        c.expect_replay = False   # a fresh argument written in place records every call
    rets = ["loss.detach()", "loss.detach()", "loss", "(loss.detach(), out.detach())",
            "{'l': loss.detach(), 'col': out.detach()[:, 0]}", "out.detach()[0]", "None",
            f"(loss.detach(), {first}.weight.detach()[0])", "x"]
    if style == "eval":
        rets += ["out", "(out, out.argmax(1))"]
    if use_G:
        rets.append("G")
    if r.random() < 0.04:
        rets = ["loss.item()"]
    ret = r.choice(rets)
    if ret == "loss.item()":
        c.expect_replay = False
    body.append("return " + ret)
    c.features.append("ret=" + ret)
    fn_lines = [f"def step({', '.join(sig)}):"] + ["    " + ln for ln in body]
    if use_closure:
        L += ["def make_step():", "    factor = 1.0"] + ["    " + ln for ln in fn_lines] + \
             ["    def set_factor(v):", "        nonlocal factor", "        factor = v",
              "    return step, set_factor", "step, set_factor = make_step()"]
    else:
        L += fn_lines
    L.append("f = nv.compile(step) if COMPILED else step")
    if with_ev:
        L += ["def evaluate(x, y):", "    with nv.no_grad():", "        out = model(x)",
              f"        return ({loss_e}).detach(), out.argmax(1)",
              "g_ev = nv.compile(evaluate) if COMPILED else evaluate"]
    lazy = r.random() < 0.25
    if lazy:
        c.features.append("lazy")

    # ------------------------------------------------------------- the calls
    st = {"B": B0, "train": True, "frozen": False, "hook": False, "thook": False, "xrg": xrg,
          "scale": 1.0, "mode": "a", "s": 1.0}
    cargs = lambda xx="x", zz="z": ", ".join([xx] + ([zz] if use_z else []) + ["y", "s"])
    ncalls = r.randint(6, 12)
    tail = r.random() < 0.6       # the last calls change nothing: they should replay
    n_free = ncalls - 4 if tail else ncalls
    do_step = True

    def act():
        """Lines changing something between calls, and the action's name."""
        opts = []
        opts.append(("s", lambda: [f"s = {r.choice([0.5, 2.0, 1.0, 0.25, -1.0])}"]))
        opts.append(("batch", lambda: [f"B = {r.choice([2, 3, 4, 5])}"]))
        opts.append(("train/eval", lambda: [f"model.{'eval' if st.__setitem__('train', not st['train']) or not st['train'] else 'train'}()"]))
        opts.append(("lr", lambda: [f"opt.param_groups[0]['lr'] = {r.choice([0.2, 0.02, 0.001])}"]))
        opts.append(("seed", lambda: [f"nv.manual_seed({r.randint(0, 99)})"]))
        opts.append(("param_inplace", lambda: ["with nv.no_grad():", f"    {first}.weight.mul_(0.5)"]))
        opts.append(("freeze", lambda: [f"{first}.requires_grad_({st.__setitem__('frozen', not st['frozen']) or not st['frozen']})"]))
        opts.append(("swap_layer", lambda: [f"nv.manual_seed({r.randint(0, 99)})",
                                            f"{last} = nn.Linear({last_in}, {C})" if last_in else
                                            f"{last}.bias = nn.Parameter(nv.zeros({C}))"]))
        opts.append(("new_param", lambda: [f"{last}.bias = nn.Parameter({last}.bias.detach() * 2)"]))
        opts.append(("zero_outside", lambda: [f"opt.zero_grad(set_to_none={r.choice([True, False])})"]))
        opts.append(("grad_none", lambda: [f"{last}.bias.grad = None"]))
        opts.append(("new_opt", lambda: [f"opt = nv.optim.{r.choice(['SGD', 'Adam'])}(model.parameters(), lr=0.03)"]))
        opts.append(("opt_reload", lambda: ["opt.load_state_dict(opt.state_dict())"]))
        opts.append(("state_clear", lambda: ["opt.state.clear()"]))
        opts.append(("add_group_lr", lambda: ["for grp in opt.param_groups:", "    grp['lr'] *= 0.5"]))
        opts.append(("sched_outside", lambda: ["sched.step()"] if sched else ["pass"]))
        opts.append(("keep_grad", lambda: [f"KEEP_GRAD = {first}.weight.grad"]))
        opts.append(("keep_view", lambda: [f"KEEP_VIEW = {first}.weight.detach()[0]"]))
        opts.append(("keep_out", lambda: ["KEEP_OUT = out if isinstance(out, nv.Tensor) else None"]))
        opts.append(("mutate_out", lambda: ["if isinstance(out, nv.Tensor) and out.is_floating_point() and not out.requires_grad:",
                                            "    out.add_(1.0)"]))
        if not st["hook"]:
            opts.append(("fwd_hook", lambda: st.__setitem__("hook", True) or
                         [f"HOOK = {first}.register_forward_hook(lambda m, i, o: o * 0.5)"]))
        else:
            opts.append(("hook_remove", lambda: st.__setitem__("hook", False) or ["HOOK.remove()"]))
        if not st["thook"]:
            opts.append(("tensor_hook", lambda: st.__setitem__("thook", True) or
                         [f"THOOK = {last}.weight.register_hook(lambda g: g * 2)"]))
        hp = {"SGD": [("weight_decay", [0.0, 0.1])], "SGDm": [("momentum", [0.5, 0.0]), ("weight_decay", [0.1])],
              "Adam": [("betas", [(0.5, 0.9)]), ("eps", [0.1]), ("weight_decay", [0.1])],
              "AdamW": [("betas", [(0.5, 0.9)]), ("eps", [0.1]), ("weight_decay", [0.0, 0.5])],
              "RMSprop": [("alpha", [0.5]), ("eps", [0.1]), ("weight_decay", [0.1])]}[o]
        opts.append(("hyperparameter", lambda: [
            "opt.param_groups[0][%r] = %r" % (lambda kv: (kv[0], r.choice(kv[1])))(r.choice(hp))]))
        opts.append(("set_grad", lambda: [f"{last}.bias.grad = nv.ones({C})"]))
        opts.append(("grad_inplace", lambda: [f"if {first}.weight.grad is not None:",
                                              f"    {first}.weight.grad.mul_(2.0)"]))
        opts.append(("rng_draw", lambda: ["_ = nv.rand(2)"]))
        if kind == "bn":
            opts.append(("bn_momentum", lambda: [f"model[1].momentum = {r.choice([0.5, 0.01, None])}"]))
        if kind == "ln":
            opts.append(("ln_eps", lambda: [f"model[1].eps = {r.choice([0.1, 1e-3])}"]))
        if kind == "net" and KNOWN:
            opts.append(("module_fn_attr", lambda: [f"model.act = {r.choice(['F.gelu', 'F.tanh', 'nn.Tanh()'])}"]))
        if use_scale:
            opts.append(("SCALE", lambda: [f"SCALE = {r.choice([0.5, 2.0, 1.0])}"]))
        if use_mode:
            opts.append(("MODE", lambda: [f'MODE = "{r.choice("ab")}"']))
        if use_closure:
            opts.append(("closure", lambda: [f"set_factor({r.choice([0.5, 2.0, 1.0])})"]))
        if drop:
            opts.append(("dropout_p", lambda: [f"{dropmod}.p = {r.choice([0.0, 0.3, 0.5])}"]))
        if kind == "net":
            opts.append(("module_attr", lambda: [f"model.scale = {r.choice([0.5, 2.0, 1.0])}"]))
        if xrg:
            opts.append(("x_requires_grad", lambda: [f"XRG = {r.choice([True, False])}"]))
        return r.choice(opts)

    for i in range(ncalls):
        lines, label = [], []
        # mostly after the first calls: a change should meet a function that replays
        if i > 0 and i < n_free and r.random() < (0.15 if i < 3 else 0.6):
            for _ in range(r.choice([1, 1, 1, 2])):
                name, mk = act()
                lines += mk()
                label.append(name)
        special = None
        if i > 0 and i < n_free and r.random() < (0.1 if i < 3 else 0.25):
            special = r.choice(["no_grad", "reuse_x", "inplace_x"] + (["alias", "pass_H"] if use_z else [])
                               + (["autocast"] if KNOWN else []))
        if special in ("reuse_x", "inplace_x"):
            if special == "inplace_x" and not xint:
                lines += ["with nv.no_grad():", "    x.add_(1.0)"]
            # the batch may have changed: then regenerate
            lines += ["if x.shape[0] != B:"] + ["    " + d for d in data]
        else:
            lines += data
        if special:
            label.append(special)
        if style == "accum":
            do_step = (i % 2 == 1) if r.random() < 0.8 else r.choice([True, False])
            a = cargs() + f", {do_step}"
        else:
            a = cargs()
        if special == "alias":
            a = a.replace("z, y", "x, y", 1)
        if special == "pass_H":
            h = r.choice(own) if use_H else "x"
            a = a.replace("z, y", f"{h} if {h}.shape == x.shape else z, y", 1)
        cl = f"out = call(f, {a})"
        if special == "autocast":
            lines += ['with nv.autocast("cpu", dtype=nv.bfloat16):', "    " + cl]
        elif special == "no_grad" or (style == "eval" and not inner_ng and r.random() < 0.85):
            lines += ["with nv.no_grad():", "    " + cl]
        else:
            lines.append(cl)
        if with_ev and r.random() < 0.5:
            lines.append("ev_out = call(g_ev, x, y)")
            lines.append("rec(ev_out, lazy=%s)" % lazy)
        lines.append(f"rec(out, lazy={lazy})")
        c.calls.append((",".join(label) or "-", lines))
    # after the calls: the state replays left is what plain Python sees next
    c.post = []
    if lazy:
        c.post.append("S.append(snap(OUTS))")
    post_args = cargs() + (", True" if style == "accum" else "")
    c.post += [f"out = call(step, {post_args})", "S.append(snap(out))",
               "S.append({'rand': nv.rand(3).numpy().tobytes()})"]
    c.tail = tail
    c.ncalls = ncalls
    return c


def body_source(c):
    lines = list(c.setup)
    for i, (label, cl) in enumerate(c.calls):
        lines.append(f"# call {i}: {label}")
        lines += cl
    lines.append("# after the calls: one plain step, one draw from the generator")
    lines += c.post
    return "\n".join(lines) + "\n"


def snippet(c):
    body = body_source(c)
    return ("# nv.compile fuzz case %d\n" % c.seed + HEADER + "RUNS = {}\nfor COMPILED in (False, True):\n"
            "    S, OUTS, R, E = [], [], [], []\n    _GRADS.clear()\n"
            + textwrap.indent(body, "    ") + SNIPPET_FOOT)


def run(c, compiled):
    ns = {"COMPILED": compiled, "__name__": "fuzzcase"}
    exec(compile(HEADER + body_source(c), f"<case {c.seed}>", "exec"), ns)
    return ns


# ------------------------------------------------------------------ comparison

def known(k, a, b):
    """A known, accepted difference: a returned tensor whose graph backward already
    released comes back from a replay with requires_grad False (values identical)."""
    return ("--strict" not in sys.argv and k.startswith(("out", "KEEP_OUT"))
            and k.endswith(".requires_grad") and a.get(k) is True and b.get(k) is False)


def first_difference(A, B):
    if len(A) != len(B):
        return len(min(A, B, key=len)), ["snapshot count %d vs %d" % (len(A), len(B))]
    for i, (a, b) in enumerate(zip(A, B)):
        bad = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k) and not known(k, a, b))
        if bad:
            return i, bad
    return None


def describe(k, a, b):
    def sh(v):
        if isinstance(v, tuple) and v and v[0] == "T":
            import numpy as np
            dt = v[1].split(".")[-1]
            arr = np.frombuffer(v[3], dtype=dt if dt in ("float32", "float64", "int64", "int32", "bool")
                                else "uint8")
            return f"{v[1]}{v[2]} {arr[:5]}"
        return str(v)[:120]
    return f"{k}: plain {sh(a.get(k))} | compiled {sh(b.get(k))}"


SEEN = {}


def check(seed, show=False):
    c = gen(seed)
    if show:
        print(snippet(c))
    ns_a = run(c, False)
    A = ns_a["S"]
    del ns_a
    gc.collect()
    log0 = len(CACHE.stats.compile_log)
    ns_b = run(c, True)
    B, R, E = ns_b["S"], ns_b["R"], ns_b["E"]
    log = CACHE.stats.compile_log[log0:]
    del ns_b
    gc.collect()
    # snapshot index -> call index (an evaluation call adds a snapshot)
    d = first_difference(A, B)
    if d is not None:
        i, keys = d
        labels = [lab for lab, _ in c.calls]
        # which call: count rec( lines
        recs = []
        for ci, (lab, cl) in enumerate(c.calls):
            recs += [ci] * sum(ln.startswith("rec(") for ln in cl)
        lazy = "lazy" in c.features
        where = ("after all calls (lazy)" if lazy and i == 0 else
                 f"call {recs[i]} [{labels[recs[i]]}]" if not lazy and i < len(recs) else
                 "the plain call after the sequence" if i == len(A) - 2 else "the generator draw at the end"
                 if i == len(A) - 1 else f"snapshot {i}")
        cat = sorted({k.split(".")[0].split("[")[0] for k in keys})
        sig = (tuple(cat[:3]), where.split(" [")[0] if "call" not in where else labels[recs[i]] if not lazy else "lazy")
        print("=" * 70)
        first = sig not in SEEN
        SEEN.setdefault(sig, seed)
        print(f"SEED {seed} MISMATCH at {where}; features {c.features}; replays per call {R}"
              + ("" if first else f"  (like SEED {SEEN[sig]})"))
        for k in keys[:5]:
            print("  ->", describe(k, A[i], B[i]))
        if first:
            for ln in log[:8]:
                print("  log:", ln[:200])
            print("  ---- snippet ----")
            print(textwrap.indent(snippet(c), "  "))
        return "bad"
    if c.tail and c.expect_replay:
        tail_r = R[-1] - (R[-5] if len(R) >= 5 else 0)
        if tail_r == 0 and not any(E[-4:]) and not any("runs recorded every call" in ln for ln in log):
            print(f"SEED {seed} NOTE: none of the last 4 unchanged calls replayed; features {c.features}")
            for ln in log[-4:]:
                print("  log:", ln[:200])
            return "no_replay"
    return "ok"


CHUNK = 10     # seeds per child process: capture scans the live objects, which grow


def main():
    start, n = int(sys.argv[1]), int(sys.argv[2])
    show = "show" in sys.argv[3:]
    from collections import Counter
    cnt = Counter()
    t0 = time.time()
    if n > CHUNK and "--child" not in sys.argv:
        import ast
        import subprocess
        for s in range(start, start + n, CHUNK):
            k = min(CHUNK, start + n - s)
            p = subprocess.run([sys.executable, __file__, str(s), str(k), *sys.argv[3:], "--child"],
                               stdout=subprocess.PIPE, text=True)
            lines = p.stdout.splitlines()
            for ln in lines[:-1]:
                print(ln)
            try:
                cnt.update(ast.literal_eval(lines[-1].rsplit(" ", 2)[0]))
            except Exception:
                print(lines[-1] if lines else "", f"(child for seeds {s}..{s + k - 1} exited {p.returncode})")
                cnt["harness"] += k
            sys.stdout.flush()
        print(dict(cnt), f"{time.time() - t0:.0f} s")
        return
    for s in range(start, start + n):
        try:
            cnt[check(s, show)] += 1
        except Exception as e:
            cnt["harness"] += 1
            print("SEED", s, "HARNESS", type(e).__name__, str(e)[:300])
            traceback.print_exc(limit=3)
        sys.stdout.flush()
    print(dict(cnt), f"{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()

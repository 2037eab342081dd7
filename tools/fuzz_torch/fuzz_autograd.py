"""Random autograd composition fuzzer: torch vs nova.

usage: python fuzz_autograd.py START N
Each case is a small program in source form with `L` standing for the library.
"""
import sys, random, warnings
warnings.filterwarnings("ignore")
import numpy as np
import torch
import nova as nv
from common import run_seeds

VALS = np.array([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0], dtype=np.float32)

SHAPES = [(3, 4), (4,), (3, 1), (2, 3, 4), (1, 4), (4, 4), (2, 4, 3), (3,)]


def leaf_data(rng, shape):
    if rng.random() < 0.5:
        return rng.choice(VALS, size=shape).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


UN = [
    "L.exp({x} * 0.5)", "L.tanh({x})", "L.sigmoid({x})", "L.sin({x})", "{x}.abs()", "L.relu({x})",
    "L.sqrt({x}.abs())", "{x}.clamp(min=-0.5, max=1.0)", "{x}.clamp(min=0.0)", "{x}.clamp(max=0.5)",
    "{x} * {x}", "L.log({x}.abs() + 1)", "{x}.pow(2)", "{x}.pow(3)", "-{x}", "{x} * 2.5", "{x} / 2",
    "L.nn.functional.softplus({x})", "L.nn.functional.elu({x})", "L.nn.functional.leaky_relu({x}, 0.1)",
    "L.nn.functional.gelu({x})", "L.nn.functional.silu({x})", "L.nn.functional.hardtanh({x})",
    "L.atan({x})", "{x}.sign() * {x}", "L.nn.functional.relu6({x})", "{x}.square()",
    "L.nn.functional.hardswish({x})", "L.nn.functional.hardsigmoid({x})", "L.cos({x})",
    "L.softmax({x}, dim=-1)", "L.log_softmax({x}, dim=0)", "L.cumsum({x}, dim=0)",
    "L.cumprod({x}, dim=-1)", "{x}.flip(0)", "{x}.t() if {x}.dim() == 2 else {x}",
    "{x}.transpose(0, -1)", "{x}[1:]", "{x}[..., ::2]", "{x}[0]", "{x}.reshape(-1)",
    "{x}.unsqueeze(0)", "{x}.unsqueeze(-1).expand(*{x}.shape, 2)", "{x}.select(-1, 0)",
    "{x}.narrow(0, 0, 1)", "{x}.unfold(-1, 2, 1)", "{x}.unfold(0, 1, 1)", "{x}.permute(*reversed(range({x}.dim())))",
    "{x}.sum()", "{x}.sum(0)", "{x}.sum(-1, keepdim=True)", "{x}.mean(0)", "{x}.mean(-1, keepdim=True)",
    "{x}.prod(-1)", "{x}.amax(-1)", "{x}.amin(0, keepdim=True)", "{x}.amax()", "{x}.max()", "{x}.min()",
    "{x}.max(-1)[0]", "{x}.min(0, keepdim=True)[0]", "{x}.max(0).values", "L.logsumexp({x}, dim=-1)",
    "{x}.norm()", "{x}.norm(dim=-1)", "{x}.norm(p=1, dim=0)", "{x}.var(-1)", "{x}.std(0)", "{x}.var()",
    "L.nn.functional.normalize({x}, dim=-1)", 
    "{x}.sort(-1)[0]", 
    "L.cat([{x}, {x} * 2], dim=0)", "L.stack([{x}, {x}], dim=-1)", "{x}.split(1, dim=0)[0]",
    "{x}.chunk(2, dim=-1)[-1]", "L.where({x} > 0, {x}, {x} * 0.1)", "{x}.masked_fill({x} < 0, 0.0)",
    "{x}.index_select(0, L.tensor([0, 0, {x}.shape[0] - 1]))", "{x}[L.tensor([1, 0, 1]) % {x}.shape[0]]",
    "{x}.gather(-1, L.zeros({x}.shape, dtype=L.long))", "{x}.roll(1, 0)", "{x}.repeat(2, *([1] * ({x}.dim() - 1)))",
    "{x}.tril()", "{x}.triu(1)", "{x}.diagonal()", "{x}.trace().reshape(1) if {x}.dim() == 2 and {x}.shape[0] == {x}.shape[1] else {x}",
    "{x}.clone()", "{x}.detach()", "{x}.contiguous()", "L.nn.functional.dropout({x}, 0.0)",
    "{x}.cummax(-1)[0]",  "L.sinh({x} * 0.5)", "{x}.reciprocal() if False else 1 / ({x}.abs() + 1)",
    "L.erf({x})", "{x}.exp2()" if False else "L.expm1({x} * 0.3)", "L.log1p({x}.abs())", "{x}.frac() + {x}",
    "{x}.floor() + {x}", "L.rsqrt({x}.abs() + 0.5)", "L.nn.functional.logsigmoid({x})", "L.nn.functional.mish({x})",
    "L.nn.functional.selu({x})", "L.nn.functional.celu({x}, 0.5)", "L.nn.functional.softsign({x})",
    "L.nn.functional.tanhshrink({x})", "L.nn.functional.softshrink({x}, 0.5)", "L.nn.functional.hardshrink({x}, 0.5)",
    "L.nn.functional.threshold({x}, 0.5, -1.0)", "L.nn.functional.gelu({x}, approximate='tanh')",
    "{x}.sum(dim=(0, -1))", "{x}.mean(dim=(0, -1), keepdim=True)", "{x}.amax(dim=(0, -1))",
    "{x}.norm(p=float('inf'), dim=-1)", "L.linalg.vector_norm({x}, ord=3, dim=0)",
    "{x}.nan_to_num()", "{x}.squeeze()", "{x}.flatten()", "{x}.view(-1, 1)",
]

BIN = [
    "{x} + {y}", "{x} - {y}", "{x} * {y}", "{x} / ({y}.abs() + 1)", "L.maximum({x}, {y})", "L.minimum({x}, {y})",
    "L.atan2({x}, {y} + 3)", "L.where({x} > {y}, {x}, {y})", "{x}.pow({y}.abs() + 1) if False else ({x}.abs() + 1).pow({y})",
    "L.matmul({x}, {y})", "{x} @ {y}.transpose(-1, -2)", "L.einsum('...i,...i->...', {x}, {y})",
    "L.einsum('ij,kj->ik', {x}, {y})", "L.bmm({x}, {y})", "L.cat([{x}, {y}], dim=0)", "L.cat([{x}, {y}], dim=-1)",
    "L.stack([{x}, {y}])", "{x}.clamp(min={y})", "{x}.clamp(max={y})", "L.hypot({x}, {y})",
    "L.lerp({x}, {y}, 0.3)", "L.addcmul({x}, {x}, {y}, value=0.5)", "L.outer({x}, {y})",
    "L.nn.functional.linear({x}, {y})", "L.dot({x}, {y})", "L.mv({x}, {y})", "L.fmax({x}, {y})",
    "L.copysign({x}, {y})", "L.xlogy({x}.abs(), {y}.abs() + 0.5)", "L.dist({x}, {y})",
    "L.nn.functional.cosine_similarity({x}, {y}, dim=-1)", "L.cdist({x}, {y})" ,
    "{x}.masked_fill({y} > 0, 1.0)", "{x}.expand_as({y})", "{x} * {y}.detach()",
    "L.nn.functional.mse_loss({x}, {y})", "L.nn.functional.l1_loss({x}, {y})", "L.nn.functional.smooth_l1_loss({x}, {y})",
    "L.nn.functional.huber_loss({x}, {y}, delta=0.5)",
]

INPLACE = [
    "{t}[0] += {y}", "{t}[0] = {y}", "{t}.mul_(2)", "{t}.add_({y})", "{t}.clamp_(min=0)", "{t}.relu_()",
    "{t}[..., :1] *= {y}", "{t}.sub_({y}, alpha=2)", "{t}.masked_fill_({t} > 1, 0.5)", "{t}.exp_()",
    "{t}.index_put_((L.tensor([0]),), {y})", "{t}[:, 0] = 0" , "{t}.copy_({y} * 1)", "{t}.div_(2)",
    "{t}.transpose(0, -1)[0] += 1", "{t}.view(-1)[:2].mul_({y}.sum())", "{t}.sigmoid_()", "{t}.tanh_()",
    "{t}.squeeze_()" if False else "{t}.abs_()", "{t}.addcmul_({y}, {y})", "{t}.pow_(2)",
]


class Skip(Exception):
    pass


def run_prog(L, lines, leaves, extra):
    """Execute program lines; return namespace."""
    ns = {"L": L}
    for name, (arr, rg) in leaves.items():
        ns[name] = L.tensor(arr, requires_grad=rg)
    for ln in lines:
        exec(ln, ns)
    return ns


def gen_case(seed):
    rng = np.random.default_rng(seed)
    r = random.Random(seed)
    nleaf = r.randint(1, 3)
    leaves = {}
    for i in range(nleaf):
        shp = SHAPES[r.randrange(len(SHAPES))]
        leaves["a%d" % i] = (leaf_data(rng, shp), r.random() < 0.85)
    if not any(rg for _, rg in leaves.values()):
        k = next(iter(leaves))
        leaves[k] = (leaves[k][0], True)
    lines = []
    vars_ = list(leaves)
    nsteps = r.randint(2, 6)
    retained = []
    tries = 0
    # validate with torch incrementally
    while len([l for l in lines if not l.startswith("#")]) < nsteps and tries < 60:
        tries += 1
        kind = r.random()
        x = r.choice(vars_)
        y = r.choice(vars_)
        vn = "v%d" % len(vars_)
        if kind < 0.45:
            new = [f"{vn} = " + r.choice(UN).format(x=x)]
        elif kind < 0.8:
            new = [f"{vn} = " + r.choice(BIN).format(x=x, y=y)]
        elif kind < 0.92:
            ip = r.choice(INPLACE)
            new = [f"{vn} = {x} * 1", ip.format(t=vn, y=y)]
        elif kind < 0.96:
            new = [f"{vn} = {x} * 1", f"{vn}.retain_grad()"]
            retained.append(vn)
        else:
            new = [f"{vn} = " + r.choice(["{x}.detach() * {y}", "({x} * 2).detach()"]).format(x=x, y=y)]
        try:
            ns = run_prog(torch, lines + new, leaves, None)
            v = ns[vn]
            if not isinstance(v, torch.Tensor) or not v.dtype.is_floating_point:
                continue
            if v.numel() == 0 or v.numel() > 2000:
                continue
            if not np.all(np.isfinite(v.detach().numpy())):
                continue
        except Exception:
            continue
        lines += new
        vars_.append(vn)
    # output: weighted sum of last var(s)
    outs = [v for v in vars_[nleaf:]][-2:]
    if not outs:
        return None
    return leaves, lines, outs, retained


def snippet(leaves, lines, outs, W, mode):
    s = ["import numpy as np, torch, nova as nv", "for L in (torch, nv):"]
    for k, (arr, rg) in leaves.items():
        s.append(f"    {k} = L.tensor(np.array({arr.tolist()!r}, dtype=np.float32), requires_grad={rg})")
    for ln in lines:
        s.append("    " + ln)
    for i, o in enumerate(outs):
        s.append(f"    w{i} = L.tensor(np.array({W[i].tolist()!r}, dtype=np.float32))")
    s.append("    loss = " + " + ".join(f"({o} * w{i}).sum()" for i, o in enumerate(outs)))
    s.append(f"    # mode={mode}")
    s.append("    loss.backward()")
    s.append("    print(L.__name__, [" + ", ".join(f"{k}.grad" for k, (a, rg) in leaves.items() if rg) + "])")
    return "\n".join(s)


def tonp(g):
    g = g.detach()
    if isinstance(g, torch.Tensor):
        return g.numpy(force=True).copy()
    return g.numpy().copy()


def close(a, b, rtol=1e-3, atol=1e-4):
    a = np.asarray(a, dtype=np.float64); b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    return np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)


def run_one(L, lines, leaves, outs, retained, mode, W, rng):
    ns = run_prog(L, lines, leaves, None)
    ns["__L"] = L
    ov = [ns[o] for o in outs]
    if W is None:
        W = [rng.standard_normal(tuple(o.shape)).astype(np.float32) for o in ov]
    ws = [L.tensor(w) for w in W]
    leaf_rg = [k for k, (a, rg) in leaves.items() if rg]
    if not any(o.requires_grad for o in ov):
        return "nograd", W
    if mode == "hook":
        for k in leaf_rg:
            ns[k].register_hook(lambda g: g * 3)
        if lines:
            pass
    loss = sum((o * w).sum() for o, w in zip(ov, ws))
    fw = [o.detach().numpy().copy() for o in ov] + [loss.detach().numpy().copy()]
    grads = None
    if mode in ("backward", "hook"):
        loss.backward()
        grads = [ns[k].grad for k in leaf_rg]
    elif mode == "backward2":
        loss.backward(retain_graph=True)
        (loss * 2).backward()
        grads = [ns[k].grad for k in leaf_rg]
    elif mode == "grad":
        gs = L.autograd.grad(loss, [ns[k] for k in leaf_rg], allow_unused=True)
        grads = list(gs)
    elif mode == "double":
        gs = L.autograd.grad(loss, [ns[k] for k in leaf_rg], create_graph=True, allow_unused=True)
        s = None
        for g in gs:
            if g is not None and g.requires_grad:
                t = (g * g).sum()
                s = t if s is None else s + t
        if s is None:
            grads = list(gs)
        else:
            g2 = L.autograd.grad(s, [ns[k] for k in leaf_rg], allow_unused=True)
            grads = list(gs) + list(g2)
    gn = [None if g is None else tonp(g) for g in grads]
    rgn = []
    if mode in ("backward", "backward2", "hook"):
        for rv in retained:
            g = ns[rv].grad
            rgn.append(None if g is None else g.detach().numpy().copy())
    return (fw, gn, rgn), W


def check(seed, verbose=False):
    c = gen_case(seed)
    if c is None:
        return "skip"
    leaves, lines, outs, retained = c
    r = random.Random(seed * 7 + 1)
    mode = r.choice(["backward", "backward2", "grad", "hook", "double"])
    rng = np.random.default_rng(seed + 99)
    res = {}
    W = None
    try:
        rt, W = run_one(torch, lines, leaves, outs, retained, mode, W, rng)
    except Exception:
        return "torch_err"
    if rt == "nograd":
        return "nograd"
    res["torch"] = rt
    nres = run_one(nv, lines, leaves, outs, retained, mode, W, rng)
    if nres[0] == "nograd":
        print("=" * 70)
        print("SEED", seed, "NOGRAD in nova only")
        print(snippet(leaves, lines, outs, W, mode))
        return "bad"
    res["nova"], _ = run_one(nv, lines, leaves, outs, retained, mode, W, rng)
    (tf, tg, tr), (nf, ngr, nr) = res["torch"], res["nova"]
    bad = []
    for i, (a, b) in enumerate(zip(tf, nf)):
        if not close(a, b, 1e-4, 1e-5):
            bad.append(("fwd", i, a, b))
    for i, (a, b) in enumerate(zip(tg, ngr)):
        if a is None and b is None:
            continue
        if a is None:
            a = np.zeros_like(b)
        if b is None:
            b = np.zeros_like(a)
        if mode == "double" and np.shape(a) == np.shape(b):
            a = np.where(np.isnan(a), b, a)
        if not close(a, b):
            bad.append(("grad", i, a, b))
    for i, (a, b) in enumerate(zip(tr, nr)):
        if (a is None) != (b is None) or (a is not None and not close(a, b)):
            bad.append(("retained", i, a, b))
    if bad:
        print("=" * 70)
        print("SEED", seed, "mode", mode)
        print(snippet(leaves, lines, outs, W, mode))
        for kind, i, a, b in bad[:3]:
            print(kind, i, "\n torch:", a, "\n nova:", b)
        return "bad"
    return "ok"


if __name__ == "__main__":
    def _show(seed):
        c = gen_case(seed)
        if c:
            print("\n".join(c[1]))
    run_seeds(check, int(sys.argv[1]), int(sys.argv[2]), _show)

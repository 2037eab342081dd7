"""nn.functional differential fuzzer: torch vs nova.  usage: python fuzz_functional.py START N [filter]"""
import sys, random, warnings
warnings.filterwarnings("ignore")
import numpy as np
import torch
import nova as nv
from common import Cases, print_differences, run_seeds


def R(rng, *shape, kind="n"):
    if kind == "n":
        return rng.standard_normal(shape).astype(np.float32)
    if kind == "tie":
        return rng.choice(np.array([-1, 0, 0.5, 1, 2], np.float32), size=shape).astype(np.float32)
    if kind == "pos":
        return rng.uniform(0.05, 0.95, size=shape).astype(np.float32)


CASES = Cases()
case = CASES.add


# each case: (r, rng) -> (desc, inputs: dict name->(array, requires_grad), code string using F, L, and inputs)

@case
def linear(r, rng):
    b = r.random() < 0.5
    N, I, O = r.randint(1, 4), r.randint(1, 5), r.randint(1, 5)
    inp = {"x": (R(rng, 2, N, I), True), "w": (R(rng, O, I), True)}
    if b:
        inp["bias"] = (R(rng, O), True)
    return inp, "F.linear(x, w" + (", bias)" if b else ")")


@case
def conv1d(r, rng):
    g = r.choice([1, 2])
    C, O = 2 * g, 2 * g
    k = r.randint(1, 3)
    s = r.randint(1, 2)
    d = r.randint(1, 2)
    L_ = r.randint(5, 9)
    pad = r.choice([0, 1, 2, "'same'", "'valid'"])
    if pad == "'same'":
        s = 1
    inp = {"x": (R(rng, 2, C, L_), True), "w": (R(rng, O, C // g, k), True), "b": (R(rng, O), True)}
    r.choice(["zeros", "reflect", "replicate", "circular"])    # (keeps the seeded stream)
    return inp, f"F.conv1d(x, w, b, stride={s}, padding={pad}, dilation={d}, groups={g})"


@case
def conv2d(r, rng):
    g = r.choice([1, 2, 4])
    C = g * r.randint(1, 2)
    O = g * r.randint(1, 2)
    kh, kw = r.randint(1, 3), r.randint(1, 3)
    s = (r.randint(1, 2), r.randint(1, 2))
    d = (r.randint(1, 2), r.randint(1, 2))
    pad = r.choice(["0", "1", "(1, 2)", "'same'", "'valid'"])
    if pad == "'same'":
        s = 1
    inp = {"x": (R(rng, 2, C, 7, 6), True), "w": (R(rng, O, C // g, kh, kw), True)}
    bias = r.random() < 0.5
    if bias:
        inp["b"] = (R(rng, O), True)
    return inp, f"F.conv2d(x, w, {'b' if bias else 'None'}, stride={s}, padding={pad}, dilation={d}, groups={g})"


@case
def conv_transpose2d(r, rng):
    g = r.choice([1, 2])
    C = g * r.randint(1, 2)
    O = g * r.randint(1, 2)
    k = (r.randint(1, 3), r.randint(1, 3))
    s = (r.randint(1, 3), r.randint(1, 2))
    p = (r.randint(0, k[0] - 1), r.randint(0, k[1] - 1))
    d = (r.randint(1, 2), 1)
    op = (r.randint(0, max(s[0], d[0]) - 1), 0)
    inp = {"x": (R(rng, 2, C, 4, 5), True), "w": (R(rng, C, O // g, *k), True), "b": (R(rng, O), True)}
    return inp, f"F.conv_transpose2d(x, w, b, stride={s}, padding={p}, output_padding={op}, groups={g}, dilation={d})"


@case
def conv_transpose1d(r, rng):
    k = r.randint(1, 4)
    s = r.randint(1, 3)
    p = r.randint(0, k - 1)
    inp = {"x": (R(rng, 2, 3, 5), True), "w": (R(rng, 3, 2, k), True)}
    return inp, f"F.conv_transpose1d(x, w, stride={s}, padding={p})"


@case
def max_pool2d(r, rng):
    k = r.randint(2, 3)
    s = r.choice([None, 1, 2])
    p = r.randint(0, k // 2)
    cm = r.random() < 0.5
    d = r.choice([1, 1, 2])
    kind = r.choice(["n", "tie"])
    inp = {"x": (R(rng, 2, 2, 7, 6, kind=kind), True)}
    return inp, f"F.max_pool2d(x, {k}, stride={s}, padding={p}, dilation={d}, ceil_mode={cm})"


@case
def max_pool1d(r, rng):
    k = r.randint(2, 4)
    s = r.choice([None, 1, 2, 3])
    p = r.randint(0, k // 2)
    cm = r.random() < 0.5
    inp = {"x": (R(rng, 2, 3, 9, kind=r.choice(["n", "tie"])), True)}
    return inp, f"F.max_pool1d(x, {k}, stride={s}, padding={p}, ceil_mode={cm})"


@case
def avg_pool2d(r, rng):
    k = (r.randint(1, 3), r.randint(2, 3))
    s = r.choice([None, 1, 2, (2, 1)])
    p = (r.randint(0, k[0] // 2), r.randint(0, k[1] // 2))
    cm = r.random() < 0.5
    cip = r.random() < 0.5
    dv = r.choice([None, None, 3])
    inp = {"x": (R(rng, 2, 2, 7, 6), True)}
    return inp, f"F.avg_pool2d(x, {k}, stride={s}, padding={p}, ceil_mode={cm}, count_include_pad={cip}, divisor_override={dv})"


@case
def avg_pool1d(r, rng):
    k = r.randint(1, 4)
    s = r.choice([None, 1, 2, 3])
    p = r.randint(0, k // 2)
    cm = r.random() < 0.5
    cip = r.random() < 0.5
    inp = {"x": (R(rng, 2, 3, 8), True)}
    return inp, f"F.avg_pool1d(x, {k}, stride={s}, padding={p}, ceil_mode={cm}, count_include_pad={cip})"


@case
def adaptive(r, rng):
    kind = r.choice(["avg2", "max2", "avg1", "max1"])
    if kind.endswith("2"):
        o = (r.randint(1, 5), r.choice([None, 1, 3, 4]))
        inp = {"x": (R(rng, 2, 2, 7, 5, kind=r.choice(["n", "tie"])), True)}
        fn = "adaptive_avg_pool2d" if kind.startswith("avg") else "adaptive_max_pool2d"
    else:
        o = r.randint(1, 7)
        inp = {"x": (R(rng, 2, 3, 7, kind=r.choice(["n", "tie"])), True)}
        fn = "adaptive_avg_pool1d" if kind.startswith("avg") else "adaptive_max_pool1d"
    return inp, f"F.{fn}(x, {o})"


@case
def interpolate(r, rng):
    mode = r.choice(["nearest", "nearest-exact", "bilinear", "bicubic", "area", "linear", "trilinear"])
    dims = {"linear": 1, "trilinear": 3}.get(mode, 2) if mode not in ("nearest", "nearest-exact", "area") else r.choice([1, 2, 3])
    shape = [2, 2] + [r.randint(2, 5) for _ in range(dims)]
    ac = ""
    if mode in ("linear", "bilinear", "bicubic", "trilinear"):
        ac = f", align_corners={r.random() < 0.5}"
    if r.random() < 0.5:
        size = tuple(r.randint(1, 8) for _ in range(dims))
        arg = f"size={size}"
    else:
        sf = r.choice([0.5, 1.5, 2, 2.5, 3, 0.7])
        arg = f"scale_factor={sf}"
        if r.random() < 0.3:
            arg += ", recompute_scale_factor=True"
    inp = {"x": (R(rng, *shape), True)}
    return inp, f"F.interpolate(x, {arg}, mode='{mode}'{ac})"


@case
def layer_norm(r, rng):
    n = r.choice([(4,), (3, 4)])
    aff = r.random() < 0.7
    inp = {"x": (R(rng, 2, 3, 4), True)}
    if aff:
        inp["w"] = (R(rng, *n), True)
        inp["b"] = (R(rng, *n), True)
    return inp, f"F.layer_norm(x, {n}, {'w' if aff else 'None'}, {'b' if aff else 'None'}, eps=1e-5)"


@case
def group_norm(r, rng):
    G = r.choice([1, 2, 4])
    inp = {"x": (R(rng, 2, 4, 3, 2), True), "w": (R(rng, 4), True), "b": (R(rng, 4), True)}
    return inp, f"F.group_norm(x, {G}, w, b)"


@case
def batch_norm(r, rng):
    train = r.random() < 0.6
    mom = r.choice([0.1, 0.3, None])
    inp = {"x": (R(rng, 3, 4, 5) if r.random() < 0.5 else R(rng, 5, 4), True), "w": (R(rng, 4), True), "b": (R(rng, 4), True),
           "rm": (R(rng, 4), False), "rv": (R(rng, 4, kind="pos") + 0.5, False)}
    return inp, f"F.batch_norm(x, rm, rv, w, b, training={train}, momentum={mom}, eps=1e-5)", ["rm", "rv"]


@case
def instance_norm(r, rng):
    use = r.random() < 0.5
    inp = {"x": (R(rng, 2, 3, 5, 4), True), "w": (R(rng, 3), True), "b": (R(rng, 3), True)}
    extra = []
    if use:
        inp["rm"] = (R(rng, 3), False)
        inp["rv"] = (R(rng, 3, kind="pos") + 0.5, False)
        extra = ["rm", "rv"]
        return inp, "F.instance_norm(x, rm, rv, w, b, use_input_stats=True, momentum=0.2)", extra
    return inp, "F.instance_norm(x, weight=w, bias=b)"


@case
def embedding(r, rng):
    pi = r.choice([None, 0, 2, -1])
    mn = r.choice([None, None, 1.0])
    nt = r.choice([2.0, 1.0])
    idx = np.array(rng.integers(0, 5, size=(2, 4)))
    inp = {"w": (R(rng, 5, 3), True), "idx": (idx, False)}
    return inp, f"F.embedding(idx, w, padding_idx={pi}, max_norm={mn}, norm_type={nt})", (["w"] if mn else [])


@case
def softmaxes(r, rng):
    fn = r.choice(["softmax", "log_softmax", "softmin"])
    d = r.choice([0, 1, -1, 2])
    inp = {"x": (R(rng, 2, 3, 4, kind=r.choice(["n", "tie"])), True)}
    return inp, f"F.{fn}(x, dim={d})"


@case
def cross_entropy(r, rng):
    C = 4
    shape = r.choice([(5,), (3, 2)])
    probs = r.random() < 0.3
    red = r.choice(["mean", "sum", "none"])
    ls = r.choice([0.0, 0.0, 0.1, 0.3])
    ii = r.choice([-100, 1])
    w = r.random() < 0.4
    inp = {"x": (R(rng, shape[0], C, *shape[1:]), True)}
    if probs:
        t = R(rng, shape[0], C, *shape[1:], kind="pos")
        t = t / t.sum(1, keepdims=True)
        inp["t"] = (t, r.random() < 0.5)
        kw = ""
    else:
        inp["t"] = (np.array(rng.integers(0, C, size=(shape[0], *shape[1:]))), False)
        kw = f", ignore_index={ii}"
    if w:
        inp["cw"] = (R(rng, C, kind="pos"), False)
    return inp, f"F.cross_entropy(x, t, weight={'cw' if w else 'None'}, reduction='{red}', label_smoothing={ls}{kw})"


@case
def nll_loss(r, rng):
    red = r.choice(["mean", "sum", "none"])
    ii = r.choice([-100, 0, 2])
    w = r.random() < 0.5
    inp = {"x": (R(rng, 5, 3), True), "t": (np.array(rng.integers(0, 3, size=(5,))), False)}
    if w:
        inp["cw"] = (R(rng, 3, kind="pos"), False)
    return inp, f"F.nll_loss(x, t, weight={'cw' if w else 'None'}, ignore_index={ii}, reduction='{red}')"


@case
def bce(r, rng):
    red = r.choice(["mean", "sum", "none"])
    w = r.random() < 0.4
    inp = {"p": (R(rng, 3, 4, kind="pos"), True), "t": (R(rng, 3, 4, kind="pos"), r.random() < 0.5)}
    if w:
        inp["bw"] = (R(rng, 4, kind="pos"), False)
    return inp, f"F.binary_cross_entropy(p, t, weight={'bw' if w else 'None'}, reduction='{red}')"


@case
def bce_logits(r, rng):
    red = r.choice(["mean", "sum", "none"])
    w = r.random() < 0.4
    pw = r.random() < 0.5
    inp = {"x": (R(rng, 3, 4) * 3, True), "t": (R(rng, 3, 4, kind="pos"), r.random() < 0.5)}
    if w:
        inp["bw"] = (R(rng, 4, kind="pos"), False)
    if pw:
        inp["pw"] = (R(rng, 4, kind="pos") * 3, r.random() < 0.5)
    return inp, f"F.binary_cross_entropy_with_logits(x, t, weight={'bw' if w else 'None'}, pos_weight={'pw' if pw else 'None'}, reduction='{red}')"


@case
def regress(r, rng):
    fn = r.choice(["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
    red = r.choice(["mean", "sum", "none"])
    extra = ""
    if fn == "smooth_l1_loss":
        extra = f", beta={r.choice([1.0, 0.5, 0.0])}"
    if fn == "huber_loss":
        extra = f", delta={r.choice([1.0, 0.5, 2.0])}"
    inp = {"x": (R(rng, 3, 4, kind=r.choice(["n", "tie"])), True), "t": (R(rng, 3, 4, kind=r.choice(["n", "tie"])), r.random() < 0.5)}
    return inp, f"F.{fn}(x, t, reduction='{red}'{extra})"


@case
def kl_div(r, rng):
    lt = r.random() < 0.5
    red = r.choice(["mean", "sum", "none", "batchmean"])
    x = np.log(R(rng, 3, 4, kind="pos"))
    t = R(rng, 3, 4, kind="pos")
    if lt:
        t = np.log(t)
    inp = {"x": (x, True), "t": (t, r.random() < 0.5)}
    return inp, f"F.kl_div(x, t, reduction='{red}', log_target={lt})"


@case
def cos_pair(r, rng):
    fn = r.choice(["cos", "pair", "norm"])
    if fn == "cos":
        d = r.choice([0, 1, -1])
        return {"a": (R(rng, 3, 4), True), "b": (R(rng, 1, 4), True)}, f"F.cosine_similarity(a, b, dim={d}, eps=1e-8)"
    if fn == "pair":
        p = r.choice([1.0, 2.0, 3.0, float("inf")])
        kd = r.random() < 0.5
        return {"a": (R(rng, 3, 4), True), "b": (R(rng, 3, 4), True)}, f"F.pairwise_distance(a, b, p={p}, keepdim={kd})"
    p = r.choice([1.0, 2.0, 3.0])
    d = r.choice([0, 1, -1])
    return {"a": (R(rng, 3, 4, kind=r.choice(["n", "tie"])), True)}, f"F.normalize(a, p={p}, dim={d})"


@case
def pad(r, rng):
    mode = r.choice(["constant", "reflect", "replicate", "circular"])
    nd = r.choice([1, 2, 3])
    shape = [2, 2] + [r.randint(3, 5) for _ in range(nd)]
    pads = []
    for _ in range(nd):
        lo, hi = r.randint(0, 2), r.randint(0, 2)
        if mode == "constant" and r.random() < 0.3:
            lo = -1
        pads += [lo, hi]
    val = ", value=1.5" if mode == "constant" else ""
    return {"x": (R(rng, *shape), True)}, f"F.pad(x, {tuple(pads)}, mode='{mode}'{val})"


@case
def acts(r, rng):
    fn = r.choice([
        "F.gelu(x, approximate='tanh')", "F.gelu(x)", "F.silu(x)", "F.mish(x)",
        f"F.softplus(x, beta={r.choice([1, 2, 0.5])}, threshold={r.choice([20, 1, 0.5])})",
        f"F.elu(x, alpha={r.choice([1.0, 0.5, 2.0])})", "F.selu(x)", f"F.celu(x, alpha={r.choice([1.0, 0.5])})",
        f"F.hardtanh(x, {r.choice([-1.0, -0.5])}, {r.choice([1.0, 0.5])})", "F.hardswish(x)", "F.hardsigmoid(x)",
        f"F.leaky_relu(x, {r.choice([0.01, 0.2, -0.5])})", f"F.glu(x, dim={r.choice([0, -1])})",
        "F.relu6(x)", "F.logsigmoid(x)", "F.prelu(x, L.tensor([0.25]))", "F.rrelu(x, training=False)",
        "F.softsign(x)", "F.tanhshrink(x)", "F.threshold(x, 0.5, 2.0)", "F.sigmoid(x)", "F.tanh(x)",
    ])
    x = R(rng, 4, 6, kind=r.choice(["n", "tie"])) * r.choice([1, 3])
    # include hardswish/hardsigmoid/relu6 boundaries
    x.flat[:6] = [-3, 3, 6, 0, -1, 1]
    return {"x": (x, True)}, fn


@case
def sdpa(r, rng):
    B, H, Lq, Lk, E, Ev = 2, r.choice([1, 2]), r.randint(1, 4), r.randint(1, 5), 3, r.choice([2, 3])
    causal = r.random() < 0.4
    mk = r.choice([None, "bool", "float"])
    if causal:
        mk = None
    sc = r.choice([None, 0.5])
    inp = {"q": (R(rng, B, H, Lq, E), True), "k": (R(rng, B, H, Lk, E), True), "v": (R(rng, B, H, Lk, Ev), True)}
    m = "None"
    if mk == "bool":
        mm = rng.random((Lq, Lk)) < 0.7
        mm[:, 0] = True
        inp["m"] = (mm, False)
        m = "m"
    elif mk == "float":
        inp["m"] = (R(rng, B, 1, Lq, Lk), r.random() < 0.5)
        m = "m"
    return inp, f"F.scaled_dot_product_attention(q, k, v, attn_mask={m}, is_causal={causal}, scale={sc})"


@case
def misc_losses(r, rng):
    fn = r.choice(["margin", "hinge", "soft_margin", "multilabel", "poisson", "gauss", "triplet", "cosemb", "multimargin"])
    red = r.choice(["mean", "sum", "none"])
    if fn == "margin":
        return {"a": (R(rng, 5), True), "b": (R(rng, 5), True), "y": (np.sign(R(rng, 5)) + (R(rng, 5) == 0), False)}, f"F.margin_ranking_loss(a, b, y, margin=0.3, reduction='{red}')"
    if fn == "hinge":
        return {"a": (R(rng, 5), True), "y": (np.where(R(rng, 5) > 0, 1.0, -1.0).astype(np.float32), False)}, f"F.hinge_embedding_loss(a, y, margin=0.5, reduction='{red}')"
    if fn == "soft_margin":
        return {"a": (R(rng, 5), True), "y": (np.where(R(rng, 5) > 0, 1.0, -1.0).astype(np.float32), False)}, f"F.soft_margin_loss(a, y, reduction='{red}')"
    if fn == "multilabel":
        return {"a": (R(rng, 3, 4), True), "y": ((R(rng, 3, 4) > 0).astype(np.float32), False)}, f"F.multilabel_soft_margin_loss(a, y, reduction='{red}')"
    if fn == "poisson":
        li = r.random() < 0.5
        full = r.random() < 0.5
        a = R(rng, 3, 4) if li else R(rng, 3, 4, kind="pos") * 3
        return {"a": (a, True), "y": (np.floor(R(rng, 3, 4, kind="pos") * 5), False)}, f"F.poisson_nll_loss(a, y, log_input={li}, full={full}, reduction='{red}')"
    if fn == "gauss":
        return {"a": (R(rng, 3, 4), True), "y": (R(rng, 3, 4), True), "v": (R(rng, 3, 4, kind="pos"), True)}, f"F.gaussian_nll_loss(a, y, v, full={r.random() < 0.5}, reduction='{red}')"
    if fn == "triplet":
        return {"a": (R(rng, 3, 4), True), "p": (R(rng, 3, 4), True), "n": (R(rng, 3, 4), True)}, f"F.triplet_margin_loss(a, p, n, margin=1.0, p={r.choice([1, 2])}, swap={r.random() < 0.5}, reduction='{red}')"
    if fn == "cosemb":
        return {"a": (R(rng, 3, 4), True), "b": (R(rng, 3, 4), True), "y": (np.array([1.0, -1.0, 1.0], np.float32), False)}, f"F.cosine_embedding_loss(a, b, y, margin=0.2, reduction='{red}')"
    if fn == "multimargin":
        return {"a": (R(rng, 3, 4), True), "y": (np.array(rng.integers(0, 4, size=(3,))), False)}, f"F.multi_margin_loss(a, y, p={r.choice([1, 2])}, margin=0.7, reduction='{red}')"


def tonp(t):
    t = t.detach()
    if isinstance(t, torch.Tensor):
        return t.numpy(force=True).astype(np.float64)
    return t.numpy().astype(np.float64)


def run(L, inp, code, W, mut):
    F = L.nn.functional
    ns = {"L": L, "F": F}
    for k, (a, rg) in inp.items():
        t = L.tensor(a)
        if rg and t.dtype.is_floating_point:
            t.requires_grad_(True)
        ns[k] = t
    out = eval(code, ns)
    if isinstance(out, tuple):
        out = out[0]
    res = {"out": tonp(out)}
    if W is None:
        W = np.random.default_rng(1).standard_normal(tuple(out.shape)).astype(np.float32)
    if out.requires_grad:
        (out * L.tensor(W)).sum().backward()
    for k, (a, rg) in inp.items():
        if ns[k].grad is not None:
            res["g_" + k] = tonp(ns[k].grad)
    for k in mut:
        res["m_" + k] = tonp(ns[k])
    return res, W


def check(seed, filt=None):
    r = random.Random(seed)
    rng = np.random.default_rng(seed)
    cs = [c for c in CASES if filt is None or c.__name__ in filt]
    c = r.choice(cs)
    got = c(r, rng)
    inp, code = got[0], got[1]
    mut = got[2] if len(got) > 2 else []
    try:
        tr, W = run(torch, inp, code, None, mut)
    except Exception:
        return "torch_err"
    try:
        nr, _ = run(nv, inp, code, W, mut)
    except Exception as e:
        print("=" * 60)
        print("SEED", seed, c.__name__, code, "NOVA EXC", type(e).__name__, str(e)[:300])
        return "err"
    bad = []
    for k in sorted(set(tr) | set(nr)):
        a, b = tr.get(k), nr.get(k)
        if a is None or b is None:
            z = a if b is None else b
            if np.all(z == 0):
                continue
            bad.append((k, a, b))
            continue
        tol = (1e-4, 1e-5) if k == "out" else (1e-3, 1e-4)
        if a.shape != b.shape or not np.allclose(a, b, rtol=tol[0], atol=tol[1], equal_nan=True):
            bad.append((k, a, b))
    if bad:
        print("=" * 60)
        print("SEED", seed, c.__name__, code)
        for k, (a, rg) in inp.items():
            print(f"  {k} = np.array({np.asarray(a).tolist()!r}, dtype=np.{np.asarray(a).dtype}) rg={rg}")
        print_differences(bad, 3)
        return "bad"
    return "ok"


if __name__ == "__main__":
    filt = sys.argv[3].split(",") if len(sys.argv) > 3 else None
    run_seeds(lambda s: check(s, filt), int(sys.argv[1]), int(sys.argv[2]))

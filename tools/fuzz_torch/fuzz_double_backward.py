"""Double-backward fuzzer for nn.functional: torch vs nova, second derivatives.

usage: python fuzz_double_backward.py START N [case,case...]
Each case computes out = f(inputs); g = d(sum(w0 * out))/d(inputs) with create_graph,
then h = d(sum(w_k * g_k))/d(inputs); out, g and h are compared (float64 to 1e-9 of each
tensor's largest magnitude, a quarter of the cases in float32 to 1e-4; gradients 10x).
Inputs include ties and exact kinks (0, thresholds). Accepted deviations, not generated
or not counted: a second derivative one side lacks counts only if the other's is nonzero
(PyTorch's `where`-based gradients carry no history, Nova gives every gradient taken
with create_graph a zero-slope one, so a function piecewise linear in x alone has
zeros, as PyTorch's fused relu/hardtanh do); ELU/CELU/SELU/PReLU exactly at 0 and
softplus exactly at its threshold; embedding's scale_grad_by_freq; l1_loss's second
derivative alone; a gradient where PyTorch's is NaN and Nova's finite.
"""
import functools
import numpy as np
from common import Cases, make_inputs, program_main, program_snippet, record

CASES = Cases()


def case(f):
    """register f; a quarter of the cases run in float32 (seeded by the case's own r)"""
    @functools.wraps(f)
    def g(r, rng):
        inp, code = f(r, rng)
        if r.random() < 0.25:
            inp = {k: (a.astype(np.float32) if a.dtype == np.float64 else a, rg) for k, (a, rg) in inp.items()}
        return inp, code
    return CASES.add(g)


def R(rng, *shape, kind="n", special=()):
    if kind == "n":
        a = rng.standard_normal(shape)
    elif kind == "tie":
        a = rng.choice(np.array([-1, 0, 0, 0.5, 1, 2, -2]), size=shape).astype(np.float64)
    elif kind == "pos":
        a = rng.uniform(0.05, 0.95, size=shape)
    else:
        a = rng.standard_normal(shape) * 10
    a = np.array(a, dtype=np.float64)
    if special and a.size:
        flat = a.reshape(-1)
        for _ in range(rng.integers(1, 3)):
            flat[rng.integers(0, flat.size)] = rng.choice(np.array(special, dtype=np.float64))
    return a


def K(r):
    return r.choice(["n", "n", "tie", "big"])


RED = ["mean", "sum", "none"]

@case
def act(r, rng):
    fn = r.choice(["relu", "leaky_relu", "elu", "selu", "celu", "gelu", "gelu_tanh", "silu", "mish", "softplus",
                   "hardtanh", "hardswish", "logsigmoid", "softsign", "tanhshrink", "relu6",
                   "sigmoid", "tanh", "softshrink", "hardshrink", "threshold", "glu", "prelu", "rrelu"])
    spec = {"relu": [0.0], "leaky_relu": [0.0], "elu": [1.0], "selu": [1.0], "celu": [1.0], "hardtanh": [-1.0, 1.0, -0.5, 0.5],
            "hardswish": [-3.0, 3.0, 0.0], "hardsigmoid": [-3.0, 3.0], "softplus": [20.0, 10.0, 2.0, 0.0], "relu6": [0.0, 6.0],
            "softshrink": [0.5, -0.5], "hardshrink": [0.5, -0.5], "threshold": [0.1, 0.0], "prelu": [1.0]}.get(fn, [0.0])
    x = R(rng, 3, 4, kind=K(r), special=spec)
    inp = {"x": (x, True)}
    if fn in ("elu", "celu", "selu", "prelu"):
        x[x == 0] = 0.25    # (second derivative exactly at 0: Nova takes its own branch)
    if fn == "leaky_relu": return inp, f"F.leaky_relu(x, {r.choice([0.01, 0.2, -0.5, 2.0])})"
    if fn == "elu": return inp, f"F.elu(x, alpha={r.choice([1.0, 0.5, 2.0])})"
    if fn == "celu": return inp, f"F.celu(x, alpha={r.choice([1.0, 0.5, 2.0])})"
    if fn == "gelu": return inp, "F.gelu(x)"
    if fn == "gelu_tanh": return inp, "F.gelu(x, approximate='tanh')"
    if fn == "softplus":
        b = r.choice([1.0, 0.5, 2.0]); t = r.choice([20.0, 1.0, 5.0])
        x[x * b == t] += 0.125   # (exactly at the threshold: Nova takes its own branch)
        return inp, f"F.softplus(x, beta={b}, threshold={t})"
    if fn == "hardtanh":
        lo, hi = r.choice([(-1.0, 1.0), (-0.5, 0.5), (0.0, 2.0)])
        return inp, f"F.hardtanh(x, {lo}, {hi})"
    if fn == "softshrink": return inp, "F.softshrink(x, 0.5)"
    if fn == "hardshrink": return inp, "F.hardshrink(x, 0.5)"
    if fn == "threshold": return inp, f"F.threshold(x, 0.1, {r.choice([0.0, 20.0, -1.0])})"
    if fn == "glu": return inp, f"F.glu(x, {r.choice([0, 1, -1])})"
    if fn == "prelu":
        w = R(rng, r.choice([1, 4]), kind="n")
        return {"x": (x, True), "w": (w, True)}, "F.prelu(x, w)" if w.shape[0] == 1 else "F.prelu(x.reshape(3, 4, 1), w)"
    if fn == "rrelu": return inp, "F.rrelu(x, training=False)"
    return inp, f"F.{fn}(x)"

@case
def softmaxes(r, rng):
    fn = r.choice(["softmax", "log_softmax", "softmin"])
    shape = r.choice([(3, 4), (2, 3, 4), (5,)])
    d = r.randint(-len(shape), len(shape) - 1)
    x = R(rng, *shape, kind=K(r), special=[0.0])
    return {"x": (x, True)}, f"F.{fn}(x, dim={d})"

@case
def normalize(r, rng):
    p = r.choice([2.0, 1.0, 3.0])
    d = r.choice([0, 1, -1])
    x = R(rng, 3, 4, kind=K(r))
    return {"x": (x, True)}, f"F.normalize(x, p={p}, dim={d})"

@case
def reg_losses(r, rng):
    fn = r.choice(["mse_loss", "smooth_l1_loss", "huber_loss", "smooth_l1_b", "huber_d"])
    red = r.choice(RED)
    a = R(rng, 3, 4, kind=K(r)); b = a.copy() if r.random() < 0.3 else R(rng, 3, 4, kind=K(r))
    if r.random() < 0.3:  # exact thresholds |a-b|=1 or beta
        b = a + rng.choice(np.array([-1.0, 1.0, 0.0, 0.5, -0.5]), size=a.shape)
    inp = {"a": (a, True), "b": (b, r.random() < 0.7)}
    if fn == "smooth_l1_b": return inp, f"F.smooth_l1_loss(a, b, reduction='{red}', beta={r.choice([0.5, 2.0, 0.0])})"
    if fn == "huber_d": return inp, f"F.huber_loss(a, b, reduction='{red}', delta={r.choice([0.5, 2.0])})"
    return inp, f"F.{fn}(a, b, reduction='{red}')"

@case
def bce(r, rng):
    red = r.choice(RED)
    logits = r.random() < 0.5
    y = R(rng, 3, 4, kind="pos")
    if r.random() < 0.5: y = np.round(y)
    inp = {"y": (y, r.random() < 0.5)}
    w = r.random() < 0.5
    extra = ""
    if w:
        inp["w"] = (R(rng, 4, kind="pos"), False); extra += ", weight=w"
    if logits:
        inp["a"] = (R(rng, 3, 4, kind=K(r), special=[0.0]), True)
        if r.random() < 0.5:
            inp["pw"] = (R(rng, 4, kind="pos") * 3, r.random() < 0.5); extra += ", pos_weight=pw"
        return inp, f"F.binary_cross_entropy_with_logits(a, y{extra}, reduction='{red}')"
    inp["a"] = (R(rng, 3, 4, kind="pos"), True)
    return inp, f"F.binary_cross_entropy(a, y{extra}, reduction='{red}')"

@case
def ce(r, rng):
    red = r.choice(RED)
    C = 4
    shape = r.choice([(3, C), (2, C, 3), (C,)])
    x = R(rng, *shape, kind=K(r))
    probs = r.random() < 0.35
    inp = {"x": (x, True)}
    extra = ""
    if r.random() < 0.4:
        inp["w"] = (R(rng, C, kind="pos"), False); extra += ", weight=w"
    if r.random() < 0.5: extra += f", label_smoothing={r.choice([0.1, 0.5, 1.0])}"
    tshape = shape[:1] + shape[2:] if len(shape) > 1 else ()
    if probs:
        t = rng.uniform(0, 1, size=shape)
        t = t / t.sum(axis=1 if len(shape) > 1 else 0, keepdims=True)
        inp["t"] = (t, r.random() < 0.5)
    else:
        t = rng.integers(0, C, size=tshape)
        if r.random() < 0.4 and t.size:
            extra += ", ignore_index=1"
        inp["t"] = (np.array(t, dtype=np.int64), False)
    fn = "cross_entropy"
    if not probs and r.random() < 0.3 and "label_smoothing" not in extra:
        return inp, f"F.nll_loss(F.log_softmax(x, {1 if len(shape)>1 else 0}), t{extra}, reduction='{red}')"
    return inp, f"F.{fn}(x, t{extra}, reduction='{red}')"

@case
def nll(r, rng):
    red = r.choice(RED)
    inp = {"x": (R(rng, 3, 4, kind=K(r)), True), "t": (rng.integers(0, 4, size=3).astype(np.int64), False)}
    extra = ""
    if r.random() < 0.5:
        inp["w"] = (R(rng, 4, kind="pos"), r.random() < 0.5); extra += ", weight=w"
    if r.random() < 0.4: extra += ", ignore_index=2"
    return inp, f"F.nll_loss(x, t{extra}, reduction='{red}')"

@case
def kl(r, rng):
    red = r.choice(["mean", "sum", "none", "batchmean"])
    lt = r.random() < 0.5
    a = np.log(R(rng, 3, 4, kind="pos"))
    b = np.log(R(rng, 3, 4, kind="pos")) if lt else R(rng, 3, 4, kind="pos")
    if not lt and r.random() < 0.3: b[0, 0] = 0.0
    return {"a": (a, True), "b": (b, r.random() < 0.6)}, f"F.kl_div(a, b, reduction='{red}', log_target={lt})"

@case
def misc_losses(r, rng):
    fn = r.choice(["margin", "hinge", "soft_margin", "multilabel", "poisson", "gauss", "triplet", "cosemb", "multimargin", "cos", "pdist"])
    red = r.choice(RED)
    if fn == "margin":
        a = R(rng, 5, kind=K(r)); b = R(rng, 5, kind=K(r))
        return {"a": (a, True), "b": (b, True), "y": (np.where(R(rng, 5) > 0, 1.0, -1.0), False)}, f"F.margin_ranking_loss(a, b, y, margin={r.choice([0.0, 0.3])}, reduction='{red}')"
    if fn == "hinge":
        return {"a": (R(rng, 5, kind=K(r), special=[0.5, 0.0]), True), "y": (np.where(R(rng, 5) > 0, 1.0, -1.0), False)}, f"F.hinge_embedding_loss(a, y, margin=0.5, reduction='{red}')"
    if fn == "soft_margin":
        return {"a": (R(rng, 5, kind=K(r)), True), "y": (np.where(R(rng, 5) > 0, 1.0, -1.0), False)}, f"F.soft_margin_loss(a, y, reduction='{red}')"
    if fn == "multilabel":
        ex = ""
        inp = {"a": (R(rng, 3, 4, kind=K(r)), True), "y": ((R(rng, 3, 4) > 0).astype(np.float64), False)}
        if r.random() < 0.4: inp["w"] = (R(rng, 4, kind="pos"), False); ex = ", weight=w"
        return inp, f"F.multilabel_soft_margin_loss(a, y{ex}, reduction='{red}')"
    if fn == "poisson":
        li = r.random() < 0.5
        full = r.random() < 0.5
        a = R(rng, 3, 4, kind=K(r)) if li else R(rng, 3, 4, kind="pos") * 3
        return {"a": (a, True), "y": (np.floor(R(rng, 3, 4, kind="pos") * 5), r.random() < 0.3)}, f"F.poisson_nll_loss(a, y, log_input={li}, full={full}, reduction='{red}')"
    if fn == "gauss":
        vs = r.choice([(3, 4), (3, 1), (3,)])
        return {"a": (R(rng, 3, 4), True), "y": (R(rng, 3, 4), True), "v": (R(rng, *vs, kind="pos"), True)}, f"F.gaussian_nll_loss(a, y, v, full={r.random() < 0.5}, eps={r.choice([1e-6, 0.1])}, reduction='{red}')"
    if fn == "triplet":
        a = R(rng, 3, 4, kind=K(r))
        p_ = a.copy() if r.random() < 0.2 else R(rng, 3, 4, kind=K(r))
        return {"a": (a, True), "p": (p_, True), "n": (R(rng, 3, 4, kind=K(r)), True)}, f"F.triplet_margin_loss(a, p, n, margin=1.0, p={r.choice([1, 2, 3])}, swap={r.random() < 0.5}, reduction='{red}')"
    if fn == "cosemb":
        return {"a": (R(rng, 3, 4), True), "b": (R(rng, 3, 4), True), "y": (np.array([1.0, -1.0, 1.0]), False)}, f"F.cosine_embedding_loss(a, b, y, margin=0.2, reduction='{red}')"
    if fn == "multimargin":
        return {"a": (R(rng, 3, 4, kind=K(r)), True), "y": (rng.integers(0, 4, size=(3,)).astype(np.int64), False)}, f"F.multi_margin_loss(a, y, p={r.choice([1, 2])}, margin=0.7, reduction='{red}')"
    if fn == "cos":
        a = R(rng, 3, 4, kind=K(r)); b = R(rng, 3, 4, kind=K(r)) if r.random() < 0.7 else a * 2
        sh = r.choice(["b", "b[:1]"])
        return {"a": (a, True), "b": (b, True)}, f"F.cosine_similarity(a, {sh}, dim={r.choice([1, 0, -1])}, eps={r.choice([1e-8, 0.5])})"
    if fn == "pdist":
        a = R(rng, 3, 4, kind=K(r)); b = R(rng, 3, 4, kind=K(r)) if r.random() < 0.7 else a.copy()
        return {"a": (a, True), "b": (b, True)}, f"F.pairwise_distance(a, b, p={r.choice([2.0, 1.0, 3.0])}, eps={r.choice([1e-6, 0.0])}, keepdim={r.random()<0.5})"

@case
def linear(r, rng):
    b = r.random() < 0.5
    N, I, O = r.randint(1, 4), r.randint(1, 5), r.randint(1, 5)
    inp = {"x": (R(rng, 2, N, I), True), "w": (R(rng, O, I), True)}
    if b: inp["bias"] = (R(rng, O), True)
    return inp, "F.linear(x, w" + (", bias)" if b else ")") + (" ** 2" if r.random() < 0.5 else "")

@case
def bilinear(r, rng):
    inp = {"x1": (R(rng, 3, 2), True), "x2": (R(rng, 3, 4), True), "w": (R(rng, 5, 2, 4), True)}
    b = r.random() < 0.5
    if b: inp["b"] = (R(rng, 5), True)
    return inp, f"F.bilinear(x1, x2, w{', b' if b else ''})"

@case
def norms(r, rng):
    fn = r.choice(["layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm"])
    x = R(rng, 3, 4, 5, kind=r.choice(["n", "n", "tie"]))
    inp = {"x": (x, True)}
    aff = r.random() < 0.6
    if fn == "layer_norm":
        ns = r.choice([(5,), (4, 5)])
        if aff: inp["w"] = (R(rng, *ns), True); inp["b"] = (R(rng, *ns), True)
        return inp, f"F.layer_norm(x, {ns}" + (", w, b" if aff else "") + f", eps={r.choice([1e-5, 0.1])})"
    if fn == "rms_norm":
        ns = r.choice([(5,), (4, 5)])
        if aff: inp["w"] = (R(rng, *ns), True)
        return inp, f"F.rms_norm(x, {ns}" + (", w" if aff else "") + f", eps={r.choice([None, 1e-5, 0.1])})"
    if fn == "group_norm":
        g = r.choice([1, 2, 4])
        if aff: inp["w"] = (R(rng, 4), True); inp["b"] = (R(rng, 4), True)
        return inp, f"F.group_norm(x, {g}" + (", w, b" if aff else "") + ")"
    if fn == "batch_norm":
        if aff: inp["w"] = (R(rng, 4), True); inp["b"] = (R(rng, 4), True)
        return inp, "F.batch_norm(x, None, None" + (", w, b" if aff else "") + ", training=True)"
    if fn == "instance_norm":
        if aff: inp["w"] = (R(rng, 4), True); inp["b"] = (R(rng, 4), True)
        return inp, "F.instance_norm(x" + (", weight=w, bias=b" if aff else "") + ")"

@case
def conv1d(r, rng):
    g = r.choice([1, 2])
    C, O = 2 * g, 2 * g
    k = r.randint(1, 3); s = r.randint(1, 2); d = r.randint(1, 2)
    pad = r.choice([0, 1, 2, "'same'", "'valid'"])
    if pad == "'same'": s = 1
    inp = {"x": (R(rng, 2, C, r.randint(5, 8)), True), "w": (R(rng, O, C // g, k), True), "b": (R(rng, O), True)}
    return inp, f"F.conv1d(x, w, b, stride={s}, padding={pad}, dilation={d}, groups={g})" + r.choice(["", " ** 2", ".tanh()"])

@case
def conv2d(r, rng):
    g = r.choice([1, 2])
    C = g * r.randint(1, 2); O = g * r.randint(1, 2)
    kh, kw = r.randint(1, 3), r.randint(1, 3)
    s = (r.randint(1, 2), r.randint(1, 2)); d = (r.randint(1, 2), r.randint(1, 2))
    pad = r.choice(["0", "1", "(1, 2)", "'same'"])
    if pad == "'same'": s = 1
    inp = {"x": (R(rng, 2, C, 6, 5), True), "w": (R(rng, O, C // g, kh, kw), True)}
    bias = r.random() < 0.5
    if bias: inp["b"] = (R(rng, O), True)
    return inp, f"F.conv2d(x, w, {'b' if bias else 'None'}, stride={s}, padding={pad}, dilation={d}, groups={g})" + r.choice(["", " ** 2", ".tanh()"])

@case
def conv_transpose2d(r, rng):
    g = r.choice([1, 2])
    C = g * r.randint(1, 2); O = g * r.randint(1, 2)
    k = (r.randint(1, 3), r.randint(1, 3)); s = (r.randint(1, 3), r.randint(1, 2))
    p = (r.randint(0, k[0] - 1), r.randint(0, k[1] - 1)); d = (r.randint(1, 2), 1)
    op = (r.randint(0, max(s[0], d[0]) - 1), 0)
    inp = {"x": (R(rng, 2, C, 4, 3), True), "w": (R(rng, C, O // g, *k), True), "b": (R(rng, O), True)}
    return inp, f"F.conv_transpose2d(x, w, b, stride={s}, padding={p}, output_padding={op}, groups={g}, dilation={d})" + r.choice(["", " ** 2", ".tanh()"])

@case
def pools(r, rng):
    fn = r.choice(["max", "avg", "adapt", "max1d", "adaptmax", "lp"])
    kind = r.choice(["n", "tie", "tie"])
    x = R(rng, 2, 2, 6, 5, kind=kind)
    inp = {"x": (x, True)}
    post = r.choice(["", " ** 2"])
    if fn == "max":
        k = r.randint(2, 3); s = r.choice([None, 1, 2]); p = r.randint(0, k // 2); cm = r.random() < 0.5; d = r.choice([1, 2])
        return inp, f"F.max_pool2d(x, {k}, stride={s}, padding={p}, dilation={d}, ceil_mode={cm})" + post
    if fn == "avg":
        k = (r.randint(1, 3), r.randint(2, 3)); s = r.choice([None, 1, 2]); p = (r.randint(0, k[0] // 2), r.randint(0, k[1] // 2))
        return inp, f"F.avg_pool2d(x, {k}, stride={s}, padding={p}, ceil_mode={r.random()<0.5}, count_include_pad={r.random()<0.5}, divisor_override={r.choice([None, 3])})" + post
    if fn == "adapt":
        return inp, f"F.adaptive_avg_pool2d(x, {r.choice([(3, 2), (4, 4), 1, (None, 3)])})" + post
    if fn == "adaptmax":
        return inp, f"F.adaptive_max_pool2d(x, {r.choice([(3, 2), (4, 4), 1])})" + post
    if fn == "max1d":
        return {"x": (R(rng, 2, 3, 9, kind=kind), True)}, f"F.max_pool1d(x, {r.randint(2, 3)}, stride={r.choice([None, 1, 2])})" + post
    if fn == "lp":
        return {"x": (R(rng, 2, 2, 6, 5, kind="pos"), True)}, f"F.lp_pool2d(x, {r.choice([2.0, 3.0])}, 2)" + post

@case
def interp(r, rng):
    mode = r.choice(["nearest", "nearest-exact", "bilinear", "bicubic", "area", "linear"])
    if mode == "linear":
        x = R(rng, 2, 2, 5)
        ac = r.choice([None, True, False])
        return {"x": (x, True)}, f"F.interpolate(x, size={r.choice([3, 7, 10])}, mode='linear', align_corners={ac}) ** 2"
    x = R(rng, 1, 2, 4, 5)
    ac = "" if mode in ("nearest", "nearest-exact", "area") else f", align_corners={r.choice([True, False])}"
    sz = r.choice(["size=(6, 7)", "size=(3, 3)", "scale_factor=2", "scale_factor=1.5", "size=(8, 10)"])
    return {"x": (x, True)}, f"F.interpolate(x, {sz}, mode='{mode}'{ac}) ** 2"

@case
def pad(r, rng):
    mode = r.choice(["constant", "reflect", "replicate", "circular"])
    x = R(rng, 1, 2, 4, 5)
    p = r.choice([(1, 1), (1, 2, 0, 1), (2, 0, 1, 3), (0, 1)])
    v = ", value=1.5" if mode == "constant" else ""
    return {"x": (x, True)}, f"F.pad(x, {p}, mode='{mode}'{v}) ** 2"

@case
def embedding(r, rng):
    w = R(rng, 6, 3)
    idx = rng.integers(0, 6, size=(2, 4)).astype(np.int64)
    ex = r.choice(["", ", padding_idx=1", ", max_norm=None"])   # (scale_grad_by_freq: accepted deviation)
    return {"w": (w, True), "i": (idx, False)}, f"F.embedding(i, w{ex}) ** 2"

@case
def dropout0(r, rng):
    fn = r.choice(["dropout", "dropout1d", "dropout2d", "alpha_dropout", "feature_alpha_dropout"])
    x = R(rng, 2, 3, 4)
    return {"x": (x, True)}, f"F.{fn}(x, p=0.0, training=True) ** 2"

@case
def sdpa(r, rng):
    L_, S, E = r.randint(1, 4), r.randint(1, 4), r.choice([2, 3])
    causal = r.random() < 0.4
    inp = {"q": (R(rng, 2, L_, E), True), "k": (R(rng, 2, S, E), True), "v": (R(rng, 2, S, E), True)}
    ex = ""
    if not causal and r.random() < 0.5:
        if r.random() < 0.5:
            m = rng.random((L_, S)) < 0.7; m[:, 0] = True
            inp["m"] = (m, False)
        else:
            inp["m"] = (R(rng, L_, S), r.random() < 0.5)
        ex = ", attn_mask=m"
    if r.random() < 0.3: ex += ", scale=0.7"
    return inp, f"F.scaled_dot_product_attention(q, k, v{ex}, is_causal={causal})"

@case
def misc(r, rng):
    fn = r.choice(["l1_pointwise", "pixel_shuffle", "unfold", "fold", "logsumexp", "cdist", "pdist", "one_hot_mm", "local_response_norm", "affine"])
    if fn == "l1_pointwise":
        a = R(rng, 3, 4, kind="tie")
        return {"a": (a, True), "b": (R(rng, 3, 4, kind="tie"), True)}, "F.l1_loss(a, b, reduction='none') * a"
    if fn == "pixel_shuffle":
        return {"x": (R(rng, 1, 4, 2, 3), True)}, "F.pixel_shuffle(x, 2) ** 2"
    if fn == "unfold":
        return {"x": (R(rng, 1, 2, 4, 5), True)}, f"F.unfold(x, (2, 2), padding={r.choice([0, 1])}, stride={r.choice([1, 2])}) ** 2"
    if fn == "fold":
        return {"x": (R(rng, 1, 8, 12), True)}, "F.fold(x, (4, 5), (2, 2)) ** 2"
    if fn == "logsumexp":
        return {"x": (R(rng, 3, 4, kind=K(r)), True)}, "L.logsumexp(x, 1)"
    if fn == "cdist":
        a = R(rng, 3, 2, kind=K(r)); b = R(rng, 4, 2, kind=K(r))
        if r.random() < 0.3: b[0] = a[0]
        return {"a": (a, True), "b": (b, True)}, f"L.cdist(a, b, p={r.choice([2.0, 1.0, 3.0])})"
    if fn == "pdist":
        a = R(rng, 4, 3)
        return {"a": (a, True)}, f"F.pdist(a, p={r.choice([2.0, 1.0, 3.0])})"
    if fn == "one_hot_mm":
        return {"x": (R(rng, 3, 4), True)}, "F.one_hot(L.tensor([0, 2, 1]), 4).to(x.dtype) * x.exp()"
    if fn == "local_response_norm":
        return {"x": (R(rng, 2, 5, 3), True)}, "F.local_response_norm(x, 3)"
    if fn == "affine":
        th = R(rng, 2, 2, 3) * 0.5
        return {"th": (th, True), "x": (R(rng, 2, 1, 4, 5), True)}, f"F.grid_sample(x, F.affine_grid(th, (2, 1, 3, 4), align_corners=False), align_corners=False, mode='{r.choice(['bilinear', 'nearest'])}', padding_mode='{r.choice(['zeros', 'border', 'reflection'])}')"



def differentiable(inp):
    return [k for k, (a, rg) in inp.items() if rg and np.asarray(a).dtype.kind == "f"]


def run(L, inp, code, grad=True):
    ns = make_inputs(L, inp)
    out = eval(code, ns)
    if isinstance(out, tuple):
        out = out[0]
    res = {}
    record(res, "out", out)
    diff = differentiable(inp)
    g = np.random.default_rng(7)
    w0 = L.tensor(g.standard_normal(tuple(out.shape))).to(out.dtype)
    ws = {k: L.tensor(g.standard_normal(np.shape(inp[k][0]))).to(ns[k].dtype) for k in diff}
    if not grad or not out.requires_grad:
        return res
    gs = L.autograd.grad((out * w0).sum(), [ns[k] for k in diff], create_graph=True, allow_unused=True)
    tot = None
    for k, gk in zip(diff, gs):
        if gk is not None:
            record(res, "g_" + k, gk)
            if gk.requires_grad:
                tot = (gk * ws[k]).sum() if tot is None else tot + (gk * ws[k]).sum()
    if tot is not None:
        for k, h in zip(diff, L.autograd.grad(tot, [ns[k] for k in diff], allow_unused=True)):
            if h is not None:
                record(res, "h_" + k, h)
    return res


def snippet(inp, code):
    diff = differentiable(inp)
    body = ["if isinstance(out, tuple): out = out[0]",
            "g = np.random.default_rng(7)  # the fuzzer's weights",
            "w0 = L.tensor(g.standard_normal(tuple(out.shape))).to(out.dtype)",
            f"ws = [L.tensor(g.standard_normal(tuple(_v.shape))).to(_v.dtype) for _v in ({', '.join(diff)},)]",
            f"gs = L.autograd.grad((out * w0).sum(), ({', '.join(diff)},), create_graph=True, allow_unused=True)",
            "print(L.__name__, out, gs)",
            "tot = sum((gk * w).sum() for gk, w in zip(gs, ws) if gk is not None and gk.requires_grad)",
            f"print(L.autograd.grad(tot, ({', '.join(diff)},), allow_unused=True) if not isinstance(tot, int) else None)"]
    return program_snippet(inp, code, body)


if __name__ == "__main__":
    program_main(CASES, rtol32=1e-4, rtol64=1e-9, run=run, snippet=snippet, nan_ok=True)

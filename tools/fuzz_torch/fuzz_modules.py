"""nn module differential fuzzer (torch module -> state_dict -> nova module). usage: python fuzz_modules.py START N [filter]"""
import sys, random, warnings
warnings.filterwarnings("ignore")
import numpy as np
import torch
import nova as nv
from common import Cases, print_differences, run_seeds


def tonp(t):
    t = t.detach()
    if isinstance(t, torch.Tensor):
        return t.numpy(force=True).astype(np.float64)
    return t.numpy().astype(np.float64)


def copy_sd(tsd, nm):
    sd = {k: nv.tensor(v) for k, v in tsd.items()}
    missing = set(nm.state_dict()) ^ set(sd)
    if missing:
        raise AssertionError(f"state_dict keys differ: {sorted(missing)}")
    nm.load_state_dict(sd)


CASES = Cases()
case = CASES.add


@case
def rnn(r, rng):
    kind = r.choice(["LSTM", "GRU", "RNN"])
    nl = r.choice([1, 2])
    bi = r.random() < 0.5
    bf = r.random() < 0.5
    bias = r.random() < 0.8
    I, H, T, B = 3, 4, r.randint(1, 4), 2
    kw = dict(input_size=I, hidden_size=H, num_layers=nl, bidirectional=bi, batch_first=bf, bias=bias)
    if kind == "RNN":
        kw["nonlinearity"] = r.choice(["tanh", "relu"])
    if kind == "LSTM" and r.random() < 0.3:
        kw["proj_size"] = 2
    use_h0 = r.random() < 0.5
    x = rng.standard_normal((B, T, I) if bf else (T, B, I)).astype(np.float32)
    D = 2 if bi else 1
    Hout = kw.get("proj_size", 0) or H
    h0 = rng.standard_normal((nl * D, B, Hout)).astype(np.float32)
    c0 = rng.standard_normal((nl * D, B, H)).astype(np.float32)
    unbatched = r.random() < 0.15

    def build(L):
        torch.manual_seed(0)
        return getattr(L.nn, kind)(**kw)

    def fwd(L, m, leaves):
        xx = leaves["x"]
        if unbatched:
            xx = xx[:, 0] if bf else xx[:, 0]
            xx = leaves["x"][0] if bf else leaves["x"][:, 0]
        args = [xx]
        if use_h0:
            hh = leaves["h0"][:, 0] if unbatched else leaves["h0"]
            if kind == "LSTM":
                cc = leaves["c0"][:, 0] if unbatched else leaves["c0"]
                args.append((hh, cc))
            else:
                args.append(hh)
        out, h = m(*args)
        if kind == "LSTM":
            return [out, h[0], h[1]]
        return [out, h]
    leaves = {"x": x, "h0": h0, "c0": c0}
    return f"{kind}({kw}) h0={use_h0} unbatched={unbatched}", build, fwd, leaves, 1


@case
def mha(r, rng):
    E, Hh = 4, r.choice([1, 2])
    bf = r.random() < 0.5
    kdim = r.choice([None, 3])
    bias = r.random() < 0.8
    abk = r.random() < 0.3
    zero_attn = r.random() < 0.2
    kw = dict(embed_dim=E, num_heads=Hh, batch_first=bf, bias=bias, add_bias_kv=abk, add_zero_attn=zero_attn)
    if kdim:
        kw.update(kdim=kdim, vdim=kdim)
    B, Lq, S = 2, r.randint(1, 3), r.randint(1, 4)
    q = rng.standard_normal((B, Lq, E) if bf else (Lq, B, E)).astype(np.float32)
    kd = kdim or E
    k = rng.standard_normal((B, S, kd) if bf else (S, B, kd)).astype(np.float32)
    v = rng.standard_normal((B, S, kd) if bf else (S, B, kd)).astype(np.float32)
    self_attn = kdim is None and r.random() < 0.4
    kpm_kind = r.choice([None, "bool", "float"])
    am_kind = r.choice([None, "bool", "float", "bool3"])
    need_w = r.random() < 0.6
    avg = r.random() < 0.5
    S_eff = Lq if self_attn else S
    kpm = rng.random((B, S_eff)) < 0.3
    kpm[:, 0] = False
    am = rng.random((Lq, S_eff)) < 0.3
    am[:, 0] = False
    am3 = rng.random((B * Hh, Lq, S_eff)) < 0.3
    am3[..., 0] = False
    kpmf = rng.standard_normal((B, S_eff)).astype(np.float32)
    amf = rng.standard_normal((Lq, S_eff)).astype(np.float32)
    leaves = {"q": q, "k": k, "v": v}

    def build(L):
        torch.manual_seed(0)
        return L.nn.MultiheadAttention(**kw)

    def fwd(L, m, lv):
        qq = lv["q"]
        kk, vv = (qq, qq) if self_attn else (lv["k"], lv["v"])
        kw2 = dict(need_weights=need_w, average_attn_weights=avg)
        if kpm_kind == "bool":
            kw2["key_padding_mask"] = L.tensor(kpm)
        elif kpm_kind == "float":
            kw2["key_padding_mask"] = L.tensor(kpmf)
        if am_kind == "bool":
            kw2["attn_mask"] = L.tensor(am)
        elif am_kind == "bool3":
            kw2["attn_mask"] = L.tensor(am3)
        elif am_kind == "float":
            kw2["attn_mask"] = L.tensor(amf)
        if kpm_kind and am_kind and (kpm_kind == "float") != (am_kind == "float"):
            raise RuntimeError("skip: mixed mask types")
        out, w = m(qq, kk, vv, **kw2)
        return [out] + ([w] if w is not None else [])
    return f"MHA({kw}) self={self_attn} kpm={kpm_kind} am={am_kind} need_w={need_w} avg={avg}", build, fwd, leaves, 1


@case
def tel(r, rng):
    nf = r.random() < 0.5
    bf = r.random() < 0.5
    act = r.choice(["relu", "gelu"])
    kw = dict(d_model=4, nhead=2, dim_feedforward=6, dropout=0.0, activation=act, batch_first=bf, norm_first=nf)
    dec = r.random() < 0.3
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    mem = rng.standard_normal((2, 4, 4)).astype(np.float32)
    causal = r.random() < 0.4
    kpm = rng.random((2, 3)) < 0.3
    kpm[:, 0] = False
    use_kpm = r.random() < 0.4
    train = r.random() < 0.5

    def build(L):
        torch.manual_seed(0)
        m = (L.nn.TransformerDecoderLayer if dec else L.nn.TransformerEncoderLayer)(**kw)
        return m.train() if train else m.eval()

    def fwd(L, m, lv):
        xx = lv["x"]
        mask = L.nn.Transformer.generate_square_subsequent_mask(3 if bf else 2) if causal else None
        if dec:
            return [m(xx, lv["mem"], tgt_mask=mask, tgt_key_padding_mask=L.tensor(kpm) if use_kpm else None)]
        return [m(xx, src_mask=mask, src_key_padding_mask=L.tensor(kpm) if use_kpm else None)]
    return f"{'Dec' if dec else 'Enc'}({kw}) causal={causal} kpm={use_kpm} train={train}", build, fwd, {"x": x, "mem": mem}, 1


@case
def bn(r, rng):
    kind = r.choice(["BatchNorm1d", "BatchNorm2d", "InstanceNorm1d", "InstanceNorm2d", "LayerNorm", "GroupNorm"])
    mom = r.choice([0.1, 0.5, None])
    aff = r.random() < 0.7
    trs = r.random() < 0.8
    steps = r.randint(1, 4)
    C = 3
    if kind.endswith("1d"):
        shape = r.choice([(4, C), (4, C, 5)]) if kind.startswith("Batch") else (2, C, 5)
    elif kind.endswith("2d"):
        shape = (2, C, 3, 2)
    else:
        shape = (2, C, 4)
    xs = [(rng.standard_normal(shape) * 2 + 1).astype(np.float32) for _ in range(steps + 1)]

    def build(L):
        if kind == "LayerNorm":
            return L.nn.LayerNorm([C, 4], elementwise_affine=aff)
        if kind == "GroupNorm":
            return L.nn.GroupNorm(r2, C, affine=aff)
        return getattr(L.nn, kind)(C, momentum=mom, affine=aff, track_running_stats=trs)
    r2 = 3 if kind == "GroupNorm" else None

    def fwd(L, m, lv):
        m.train()
        outs = []
        for i in range(steps):
            outs.append(m(L.tensor(xs[i]) * 1.0))
        m.eval()
        outs.append(m(lv["x"]))
        for k, v in m.state_dict().items():
            if v.dtype.is_floating_point:
                outs.append(v)
            else:
                outs.append(v.to(L.float32))
        return outs
    return f"{kind} mom={mom} aff={aff} trs={trs} steps={steps}", build, fwd, {"x": xs[-1]}, 1


@case
def misc(r, rng):
    kind = r.choice(["Conv2d", "ConvT", "Embedding", "Bilinear", "PReLU", "Linear"])
    leaves = {"x": rng.standard_normal((2, 3, 5, 4)).astype(np.float32)}
    pm = r.choice(["zeros", "reflect", "replicate", "circular"])
    st = r.choice([1, 2])

    def build(L):
        torch.manual_seed(0)
        if kind == "Conv2d":
            return L.nn.Conv2d(3, 4, 3, padding=1, padding_mode=pm, stride=st)
        if kind == "ConvT":
            return L.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1, output_padding=1)
        if kind == "Embedding":
            return L.nn.Embedding(5, 4, padding_idx=1)
        if kind == "Bilinear":
            return L.nn.Bilinear(4, 4, 3)
        if kind == "PReLU":
            return L.nn.PReLU(3)
        return L.nn.Linear(4, 2)

    def fwd(L, m, lv):
        x = lv["x"]
        if kind == "Embedding":
            return [m(L.tensor([[0, 1, 4], [1, 1, 2]]))]
        if kind == "Bilinear":
            return [m(x, x * 2)]
        return [m(x)]
    return f"{kind} pm={pm}", build, fwd, leaves, 1


def check(seed, filt=None):
    r = random.Random(seed)
    rng = np.random.default_rng(seed)
    cs = [c for c in CASES if filt is None or c.__name__ in filt]
    c = r.choice(cs)
    desc, build, fwd, leaves, _ = c(r, rng)
    res = {}
    W = None
    for L in (torch, nv):
        try:
            m = build(L)
            if L is nv:
                copy_sd(res["tm"], m)
            else:
                res["tm"] = {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}
            lv = {k: L.tensor(a, requires_grad=True) for k, a in leaves.items()}
            outs = fwd(L, m, lv)
        except Exception as e:
            if L is torch:
                if "-v" in sys.argv: print("TORCH ERR", seed, desc, e)
                return "torch_err"
            print("=" * 60)
            print("SEED", seed, desc, "NOVA EXC", type(e).__name__, str(e)[:300])
            return "err"
        if W is None:
            rng2 = np.random.default_rng(seed + 5)
            W = [rng2.standard_normal(tuple(o.shape)).astype(np.float32) for o in outs]
        loss = sum((o * L.tensor(w)).sum() for o, w in zip(outs, W) if o.requires_grad)
        d = {f"out{i}": tonp(o) for i, o in enumerate(outs)}
        if not isinstance(loss, int):
            loss.backward()
            for k, t in lv.items():
                if t.grad is not None:
                    d["g_" + k] = tonp(t.grad)
            for name, p in m.named_parameters():
                if p.grad is not None:
                    d["p_" + name] = tonp(p.grad)
        res[L.__name__] = d
    tr, nr = res["torch"], res["nova"]
    bad = []
    for k in sorted(set(tr) | set(nr)):
        a, b = tr.get(k), nr.get(k)
        if a is None or b is None:
            z = a if b is None else b
            if np.all(z == 0):
                continue
            bad.append((k, a, b))
            continue
        if a.shape != b.shape or not np.allclose(a, b, rtol=1e-3, atol=1e-4, equal_nan=True):
            bad.append((k, a, b))
    if bad:
        print("=" * 60)
        print("SEED", seed, desc)
        print_differences(bad, 4)
        return "bad"
    return "ok"


if __name__ == "__main__":
    filt = sys.argv[3].split(",") if len(sys.argv) > 3 and sys.argv[3] != "-v" else None
    run_seeds(lambda s: check(s, filt), int(sys.argv[1]), int(sys.argv[2]))

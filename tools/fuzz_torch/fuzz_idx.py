"""Indexing differential fuzzer: python fuzz_idx.py SEED N [only]"""
import sys
import numpy as np
import torch
import nova as nv
from common import *  # noqa


def idx_expr(rng, shp):
    """A random index expression string for a tensor of shape shp (uses L for tensors)."""
    nd = len(shp)
    parts = []
    i = 0
    adv_shape = tuple(int(rng.choice([1, 2, 3])) for _ in range(int(rng.integers(1, 3))))
    while i < nd:
        r = rng.random()
        n = shp[i]
        if r < 0.25:
            parts.append(":")
        elif r < 0.4 and n:
            parts.append(str(int(rng.integers(-n, n))))
        elif r < 0.55 and n:
            a = int(rng.integers(-n, n)); st = int(rng.choice([1, 2, 3]))
            parts.append(f"{a}::{st}")
        elif r < 0.75 and n:
            vals = rng.integers(-n, n, size=adv_shape).tolist()
            parts.append(f"L.tensor({vals})")
        elif r < 0.82 and n:
            parts.append(str(rng.integers(-n, n, size=int(rng.integers(1, 4))).tolist()))
        elif r < 0.88:
            parts.append("None")
            continue
        elif r < 0.94 and i == 0:
            parts.append("...")
            break
        else:
            parts.append(":")
        i += 1
    if rng.random() < 0.1:
        parts.append("None")
    return "[" + ", ".join(parts) + "]"


OPS = [
    "a{ix}", "a[a > 0]", "a[(a > 0).any(-1)]" , "L.where(a > 0)", "L.nonzero(a)", "L.argwhere(a)",
    "L.gather(a, {d}, I)", "a.scatter({d}, I, s)", "a.scatter_add({d}, I, s)",
    "a.scatter_reduce({d}, I, s, reduce='sum', include_self={inc})",
    "a.scatter_reduce({d}, I, s, reduce='prod', include_self={inc})",
    "a.scatter_reduce({d}, I, s, reduce='amax', include_self={inc})",
    "a.scatter_reduce({d}, I, s, reduce='amin', include_self={inc})",
    "a.scatter_reduce({d}, I, s, reduce='mean', include_self={inc})",
    "a.index_select({d}, J)", "a.index_add({d}, J, t)", "a.index_add({d}, J, t, alpha=2)",
    "L.take(a, K)", "L.take_along_dim(a, I, {d})", "L.masked_select(a, a > 0)",
    "a.masked_scatter(a > 0, s)", "a.index_put_((J,), v, accumulate=True)",
    "a.index_fill({d}, J, -1)", "a.index_copy({d}, Ju, t)",
]
SET = ["a{ix} = v0", "a{ix} = a{ix} * 2", "a[a > 0] = v0", "a[a > 0] = -a[a > 0]", "a{ix} += 1"]


def main():
    seed = int(sys.argv[1]); n = int(sys.argv[2])
    only = int(sys.argv[3]) if len(sys.argv) > 3 else None
    print("seed", seed)
    stats = {}
    for i in range(n):
        if only is not None and i != only:
            continue
        rng = np.random.default_rng([seed, i])
        nd = int(rng.integers(1, 4))
        shp = tuple(int(rng.choice([1, 2, 3, 4, 5, 7])) for _ in range(nd))
        dt = str(rng.choice(["float32", "float64", "int64", "int32", "float16", "bool", "uint8"]))
        arr = gen_array(rng, shp, dt, special=False, small=True)
        d = int(rng.integers(-nd, nd))
        dd = d % nd
        env = {"a": ("t", arr, dt)}
        # index tensors for gather/scatter: same ndim, dims <= a's except along d
        ishape = tuple(int(rng.integers(1, s + 1)) if k != dd else int(rng.integers(1, 6)) for k, s in enumerate(shp))
        env["I"] = ("t", rng.integers(0, shp[dd], size=ishape).astype(np.int64), "int64")
        sshape = tuple(max(a_, b_) for a_, b_ in zip(ishape, shp)) if rng.random() < 0.5 else ishape
        env["s"] = ("t", gen_array(rng, sshape, dt, special=False, small=True), dt)
        m = int(rng.integers(0, 6))
        env["J"] = ("t", rng.integers(-shp[dd] if rng.random() < 0.3 else 0, shp[dd], size=m).astype(np.int64), "int64")
        ju = rng.permutation(shp[dd])[: min(m, shp[dd])]
        env["Ju"] = ("t", ju.astype(np.int64), "int64")
        tshape = list(shp); tshape[dd] = m
        env["t"] = ("t", gen_array(rng, tuple(tshape), dt, special=False, small=True), dt)
        tshape2 = list(shp); tshape2[dd] = len(ju)
        if "Ju" in env:
            env["t"] = env["t"] if rng.random() < 0.5 else ("t", gen_array(rng, tuple(tshape2), dt, special=False, small=True), dt)
        size = int(np.prod(shp))
        env["K"] = ("t", rng.integers(-size, size, size=(int(rng.integers(0, 4)), 2)).astype(np.int64), "int64")
        vshape = shp[1:] if rng.random() < 0.5 else ((m,) + shp[1:] if rng.random() < 0.5 else ())
        env["v"] = ("t", gen_array(rng, vshape, dt, special=False, small=True), dt)
        env["v0"] = ("t", gen_array(rng, (), dt, special=False, small=True), dt)
        if rng.random() < 0.7:
            tmpl = str(rng.choice(OPS))
            ix = idx_expr(rng, shp)
            code = "r = " + tmpl.format(ix=ix, d=d, inc=bool(rng.random() < 0.5))
            outs = ["r", "a"]
        else:
            tmpl = str(rng.choice(SET))
            ix = idx_expr(rng, shp)
            code = tmpl.format(ix=ix)
            outs = ["a"]
        if "scatter(" in code or "index_put_" in code and "accumulate=True" not in code:
            pass

        def run(L, conv):
            e = {"L": L}
            for k, v in env.items():
                e[k] = conv(v[1], v[2])
            exec(code, e)
            r = [e[o] for o in outs]
            return [tuple(x) if isinstance(x, tuple) else x for x in r]
        res = run_both(lambda: run(torch, to_torch), lambda: run(nv, to_nova))
        if isinstance(res[0], str):
            st, msg = res
            stats[st] = stats.get(st, 0) + 1
            if st in ("both_raise",):
                continue
            if st == "torch_raise" and any(w in msg for w in ("NotImplementedError", "does not support", "not implemented")):
                continue
        else:
            msg = first_difference(outs, *res, rtol_mult=30.0)
            if msg is None:
                stats["ok"] = stats.get("ok", 0) + 1
                continue
            st = "mismatch"
            # scatter with duplicate indices (no reduce) is undefined in torch
            if "a.scatter(" in code or "masked_scatter" in code and False:
                st = "undefined_dup"
            if ("] = " in code or "index_copy" in code) and "L.tensor" in code:
                st = "maybe_dup"
            stats[st] = stats.get(st, 0) + 1
            if st in ("undefined_dup",):
                continue
        print(f"=== case {i} [{st}] dt={dt} shape={shp}: {code}")
        print("   ", msg[:300])
    print("stats", stats)


if __name__ == "__main__":
    main()

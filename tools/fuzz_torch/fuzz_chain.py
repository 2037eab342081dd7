"""View/movement chains + fusion fuzzer: python fuzz_chain.py SEED N [only]
Builds a random program (list of statements) using torch to track shapes, then runs it
in torch and nova and compares every printed output."""
import sys
import numpy as np
import torch
import nova as nv
from common import *  # noqa

SIZES = [1, 2, 3, 5, 7, 8, 9, 16, 17, 33, 65]


def view_op(rng, shp):
    nd = len(shp)
    cands = []
    if nd >= 2:
        p = list(rng.permutation(nd))
        cands += [f".permute({', '.join(map(str, p))})", f".transpose({int(rng.integers(-nd, nd))}, {int(rng.integers(-nd, nd))})",
                  ".mT", f".movedim({int(rng.integers(0, nd))}, {int(rng.integers(0, nd))})"]
        if nd == 2:
            cands += [".t()", ".T", f".diagonal({int(rng.integers(-2, 3))})", f".triu({int(rng.integers(-2, 3))})",
                      f".tril({int(rng.integers(-2, 3))})", ".fliplr()", f".rot90({int(rng.integers(-2, 4))})"]
        cands.append(f".flatten({int(rng.integers(0, nd - 1))}, {nd - 1})")
    if nd >= 1:
        d = int(rng.integers(-nd, nd))
        n = shp[d]
        if n > 0:
            st = int(rng.integers(-n, n))
            step = int(rng.choice([1, 1, 2, 3]))
            sl = [":"] * nd
            sl[d % nd] = f"{st}::{step}"
            cands.append("[" + ", ".join(sl) + "]")
            stop = int(rng.integers(0, n + 1))
            sl[d % nd] = f"{rng.integers(0, n)}:{stop}:{step}"
            cands.append("[" + ", ".join(sl) + "]")
            cands.append(f".select({d}, {int(rng.integers(-n, n))})")
            s0 = int(rng.integers(0, n))
            cands.append(f".narrow({d}, {s0}, {int(rng.integers(0, n - s0 + 1))})")
            cands.append(f".flip({d})")
            cands.append(f".roll({int(rng.integers(-5, 6))}, {d})")
            if n % 2 == 0 or rng.random() < 0.3:
                cands.append(f".unflatten({d}, ({n}, 1))")
        cands.append(f".unsqueeze({int(rng.integers(-nd - 1, nd + 1))})")
        ones = [i for i, s in enumerate(shp) if s == 1]
        if ones:
            cands.append(f".squeeze({tuple(ones[:2])})")
            e = list(shp)
            e[ones[0]] = int(rng.choice([3, 7, 17]))
            cands.append(f".expand({', '.join(map(str, e))})")
        cands.append(".flatten()")
        cands.append(f".repeat({', '.join(str(int(rng.choice([1, 2]))) for _ in range(nd))})")
    else:
        cands.append(".unsqueeze(0)")
        cands.append(".expand(5)")
    if nd <= 3 and int(np.prod(shp)) <= 4096:
        cands.append(".contiguous()")
    return str(rng.choice(cands))


ELT = ["({a} + {b})", "({a} * {b})", "({a} - {b})", "L.maximum({a}, {b})", "L.where({a} > {b}, {a}, {b} * 2)",
       "({a} / ({b}.abs() + 1))", "L.exp(-({a}).abs()) + {b}", "({a} * 0.5 + {b} * {b})", "L.sigmoid({a}) * {b}"]
UNA = ["L.tanh({a})", "({a} * 3 - 1)", "{a}.abs().sqrt()", "L.relu({a})", "({a} ** 2)", "L.sin({a})"]
RED = ["{a}.sum()", "{a}.sum({d})", "{a}.amax({d})", "{a}.mean({d}, keepdim=True)", "{a}.cumsum({d})",
       "{a}.softmax({d})", "{a}.amin()", "{a}.argmax({d})", "{a}.logsumexp({d})", "{a}.var({d})", "{a}.max({d})[1]"]
INPLACE = ["{v}.add_(1.5)", "{v}.mul_(-2)", "{v}.zero_()", "{v}.fill_(3.25)", "{v}.clamp_(-0.5, 0.5)",
           "{v}.copy_({w})", "{v}.masked_fill_({v} > 0, -7.0)", "{v}[...] = {w}", "{v}.sub_({w})",
           "{v}.index_fill_({d}, L.tensor([0]), 9.0)"]


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
        shp = tuple(int(rng.choice(SIZES)) for _ in range(nd))
        dt = str(rng.choice(["float32", "float32", "float64", "float16", "bfloat16", "int32"]))
        arrs = {"x0": gen_array(rng, shp, dt, special=False, small=True),
                "y0": gen_array(rng, shp, dt, special=False, small=True)}
        prog = []
        tenv = {"L": torch, "x0": to_torch(arrs["x0"], dt), "y0": to_torch(arrs["y0"], dt)}
        names = ["x0", "y0"]
        outs = []
        for step in range(int(rng.integers(3, 9))):
            kind = rng.random()
            src = str(rng.choice(names))
            sh = tuple(tenv[src].shape)
            nm = f"v{step}"
            if kind < 0.45:
                stmt = f"{nm} = {src}{view_op(rng, sh)}"
            elif kind < 0.65:
                # combine with another var whose shape broadcasts
                other = [m for m in names if m != src]
                rng.shuffle(other)
                partner = None
                for m in other:
                    try:
                        torch.broadcast_shapes(sh, tuple(tenv[m].shape))
                        partner = m
                        break
                    except RuntimeError:
                        pass
                if partner is None:
                    stmt = f"{nm} = {str(rng.choice(UNA)).format(a=src)}"
                else:
                    stmt = f"{nm} = {str(rng.choice(ELT)).format(a=src, b=partner)}"
            elif kind < 0.8:
                stmt = f"{nm} = {str(rng.choice(UNA)).format(a=src)}"
            elif kind < 0.9 and len(sh) >= 1:
                # in-place through a view of a base (src may be a view)
                w = "w_" + nm
                vop = view_op(rng, sh)
                tmpl = str(rng.choice(INPLACE))
                prog_v = f"{nm} = {src}{vop}"
                try:
                    exec(prog_v, tenv)
                except Exception:
                    continue
                vs = tuple(tenv[nm].shape)
                if "expand" in vop or "repeat" in vop or "contiguous" in vop or "flatten" in vop and False:
                    pass
                prog.append(prog_v)
                wshape = vs[1:] if (len(vs) >= 1 and rng.random() < 0.3) else vs
                arrs[w] = gen_array(rng, wshape, dt, special=False, small=True)
                tenv[w] = to_torch(arrs[w], dt)
                d = int(rng.integers(-len(vs), len(vs))) if len(vs) else 0
                stmt = tmpl.format(v=nm, w=w, d=d)
                try:
                    exec(stmt, tenv)
                except Exception:
                    prog.pop()
                    continue
                prog.append(stmt)
                names.append(nm)
                outs += [nm, src, "x0", "y0"]
                continue
            else:
                d = int(rng.integers(-len(sh), len(sh))) if len(sh) else 0
                stmt = f"{nm} = {str(rng.choice(RED)).format(a=src, d=d)}"
            try:
                exec(stmt, tenv)
            except Exception:
                continue
            prog.append(stmt)
            names.append(nm)
            outs.append(nm)
        outs = sorted(set(outs + names))
        code = "\n".join(prog)
        # run in both fresh
        def run(L, conv):
            env = {"L": L}
            for k, a in arrs.items():
                env[k] = conv(a, dt)
            exec(code, env)
            return [env[o] for o in outs]
        res = run_both(lambda: run(torch, to_torch), lambda: run(nv, to_nova))
        if isinstance(res[0], str):
            st, msg = res
            stats[st] = stats.get(st, 0) + 1
            if st == "both_raise":
                continue
            if st == "torch_raise":
                continue
        else:
            msg = first_difference(outs, *res, rtol_mult=50.0)
            if msg is None:
                stats["ok"] = stats.get("ok", 0) + 1
                continue
            st = "mismatch"
            if any(w in code for w in ("flatten", "contiguous")) and any(w in code for w in ("_(", "] =")):
                st = "doc_deviation"
            stats[st] = stats.get(st, 0) + 1
            if st == "doc_deviation":
                continue
        print(f"=== case {i} [{st}] dtype={dt} shape={shp}")
        print("    " + code.replace("\n", "\n    "))
        print("   ", msg[:400])
    print("stats", stats)


if __name__ == "__main__":
    main()

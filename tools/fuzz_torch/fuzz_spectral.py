"""FFT and einsum differential fuzzer: torch vs nova, values and gradients.

usage: python fuzz_spectral.py START N [case,case...]
Each case is one expression over float32/float64/complex inputs; the gradient is that of
fixed random weights times the outputs (complex ones through view_as_real). float32 is
compared to 1e-4 of each output's largest magnitude, float64 to 1e-9 (gradients 10x).
"""
import numpy as np
from common import Cases, program_main

CASES = Cases()
case = CASES.add


def arr(rng, shape, kind):
    if kind in ("f32", "f64"):
        return rng.standard_normal(shape).astype(np.float32 if kind == "f32" else np.float64)
    a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return a.astype(np.complex64 if kind == "c64" else np.complex128)


def rshape(r, nd=None):
    nd = nd if nd is not None else r.randint(1, 3)
    return tuple(r.choice([1, 2, 3, 4, 5, 6, 7, 8, 9]) for _ in range(nd))


def norm(r):
    return r.choice(["", ", norm='backward'", ", norm='ortho'", ", norm='forward'", ", norm=None"])


def kind_for(r, fn):
    if fn.startswith(("rfft", "ihfft")):
        return r.choice(["f32", "f64"])
    if fn.startswith(("irfft", "hfft")):
        return r.choice(["c64", "c128", "c64", "f32"])
    return r.choice(["f32", "f64", "c64", "c128"])


@case
def fft_1d(r, rng):
    fn = r.choice(["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
    sh = rshape(r)
    kind = kind_for(r, fn)
    args = f", n={r.randint(1, 12)}" if r.random() < 0.5 else ""
    if r.random() < 0.6:
        args += f", dim={r.randint(-len(sh), len(sh) - 1)}"
    return {"x": (arr(rng, sh, kind), True)}, f"fft.{fn}(x{args}{norm(r)})"


@case
def fft_nd(r, rng):
    fn = r.choice(["fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn",
                   "hfft2", "ihfft2", "hfftn", "ihfftn"])
    nd = r.randint(1, 4) if fn.endswith("n") else r.randint(2, 4)
    sh = rshape(r, nd)
    kind = kind_for(r, fn)
    dims = r.sample(range(nd), 2 if fn.endswith("2") else r.randint(1, nd))
    dims = [d - nd if r.random() < 0.4 else d for d in dims]
    args = ""
    if fn.endswith("2"):
        if r.random() < 0.5:
            args += f", s=({r.choice([-1, 1, 2, 5, 10])}, {r.randint(1, 10)})"
        if r.random() < 0.5:
            args += f", dim=({dims[0]}, {dims[1]})"
    else:
        mode = r.random()
        s = tuple(r.choice([-1] + list(range(1, 11))) for _ in dims)
        if 0.3 <= mode < 0.55:
            args += f", dim={tuple(dims)}"
        elif 0.55 <= mode < 0.8:
            args += f", s={s}, dim={tuple(dims)}"
        elif mode >= 0.8:
            args += f", s={s}"
    return {"x": (arr(rng, sh, kind), True)}, f"fft.{fn}(x{args}{norm(r)})"


@case
def shifts(r, rng):
    fn = r.choice(["fftshift", "ifftshift"])
    sh = rshape(r)
    nd = len(sh)
    m = r.random()
    # (dim=() is a documented deviation: it shifts nothing in Nova; not generated)
    if m < 0.3:
        args = ""
    elif m < 0.6:
        args = f", dim={r.randint(-nd, nd - 1)}"
    else:
        ds = r.sample(range(nd), r.randint(1, nd))
        args = f", dim={tuple(d - nd if r.random() < 0.4 else d for d in ds)}"
    return {"x": (arr(rng, sh, r.choice(["f32", "f64", "c64"])), True)}, f"fft.{fn}(x{args})"


@case
def freqs(r, rng):
    fn = r.choice(["fftfreq", "rfftfreq"])
    a = f"{r.randint(1, 12)}"
    if r.random() < 0.5:
        a += f", d={r.choice([0.1, 0.5, 2.0, 3])}"
    if r.random() < 0.4:
        a += f", dtype=L.{r.choice(['float64', 'float32'])}"
    return {}, f"fft.{fn}({a})"


@case
def fft_roundtrip(r, rng):
    n = r.randint(1, 9)
    sh = rshape(r, r.randint(1, 2)) + (n,)
    nn = r.choice([n, n + 1, max(1, n - 1)])
    nm = norm(r)
    code = r.choice([f"fft.irfft(fft.rfft(x{nm}), n={nn}{nm})",
                     f"fft.ifft(fft.fft(x{nm}){nm}).real",
                     f"fft.hfft(fft.ihfft(x{nm}), n={nn}{nm})",
                     f"fft.fftshift(fft.fft2(x{nm}) * 2, dim=-1).abs()",
                     f"fft.irfftn(fft.rfftn(x, dim=(-1,)) * fft.rfftn(x, dim=(-1,)), s=({n},), dim=(-1,))"])
    return {"x": (arr(rng, sh, r.choice(["f32", "f64"])), True)}, code


@case
def fft_edge(r, rng):
    kind = r.choice(["f32", "f64", "c64"])
    sh = rshape(r, 2)
    x = arr(rng, sh, kind)
    code = r.choice([
        "fft.fft(x.mT, dim=0)", "fft.fft(x[:, 1:] if x.shape[1] > 1 else x)",
        "fft.ifft(x.expand(3, -1, -1), dim=0)", "fft.fftn(x, s=(-1, %d))" % r.randint(1, 9),
        "fft.fft2(x, s=(%d, -1))" % r.randint(1, 9), "fft.fft(x, n=0)", "fft.fftn(x, dim=(0, 0))",
        "fft.fftn(x, s=(3,), dim=(0, 1))", "fft.fft(x, dim=2)", "fft.rfft(x, norm='bogus')",
        "fft.fftn(x, dim=())", "fft.fftn(x, s=())", "fft.fft(x[0, 0])", "fft.irfft(x, n=1)",
        "fft.irfftn(x, s=(1, 1))", "fft.hfft(x, n=1)", "fft.fft(x * 2 + 1, dim=-2)[..., :1]",
    ])
    if "irfft" in code and not np.iscomplexobj(x):
        x = x.astype(np.complex64)
    return {"x": (x, "[0, 0]" not in code)}, code


def einsum_equation(r, allow_bcast=True):
    letters = r.sample("abcdefghij", r.randint(1, 6))
    size = {ch: r.randint(1, 4) for ch in letters}
    nops = r.choice([1, 1, 2, 2, 2, 3, 3, 4])
    use_ell = r.random() < 0.3
    ell_nd = r.randint(0, 2)
    ell_sh = [r.randint(1, 3) for _ in range(ell_nd)]
    ops, shapes = [], []
    for _ in range(nops):
        subs = [r.choice(letters) for _ in range(r.randint(0, 4))]
        sh = [1 if allow_bcast and r.random() < 0.08 else size[ch] for ch in subs]
        term = "".join(subs)
        if use_ell and r.random() < 0.8:
            pos = r.randint(0, len(subs))
            nd = r.randint(0, ell_nd)
            esh = [es if r.random() < 0.8 else 1 for es in ell_sh[ell_nd - nd:]]
            term = term[:pos] + "..." + term[pos:]
            sh = sh[:pos] + esh + sh[pos:]
        ops.append(term)
        shapes.append(tuple(sh))
    used = sorted(set("".join(ops).replace(".", "")))
    eq = ",".join(ops)
    if r.random() < 0.6:
        o = "".join(r.sample(used, r.randint(0, len(used))))
        if "..." in eq and r.random() < 0.85:
            p = r.randint(0, len(o))
            o = o[:p] + "..." + o[p:]
        eq += "->" + o
    return eq, shapes


@case
def einsum(r, rng):
    eq, shapes = einsum_equation(r)
    kind = r.choice(["f32", "f32", "f64", "i64"])
    inp = {}
    for i, sh in enumerate(shapes):
        a = rng.integers(-5, 5, size=sh).astype(np.int64) if kind == "i64" else arr(rng, sh, kind)
        inp[f"x{i}"] = (a, kind != "i64")
    names = ", ".join(inp)
    return inp, f"L.einsum('{eq}', {names})" if r.random() < 0.5 else f"L.einsum('{eq}', [{names}])"


@case
def einsum_spaces(r, rng):
    eq, shapes = einsum_equation(r, allow_bcast=False)
    eq = " " + eq.replace(",", " , ").replace("->", " -> ")
    inp = {f"x{i}": (arr(rng, sh, "f32"), True) for i, sh in enumerate(shapes)}
    return inp, f"L.einsum('{eq}', {', '.join(inp)})"


@case
def einsum_sublist(r, rng):
    eq, shapes = einsum_equation(r, allow_bcast=False)
    lhs, _, rhs = eq.partition("->")

    def conv(t):
        return "[" + ", ".join("Ellipsis" if ch == "E" else str(ord(ch) - 97)
                               for ch in t.replace("...", "E")) + "]"
    inp, parts = {}, []
    for i, (t, sh) in enumerate(zip(lhs.split(","), shapes)):
        inp[f"x{i}"] = (arr(rng, sh, "f32"), True)
        parts += [f"x{i}", conv(t)]
    if "->" in eq:
        parts.append(conv(rhs))
    return inp, f"L.einsum({', '.join(parts)})"


@case
def einsum_complex(r, rng):
    eq, shapes = einsum_equation(r, allow_bcast=False)
    inp = {f"x{i}": (arr(rng, sh, "c64"), True) for i, sh in enumerate(shapes)}
    return inp, f"L.einsum('{eq}', {', '.join(inp)})"


@case
def einsum_edge(r, rng):
    d = r.choice(["f32", "f64"])
    n, m = r.randint(1, 4), r.randint(1, 4)
    eq, shapes = r.choice([
        ("iii->i", [(n, n, n)]), ("iii", [(n, n, n)]), ("ii->", [(n, n)]), ("ij->ii", [(n, n)]),
        ("...->...", [(n, m)]), ("...", [(n, m)]), ("i...i->...", [(n, m, n)]), ("AbA->b", [(n, m, n)]),
        ("ij,jk", [(n, m), (m, 2)]), ("ij,jk", [(n, m), (m + 1, 2)]), ("ij,ij->", [(n, m), (1, m)]),
        ("ij,jk,kl,lm->im", [(n, m), (m, 2), (2, 3), (3, 1)]), ("i,i,i->", [(n,), (n,), (n,)]),
        ("bij,bjk->bik", [(2, n, m), (1, m, 3)]), ("ij->j i", [(n, m)]), ("i j", [(n, m)]),
        ("ab,,cd->", [(n, m), (), (2, 2)]), (",->", [(), ()]), ("->", [()]), ("i->", [(0,)]),
        ("ij,jk->ik", [(n, 0), (0, m)]), ("...ij,...jk->...ik", [(2, 1, n, m), (3, m, 2)]),
        ("ij,kl->ijkl", [(n, m), (2, 1)]), ("ijk,ikj->", [(n, m, 2), (n, 2, m)]),
        ("i,j->ij", [(n,), (m,)]), ("ij->jj", [(n, m)]),
    ])
    inp = {f"x{i}": (arr(rng, sh, d), True) for i, sh in enumerate(shapes)}
    first = "x0.mT.mT" if r.random() < 0.3 and shapes and len(shapes[0]) == 2 else "x0"
    rest = "".join(", " + k for k in list(inp)[1:])
    return inp, f"L.einsum('{eq}', {first}{rest})"
# (operands of different dtypes: PyTorch refuses them, Nova promotes; not generated)


if __name__ == "__main__":
    program_main(CASES, rtol32=1e-4, rtol64=1e-9)

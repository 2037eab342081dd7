"""Shared helpers for the differential fuzzers (torch vs nova)."""
import warnings
import numpy as np
import torch
import nova as nv

warnings.filterwarnings("ignore")

DT = {
    "bool": (np.bool_, torch.bool, nv.bool),
    "uint8": (np.uint8, torch.uint8, nv.uint8),
    "int8": (np.int8, torch.int8, nv.int8),
    "int16": (np.int16, torch.int16, nv.int16),
    "int32": (np.int32, torch.int32, nv.int32),
    "int64": (np.int64, torch.int64, nv.int64),
    "float16": (np.float16, torch.float16, nv.float16),
    "bfloat16": (None, torch.bfloat16, nv.bfloat16),
    "float32": (np.float32, torch.float32, nv.float32),
    "float64": (np.float64, torch.float64, nv.float64),
}
INTS = ["uint8", "int8", "int16", "int32", "int64"]
FLOATS = ["float16", "bfloat16", "float32", "float64"]
ALL = ["bool"] + INTS + FLOATS

TNAME = {v[1]: k for k, v in DT.items()}
NNAME = {v[2]: k for k, v in DT.items()}


def gen_array(rng, shape, dt, special=True, small=False):
    """numpy array holding values for dtype dt (bfloat16 -> float32 holding bf16-rounded values)."""
    n = int(np.prod(shape)) if len(shape) else 1
    if dt == "bool":
        a = rng.random(n) < 0.5
        return a.reshape(shape)
    if dt in INTS:
        info = np.iinfo(DT[dt][0])
        lo, hi = (-10, 10) if small or rng.random() < 0.6 else (info.min, info.max)
        lo = max(lo, info.min)
        a = rng.integers(lo, hi, size=n, endpoint=True, dtype=np.int64)
        if special and n and rng.random() < 0.3:
            k = rng.integers(0, n)
            a[k] = rng.choice([info.min, info.max, 0, -1 if info.min < 0 else 1])
        return a.astype(DT[dt][0]).reshape(shape)
    # floats
    scale = rng.choice([1.0, 3.0, 100.0, 1e4]) if not small else 3.0
    a = (rng.standard_normal(n) * scale)
    if rng.random() < 0.3:
        a = np.round(a * 2) / 2  # ties / integral values
    if special and n and rng.random() < 0.4:
        for _ in range(rng.integers(1, 4)):
            k = rng.integers(0, n)
            a[k] = rng.choice([np.nan, np.inf, -np.inf, -0.0, 0.0, 0.5, -0.5, 1.5, -2.5, 1e-30, 6e4, -7e4])
    if dt == "bfloat16":
        return torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16).float().numpy().reshape(shape)
    with np.errstate(over="ignore"):
        return a.astype(DT[dt][0]).reshape(shape)


def to_torch(a, dt):
    if dt == "bfloat16":
        return torch.from_numpy(np.array(a, copy=True, order="C")).to(torch.bfloat16)
    return torch.from_numpy(np.array(a, copy=True, order="C")).clone()


def to_nova(a, dt):
    if dt == "bfloat16":
        return nv.tensor(np.array(a, copy=True, order="C")).to(nv.bfloat16)
    return nv.tensor(np.array(a, copy=True, order="C"))


def t2np(t):
    if isinstance(t, torch.Tensor):
        if t.dtype == torch.bfloat16:
            return t.float().numpy()
        return t.detach().numpy()
    return t


def n2np(t):
    if isinstance(t, nv.Tensor):
        if t.dtype == nv.bfloat16:
            return t.float().numpy()
        return t.numpy()
    return t


def dtname(x):
    if isinstance(x, torch.Tensor):
        return TNAME.get(x.dtype, str(x.dtype))
    if isinstance(x, nv.Tensor):
        return NNAME.get(x.dtype, str(x.dtype))
    return type(x).__name__


TOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-6, "float64": 1e-13}


def compare(tr, nr, rtol_mult=1.0, check_signzero=False):
    """Return None if equal enough, else a message."""
    if isinstance(tr, (tuple, list)):
        if not isinstance(nr, (tuple, list)) or len(tr) != len(nr):
            return f"structure mismatch: torch {type(tr)} len {len(tr)} vs nova {type(nr)}"
        for i, (a, b) in enumerate(zip(tr, nr)):
            m = compare(a, b, rtol_mult, check_signzero)
            if m:
                return f"[{i}] {m}"
        return None
    if isinstance(tr, torch.Tensor):
        if not isinstance(nr, nv.Tensor):
            return f"type: torch Tensor vs nova {type(nr)}"
        td, nd = dtname(tr), dtname(nr)
        if td != nd:
            return f"dtype: torch {td} vs nova {nd}"
        if tuple(tr.shape) != tuple(nr.shape):
            return f"shape: torch {tuple(tr.shape)} vs nova {tuple(nr.shape)}"
        a = t2np(tr)
        b = n2np(nr)
        if a.shape != b.shape:
            return f"np shape: {a.shape} vs {b.shape}"
        if td == "bool" or td in INTS:
            if not np.array_equal(a, b):
                bad = np.argwhere(a != b)[:5]
                return f"values differ at {bad.tolist()}: torch {a[tuple(bad.T)]} nova {b[tuple(bad.T)]}"
            return None
        a = a.astype(np.float64)
        b = b.astype(np.float64)
        nan_a, nan_b = np.isnan(a), np.isnan(b)
        if not np.array_equal(nan_a, nan_b):
            bad = np.argwhere(nan_a != nan_b)[:5]
            return f"NaN mismatch at {bad.tolist()}: torch {a[tuple(bad.T)]} nova {b[tuple(bad.T)]}"
        ok = ~nan_a
        inf_a, inf_b = np.isinf(a) & ok, np.isinf(b) & ok
        if not np.array_equal(a[inf_a | inf_b], b[inf_a | inf_b]):
            bad = np.argwhere((inf_a | inf_b) & (a != b))[:5]
            return f"inf mismatch at {bad.tolist()}: torch {a[tuple(bad.T)]} nova {b[tuple(bad.T)]}"
        fin = ok & ~inf_a & ~inf_b
        tol = TOL.get(td, 1e-6) * rtol_mult
        diff = np.abs(a - b)
        lim = tol * np.maximum(np.abs(a), np.abs(b)) + tol * 1e-3
        # allow small absolute error relative to the tensor's scale when summing
        badm = fin & (diff > lim)
        if badm.any():
            bad = np.argwhere(badm)[:5]
            return f"values differ at {bad.tolist()}: torch {a[tuple(bad.T)]} nova {b[tuple(bad.T)]}"
        if check_signzero:
            z = fin & (a == 0) & (b == 0) & (np.signbit(a) != np.signbit(b))
            if z.any():
                bad = np.argwhere(z)[:5]
                return f"signed zero differs at {bad.tolist()}: torch {a[tuple(bad.T)]} nova {b[tuple(bad.T)]}"
        return None
    # python scalars etc
    if isinstance(tr, (bool, int, float)):
        if isinstance(nr, nv.Tensor):
            return f"type: torch {type(tr)} vs nova Tensor"
        if isinstance(tr, float) and np.isnan(tr) and np.isnan(nr):
            return None
        if tr != nr and not (isinstance(tr, float) and abs(tr - nr) <= 1e-6 * abs(tr)):
            return f"scalar: torch {tr!r} vs nova {nr!r}"
        return None
    if tr != nr:
        return f"other: torch {tr!r} vs nova {nr!r}"
    return None


def run_both(fn_t, fn_n):
    """Run; return (status, message) where status in ok/mismatch/raise_mismatch."""
    te = ne = None
    tr = nr = None
    try:
        tr = fn_t()
    except Exception as e:  # noqa
        te = e
    try:
        nr = fn_n()
        # force realization
        if isinstance(nr, nv.Tensor):
            n2np(nr)
        elif isinstance(nr, (tuple, list)):
            for x in nr:
                if isinstance(x, nv.Tensor):
                    n2np(x)
    except Exception as e:  # noqa
        ne = e
    if te is not None and ne is not None:
        return "both_raise", None
    if te is not None:
        return "torch_raise", f"torch raised {type(te).__name__}: {str(te)[:150]}; nova gave {short(nr)}"
    if ne is not None:
        return "nova_raise", f"nova raised {type(ne).__name__}: {str(ne)[:300]}; torch gave {short(tr)}"
    return tr, nr


def short(x):
    try:
        if isinstance(x, nv.Tensor):
            return f"{dtname(x)}{tuple(x.shape)} {n2np(x).ravel()[:6]}"
        if isinstance(x, torch.Tensor):
            return f"{dtname(x)}{tuple(x.shape)} {t2np(x).ravel()[:6]}"
    except Exception as e:
        return f"<{e}>"
    return repr(x)[:100]


def run_seeds(check, start, n, on_error=None):
    """``check(seed)`` for seeds ``start .. start + n - 1``, counting what each returns
    ("ok", "bad", ...); a harness exception counts as "harness" and is printed (then
    ``on_error(seed)``, to print the case). Prints and returns the counts."""
    from collections import Counter
    cnt = Counter()
    for s in range(start, start + n):
        try:
            cnt[check(s)] += 1
        except Exception as e:
            cnt["harness"] += 1
            print("SEED", s, "HARNESS", type(e).__name__, str(e)[:300])
            if on_error is not None:
                on_error(s)
    print(cnt)
    return cnt


class Cases(list):
    """The case builders of a fuzzer, in definition order; decorate each with ``@cases.add``."""

    def add(self, f):
        self.append(f)
        return f


def print_differences(bad, most=4):
    """For each (name, torch array, nova array) of ``bad`` (at most ``most``): where they
    differ most, or their shapes."""
    for k, a, b in bad[:most]:
        if a is not None and b is not None and a.shape == b.shape:
            i = np.argmax(np.abs(a - b))
            print(f"  {k}: shape {a.shape}, maxdiff {np.abs(a - b).max():.3g} at "
                  f"{np.unravel_index(i, a.shape)} torch={a.flat[i]} nova={b.flat[i]}")
        else:
            print(f"  {k}: torch={None if a is None else a.shape} "
                  f"nova={None if b is None else b.shape}")


def first_difference(names, torch_values, nova_values, rtol_mult):
    """``"name: how"`` for the first of the outputs that differ (``compare``), else None."""
    for o, a, b in zip(names, torch_values, nova_values):
        m = compare(a, b, rtol_mult=rtol_mult)
        if m:
            return f"{o}: {m}"
    return None


# ---- programs over named inputs: one line of code run with L = torch and L = nova ----
# (fuzz_spectral.py, fuzz_linalg.py, fuzz_double_backward.py). A case builder returns
# ``(inp, code[, opts])``: ``inp`` maps a name to ``(ndarray, requires_grad)``, ``code`` is
# an expression in ``L``, ``la`` (L.linalg), ``fft`` (L.fft) and ``F`` (L.nn.functional).

PRELUDE = "la, fft, F = L.linalg, L.fft, L.nn.functional"


def is_tensor(x):
    return isinstance(x, (torch.Tensor, nv.Tensor)) or type(x).__name__ == "ComplexTensor"


def outputs(o):
    """A result as a flat list: a tensor, or the items of a (named) tuple or list."""
    if isinstance(o, (tuple, list)):
        return [y for x in o for y in outputs(x)]
    return [o]


def as_np(t):
    t = t.detach()
    if isinstance(t, torch.Tensor):
        t = t.resolve_conj().resolve_neg()
        return (t.float() if t.dtype == torch.bfloat16 else t).numpy().copy()
    return np.asarray(t.numpy()).copy()


def weighted_loss(L, outs):
    """sum of each float/complex output (complex through ``view_as_real``) times fixed
    N(0, 1) weights drawn in output order; None where nothing requires grad."""
    g = np.random.default_rng(1)
    loss = None
    for o in outs:
        if is_tensor(o) and (o.is_floating_point() or o.is_complex()):
            rv = L.view_as_real(o.resolve_conj() if L is torch else o) if o.is_complex() else o
            w = L.tensor(g.standard_normal(tuple(rv.shape))).to(rv.dtype)
            if o.requires_grad:
                loss = (rv * w).sum() if loss is None else loss + (rv * w).sum()
    return loss


def make_inputs(L, inp):
    ns = {"L": L, "la": L.linalg, "fft": L.fft, "F": L.nn.functional, "np": np}
    for k, (a, rg) in inp.items():
        t = L.tensor(np.array(a, copy=True))
        if rg and (t.is_floating_point() or t.is_complex()):
            t.requires_grad_(True)
        ns[k] = t
    return ns


def record(res, key, o):
    if is_tensor(o):
        res[key] = (str(o.dtype).split(".")[-1], tuple(o.shape), as_np(o))
    else:
        res[key] = ("py", type(o).__name__, o)


def run_program(L, inp, code, grad=True):
    """{"out<i>": (dtype, shape, array) or ("py", type, value), "g_<name>": gradient of
    ``weighted_loss`` for each input that requires grad}."""
    ns = make_inputs(L, inp)
    outs = outputs(eval(code, ns))
    res = {}
    for i, o in enumerate(outs):
        record(res, f"out{i}", o)
    loss = weighted_loss(L, outs) if grad else None
    if loss is not None:
        loss.backward()
        for k in inp:
            g = getattr(ns[k], "grad", None)
            if g is not None:
                record(res, "g_" + k, g)
    return res


def close_scaled(a, b, rtol):
    """Equal NaN/inf patterns and ``|a - b| <= rtol * max(1, max|a|, max|b|)`` over the
    finite rest (complex too): errors measured against the tensor's scale, as a
    decomposition's are (and at least against 1, the inputs' scale)."""
    a = np.asarray(a).astype(np.complex128)
    b = np.asarray(b).astype(np.complex128)
    if a.shape != b.shape:
        return False
    if a.size == 0:
        return True
    na, nb = np.isnan(a), np.isnan(b)
    if not np.array_equal(na, nb):
        return False
    ia, ib = np.isinf(a) & ~na, np.isinf(b) & ~nb
    if not np.array_equal(ia, ib) or not np.array_equal(a[ia], b[ib]):
        return False
    fin = ~na & ~ia
    if not fin.any():
        return True
    aa, bb = a[fin], b[fin]
    scale = max(np.abs(aa).max(), np.abs(bb).max(), 1.0)
    return np.abs(aa - bb).max() <= rtol * scale


def result_differences(tr, nr, rtol, grad_mult=10.0, nan_ok=False):
    """[(key, how)] where two ``run_program`` results differ (a gradient one side lacks
    counts only if the other is nonzero; gradients get ``grad_mult`` times the tolerance;
    with ``nan_ok`` a gradient NaN in torch's result where nova's is finite is accepted)."""
    bad = []
    for k in sorted(set(tr) | set(nr)):
        a, b = tr.get(k), nr.get(k)
        if nan_ok and k[:2] in ("g_", "h_") and a and b and a[0] == b[0] != "py" and a[1] == b[1]:
            a = a[:2] + (np.where(np.isnan(a[2]) & np.isfinite(b[2]), b[2], a[2]),)
        if a is None or b is None:
            z = a if b is None else b
            if k[:2] in ("g_", "h_") and z[0] != "py" and np.all(z[2] == 0):
                continue
            bad.append((k, "missing", f"torch {a and a[:2]} nova {b and b[:2]}"))
        elif a[0] == "py" or b[0] == "py":
            if a[0] != b[0] or (a[2] != b[2] and not (isinstance(a[2], float) and abs(a[2] - b[2]) <= rtol * abs(a[2]))):
                bad.append((k, "value", f"torch {a!r} nova {b!r}"))
        elif a[0] != b[0]:
            bad.append((k, "dtype", f"torch {a[0]} nova {b[0]}"))
        elif a[1] != b[1]:
            bad.append((k, "shape", f"torch {a[1]} nova {b[1]}"))
        elif not close_scaled(a[2], b[2], rtol * (grad_mult if k[:2] in ("g_", "h_") else 1)):
            A, B = np.asarray(a[2]).astype(np.complex128), np.asarray(b[2]).astype(np.complex128)
            d = np.abs(A - B)
            d[np.isnan(d)] = np.inf
            i = np.unravel_index(np.argmax(d), d.shape)
            bad.append((k, "value", f"maxdiff {d.max():.3g} at {tuple(int(j) for j in i)} torch={A[i]:.8g} "
                                    f"nova={B[i]:.8g} (scale {np.nanmax(np.abs(A)):.3g})"))
    return bad


def array_source(a):
    a = np.asarray(a)
    return f"np.array({a.tolist()!r}, dtype=np.{a.dtype})"


def program_snippet(inp, code, body=None):
    """A standalone script running ``code`` on ``inp`` with torch and nova; ``body``:
    the lines after ``out = ...`` (default: print the outputs and the gradients of
    ``weighted_loss``)."""
    s = ["import numpy as np, torch, nova as nv", "for L in (torch, nv):", "    " + PRELUDE]
    for k, (a, rg) in inp.items():
        grad = rg and np.asarray(a).dtype.kind in "fc"
        s.append(f"    {k} = L.tensor({array_source(a)}{', requires_grad=True' if grad else ''})")
    s.append(f"    out = {code}")
    if body is None:
        s += ["    print(L.__name__, out)",
              "    g, rv = np.random.default_rng(1), lambda o: L.view_as_real(o) if o.is_complex() else o",
              "    fl = [o for o in (out if isinstance(out, tuple) else [out]) if hasattr(o, 'is_complex')",
              "          and (o.is_floating_point() or o.is_complex())]  # the fuzzer's weights:",
              "    ws = [L.tensor(g.standard_normal(tuple(rv(o).shape))).to(rv(o).dtype) for o in fl]",
              "    loss = sum((rv(o) * w).sum() for o, w in zip(fl, ws) if o.requires_grad)",
              "    if not isinstance(loss, int):",
              "        loss.backward()",
              "        print(" + ", ".join(f"{k}.grad" for k, (a, rg) in inp.items()
                                         if rg and np.asarray(a).dtype.kind in "fc") + ")"]
    else:
        s += ["    " + ln for ln in body]
    return "\n".join(s)


def op_name(code):
    """The first library call of ``code`` (``la.svd``, ``F.elu``...): with the case name
    and the kind of difference, what makes two failures the same failure."""
    import re
    m = re.search(r"\b((?:la|fft|F|L\.special|L)\.\w+)", code)
    return m.group(1) if m else code[:30]


class Reporter:
    """Prints the first failure of each signature in full (with its snippet) and later
    ones in a line, so a run's output lists distinct failures."""

    def __init__(self):
        self.seen = {}

    def report(self, seed, signature, header, details, snippet):
        print("=" * 60)
        if signature in self.seen:
            print(f"SEED {seed} {header}  (same failure as SEED {self.seen[signature]})")
            return
        self.seen[signature] = seed
        print(f"SEED {seed} {header}")
        for d in details:
            print("  ->", d)
        print("  ---- snippet ----")
        print("  " + snippet.replace("\n", "\n  "))


def check_program(cases, seed, filt, reporter, rtol32, rtol64, run=run_program, snippet=program_snippet,
                  nan_ok=False):
    """One seeded case of ``cases`` (restricted to the names in ``filt``): run with torch,
    then nova; "ok", "torch_err" (torch refused it: not judged), "err" (nova raised) or
    "bad". ``opts`` of a case: "grad" (False: forward only), "tolmul" (tolerance factor).
    float64 inputs get ``rtol64``, others ``rtol32``."""
    import random
    r = random.Random(seed)
    rng = np.random.default_rng(seed)
    cs = [c for c in cases if filt is None or c.__name__ in filt]
    c = r.choice(cs)
    got = c(r, rng)
    inp, code = got[0], got[1]
    opts = got[2] if len(got) > 2 else {}
    wide = any(np.asarray(a).dtype in (np.float64, np.complex128) for a, _ in inp.values())
    rtol = (rtol64 if wide else rtol32) * opts.get("tolmul", 1.0)
    grad = opts.get("grad", True)
    try:
        try:
            tr = run(torch, inp, code, grad)
        except Exception:
            if not grad:
                raise
            grad = False                      # torch has no backward here: compare values
            tr = run(torch, inp, code, grad)
    except Exception:
        return "torch_err"
    try:
        nr = run(nv, inp, code, grad)
    except Exception as e:
        reporter.report(seed, (c.__name__, op_name(code), "raise", type(e).__name__),
                        f"{c.__name__}: {code}", [f"nova raised {type(e).__name__}: {str(e)[:300]}"],
                        snippet(inp, code))
        return "err"
    bad = result_differences(tr, nr, rtol, nan_ok=nan_ok)
    if bad:
        reporter.report(seed, (c.__name__, op_name(code), bad[0][0][:2], bad[0][1]),
                        f"{c.__name__}: {code}", [f"{k}: {kind}: {how}" for k, kind, how in bad[:4]],
                        snippet(inp, code))
        return "bad"
    return "ok"


def program_main(cases, rtol32, rtol64, **kw):
    """``python fuzz_x.py START N [name,name...]``: seeds START..START+N-1 (``START 1``
    replays one), restricted to the named case builders."""
    import sys
    filt = sys.argv[3].split(",") if len(sys.argv) > 3 else None
    rep = Reporter()
    return run_seeds(lambda s: check_program(cases, s, filt, rep, rtol32, rtol64, **kw),
                     int(sys.argv[1]), int(sys.argv[2]))

"""torch.special differential fuzzer at extreme points: values and first derivatives.

usage: python fuzz_special.py START N [function,function...]
Each case takes one function of nv.special, a dtype (float64, or float32 one time in
three) and 12 points, mostly from lists of hard points (0, -0, subnormals, poles,
overflow edges, +-inf, NaN, domain ends) and otherwise log-uniform. Where Nova and PyTorch
differ (beyond 1e-11 relative in float64, 1e-4 in float32; gradients 1e-10 and 1e-4) the
exact value from mpmath (40 digits) decides: Nova passes if within 1e-9 (float32: 1e-3)
of it, or no further from it than 3x PyTorch's error; gradients against mpmath's
derivative, 1e-7 (1e-3). Not judged (Nova's accepted deviations): bessel/airy/i0/i1
functions, zeta(x, +inf) and the orthogonal polynomials at +-inf;
gammainc/gammaincc with a > 1e4; digamma's gradient at the poles; points where PyTorch
gives NaN and Nova the right finite value; expm1's gradient below 0 (exp(x));
gammainc/gammaincc's d/dx for a < 0 (0; PyTorch evaluates its density formula) and at
x = 0, a = 1 (1; PyTorch NaN).
Bugs it found, each fixed with a regression test: gammaln/multigammaln's and entr's
gradients at +inf (NaN; 2026-12-07); erfcx's gradient where it overflows (0 or NaN),
digamma's gradient at subnormal x (NaN), polygamma underflowing to 0 for large x where
(n-1)!/x^n is representable (2026-12-08).
"""
import math
import random
import signal
import sys
import numpy as np
import torch
import nova as nv
import mpmath as mp
from common import Reporter, array_source, run_seeds

mp.mp.dps = 40

HARD = [0.0, -0.0, 1e-30, -1e-30, 1e-300, 5e-324, 1e-8, -1e-8, 1e-3, 0.1, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0,
        3.5, 4.999, 5.0, 7.5, 10.0, 20.0, 30.0, 50.0, 88.0, 89.0, 100.0, 500.0, 700.0, 710.0, 750.0, 1e4,
        1e6, 1e10, 1e15, 1e30, 1e300, np.inf, -np.inf, np.nan, -0.1, -0.5, -1.0, -1.0 + 1e-9, -1.0 - 1e-9,
        -1.5, -2.0, -2.0 + 1e-7, -2.5, -3.0, -3.5, -5.0, -10.0, -10.5, -20.0, -30.0, -50.0, -88.0, -100.0,
        -700.0, -1e4, -1e10, -1e30, 0.999, 0.9999999, 1.0000001, 0.25, 0.75, 1e-5, -1e-5, 1e-15, 6.0,
        8.0, 12.0, 15.0, 25.0, 40.0, 60.0, 170.0, 171.7, 172.0]
UNIT = [0.0, -0.0, 1e-30, 1e-10, 1e-5, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999999, 1 - 1e-10, 1.0,
        -1.0, -0.999999, -0.5, -1e-10, 1.0000001, 2.0, -2.0, np.inf, np.nan, 1e-300, 0.3333]
SMALL = [0.0, -0.0, 1e-30, 1e-10, 0.5, 1.0, 1.5, 2.0, 3.0, 10.0, 100.0, 1e4, 1e8, 1e30, np.inf, -1.0,
         -0.5, -2.5, np.nan, 5e-324, 0.1, 25.0, 333.3]
A_GI = [1e-30, 1e-5, 0.1, 0.5, 1.0, 2.0, 10.0, 50.0, 100.0, 1000.0, 1e4, 0.0, -1.0, np.inf, np.nan]
X_GI = [0.0, 1e-30, 1e-5, 0.1, 0.5, 1.0, 2.0, 9.0, 10.0, 11.0, 50.0, 99.0, 100.0, 101.0, 1000.0, 1e4,
        1.01e4, 1e5, 1e30, np.inf, -1.0, np.nan]
ZX = [1.0, 1.0000001, 1.5, 2.0, 3.0, 4.5, 10.0, 50.0, 100.0, 1e4, np.inf, 0.5, 0.0, -1.0, -2.5, np.nan]
ZQ = [1.0, 0.5, 1e-5, 1e-30, 2.0, 10.0, 1e4, 1e10, np.inf, 0.0, -0.5, -1.0, -2.0, -2.5, np.nan, 3.3]
PX = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 0.3, -0.7, 0.999, 1.5, -2.0, 3.0, 10.0, -10.0, 1e3, np.nan, 0.25,
      0.75, 1e-8]                      # (+-inf: Nova's polynomials differ there, accepted)
PN = [0, 1, 2, 3, 4, 5, 6, 7, 10, 13, 16, 19, 20, -1]


def nonpos_int(x):
    return x <= 0 and x == int(x)


def gi(a, x, upper):
    if a == 0 and x == 0:
        return mp.nan
    if a == 0:
        return mp.mpf(0 if upper else 1)
    if x == 0:
        return mp.mpf(1 if upper else 0)
    return mp.gammainc(a, x, mp.inf, regularized=True) if upper else mp.gammainc(a, 0, x, regularized=True)


def xlog1py(x, y):
    if x == 0 and y >= -1:
        return mp.mpf(0)
    return x * mp.log1p(y)


def poly(kind):
    def f(x, n):
        n = int(n)
        if n < 0:
            return mp.mpf(0)
        if kind in ("v", "w", "sv", "sw"):      # the three-term recurrence, exact in mpmath
            y = 2 * x - 1 if kind[0] == "s" else x
            p0, p1 = mp.mpf(1), 2 * y - 1 if kind[-1] == "v" else 2 * y + 1
            for _ in range(n):
                p0, p1 = p1, 2 * y * p1 - p0
            return p0
        return {"t": lambda: mp.chebyt(n, x), "u": lambda: mp.chebyu(n, x), "h": lambda: mp.hermite(n, x),
                "he": lambda: mp.hermite(n, x / mp.sqrt(2)) * mp.mpf(2) ** (-mp.mpf(n) / 2),
                "l": lambda: mp.laguerre(n, 0, x), "p": lambda: mp.legendre(n, x),
                "st": lambda: mp.chebyt(n, 2 * x - 1), "su": lambda: mp.chebyu(n, 2 * x - 1)}[kind]()
    return f


# name -> (call with L, argument names, their point lists, exact function of mpf arguments
#          (None: PyTorch is the reference), names of the differentiable arguments)
FUNCS = {
    "gammaln": ("L.special.gammaln(x)", "x", [HARD], lambda x: mp.inf if nonpos_int(x) else mp.log(abs(mp.gamma(x))), "x"),
    "digamma": ("L.special.digamma(x)", "x", [HARD], lambda x: mp.digamma(x), "x"),
    "erfinv": ("L.special.erfinv(x)", "x", [UNIT], lambda x: mp.erfinv(x), "x"),
    "erfcx": ("L.special.erfcx(x)", "x", [HARD], lambda x: mp.exp(x * x) * mp.erfc(x), "x"),
    "ndtr": ("L.special.ndtr(x)", "x", [HARD], lambda x: mp.ncdf(x), "x"),
    "ndtri": ("L.special.ndtri(x)", "x", [UNIT], lambda p: mp.sqrt(2) * mp.erfinv(2 * p - 1), "x"),
    "log_ndtr": ("L.special.log_ndtr(x)", "x", [HARD], lambda x: mp.log(mp.ncdf(x)), "x"),
    "sinc": ("L.special.sinc(x)", "x", [HARD], lambda x: mp.sinpi(x) / (mp.pi * x) if x else mp.mpf(1), "x"),
    "entr": ("L.special.entr(x)", "x", [HARD], lambda x: -x * mp.log(x) if x > 0 else (0 if x == 0 else -mp.inf), "x"),
    "logit": ("L.special.logit(x)", "x", [UNIT], lambda x: mp.log(x / (1 - x)), "x"),
    "logit_eps": ("L.special.logit(x, 0.1)", "x", [UNIT],
                  lambda x: (lambda c: mp.log(c / (1 - c)))(min(max(x, mp.mpf(0.1)), 1 - mp.mpf(0.1))), "x"),
    "expit": ("L.special.expit(x)", "x", [HARD], lambda x: 1 / (1 + mp.exp(-x)), "x"),
    "exp2": ("L.special.exp2(x)", "x", [HARD], lambda x: mp.power(2, x), "x"),
    "erfc": ("L.special.erfc(x)", "x", [HARD], lambda x: mp.erfc(x), "x"),
    "expm1": ("L.special.expm1(x)", "x", [HARD], lambda x: mp.expm1(x), "x"),
    "log1p": ("L.special.log1p(x)", "x", [HARD], lambda x: mp.log1p(x) if x > -1 else (-mp.inf if x == -1 else mp.nan), "x"),
    "i0e": ("L.special.i0e(x)", "x", [HARD], lambda x: mp.besseli(0, x) * mp.exp(-abs(x)), "x"),
    "i1e": ("L.special.i1e(x)", "x", [HARD], lambda x: mp.besseli(1, x) * mp.exp(-abs(x)), "x"),
    "gammainc": ("L.special.gammainc(a, x)", "ax", [A_GI, X_GI], lambda a, x: gi(a, x, False), "x"),
    "gammaincc": ("L.special.gammaincc(a, x)", "ax", [A_GI, X_GI], lambda a, x: gi(a, x, True), "x"),
    "xlogy": ("L.special.xlogy(x, y)", "xy", [SMALL, SMALL], lambda x, y: mp.mpf(0) if x == 0 else x * mp.log(y), "xy"),
    "xlog1py": ("L.special.xlog1py(x, y)", "xy", [SMALL, SMALL], xlog1py, "xy"),
    "zeta": ("L.special.zeta(x, q)", "xq", [ZX, ZQ], lambda x, q: mp.inf if x == 1 else mp.zeta(x, q), ""),
}
for _n in (1, 2, 3, 5):
    FUNCS[f"polygamma{_n}"] = (f"L.special.polygamma({_n}, x)", "x", [HARD], (lambda n: lambda x: mp.polygamma(n, x))(_n), "x")
for _p in (1, 2, 3, 5):
    FUNCS[f"multigammaln{_p}"] = (
        f"L.special.multigammaln(x, {_p})", "x", [[v for v in HARD if v > (_p - 1) / 2]],
        (lambda p: lambda a: p * (p - 1) / 4 * mp.log(mp.pi) + mp.fsum(mp.log(abs(mp.gamma(a - mp.mpf(j) / 2))) for j in range(p)))(_p), "x")
for _k, _f in [("t", "chebyshev_polynomial_t"), ("u", "chebyshev_polynomial_u"), ("v", "chebyshev_polynomial_v"),
               ("w", "chebyshev_polynomial_w"), ("h", "hermite_polynomial_h"), ("he", "hermite_polynomial_he"),
               ("l", "laguerre_polynomial_l"), ("p", "legendre_polynomial_p"), ("st", "shifted_chebyshev_polynomial_t"),
               ("su", "shifted_chebyshev_polynomial_u"), ("sv", "shifted_chebyshev_polynomial_v"),
               ("sw", "shifted_chebyshev_polynomial_w")]:
    FUNCS[_f] = (f"L.special.{_f}(x, n)", "xn", [PX, PN], poly(_k), "")


def not_judged(name, args, grad):
    """Nova's accepted deviations at a point (see the module's docstring), and bugs found
    by this fuzzer that are not fixed yet"""
    if (name.startswith("polygamma") or name == "digamma" and grad) and args[0] == -math.inf:
        return True     # no limit at -inf: Nova gives SciPy's +-inf (gradient 0), PyTorch NaN
    if grad and name == "digamma" and math.isfinite(args[0]) and args[0] <= 0 and args[0] == int(args[0]):
        return True
    if grad and name == "expm1" and args[0] < 0:
        return True     # Nova's gradient is exp(x), PyTorch's expm1(x) + 1
    if name == "zeta" and args[1] == math.inf:
        return True     # Nova's zeta(x, +inf) is 0, PyTorch's NaN
    if grad and name.startswith("gammainc") and args[0] < 0 and args[1] >= 0:
        return True     # a < 0 (the value NaN): Nova's d/dx 0, PyTorch's its density formula
    if grad and name.startswith("gammainc") and args[1] == 0 and args[0] == 1:
        return True     # d/dx at x = 0, a = 1 is the density e^-0 = 1 (Nova); PyTorch's formula NaN
    if name.startswith("gammainc") and args[0] > 1e4:
        return True
    return False


class Timeout(Exception):
    pass


def exact(f, args, deriv=None):
    """f at args (float) or, with deriv = i, its derivative in argument i; NaN where mpmath
    fails or takes over 20 s (a derivative of lgamma near a pole takes 2-5 s at 360
    digits on a busy 2-core VM: a 3 s limit judged Nova against NaN there)"""
    def on_alarm(*_):
        raise Timeout()
    if f is None or any(math.isnan(v) for v in args):
        return math.nan
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(20)
    try:
        m = [mp.mpf(v) for v in args]
        if deriv is None:
            v = f(*m)
        else:                      # (digits enough for 1 - 1e-300's derivative)
            with mp.workdps(360):
                v = mp.diff(lambda t: f(*(m[:deriv] + [t] + m[deriv + 1:])), m[deriv])
        if isinstance(v, mp.mpc):
            v = v.real if abs(v.imag) <= 1e-30 * abs(v.real) else mp.nan
        return float(v)
    except Exception:
        return math.nan
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def rel(a, b, floor=1e-300):
    """distance of a from b relative to max(|b|, floor); 0 for equal non-finite values,
    inf for unequal ones"""
    if math.isnan(a) and math.isnan(b):
        return 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return 0.0 if a == b else math.inf
    return abs(a - b) / max(abs(b), floor) if a != b else 0.0


def points(r, lists, names):
    cols = []
    for lst, nm in zip(lists, names):
        if nm == "n":
            cols.append([r.choice(lst) for _ in range(12)])
        else:
            cols.append([r.choice(lst) if r.random() < 0.7 else
                         r.choice([-1, 1]) * 10 ** r.uniform(-6, 3) for _ in range(12)])
    return cols


def evaluate(L, code, names, cols, dt, diff):
    ns = {"L": L}
    ts = []
    for nm, c in zip(names, cols):
        t = L.tensor(np.array(c, dtype=np.int64 if nm == "n" else dt))
        if nm in diff:
            t.requires_grad_(True)
        ns[nm] = t
        ts.append(t)
    y = eval(code, ns)
    val = y.detach().numpy().astype(np.float64)
    grads = {}
    if diff and y.requires_grad:
        gs = L.autograd.grad(y.sum(), [ns[nm] for nm in diff], allow_unused=True)
        grads = {nm: None if g is None else g.numpy().astype(np.float64) for nm, g in zip(diff, gs)}
    return str(y.dtype).split(".")[-1], val, grads


def snippet(code, names, cols, dt, diff):
    s = ["import numpy as np, torch, nova as nv", "for L in (torch, nv):"]
    for nm, c in zip(names, cols):
        a = np.array(c, dtype=np.int64 if nm == "n" else dt)
        s.append(f"    {nm} = L.tensor({array_source(a)}{', requires_grad=True' if nm in diff else ''})")
    s.append(f"    y = {code}")
    s.append("    print(L.__name__, y.detach().numpy().tolist())")
    if diff:
        s.append(f"    print(L.autograd.grad(y.sum(), [{', '.join(diff)}], allow_unused=True))")
    return "\n".join(s)


def check(seed, filt, reporter):
    r = random.Random(seed)
    names_ok = [k for k in FUNCS if filt is None or k in filt]
    name = r.choice(names_ok)
    code, names, lists, f, diff = FUNCS[name]
    dt = np.float32 if r.random() < 1 / 3 else np.float64
    f32 = dt == np.float32
    cols = points(r, lists, names)
    cols = [[float(dt(v)) if nm != "n" else v for v in c] for nm, c in zip(names, cols)]
    try:
        td, tv, tg = evaluate(torch, code, names, cols, dt, diff)
    except Exception:
        try:                                    # torch has no gradient here: values only
            diff = ""
            td, tv, tg = evaluate(torch, code, names, cols, dt, diff)
        except Exception:
            return "torch_err"
    try:
        nd, nvv, ng = evaluate(nv, code, names, cols, dt, diff)
    except Exception as e:
        reporter.report(seed, (name, "raise"), f"{name} {dt.__name__}: {code}",
                        [f"nova raised {type(e).__name__}: {str(e)[:200]}"], snippet(code, names, cols, dt, diff))
        return "err"
    bad = []
    if td != nd:
        bad.append(f"dtype: torch {td} nova {nd}")
    rt, tol = (1e-4, 1e-3) if f32 else (1e-11, 1e-9)
    floor = 1.0 if "polynomial" in name else 1e-300    # (polynomials: errors near their roots against 1)
    for i in range(12):
        args = [c[i] for c in cols]
        n, t = nvv[i], tv[i]
        if rel(n, t, floor) <= rt or not_judged(name, args, False):
            continue
        e = exact(f, args)
        if f32:
            e = float(np.float32(e))
        en, et = rel(n, e, floor), rel(t, e, floor)
        if f is not None and (en <= tol or en <= 3 * et + rt):
            continue
        bad.append(f"{name}{tuple(args)}: nova={n!r} torch={t!r} exact={e!r}")
    grt, gtol = (1e-4, 1e-3) if f32 else (1e-10, 1e-7)
    for j, nm in enumerate(names):
        if nm not in diff:
            continue
        a, b = tg.get(nm), ng.get(nm)
        if a is None or b is None:
            if (a is None) != (b is None) and np.any((a if b is None else b) != 0):
                bad.append(f"d/d{nm}: torch {'None' if a is None else 'values'} nova {'None' if b is None else 'values'}")
            continue
        for i in range(12):
            args = [c[i] for c in cols]
            if rel(b[i], a[i]) <= grt or not_judged(name, args, True):
                continue
            e = exact(f, args, j)
            if f32:
                e = float(np.float32(e))
            en, et = rel(b[i], e), rel(a[i], e)
            if math.isnan(a[i]) and (en <= gtol or math.isfinite(b[i]) and math.isinf(args[j])):
                continue                        # PyTorch NaN, Nova right (or finite at an infinite point)
            if math.isnan(b[i]) and any(math.isnan(v) for v in args):
                continue                        # a NaN input's NaN gradient
            if abs(a[i]) < 1e-250 and abs(b[i]) < 1e-250:
                continue                        # both underflowing (mpmath's derivative can't tell)
            if f is not None and not math.isnan(e) and (en <= gtol or en <= 3 * et + grt):
                continue
            bad.append(f"d/d{nm} {name}{tuple(args)}: nova={b[i]!r} torch={a[i]!r} exact={e!r}")
    if bad:
        reporter.report(seed, (name, bad[0].split(" ")[0][:4], dt), f"{name} {dt.__name__}: {code}",
                        bad[:6], snippet(code, names, cols, dt, diff))
        return "bad"
    return "ok"


if __name__ == "__main__":
    filt = sys.argv[3].split(",") if len(sys.argv) > 3 else None
    rep = Reporter()
    run_seeds(lambda s: check(s, filt, rep), int(sys.argv[1]), int(sys.argv[2]))

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

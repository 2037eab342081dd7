"""Aliasing probe: does a result share memory with its inputs exactly when PyTorch's does?

usage: python fuzz_alias.py [--hand|--auto] [--dt f,i,b,c,0,1] [--quick] [--compiled] [--viewin] [--grad] [--list] [filter ...]

``--grad`` makes the float inputs leaves that require grad and runs ``f`` with grad
enabled (actions stay under ``no_grad``, as an optimizer step). ``--viewin`` passes a view of the first input (``x[:]``) instead of the input itself.

Runs on the interpreter engine (fast, no kernel compilation) unless ``--compiled``.

Each case is one expression over small named inputs (``x`` float32 (2, 3), ``xi`` int64,
``xb`` bool, ``xc`` complex64, ``xs`` a 3x3 matrix, ...). The hand table (HAND) holds the
no-op and view-like calls where an implementation is tempted to return its input (``.to``
of the same dtype, ``x + 0``, ``cat`` of one tensor, reductions over a size-1 dim,
``dropout(p=0)``, ``F.pad`` by zero, ``out=``, in-place ops returning self ...); the
automatic table walks ``dir(nv)``, ``dir(nv.Tensor)``, ``nn.functional``, ``linalg``,
``fft`` and ``special``, keeps the names PyTorch also has, and calls each with the first
argument pattern (ARGPATTERNS) PyTorch accepts, once per input dtype of ``--dt``.

Every case runs a few scenarios in PyTorch and in Nova, each with and without its action,
and compares which readouts the action changed (all under ``no_grad``):

  write   ``r = f(x)``, then write into one tensor of the result (``fill_``, an element
          ``setitem``, ``add_``, ``view(-1)[0] =``) and read the inputs (does the write
          reach them: (a)), the other results, a second ``f(x)`` computed before, and
          clones of the inputs and results taken before the write;
  mutate  ``r = f(x)``, then change an input in place (``add_``, ``x[0] = v``, ``copy_``,
          a write through a slice, ``zero_``, ``out=x``, through ``x.detach()``,
          ``x.data = ..``, ``masked_fill_``, ``index_put_``; some with ``r`` read before)
          and read the results: a result that is no view must not see the write, however
          lazily it is computed (c).

A readout that changed in one library but not in the other is printed with a short
standalone Nova snippet; Nova raising on a write PyTorch accepts is REFUSED (b). Left
out: Nova's documented deviations (README "Semantics worth knowing": ``reshape`` and
``flatten`` are always views, ``contiguous()`` copies every view, ``expand`` results
cannot be written in place; ``as_strided`` is no view; ``view_as_real`` of a tensor not
made by ``view_as_complex`` is a copy) -- see ``documented``. Readouts that differ between
two runs without the action (random ops) are not judged; PyTorch's own results with
``out=`` overlapping an input are undefined and are not in the tables.

Bugs it found (2026-12-07), fixed the same day with regression tests
(``tests/tensor/test_results_are_new.py``, ``tests/tensor/test_complex.py``):
identity shortcuts and view-built results of ops that are not views (0-d ``sum max amax
sort msort topk``, ``repeat(())``, ``all(())``, ``diff(n=0)``, ``diag``, ``interpolate``
and ``adaptive_avg_pool*`` to the same size, ``pixel_shuffle``/``pixel_unshuffle``/
``channel_shuffle``); complex results sharing a part with their input (``x.to(complex64)``,
``complex(x, y)``, ``xc + 1``, ``xc.pow(1)``, ``conj_physical``, ``float()``). ``conj()``
is a copy now (documented: PyTorch's is a view).
Still open: ``x.data = t`` re-derives complex views (``xc.real``) from the new value;
``nn.Parameter(x)`` and ``func.vmap(lambda t: t)`` copy where PyTorch shares; returned
self vs alias (``flatten(0, 0)``, ``dropout1d(p=0)``, ``from_dlpack``) shows only through
``x.data = ..`` and ``t_``.
"""
import inspect
import os
import re
import signal
import sys
import warnings
import numpy as np
import torch

# thousands of small distinct steps: a full collection after every compile (Nova's
# default, nova/runtime/cache.py settle_garbage_collector) makes a long run crawl
os.environ.setdefault("NOVA_GC_FREEZE", "0")
import nova as nv  # noqa: E402
from nova.tensor.complex import ComplexTensor

warnings.filterwarnings("ignore")
TENSORS = (torch.Tensor, nv.Tensor, ComplexTensor)

# ----------------------------------------------------------------------------- inputs
INPUTS = {
    "x": (np.float32, [[0.5, -1.25, 2.0], [1.5, 0.25, -0.75]]),
    "y": (np.float32, [[1.0, 0.5, -2.0], [0.75, -1.5, 3.0]]),
    "z": (np.float32, [[-0.5, 2.5, 1.0], [0.125, 1.75, -1.0]]),
    "xo": (np.float32, [[9.0, 9.0, 9.0], [9.0, 9.0, 9.0]]),          # out= buffer
    "x1": (np.float32, [[0.5, -1.25, 2.0]]),                          # (1, 3)
    "xa": (np.float32, [-2.0, -0.5, 0.25, 1.0, 3.0]),                 # sorted
    "x0": (np.float32, 0.75),                                         # 0-d
    "y0": (np.float32, -1.5),
    "z0": (np.float32, 2.25),
    "y1": (np.float32, [[1.0, 0.5, -2.0]]),
    "z1": (np.float32, [[-0.5, 2.5, 1.0]]),
    "x3": (np.float32, (np.arange(24).reshape(2, 3, 4) * 0.5 - 5.75).tolist()),
    "xp": (np.float32, [[0.5, -1.0], [2.0, 1.5], [-0.25, 3.0]]),     # (3, 2)
    "xs": (np.float32, [[4.0, 1.0, 0.5], [1.0, 3.0, 0.25], [0.5, 0.25, 2.0]]),
    "ys": (np.float32, [[1.0, -0.5, 2.0], [0.5, 1.5, -1.0], [2.0, 0.25, 1.0]]),
    "zs": (np.float32, [[2.0, 0.5, 0.0], [0.5, 2.0, 0.5], [0.0, 0.5, 2.0]]),
    "xv": (np.float32, [0.5, -1.0, 2.0, 1.5]),
    "yv": (np.float32, [1.0, 0.25, -0.5, 2.0]),
    "zv": (np.float32, [-1.5, 0.75, 1.25, 0.5]),
    "xd": (np.float64, [[0.5, -1.25, 2.0], [1.5, 0.25, -0.75]]),
    "xh": (np.float16, [[0.5, -1.25, 2.0], [1.5, 0.25, -0.75]]),
    "xi": (np.int64, [[1, 0, 2], [2, 1, 0]]),
    "yi": (np.int64, [[3, 1, 4], [1, 5, 9]]),
    "zi": (np.int64, [[2, 7, 1], [8, 2, 8]]),
    "xi32": (np.int32, [[1, 0, 2], [2, 1, 0]]),
    "idx": (np.int64, [0, 2]),
    "xb": (np.bool_, [[True, False, True], [True, False, True]]),
    "yb": (np.bool_, [[False, True, True], [True, True, False]]),
    "zb": (np.bool_, [[True, True, False], [False, True, True]]),
    "xt": (np.bool_, [[True, True, True], [True, True, True]]),      # all true
    "xc": (np.complex64, [[0.5 + 1j, -1.25 - 0.5j, 2.0 + 0.25j], [1.5 - 1j, 0.25 + 2j, -0.75 + 0j]]),
    "yc": (np.complex64, [[1.0 - 1j, 0.5 + 0.5j, -2.0 + 1j], [0.75 + 0j, -1.5 + 1j, 3.0 - 2j]]),
    "zc": (np.complex64, [[0.25 + 0.5j, 1j, -1.0 - 1j], [2.0 + 0j, 0.5 - 0.5j, 1.0 + 1j]]),
}
_TDT = {np.float32: torch.float32, np.float64: torch.float64, np.float16: torch.float16, np.int64: torch.int64,
        np.int32: torch.int32, np.bool_: torch.bool, np.complex64: torch.complex64}
_NDT = {np.float32: nv.float32, np.float64: nv.float64, np.float16: nv.float16, np.int64: nv.int64,
        np.int32: nv.int32, np.bool_: nv.bool, np.complex64: nv.complex64}
_NDTNAME = {np.float32: "float32", np.float64: "float64", np.float16: "float16", np.int64: "int64",
            np.int32: "int32", np.bool_: "bool", np.complex64: "complex64"}
NAME_RE = re.compile(r"(?<![.\w'\"])(" + "|".join(sorted(INPUTS, key=len, reverse=True)) + r")(?![\w'\"])(?!\s*=[^=])")


def make(L, name):
    dt, val = INPUTS[name]
    a = np.array(val, dtype=dt)
    if L is torch:
        return torch.from_numpy(a.copy())
    return nv.tensor(a.copy())


def used_inputs(expr):
    out = []
    for m in NAME_RE.finditer(expr):
        if m.group(1) not in out:
            out.append(m.group(1))
    return out


def input_source(name):
    dt, val = INPUTS[name]
    return f"{name} = nv.tensor({val!r}, dtype=nv.{_NDTNAME[dt]})"


# ------------------------------------------------------------------------- helpers
def tensors_of(o, path=""):
    """[(path, tensor)] of every tensor in a result (tensor, tuple, list, namedtuple)."""
    if isinstance(o, TENSORS):
        return [(path, o)]
    if isinstance(o, (tuple, list)):
        out = []
        for k, e in enumerate(o):
            out += tensors_of(e, f"{path}[{k}]")
        return out
    return []


def to_np(t):
    if isinstance(t, torch.Tensor):
        t = t.detach()
        if t.is_conj():
            t = t.resolve_conj()
        if t.is_neg():
            t = t.resolve_neg()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.numpy().copy()
    if t.dtype == nv.bfloat16:
        t = t.float()
    return np.array(t.numpy(), copy=True)


def same(a, b):
    if a is None or b is None:
        return a is b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "fc":
        return bool(np.array_equal(a, b, equal_nan=True))
    return bool(np.array_equal(a, b))


def kind_of(t):
    d = str(t.dtype).split(".")[-1]
    if d == "bool":
        return "b"
    if d.startswith("complex"):
        return "c"
    if d.startswith(("int", "uint")):
        return "i"
    return "f"


WRITE_VAL = {"f": "123.0", "i": "123", "b": "True", "c": "(123+0j)"}
ELEM_VAL = {"f": "-77.0", "i": "77", "b": "False", "c": "(-77+1j)"}


def writes_for(k):
    """Ways to write into a result tensor ``R`` of kind k (code using R)."""
    w = [("fill_", f"R.fill_({WRITE_VAL[k]})"),
         ("setitem", f"R[(0,) * R.dim()] = {ELEM_VAL[k]}"),
         ("view_set", f"R.view(-1)[-1] = {ELEM_VAL[k]}")]
    if k != "b":
        w.append(("add_", "R.add_(100)"))
    return w


def mutations_for(k, nd):
    """Ways to change an input ``X`` of kind k in place (code using X, L)."""
    v = ELEM_VAL[k]
    m = []
    m.append(("add_", "X.logical_not_()" if k == "b" else "X.add_(1)"))
    m.append(("setitem", f"X[0] = {v}" if nd else f"X.fill_({v})"))
    m.append(("copy_", "X.copy_(~X.clone())" if k == "b" else "X.copy_(X.clone() * 3 + 1)"))
    if nd:
        m.append(("slice_fill", f"X[..., :1].fill_({v})"))
    m.append(("zero_", "X.zero_()"))
    if k != "b":
        m.append(("out=", "L.add(X, X, out=X)"))
    m.append(("detach_write", f"X.detach().fill_({v})"))
    m.append(("data_write", f"X.data.fill_({v})"))
    m.append(("set_data", f"X.data = L.full_like(X, {v})"))
    if nd:
        m.append(("masked_fill_", f"X.masked_fill_(X == X.reshape(-1)[0], {v})" if k != "c" else f"X.masked_fill_(X.real == X.real.reshape(-1)[0], {v})"))
        m.append(("index_put_", f"X.index_put_((L.tensor([0]),), L.tensor({v}))"))
    if nd == 2:
        m.append(("t_", "X.t_()"))
    m.append(("unsqueeze_", "X.unsqueeze_(0)"))
    if k == "f":
        m.append(("init.constant_", f"L.nn.init.constant_(X, {v})"))
    if nd and k != "b":
        m.append(("setitem_tensor", "X[:] = X * 2 + 1"))
    m.append(("pre_read+add_", "_ = [t.sum() for t in RS] ; _ = [to_np(t) for t in RS]; " + m[0][1]))
    m.append(("pre_read+setitem", "_ = [to_np(t) for t in RS]; " + m[1][1]))
    return m


TIMEOUT = 20  # seconds for one Nova scenario


GRAD = [False]  # --grad: float inputs require grad, f runs with grad enabled


class Timeout(Exception):
    pass


def _alarm(*_):
    raise Timeout()


# --------------------------------------------------------------------- scenarios
def run_scenario(L, expr, action, extras, seed=1234):
    """Run ``r = expr``, optionally ``action``; return dict readout -> ndarray or 'ERR:...'.
    action: None, or (target, code): target 'R:<path>' writes result path, 'X:<name>' an input."""
    F = L.nn.functional
    names = used_inputs(expr)
    ns = {"L": L, "F": F, "to_np": to_np}
    for n in names:
        ns[n] = make(L, n)
    out = {}
    nograd = torch.no_grad if L is torch else nv.no_grad
    if GRAD[0]:
        for n in names:
            if INPUTS[n][0] in (np.float32, np.float64, np.float16) and n != "xo":
                ns[n].requires_grad_()
    with (torch.enable_grad() if L is torch else nv.enable_grad()) if GRAD[0] else nograd():
        L.manual_seed(seed)
        r = eval(expr, ns)
        rs = tensors_of(r)
        ns["r"] = r
        ns["RS"] = [t for _, t in rs]
        if extras:
            L.manual_seed(seed)
            r2 = eval(expr, ns)
            r2s = tensors_of(r2)
            cl_in = {n: ns[n].clone() for n in names if isinstance(ns[n], TENSORS)}
            cl_r = [t.clone() for _, t in rs]
    with nograd():
        err = None
        if action is not None:
            target, code = action
            if target.startswith("R:"):
                path = target[2:]
                ns["R"] = eval("r" + path, ns)
            else:
                ns["X"] = ns[target[2:]]
            try:
                exec(code, ns)
            except Exception as e:  # noqa
                err = f"{type(e).__name__}: {str(e)[:160]}"
        out["__action_error__"] = err
        reads = [(f"in:{n}", ns[n]) for n in names if isinstance(ns[n], TENSORS)]
        reads += [(f"r{p}", t) for p, t in rs]
        if extras:
            reads += [(f"r2{p}", t) for p, t in r2s]
            reads += [(f"clone({n})", t) for n, t in cl_in.items()]
            reads += [(f"clone(r{p})", t) for (p, _), t in zip(rs, cl_r)]
        for key, t in reads:
            try:
                out[key] = to_np(t)
            except Exception as e:  # noqa
                out[key] = f"ERR:{type(e).__name__}: {str(e)[:160]}"
    return out


def torch_eval(expr, names):
    """(the inputs' namespace, PyTorch's result of ``expr``), from fresh inputs."""
    ns = {"L": torch, "F": torch.nn.functional}
    for n in names:
        ns[n] = make(torch, n)
    with torch.no_grad():
        torch.manual_seed(1234)
        return ns, eval(expr, ns)


def torch_aliases(expr, names, ns, r):
    """{result path: bool} whether PyTorch's result ``r`` of ``expr`` (inputs ``ns``)
    shares storage with an input."""
    ptrs = set()
    for n in names:
        try:
            ptrs.add(ns[n].untyped_storage().data_ptr())
        except Exception:  # noqa
            pass
    res = {}
    for p, t in tensors_of(r):
        try:
            res[p] = t.untyped_storage().data_ptr() in ptrs
        except Exception:  # noqa
            res[p] = None
    return res


def changed(base, after):
    return {k for k in base if k != "__action_error__" and k in after and not same(base[k], after[k])}


# ------------------------------------------------------------------ documented
def documented(expr, kind, target, wname, key):
    """Nova's documented deviations (README, Semantics worth knowing)."""
    e = expr.replace(" ", "")
    if re.search(r"\.(reshape|flatten|ravel|view)\(|L\.(reshape|flatten|ravel)\(|nn\.Flatten\(", e) and \
            re.search(r"\.t\(\)|\.T\b|\.mT|\[:,1:\]|\[\.\.\.,|\.transpose|\.permute|\.movedim|\.swap|\[::|::2|\.diagonal", e):
        return "reshape/flatten of a non-contiguous view is a view"
    if ".contiguous(" in e:
        return "contiguous() copies a view / returns a non-view itself"
    if re.search(r"\.expand(_as)?\(|broadcast_to|broadcast_tensors|meshgrid", e) and kind in ("refused", "wrong"):
        return "expand results cannot be written in place"
    if "view_as_real" in e:
        return "view_as_real of a tensor not made by view_as_complex is a copy"
    if "as_strided" in e:
        return "as_strided is not a view"
    if re.search(r"\.conj\(\)|L\.conj\(", e) and "resolve_conj" not in e:
        return "conj() computes a copy (no conjugate bit)"
    if kind == "refused" and wname == "view_set":
        return "(not judged: view(-1) of a non-contiguous result is a view in Nova)"
    return None


# --------------------------------------------------------------------- hand table
HAND = [
    # dtype/device conversions that return self in PyTorch
    "x.to(L.float32)", "x.to(x.dtype)", "x.to(y)", "x.to('cpu')", "x.to('cpu', L.float32)", "x.cpu()",
    "x.to(L.float32, copy=True)", "x.to(L.float64)", "x.to(xd)", "x.float()", "xd.double()", "xi.long()",
    "xi32.int()", "xb.bool()", "xh.half()", "x.double()", "xi.float()", "x.int()", "xi.int()", "xb.long()",
    "x.type(L.float32)", "x.type(L.float64)", "x.type_as(y)", "x.type_as(xd)", "xi.type_as(yi)",
    "xc.to(L.complex64)", "x.to(L.complex64)", "xc.cfloat()", "x.cfloat()",
    "x.to(memory_format=L.contiguous_format)", "x.contiguous(memory_format=L.contiguous_format)",
    # identity-ish
    "x.detach()", "x.data", "x.detach().detach()", "L.detach(x)", "x.requires_grad_(False)", "x.detach_()",
    "L.as_tensor(x)", "L.as_tensor(x, dtype=L.float32)", "L.as_tensor(x, dtype=L.float64)", "L.asarray(x)",
    "L.asarray(x, copy=True)", "L.asarray(x, copy=False)", "L.tensor(x)", "x.new_tensor(x)", "L.clone(x)",
    "x.clone()", "x.clone().detach()", "x.detach().clone()", "L.nn.Parameter(x)",
    "L.nn.Parameter(x, requires_grad=False)", "L.nn.Identity()(x)", "L.nn.Identity()(xi)",
    "x.positive()", "L.positive(x)", "+x", "x.conj()", "L.conj(x)", "xc.conj()", "xc.conj_physical()",
    "x.conj_physical()", "x.resolve_conj()", "x.resolve_neg()", "xc.resolve_conj()", "x.real", "L.real(x)",
    "xc.real", "xc.imag", "L.real(xc)", "L.imag(xc)", "L.view_as_real(xc)", "L.view_as_complex(xp)",
    "L.view_as_complex(L.view_as_real(xc))",
    "x.view(L.int32)", "xi32.view(L.float32)", "x.view(L.float32)",
    # arithmetic no-ops
    "x + 0", "0 + x", "x - 0", "x * 1", "1 * x", "x / 1", "x ** 1", "x.add(0)", "x.sub(0)", "x.mul(1)",
    "x.div(1)", "x.pow(1)", "x.add(y, alpha=0)", "x.abs()", "L.abs(xv.abs())", "xi + 0", "xi * 1", "xb | xb",
    "xb & xt", "x.neg().neg()", "x.nan_to_num()", "x.clamp(-10, 10)", "x.clamp(min=-10)", "x.clamp(max=10)",
    "L.clip(x, -10, 10)", "L.clamp(x, x - 100, x + 100)", "x.clamp(min=L.tensor(-10.0))", "xi.clamp(-10, 10)",
    "L.where(xt, x, y)", "L.where(xb, x, x)", "x.where(xt, 0.0)", "L.where(xt, x, 0.0)", "x.masked_fill(~xt, 0.0)",
    "L.lerp(x, y, 0.0)", "L.addcmul(x, y, z, value=0)", "L.addcdiv(x, y, xs[0].abs() + 1, value=0)",
    "L.maximum(x, x)", "L.fmax(x, x)", "L.minimum(x, x - 1)",
    "x.floor()", "xi.floor()", "xi.ceil()", "xi.round()", "xi.trunc()", "xi.fix()", "xi.sign()", "xb.sign()",
    "xi.abs()", "xb.logical_not().logical_not()", "xi.bitwise_not().bitwise_not()", "L.floor(xi)", "L.round(xi)",
    "L.nan_to_num(xi)", "xi.nan_to_num()", "L.real(xi)", "xi.conj()", "L.sgn(xi)", "L.fix(xi)",
    "x.float().float()", "L.sum(x, dim=())", "x.sum(dim=[])", "x.sum(())", "x.mean(())", "x.amax(())",
    "x.prod(dtype=L.float32)",
    # reductions / scans over a size-1 dim or trivially
    "x1.sum(0)", "x1.sum(0, keepdim=True)", "x1.mean(0)", "x1.mean(0, keepdim=True)", "x1.amax(0)",
    "x1.amin(0, keepdim=True)", "x1.max(0)", "x1.min(0, keepdim=True)", "x1.prod(0)", "x1.cumsum(0)",
    "x1.cumprod(0)", "x1.cummax(0)", "x1.cummin(0)", "x1.logcumsumexp(0)", "x1.sort(0)", "x1.topk(1, 0)",
    "x1.median(0)", "x1.nanmedian(0)", "x1.kthvalue(1, 0)", "x1.mode(0)", "x1.nansum(0)", "x1.nanmean(0)",
    "x1.logsumexp(0)", "x1.argsort(0)", "x1.msort()", "x1.max(0, keepdim=True)", "L.max(x1, 0)",
    "x0.sum()", "x0.mean()", "x0.max()", "x0.cumsum(0)", "x0.sort()", "x0.amax()", "xv.sum(0, keepdim=True).sum(0)",
    "x.cumsum(0)[0]", "L.cumsum(x1, 0)", "L.diff(x, n=0)" ,
    # sort of sorted input, one-element cat/stack
    "xa.sort()", "xa.sort(stable=True)", "L.sort(xa)", "xa.sort(descending=False)", "xa.msort()", "L.msort(xa)",
    "xa.sort().values", "xa.sort()[0]", "xa.topk(5)", "xa.unique()", "L.unique(xa, sorted=True)",
    "L.cat([x])", "L.cat((x,))", "L.cat([x], 1)", "L.concat([x])", "L.concatenate([x])", "L.cat([x, x[:0]])",
    "L.stack([x])", "L.stack([x], 2)", "L.hstack([x])", "L.vstack([x])", "L.dstack([x])", "L.column_stack([x])",
    "L.row_stack([x])", "L.block_diag(x)", "L.cat([xv])", "L.hstack([xv])",
    # shape ops
    "x.expand(2, 3)", "x.expand(-1, -1)", "x1.expand(2, 3)", "x1.expand_as(x)", "x.expand_as(y)",
    "L.broadcast_to(x1, (2, 3))", "L.broadcast_to(x, (2, 3))", "x.broadcast_to((2, 3))",
    "L.broadcast_tensors(x, y)", "L.broadcast_tensors(x1, x)", "L.meshgrid(xv, yv, indexing='ij')",
    "x.repeat_interleave(1)", "x.repeat_interleave(1, 0)", "L.repeat_interleave(x, 1, dim=1)", "x.repeat(1, 1)",
    "x.repeat(1, 1, 1)", "x.tile((1, 1))", "L.tile(x, (1,))", "x.tile((1, 1, 1))",
    "L.atleast_1d(x)", "L.atleast_2d(x)", "L.atleast_3d(x)", "L.atleast_1d(x0)", "L.atleast_2d(xv)",
    "L.atleast_3d(xv)", "L.atleast_1d(x, y)", "L.atleast_2d(x0)",
    "x.squeeze()", "x1.squeeze()", "x1.squeeze(0)", "x.squeeze(0)", "x.squeeze(-1)", "L.squeeze(x1)",
    "x.unsqueeze(0)", "x.unsqueeze(-1)", "L.unsqueeze(x, 1)", "x.movedim(0, 1)", "x.movedim(0, 0)",
    "L.movedim(x3, (0, 1), (1, 0))", "x.moveaxis(1, 0)", "x.swapaxes(0, 1)", "x.swapdims(0, 1)",
    "x.transpose(0, 1)", "x.transpose(0, 0)", "x.permute(0, 1)", "x.permute(1, 0)", "L.permute(x3, (2, 0, 1))",
    "x.unflatten(1, (3, 1))", "x.unflatten(0, (1, 2))", "L.unflatten(x, 1, (1, 3))",
    "x.unbind(0)", "x.unbind(1)", "L.unbind(x)", "x.split(1)", "x.split([1, 2], 1)", "x.split(5)",
    "L.split(x, 1)", "x.chunk(2)", "x.chunk(1)", "L.chunk(x, 3, 1)", "x.tensor_split(2)",
    "x.tensor_split([1], 1)", "L.tensor_split(x, 1)", "xv.hsplit(2)", "x.hsplit(3)", "x.vsplit(2)",
    "x3.dsplit(2)", "L.hsplit(x, [1])", "x.unsafe_split(1)", "x.unsafe_chunk(2)",
    "x.diagonal()", "xs.diagonal()", "xs.diagonal(1)", "L.diagonal(x3, 0, 1, 2)", "xs.diag()", "L.diag(xs)",
    "L.diag_embed(xv)", "L.diagflat(xv)", "x.narrow(1, 0, 2)", "x.narrow(1, 0, 3)", "L.narrow(x, 0, 1, 1)",
    "x.select(0, 1)", "L.select(x, 1, 0)", "x[0]", "x[1:]", "x[:, 1:]", "x[..., None]", "x[None]",
    "x[:]", "x[...]", "x[:, ::2]", "x[[0, 1]]", "x[xb]", "x[idx[:1]]", "x[:, idx]", "x[0, 0]", "x[-1, ...]",
    "x.T", "x.mT", "x.H", "x.mH", "xc.H", "xc.mH", "xc.T", "x.t()", "xv.t()", "xv.T", "x0.t()",
    "L.t(x)", "L.adjoint(xc)", "x.adjoint()",
    "xv.unfold(0, 2, 1)", "xv.unfold(0, 2, 2)", "x.unfold(1, 3, 1)", "x.unfold(0, 1, 1)",
    "x.view(-1)", "x.view(3, 2)", "x.view(2, 3)", "x.view_as(y)", "x.view_as(x)", "x.reshape(-1)",
    "x.reshape(2, 3)", "x.reshape_as(y)", "L.reshape(x, (3, 2))", "x.flatten()", "x.flatten(0, 0)",
    "x3.flatten(1)", "L.flatten(x)", "x.ravel()", "L.ravel(x)", "xv.flatten()", "x0.flatten()",
    "x.t().reshape(-1)", "x[:, 1:].flatten()", "x.t().contiguous()", "x[1:].contiguous()", "x.contiguous()",
    "x.t().t()", "x.unsqueeze(0).squeeze(0)", "x.view(-1).view(2, 3)", "x.detach().t()", "x[0][1:]",
    "x.as_strided((3,), (1,))", "x.as_strided((2, 3), (3, 1))", "x.view(1, 2, 3).squeeze(0)",
    "x.flip(0)", "L.flip(x, (0, 1))", "x.fliplr()", "x.flipud()", "x.roll(0)",
    "x.roll(3, 1)", "x.rot90(0)", "x.rot90(4)", "x.rot90(1)", "x.triu()", "x.tril(5)", "x.triu(-5)",
    "L.einsum('ij->ij', x)", "L.einsum('ij->ji', x)", "L.einsum('ii->i', xs)", "L.einsum('ij', x)",
    "L.einsum('...->...', x)", "x.index_select(0, idx[:1] * 0 + 1)", "L.take(x, L.arange(6))",
    "L.gather(x, 1, xi)", "L.take_along_dim(x, xi, 1)", "x.masked_select(xt)", "L.nonzero(xb)",
    "x.index_fill(0, idx[:0], 5.0)", "x.index_add(0, idx[:0], x[:0])", "x.scatter(0, xi[:0], x[:0])",
    "x.index_put((idx[:0],), L.tensor(5.0))", "x.masked_scatter(~xt, y)", "L.select_scatter(x, y[0], 0, 0)",
    "L.slice_scatter(x, y, 0)", "L.diagonal_scatter(xs, xs.diagonal())",
    # functional / modules
    "F.dropout(x, p=0.0)", "F.dropout(x, p=0.0, training=False)", "F.dropout(x, 0.5, training=False)",
    "F.dropout(x, 0.0, True, True)", "F.alpha_dropout(x, 0.0)", "F.dropout1d(x, 0.0)", "F.dropout2d(x3, 0.0)",
    "F.feature_alpha_dropout(x3, 0.0)", "F.alpha_dropout(x, 0.5, training=False)",
    "F.pad(x, (0, 0))", "F.pad(x, (0, 0, 0, 0))", "F.pad(x, (0, 0), value=1.0)", "F.pad(x, (0, 0), mode='constant')",
    "F.pad(x[None], (0, 0), mode='reflect')", "F.pad(x[None], (0, 0), mode='replicate')",
    "F.pad(x[None], (0, 0), mode='circular')", "F.pad(x, (1, 1))",
    "L.nn.Flatten()(x)", "L.nn.Flatten(0)(x)", "L.nn.Flatten()(x3)", "L.nn.Unflatten(1, (3, 1))(x)",
    "L.nn.Dropout(0.0)(x)", "L.nn.Dropout(0.5).eval()(x)", "L.nn.Dropout(0.0).eval()(x)", "L.nn.ZeroPad2d(0)(x3)",
    "L.nn.ConstantPad1d(0, 1.0)(x)", "L.nn.Identity(3)(x)", "L.nn.Sequential()(x)",
    "L.nn.Sequential(L.nn.Identity(), L.nn.Flatten(0))(x)", "L.nn.ReLU(inplace=True)(x)", "F.relu_(x)",
    "F.relu(x, inplace=True)", "F.threshold(x, -10.0, 0.0, inplace=True)", "F.hardtanh(x, inplace=True)",
    "F.leaky_relu(x, inplace=True)", "F.elu(x, inplace=True)", "F.relu6(x, inplace=True)",
    "F.selu(x, inplace=True)", "F.celu(x, inplace=True)", "F.rrelu(x, training=False, inplace=True)",
    "F.silu(x, inplace=True)", "F.hardswish(x, inplace=True)", "F.hardsigmoid(x, inplace=True)",
    "F.mish(x, inplace=True)", "F.relu(x.abs())", "F.hardtanh(x, -10.0, 10.0)", "F.threshold(x, -10.0, 0.0)",
    "F.interpolate(x[None], scale_factor=1.0)", "F.interpolate(x[None], size=3)",
    "F.adaptive_avg_pool1d(x, 3)", "F.adaptive_max_pool1d(x, 3)", "F.avg_pool1d(x, 1)", "F.max_pool1d(x, 1)",
    "F.pixel_shuffle(x3[None], 1)", "F.pixel_unshuffle(x3[None], 1)", "F.channel_shuffle(x3[None], 1)",
    "F.normalize(x, p=2.0, dim=0)", "F.linear(x, L.eye(3))", "F.embedding(xi, xs)", "F.one_hot(xi, 3)",
    "F.unfold(x3[None], 1)", "F.glu(L.cat([x, x], 1))",
    # in-place ops and out=
    "x.add_(0)", "x.add_(1)", "x.mul_(1)", "x.zero_()", "x.copy_(y)", "x.copy_(x)", "x.fill_(1)",
    "x.clamp_(min=-10)", "x.clamp_(-1, 1)", "x.t_()", "x.unsqueeze_(0)", "x1.squeeze_()", "x.transpose_(0, 1)",
    "x.abs_()", "x.sin_()", "x.masked_fill_(xb, 0.0)", "x.index_fill_(0, idx[:1], 5.0)", "x.scatter_(0, xi[:1], 1.0)",
    "x.index_put_((idx[:1],), L.tensor(5.0))", "x.nan_to_num_()", "x.where(xb, y)", "x.lerp_(y, 0.5)",
    "x.addcmul_(y, z)", "x.uniform_()", "x.normal_()", "x.exponential_()", "x.random_(0, 5)",
    "x.bernoulli_(0.5)", "x.requires_grad_(False).add_(1)", "x.resize_(2, 3)", "x.resize_as_(y)",
    "x.set_(y)", "x.swapaxes_(0, 1)", "x.squeeze_(0)", "x.as_strided_((3,), (1,))",
    "L.add(x, y, out=xo)", "L.sin(x, out=xo)", "L.add(x, 1, out=x)", "L.mul(x, 2, out=x)",
    "L.clamp(x, -1, 1, out=xo)", "L.where(xb, x, y, out=xo)", "L.matmul(xs, ys, out=zs)",
    "L.sum(x, 0, out=xo[0])", "L.add(x, y, out=xo[:, :])", "L.cat([x[:1], y[1:]], out=xo)",
    "L.stack([x[0], y[0]], out=xo)", "L.abs(x, out=xo.t().t())", "L.neg(x, out=x)", "L.sort(xv, out=(yv, idx.repeat(2)))",
    "L.max(x, 0, out=(xo[0], idx.repeat(2)[:3]))", "L.cumsum(x, 1, out=xo)", "L.mm(xs, ys, out=zs)",
    "L.linalg.inv(xs, out=ys)", "L.fft.fft(xc, out=yc)", "L.special.expit(x, out=xo)", "L.index_select(x, 0, idx[:1], out=xo[:1])",
    "L.masked_select(x, xb, out=xv)", "L.argmax(x, 1, out=idx)", "L.add(x, y, out=y)",
    # linalg / misc
    "L.linalg.matrix_power(xs, 1)", "L.matrix_power(xs, 1)", "L.linalg.matrix_power(xs, 0)", "xs @ L.eye(3)",
    "L.linalg.multi_dot([xs])", "L.linalg.multi_dot([xs, ys])", "L.chain_matmul(xs)", "L.kron(x, L.ones(1, 1))",
    "L.linalg.diagonal(xs)", "L.linalg.vecdot(x, y)", "L.linalg.matrix_exp(xs * 0)", "L.linalg.solve(L.eye(3), xs)",
    "L.fft.fftshift(x1, 0)", "L.fft.ifftshift(x1, 0)", "L.fft.fft(xc, n=3)",
    "L.result_type(x, y) and x",
    "L.broadcast_tensors(x)", "L.cartesian_prod(xv)", "L.combinations(xv, 1)",
    "L.tensordot(x, L.tensor(1.0), 0)", "L.outer(x1[0], L.ones(1))", "L.trapezoid(x1, dim=0)",
    "L.vander(xv, 1)", "L.tril_indices(2, 2)", "L.cov(x1)", "L.histc(xv, 2)",
]
HAND += [
    # more candidates for an identity shortcut (parameters that make the op a no-op)
    "x1.flip(0)", "x1.roll(1, 0)", "x1.roll(5)" , "x.roll(6)", "x1.rot90(2, (0, 0 + 1))", "x1.fliplr()" ,
    "x1.flipud()", "xa[:1].sort()[0]", "x1.repeat_interleave(1, 0)", "L.narrow_copy(x, 1, 0, 3)",
    "x.index_select(1, L.arange(3))", "x[:, L.arange(3)]", "x[L.tensor([True, True])]", "x.gather(1, L.arange(3).expand(2, 3))",
    "L.take_along_dim(x, L.arange(3)[None], 1)", "x.masked_select(xt).view(2, 3)",
    "F.interpolate(x3[None], size=(3, 4), mode='bilinear')", "F.interpolate(x3[None], size=(3, 4))",
    "F.interpolate(x[None], size=3, mode='linear')", "F.interpolate(x[None], scale_factor=1.0, mode='linear')",
    "F.interpolate(x3[None], scale_factor=1.0, mode='bicubic')", "F.interpolate(x3[None], size=(3, 4), mode='area')",
    "F.interpolate(x3[None], size=(3, 4), mode='nearest-exact')", "F.upsample(x[None], size=3)",
    "L.nn.Upsample(size=3)(x[None])", "F.adaptive_avg_pool2d(x3, (3, 4))", "F.adaptive_max_pool2d(x3, (3, 4))",
    "F.adaptive_avg_pool3d(x3[None], (2, 3, 4))", "F.avg_pool2d(x3, 1)", "F.max_pool2d(x3, 1)",
    "F.lp_pool1d(x, 1.0, 1)", "F.adaptive_avg_pool1d(x[None], 3)", "L.nn.AdaptiveAvgPool1d(3)(x)",
    "L.nn.PixelShuffle(1)(x3[None])", "F.pixel_shuffle(x3, 1)", "L.nn.ChannelShuffle(1)(x3[None])",
    "F.grid_sample(x3[None], L.zeros(1, 1, 1, 2))", "F.affine_grid(L.eye(2, 3)[None], [1, 1, 2, 3], align_corners=False)",
    "L.fft.fftshift(xv, 0)[:0]", "L.fft.fftshift(x1, 0)", "L.fft.ifftshift(x1, 0)",
    "L.complex(x, y)", "L.complex(x, L.zeros_like(x))", "L.polar(x.abs(), L.zeros_like(x))", "x.type(L.complex64)",
    "x + 0j", "x * 1j", "xi.to(L.complex64)", "xd.to(L.complex128)", "x.to(L.complex128)", "xc.to(L.complex128)",
    "xc.to(L.complex64, copy=True)", "xc.cdouble()", "xc.conj().conj()", "xc.conj_physical().conj()",
    "L.conj_physical(xc)", "L.resolve_conj(xc.conj())", "L.resolve_neg(xc)", "xc.clone()", "xc.detach()",
    "xc.view_as(yc)", "xc.reshape(-1)", "xc.t()", "xc[0]", "xc.flatten()", "xc.squeeze()", "xc.unsqueeze(0)",
    "xc.expand(2, 3)", "xc.permute(1, 0)", "xc.abs()", "xc.angle()", "xc * 1", "xc + 0", "L.cat([xc])",
    "L.stack([xc])", "xc.sum(())", "xc.sum(0)", "xc.diagonal()", "xc.split(1)", "xc.unbind(0)", "xc.narrow(1, 0, 2)",
    "L.view_as_complex(xp)", "L.view_as_complex(xp).real", "L.view_as_complex(xp).conj()",
    "L.view_as_complex(xp).imag", "xc.real.t()", "xc.imag[0]", "xc.real * 1", "xc.real.clone()",
    "x0.prod()", "x0.min()", "x0.median()", "x0.nanmedian()", "x0.argmax()", "x0.logsumexp(0)", "x0.mode()",
    "x0.cumprod(0)", "x0.cummax(0)", "x0.std()", "x0.norm()", "x0.abs()", "x0.mean(0)", "x0.sum(0)", "x0.sum(0, True)",
    "x0.amin(0)", "x0.topk(1)", "x0.kthvalue(1)", "x0.max(0)", "x0.unique()", "x0.flip(0)", "x0.roll(1)",
    "x0.squeeze()", "x0.reshape(())", "x0.expand(())", "x0.repeat(())", "x0.tile(())", "L.atleast_1d(x0)[0]",
    "x0.clamp(-10, 10)", "x0.nansum()", "x0.nanmean()", "xs[:1, :1].trace()",
    "x1.sum((0,))", "x1.sum(-2)", "x1.var(0, correction=0)", "x1.norm(dim=0)", "x1.all(0)", "x1.any(0)",
    "xb[:1].all(0)", "xb[:1].any(0)", "xb.all(())" , "xi[:1].sum(0)", "xi[:1].max(0)", "xi[:1].amax(0)",
    "xi[:1].cumsum(0)", "xi[:1].prod(0)", "xb[:1].sum(0)", "x1.count_nonzero(0)", "x1.mean(0, dtype=L.float32)",
    "x1.sum(0, dtype=L.float32)", "x1.softmax(0)", "x1.log_softmax(0)", "x1.cumsum(0, dtype=L.float32)",
    "L.linalg.vector_norm(x0)", "L.linalg.norm(x1, dim=0)", "x1.logcumsumexp(0)", "x1.aminmax(dim=0)",
    "L.std_mean(x1, 0)", "L.var_mean(x1, 0)", "x1.nanquantile(0.5, 0)", "x1.quantile(0.5, 0)",
    "L.linalg.inv(L.eye(3))", "L.eye(3) @ xs", "L.matmul(xs, L.eye(3))", "L.linalg.pinv(L.eye(3))",
    "L.einsum('ij,jk->ik', xs, L.eye(3))", "L.tensordot(x, L.tensor(1.0), 0)", "L.trace(xs[:1, :1])",
    "xs.triu().tril()", "L.linalg.cholesky(L.eye(3))", "L.linalg.qr(L.eye(3))", "L.linalg.eigh(L.eye(3))",
    "L.linalg.svd(L.eye(3))", "L.linalg.lu_factor(L.eye(3))", "L.linalg.solve_triangular(L.eye(3), xs, upper=True)",
    "L.cholesky_solve(xs, L.eye(3))", "L.linalg.matrix_exp(L.zeros(3, 3))", "L.linalg.det(xs[:1, :1])",
    "L.bucketize(xa, xa)", "L.searchsorted(xa, xa)", "L.histc(xa, 5, -2.0, 3.0)", "L.bincount(idx)",
    "L.unique_consecutive(xa)", "L.unique(xa, return_inverse=True)", "L.nonzero(xt)", "L.argwhere(xt)",
    "x.masked_fill(xb, 0.0).masked_fill(xb, 0.0)", "L.where(xt)", "x.new_tensor(x.tolist())",
    "L.nn.utils.parameters_to_vector([x])", "L.nn.utils.parameters_to_vector([xv])",
    "L.cdist(xv[None], xv[None])", "L.nn.functional.embedding(idx, xs)", "F.one_hot(idx, 3).float()",
    "L.nn.functional.normalize(x0[None], dim=0)", "F.layer_norm(x, (3,))", "L.nn.LayerNorm(3, elementwise_affine=False)(x)",
    "F.softmax(x1, 0)", "F.log_softmax(x1, 0)",
    "L.nn.utils.rnn.pad_sequence([x])", "L.nn.utils.rnn.pad_sequence([xv, yv])",
    "L.func.vmap(lambda t: t)(x)", "L.func.vmap(lambda t: t * 1)(x)", "L.func.vmap(lambda t: t.t())(x3)",
    "L.func.vmap(lambda t: t[0])(x)",
]
HAND = [h for h in HAND if h]

# ------------------------------------------------------------------ auto table
SKIP = re.compile(
    r"^(set_|use_|is_|get_|_|are_|can_cast|promote_types|result_type|compile|vmap|jit|export|save|load|seed|"
    r"manual_seed|initial_seed|from_file|from_numpy|frombuffer|empty_strided|autocast|cuda|mps|xpu|backward|"
    r"register|share_memory|pin_memory|record_stream|data_ptr|numpy|tolist|item$|apply_|map_|map2_|dim_order|"
    r"element_size|nbytes|itemsize|retain|storage|untyped_storage|typename|sym_|wait|print|dim$|ndimension|"
    r"numel|nelement|size$|stride|storage_offset|type$|to_sparse|to_dense|sparse|coalesce|indices|values$|"
    r"crow|col|ccol|row_indices|q_|int_repr|dequantize|quantize|fake_quantize|resize|module_load|"
    r"new_empty|empty|normal$|rand|bernoulli$|multinomial|poisson|dropout|fork|lobpcg|pca_lowrank|svd_lowrank|"
    r"nested|align|rename|refine_names|unflatten_dense|is_|has_|device|get_device|nonzero_static|"
    r"stft|istft|cudnn|mkldnn|miopen|fbgemm|native_|batch_norm_|quantized|tensorboard|detect_anomaly|"
    r"set_|hook|grad$|requires_grad$|names|layout|dtype|shape|ndim|output_nr|_version|is_leaf|"
    r"as_subclass|smm|sspaddmm|hspmm|lu_unpack|unique_consecutive$|data$|T$|mT$|H$|mH$|real$|imag$)")

SETS = {"f": ("x", "y", "z"), "s": ("xs", "ys", "zs"), "v": ("xv", "yv", "zv"), "i": ("xi", "yi", "zi"),
        "b": ("xb", "yb", "zb"), "c": ("xc", "yc", "zc"), "0": ("x0", "y0", "z0"), "1": ("x1", "y1", "z1")}
ARGPATTERNS = ["{x}", "{x}, 1", "{x}, 0", "{x}, {y}", "{x}, {y}, {z}", "{x}, -1", "{x}, 2", "{x}, 0.5",
               "[{x}, {y}]", "{x}, dim=0", "{x}, 1, 0", "{x}, 0, 1", "{x}, {y}, 0.5", "{x}, [0]",
               "{x}, {x}.abs() + 1", "{x}, 1, 2", "{x}, 'fro'", "{x}, (1, 1)", "{x}, 2, 1", "{x}, 3"]
# the order in which input sets are tried for each dtype kind of --dt
KIND_SETS = {"f": ["f", "s", "v"], "i": ["i"], "b": ["b"], "c": ["c"], "0": ["0"], "1": ["1"]}


def module_walk():
    """[(prefix, nova_obj, torch_obj)] of the namespaces walked."""
    return [("L.", nv, torch), ("F.", nv.nn.functional, torch.nn.functional), ("L.linalg.", nv.linalg, torch.linalg),
            ("L.fft.", nv.fft, torch.fft), ("L.special.", nv.special, torch.special)]


def auto_exprs(kinds, quiet=True):
    """Expressions (one per callable and dtype kind) that PyTorch accepts."""
    out = []
    names_total = 0
    groups = []
    for prefix, nmod, tmod in module_walk():
        names = sorted(n for n in dir(nmod) if not n.startswith("_") and hasattr(tmod, n))
        for n in names:
            to = getattr(tmod, n)
            if not callable(to) or inspect.isclass(to) or inspect.ismodule(to) or SKIP.match(n):
                continue
            groups.append((prefix, n))
    tnames = sorted(n for n in dir(nv.Tensor) if not n.startswith("_") and hasattr(torch.Tensor, n))
    for n in tnames:
        to = getattr(torch.Tensor, n)
        if not callable(to) or SKIP.match(n):
            continue
        groups.append(("x.", n))
    for prefix, n in groups:
        names_total += 1
        for kind in kinds:
            found = None
            for s in KIND_SETS[kind]:
                x, y, z = SETS[s]
                for pat in ARGPATTERNS:
                    args = pat.format(x=x, y=y, z=z)
                    if prefix == "x.":
                        a = args.split(", ", 1)
                        if a[0] != x:
                            continue
                        expr = f"{x}.{n}({a[1] if len(a) > 1 else ''})"
                    else:
                        expr = f"{prefix}{n}({args})"
                    try:
                        signal.alarm(10)
                        ns = {"L": torch, "F": torch.nn.functional}
                        for k in used_inputs(expr):
                            ns[k] = make(torch, k)
                        with torch.no_grad():
                            r = eval(expr, ns)
                        signal.alarm(0)
                    except BaseException:  # noqa
                        signal.alarm(0)
                        continue
                    if tensors_of(r):
                        found = expr
                        break
                if found:
                    break
            if found and found not in out:
                out.append(found)
    return out, names_total


def view_input(expr):
    """The expression with its first input replaced by a view of it (``x[:]``), so that
    mutations of ``x`` reach the op's input through a view."""
    m = NAME_RE.search(expr)
    if not m:
        return None
    n = m.group(1)
    sub = "[...]" if np.array(INPUTS[n][1]).ndim == 0 else "[:]"
    return expr[:m.end()] + sub + expr[m.end():]


# ------------------------------------------------------------------------ checking
def snippet(expr, target, code, key, tchg, nchg, pre=None):
    names = used_inputs(expr)
    lines = ["import nova as nv; " + "; ".join(input_source(n) for n in names)]
    if target.startswith("R:"):
        path = target[2:]
        c = code.replace("R", "r" + path)
    else:
        c = code.replace("X", target[2:]).replace("RS", "[r]").replace("L.", "nv.")
    e = expr.replace("L.", "nv.").replace("F.", "nv.nn.functional.")
    pre_line = ""
    if key.startswith("r2"):
        pre_line = f"; r2 = {e}"
    elif key.startswith("clone("):
        pre_line = f"; c = {key[6:-1] if not key.startswith('clone(r') else 'r' + key[7:-1]}.clone()"
    c = c.replace('to_np(t)', 't.numpy()')
    if GRAD[0]:
        req = [n for n in names if INPUTS[n][0] in (np.float32, np.float64, np.float16) and n != "xo"]
        lines[0] += "".join(f"; {n}.requires_grad_()" for n in req)
        lines.append(f"r = {e}{pre_line}\nwith nv.no_grad(): {c}")
    else:
        lines.append(f"with nv.no_grad(): r = {e}{pre_line}; {c}")
    what = {"in": key[3:], "r2": "r2" + key[2:]}.get(key.split(":")[0] if key.startswith("in:") else key[:2], None)
    if key.startswith("in:"):
        what = key[3:]
    elif key.startswith("r2"):
        what = "r2" + key[2:]
    elif key.startswith("clone("):
        what = "c"
    else:
        what = key
    lines.append(f"print({what})  # torch: {'changed' if tchg else 'unchanged'}; nova: {'changed' if nchg else 'unchanged'}")
    return "\n".join(lines)


class Report:
    """Findings grouped by (group, expression): the first snippet and every action/readout seen."""

    def __init__(self):
        self.items = {}
        self.doc = {}
        self.info = {}

    def add(self, group, key, text, table=None, tag=None):
        table = self.items if table is None else table
        d = table.setdefault(group, {})
        if key not in d:
            d[key] = [text, []]
        if tag and tag not in d[key][1]:
            d[key][1].append(tag)


def check_case(expr, rep, quick=False, verbose=False):
    """Run every scenario of one expression; add findings to rep."""
    names = used_inputs(expr)
    # baselines, with and without the extras (twice: readouts that differ between them are random)
    TB, NB, UNSTABLE = {}, {}, {}
    for ex in (False, True):
        try:
            tb = run_scenario(torch, expr, None, ex)
            tb2 = run_scenario(torch, expr, None, ex)
        except Exception:  # noqa
            return "torch_raise"
        try:
            signal.alarm(TIMEOUT)
            nb = run_scenario(nv, expr, None, ex)
            nb2 = run_scenario(nv, expr, None, ex)
            signal.alarm(0)
        except Timeout:
            rep.add("timeout", expr, f"{expr}: nova baseline took over {TIMEOUT} s", rep.info)
            return "timeout"
        except Exception as e:  # noqa
            signal.alarm(0)
            rep.add("nova-raise", expr, f"{expr}: nova raised {type(e).__name__}: {str(e)[:200]}", rep.info)
            return "nova_raise"
        for k, v in nb.items():
            if isinstance(v, str) and v.startswith("ERR:"):
                rep.add("nova-raise", expr, f"{expr}: nova read {k}: {v}", rep.info)
                return "nova_raise"
        UNSTABLE[ex] = {k for k in tb if not same(tb[k], tb2.get(k))} | {k for k in nb if not same(nb[k], nb2.get(k))}
        if set(tb) != set(nb):
            rep.add("structure", expr, f"{expr}: readouts differ torch {sorted(tb)} nova {sorted(nb)}", rep.info)
            return "structure"
        TB[ex], NB[ex] = tb, nb
    ns, tr = torch_eval(expr, names)
    tpaths = [(p, kind_of(t), t.dim()) for p, t in tensors_of(tr)]
    talias = torch_aliases(expr, names, ns, tr)
    actions = []
    for p, k, nd in tpaths[:4]:
        for wname, code in writes_for(k):
            actions.append(("write", f"R:{p}", wname, code, True))
    for n in names:
        dt = INPUTS[n][0]
        k = {np.bool_: "b", np.complex64: "c", np.int64: "i", np.int32: "i"}.get(dt, "f")
        nd = np.array(INPUTS[n][1]).ndim
        muts = mutations_for(k, nd)
        if quick:
            muts = muts[:3]
        for mname, code in muts:
            actions.append(("mutate", f"X:{n}", mname, code, mname in ("add_", "setitem")))
    for fam, target, aname, code, extras in actions:
        for ex in ((False, True) if extras else (False,)):
            try:
                ta = run_scenario(torch, expr, (target, code), ex)
            except Exception:  # noqa
                continue
            try:
                signal.alarm(TIMEOUT)
                na = run_scenario(nv, expr, (target, code), ex)
                signal.alarm(0)
            except Timeout:
                rep.add("timeout", expr, f"{expr}: {target} {aname} timed out", rep.info)
                return "timeout"
            except Exception as e:  # noqa
                signal.alarm(0)
                rep.add("ERROR: Nova raises outside the action", expr, f"{expr}: {target} {aname}: {type(e).__name__}: {str(e)[:200]}", None, f"{target}.{aname}{'+x' if ex else ''}")
                continue
            te, ne = ta["__action_error__"], na["__action_error__"]
            if te is not None:
                if ne is None and verbose:
                    rep.add("torch-refuses", (expr, aname), f"{expr}: {target} {aname}: torch {te}; nova accepts", rep.info)
                continue
            if ne is not None:
                alias = talias.get(target[2:]) if fam == "write" else None
                doc = documented(expr, "refused", target, aname, "")
                text = (f"{expr}: {aname} into {'r' + target[2:] if fam == 'write' else target[2:]} raises in Nova "
                        f"({ne}); torch accepts (torch result aliases input: {alias})")
                if doc:
                    rep.add(doc, expr, text, rep.doc, aname)
                elif fam == "write":
                    rep.add("REFUSED(b): Nova raises on a write into a result torch accepts", expr, text, None, aname)
                else:
                    rep.add("refused mutation of an input (not an aliasing question)", (target, aname), f"{target[2:]}: {aname}: {ne}", rep.info)
                continue
            for k, v in na.items():
                if isinstance(v, str) and v.startswith("ERR:") and not (isinstance(ta.get(k), str)):
                    rep.add("ERROR: reading a result after the action raises in Nova", expr, f"{expr}: after {aname} on {target}, reading {k}: {v}", None, f"{target}.{aname}{'+x' if ex else ''}->{k}")
            tch = changed(TB[ex], ta) - UNSTABLE[ex]
            nch = changed(NB[ex], na) - UNSTABLE[ex]
            for key in sorted(tch ^ nch):
                if isinstance(na.get(key), str):
                    continue
                t_c, n_c = key in tch, key in nch
                if fam == "write":
                    if key.startswith("in:"):
                        grp = "WRONG(a): write into result reaches input" if n_c else "WRONG(a): torch aliases, Nova's write does not reach input"
                    elif key.startswith("clone(") or key.startswith("r2"):
                        grp = "WRONG(c'): write into result changes an earlier result/clone" if n_c else "WRONG(c'): earlier result misses a write torch shows"
                    else:
                        grp = "WRONG(a): write into one result changes another" if n_c else "WRONG(a): write into one result misses another (torch shares)"
                else:
                    if key.startswith("in:"):
                        grp = "WRONG(m): mutation of one input changes another input" if n_c else "WRONG(m): mutation misses an aliased input"
                    else:
                        grp = "WRONG(c): later write to input changes earlier result" if n_c else "WRONG(c): earlier view result misses later write to input"
                if aname == "set_data":
                    grp = grp.replace("WRONG(c)", "WRONG(c, x.data = ...)").replace("WRONG(m)", "WRONG(m, x.data = ...)")
                doc = documented(expr, "wrong", target, aname, key)
                text = f"{expr}\n" + "    " + snippet(expr, target, code, key, t_c, n_c).replace("\n", "\n    ")
                tag = f"{target[2:] or 'r'}.{aname}{'+x' if ex else ''}->{key}"
                if doc:
                    rep.add(doc, expr, text, rep.doc, tag)
                else:
                    rep.add(grp, expr, text, None, tag)
    return "ok"


def main(argv):
    signal.signal(signal.SIGALRM, _alarm)
    hand = auto = True
    kinds = ["f", "i", "b", "c"]
    quick = verbose = listing = False
    engine = "interp"
    viewin = False
    filt = []
    it = iter(argv)
    for a in it:
        if a == "--hand":
            auto = False
        elif a == "--auto":
            hand = False
        elif a == "--dt":
            kinds = next(it).split(",")
        elif a == "--quick":
            quick = True
        elif a == "-v":
            verbose = True
        elif a == "--compiled":
            engine = None
        elif a == "--grad":
            GRAD[0] = True
        elif a == "--viewin":
            viewin = True
        elif a == "--list":
            listing = True
        else:
            filt.append(a)
    exprs = list(HAND) if hand else []
    ntotal = 0
    if auto:
        ae, ntotal = auto_exprs(kinds)
        exprs += [e for e in ae if e not in exprs]
    if filt:
        exprs = [e for e in exprs if any(f in e for f in filt)]
    if viewin:
        exprs = [view_input(e) for e in exprs]
        exprs = [e for e in exprs if e]
    if listing:
        print("\n".join(exprs))
        print(f"{len(exprs)} expressions ({ntotal} auto callables tried)")
        return
    if engine:
        nv.set_engine(engine)
    rep = Report()
    stats = {}
    for i, e in enumerate(exprs):
        try:
            st = check_case(e, rep, quick, verbose)
        except Timeout:
            st = "timeout"
        except Exception as ex:  # noqa
            signal.alarm(0)
            st = "crash"
            rep.add("probe-crash", e, f"{e}: {type(ex).__name__}: {str(ex)[:200]}", rep.info)
        stats[st] = stats.get(st, 0) + 1
        if st == "ok":
            stats.setdefault("ok_exprs", []).append(e)
        print(f"[{i + 1}/{len(exprs)}] {st:12s} {e}", file=sys.stderr, flush=True)
    for title, table in (("FINDINGS", rep.items), ("DOCUMENTED (left out)", rep.doc), ("INFO", rep.info)):
        print(f"\n==================== {title}")
        for g, d in sorted(table.items()):
            print(f"\n--- {g} ({len(d)})")
            for text, tags in d.values():
                print("  " + text + (f"\n      seen in: {', '.join(tags)}" if tags else ""))
    covered = stats.pop("ok_exprs", [])
    callables = set()
    for e in covered:
        e = e.replace("[:]", "").replace("[...]", "")
        m = re.match(r"^(L\.(?:linalg\.|fft\.|special\.|nn\.)?\w+|F\.\w+|\w+\.\w+|.*)", e)
        callables.add(re.sub(r"^(x\w*|y\w*)\.", "Tensor.", m.group(1)))
    print(f"\nstats: {stats}; {len(covered)} expressions checked, about {len(callables)} distinct callables")


if __name__ == "__main__":
    main(sys.argv[1:])

"""nn.Module API differential fuzzer: the same random sequence of Module API calls run
against torch.nn and nova.nn in lockstep, comparing everything observable after each call.

usage: python fuzz_nn_api.py START N [--noshrink] [--repr] [--strict] [-v]
  (START 1 replays one case; --noshrink: print failures unshrunk (faster); --repr: also
  print repr-only differences; --strict: also compare names registered as None in
  _parameters/_buffers/_modules; -v: also print documented deviations.) About 0.3 s a
  case on an idle core (0.5 s on a loaded 2-core VM), plus ~5 s to shrink each new
  failure.

Each case builds a small random module tree (Root/Sequential (also with OrderedDict
names)/ModuleList/ModuleDict/ParameterList/ParameterDict, Linear, Conv1d, LayerNorm,
BatchNorm1d, Embedding, Dropout, activations, custom modules with persistent and
non-persistent buffers, shared submodules), gives every float tensor the same values in
both frameworks (a seed per name), then applies 6-30 random calls:
named_parameters/_buffers/_modules/_children and the plain iterators (prefix, recurse,
remove_duplicate), state_dict (prefix, keep_vars) and load_state_dict (strict, assign,
missing/unexpected/mis-shaped keys: the error must name the key), setattr/delattr of
Parameters/Modules/tensors/None/ints/nn.Buffer/shared parameters, buffers and modules over
every kind of existing name (parameter, buffer, child, new, plain attribute),
register_parameter/register_buffer/add_module/register_module (invalid names too),
Sequential/ModuleList/ModuleDict/ParameterList/ParameterDict indexing, slicing and
mutation (append/insert/extend/pop/del/setitem/+/+=/*/update/clear), train/eval,
requires_grad_, zero_grad, to/half/double/float/bfloat16/type (parameter identity kept),
apply, deepcopy, pickle, forward pre/post hooks (with_kwargs, prepend, always_call,
replacing inputs and outputs), full backward hooks and pre-hooks (logging and replacing
gradients), Tensor.register_hook on outputs and parameters, handle.remove(), global
module hooks (nn.modules.module.register_module_forward_pre_hook/forward_hook/
full_backward_hook/*_registration_hook), state-dict hooks (_register_state_dict_hook,
register_state_dict_pre_hook, register_load_state_dict_pre/post_hook), repr/extra_repr,
getattr of the public attributes PyTorch's modules have, get_submodule/get_parameter/
get_buffer (bad paths too), calls with keyword arguments and bad shapes, forward+backward.

After each call it compares: the call's result (tensors by value, dtype, shape,
requires_grad, type and by which registered tensor/module they are), the hooks' log
(order too), then a snapshot of the root module (named_parameters/buffers/modules with
remove_duplicate=False, which names share one object, non-persistent sets, dtypes,
requires_grad, training flags, values and gradients). Tolerance: 1e-4 of max(1, |x|)
for float32/float64 (10x for gradients: norm chains over 3 rows are ill-conditioned, both
frameworks stray ~1e-4 from float64), 2e-2 with float16 and 6e-2 with bfloat16 in the
model. When torch raises, nova must raise a comparable exception. A case stops at its
first hard disagreement, which is shrunk (calls dropped while the same disagreement
remains) and printed once per signature with a standalone snippet.

Result counts (worst per case): ok; bad (silently different values/state/results);
accept (torch raises, nova accepts); err (nova raises, torch accepts); exc (both raise,
exception types not comparable; the case goes on); order (hooks ran in another order);
cosmetic (repr only; printed with --repr); lazy (a computed index out of range: torch
raised at the call, nova at the read, and state computed from it -- BatchNorm running
stats, num_batches_tracked -- is left poisoned in nova, untouched in torch; README
"Failures poison only what depends on them"; the case ends); doc (documented
deviations); torch_limit (torch's CPU kernels refuse a dtype); harness.

Documented deviations it recognizes (counted "doc", printed with -v):
  * Module.to/half/double keeps buffer tensor identity (PyTorch puts new buffer
    tensors), so a buffer shared by two modules stays shared (the case ends there).
  * ValueError where PyTorch raises RuntimeError for argument errors.
nova's nn.Buffer(t) is a Tensor subclass named Buffer (PyTorch's returns a plain Tensor
flagged _is_buffer): type names are compared with Buffer read as Tensor.

Disagreements it found on 2026-12-07; fixed on 2026-12-08 with regression tests: the
None parameters, the missing attributes, deepcopy's .grad, Module.type, the name-before-
value order, ModuleList.extend and the parameter hooks' order. Still open (minor):
ParameterDict[missing]'s KeyError, ModuleList.insert's return value, LayerNorm/BatchNorm
taking float64 input with float32 weights. The original list: LayerNorm
(elementwise_affine=False or bias=False) and RMSNorm(elementwise_affine=False) keep
weight/bias as plain attributes, not registered None parameters (a tensor or module assigned there is accepted,
register_parameter('bias', None) refused); LayerNorm has no elementwise_affine attribute,
Conv1d no transposed/output_padding; copy.deepcopy copies Parameter .grad (PyTorch's
does not); Module.type(dtype) leaves integer buffers alone (PyTorch casts every tensor);
register_parameter/register_buffer check the value before the name (TypeError where
PyTorch raises KeyError); ParameterDict[missing] raises KeyError (PyTorch
AttributeError); ModuleList.insert returns the list (PyTorch None); parameter tensor hooks
run after the module backward hooks of earlier layers (PyTorch: in graph order);
LayerNorm/BatchNorm take float64 input with float32 weights (PyTorch raises). PyTorch's
own quirks that show as accept/bad: Sequential.insert on an OrderedDict-named Sequential
(KeyError or keeps names; nova renumbers), ModuleList.insert(negative index) (KeyError
after moving items), ModuleList del/insert/extend after keys were changed by hand (nova's extend then
overwrites a child), ParameterList/ParameterDict called (PyTorch raises before any hook).
Clean seeds (all "ok", ~1 min for the 30 on a loaded 2-core VM): 194 297 301 356-361 385
393 401 402 406 414 421 422 426 450 454 462 474 506 520 521 527-535 554 557 562 575.
"""
import sys, random, types, re, warnings
warnings.filterwarnings("ignore")
import numpy as np
import torch
import nova as nv
from common import run_seeds, close_scaled

# ------------------------------------------------------------------ the shared prelude
# Parts of the program text run (with L = torch or L = nova) before the calls; a snippet
# includes only the parts it uses.
PARTS = [
    ("base", r'''
import numpy as np, copy, pickle, zlib
from collections import OrderedDict
nn = L.nn
X = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
W = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
LOG, H = [], {}
def arr(shape, seed):
    return (np.random.default_rng(seed).standard_normal(shape) * 0.5).astype(np.float32)
'''),
    ("T", r'''
def T(shape, seed):
    return L.tensor(arr(shape, seed))
'''),
    ("P", r'''
def P(shape, seed):
    return nn.Parameter(L.tensor(arr(shape, seed)))
'''),
    ("I", r'''
def I(mod, seed):  # the same values in both frameworks: a seed per name
    with L.no_grad():
        for n, t in list(mod.named_parameters(remove_duplicate=False)) + list(mod.named_buffers(remove_duplicate=False)):
            if t.is_floating_point():
                a = arr(tuple(t.shape), seed + zlib.crc32(n.encode()) % 1000)
                t.copy_(L.tensor(np.abs(a) + 0.5 if n.endswith('running_var') else a).to(t.dtype))
    return mod
'''),
    ("S", r'''
def S(path):  # the module at path, through _modules only
    mod = m
    for part in path.split('.') if path else ():
        mod = mod._modules[part]
    return mod
'''),
    ("G", r'''
def G(path):  # the parameter or buffer at path, through the tables only
    mp, _, name = path.rpartition('.')
    mod = S(mp)
    return mod._parameters[name] if name in mod._parameters else mod._buffers[name]
'''),
    ("xin", r'''
def xin(mod, rg=False):
    dt = next((p.dtype for p in mod.parameters() if p.is_floating_point()), L.float32)
    return L.tensor(X).to(dt).requires_grad_(rg)
'''),
    ("cl", r'''
def cl(v):
    if isinstance(v, (tuple, list)): return type(v)(cl(a) for a in v)
    if isinstance(v, dict): return {k: cl(a) for k, a in v.items()}
    return v.detach().clone() if hasattr(v, 'detach') else v
'''),
    ("Scale", r'''
class Scale(nn.Module):
    def __init__(self, persistent=True):
        super().__init__()
        self.w = nn.Parameter(L.ones(4))
        self.register_buffer('s', L.ones(4), persistent=persistent)
        self.register_buffer('cache', L.zeros(4), persistent=False)
    def forward(self, x):
        return x * self.w + self.s
'''),
    ("ConvBlk", r'''
class ConvBlk(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(1, 2, 3, padding=1)
    def forward(self, x):
        return self.conv(x.unsqueeze(1)).sum(1)
'''),
    ("EmbBlk", r'''
class EmbBlk(nn.Module):
    def __init__(self, persistent=True):
        super().__init__()
        self.emb = nn.Embedding(6, 4)
        self.register_buffer('idx', L.tensor([0, 2, 5]), persistent=persistent)
    def forward(self, x):
        return x + self.emb(self.idx)
'''),
    ("Stack", r'''
class Stack(nn.Module):
    def __init__(self, layers, heads, plist, pdict):
        super().__init__()
        self.layers, self.heads, self.plist, self.pdict = layers, heads, plist, pdict
    def forward(self, x):
        for l in self.layers: x = l(x)
        for k in self.heads: x = x + self.heads[k](x)
        for p in self.plist: x = x * p
        for k, p in self.pdict.items(): x = x + p
        return x
'''),
    ("Root", r'''
class Root(nn.Module):
    def __init__(self, body):
        super().__init__()
        self.body = body
        self.register_buffer('step', L.zeros((), dtype=L.int64))
    def forward(self, x, scale=1.0, shift=None):
        y = self.body(x) * scale
        return y if shift is None else y + shift
'''),
    ("fpre", r'''
def fpre(tag, mode, kw=False):
    def h(mod, args, *rest):
        LOG.append(('fpre', tag, type(mod).__name__, cl(args), sorted(rest[0]) if rest else None))
        if mode == 1:
            a = (args[0] * 2,) + tuple(args[1:])
            return (a, rest[0]) if kw else a
        if mode == 2:
            return (args, dict(rest[0], scale=0.5)) if kw else args[0] + 1
    return h
'''),
    ("fhook", r'''
def fhook(tag, mode, kw=False):
    def h(mod, args, *rest):
        LOG.append(('fwd', tag, type(mod).__name__, cl(args), sorted(rest[0]) if kw else None, cl(rest[-1])))
        if mode == 1 and rest[-1] is not None:
            return rest[-1] * 0.5
    return h
'''),
    ("bhook", r'''
def bhook(tag, mode):
    def h(mod, gin, gout):
        LOG.append(('bwd', tag, type(mod).__name__, cl(gin), cl(gout)))
        if mode == 1:
            return tuple(None if g is None else g * 2 for g in gin)
    return h
'''),
    ("bpre", r'''
def bpre(tag, mode):
    def h(mod, gout):
        LOG.append(('bpre', tag, type(mod).__name__, cl(gout)))
        if mode == 1:
            return tuple(None if g is None else g * 3 for g in gout)
    return h
'''),
    ("thook", r'''
def thook(tag, mode):
    def h(g):
        LOG.append(('thook', tag, cl(g)))
        if mode == 1:
            return g * 2
    return h
'''),
    ("sdhook", r'''
def sdhook(tag, mode):
    def h(mod, sd, prefix, meta):
        LOG.append(('sd', tag, type(mod).__name__, prefix))
        if mode == 1:
            sd[prefix + 'extra_' + tag] = L.ones(1)
    return h
'''),
    ("sdpre", r'''
def sdpre(tag):
    def h(mod, prefix, keep_vars):
        LOG.append(('sdpre', tag, type(mod).__name__, prefix, keep_vars))
    return h
'''),
    ("lpost", r'''
def lpost(tag, mode):
    def h(mod, inc):
        LOG.append(('lpost', tag, type(mod).__name__, list(inc.missing_keys), list(inc.unexpected_keys)))
        if mode == 1: inc.missing_keys.clear()
        if mode == 2: inc.unexpected_keys.clear()
    return h
'''),
    ("lpre", r'''
def lpre(tag):
    def h(mod, sd, prefix, meta, strict, missing, unexpected, errors):
        LOG.append(('lpre', tag, type(mod).__name__, prefix, sorted(sd), strict))
    return h
'''),
    ("reg", r'''
def reg(tag):
    def h(mod, name, value):
        LOG.append(('reg', tag, type(mod).__name__, name, type(value).__name__.replace('Buffer', 'Tensor')))
    return h
'''),
]
PART_NAMES = [n for n, _ in PARTS]


def parts_needed(code):
    """The prelude parts ``code`` uses (transitively), in prelude order."""
    need = {"base"}
    text = code
    changed = True
    while changed:
        changed = False
        for n, src in PARTS:
            if n not in need and re.search(r"\b%s\b" % n, text):
                need.add(n)
                text += src
                changed = True
    return [(n, s) for n, s in PARTS if n in need]


# ------------------------------------------------------------------ observing results

def dtname(t):
    return str(t.dtype).split(".")[-1]


def as_np(t):
    t = t.detach()
    if isinstance(t, torch.Tensor):
        return (t.float() if t.dtype == torch.bfloat16 else t).numpy().copy()
    return np.asarray((t.float() if t.dtype == nv.bfloat16 else t).numpy()).copy()


def is_t(v):
    return isinstance(v, (torch.Tensor, nv.Tensor))


def is_mod(v):
    return isinstance(v, (torch.nn.Module, nv.nn.Module))


def tname(v):
    """The tensor's class name; nova's ``nn.Buffer(t)`` is a Tensor subclass named
    Buffer where PyTorch's returns a plain Tensor (flagged): both read as Tensor here."""
    n = type(v).__name__
    return "Tensor" if n == "Buffer" else n


def registry(m):
    """id -> first name under which ``m`` registers a parameter, buffer or module."""
    reg = {}
    if not is_mod(m):
        return reg
    for n, mm in m.named_modules(remove_duplicate=False):
        reg.setdefault(id(mm), "module:" + n)
        for k, p in mm._parameters.items():
            if p is not None:
                reg.setdefault(id(p), "param:" + (n + "." if n else "") + k)
        for k, b in mm._buffers.items():
            if b is not None:
                reg.setdefault(id(b), "buffer:" + (n + "." if n else "") + k)
    return reg


def obs(v, reg, depth=0):
    if depth > 6:
        return ("deep",)
    if is_t(v):
        return ("T", tname(v), dtname(v), tuple(v.shape), bool(v.requires_grad), reg.get(id(v)), as_np(v))
    if is_mod(v):
        return ("M", type(v).__name__, reg.get(id(v)))
    if hasattr(v, "missing_keys") and hasattr(v, "unexpected_keys"):
        return ("IK", list(v.missing_keys), list(v.unexpected_keys), repr(v))
    if isinstance(v, dict):
        return ("D", [(k, obs(x, reg, depth + 1)) for k, x in v.items()])
    if isinstance(v, (list, tuple)):
        return ("L" if isinstance(v, list) else "U", [obs(x, reg, depth + 1) for x in v])
    if isinstance(v, torch.dtype) or type(v).__name__ in ("dtype", "DType"):
        return ("dtype", str(v).split(".")[-1])
    if isinstance(v, (str, int, float, bool, type(None))):
        return v
    if type(v).__name__ == "RemovableHandle":
        return ("handle",)
    if hasattr(v, "__next__"):
        return ("L", [obs(x, reg, depth + 1) for x in v])
    return ("obj", type(v).__name__)


# Relative to max(1, |values|): float32 chains through norms (a LayerNorm feeding a
# BatchNorm over 3 rows) lose ~1e-5 in both frameworks; float64 values are often float32
# values cast. The tolerance of the least precise float in the model applies to all.
RTOL = {"float16": 2e-2, "bfloat16": 6e-2, "float32": 1e-4, "float64": 1e-4}
TOL_FLOOR = [1e-4]
CUR_KIND = [""]
GRAD_SCALE = [1.0]


def set_tol_floor(m):
    tol = 1e-4
    if is_mod(m):
        for t in list(m.parameters()) + list(m.buffers()):
            tol = max(tol, RTOL.get(dtname(t), 1e-4))
    TOL_FLOOR[0] = max(TOL_FLOOR[0], tol)     # (sticky: values keep a half model's rounding)


def norm_repr(s):
    return re.sub(r"\b(torch|nova)\.", "", s)


GRAD_MULT = 10.0


def diff(a, b, path="r"):
    """None if the observations agree, else (path, description)."""
    if isinstance(a, tuple) and a and a[0] == "T" and isinstance(b, tuple) and b and b[0] == "T":
        for i, what in ((1, "type"), (2, "dtype"), (3, "shape"), (4, "requires_grad"), (5, "identity")):
            if a[i] != b[i]:
                return (path + "." + what, f"torch {a[i]!r} nova {b[i]!r}")
        x, y = a[6], b[6]
        if x.dtype.kind in "fc":
            mult = GRAD_MULT if path.startswith(("grads", "LOG")) or "fwd+bwd" in CUR_KIND[0] else 1.0
            if path.startswith("grads"):    # against the largest gradient in the model
                mult *= max(1.0, GRAD_SCALE[0]) / max(1.0, float(np.nanmax(np.abs(x))) if x.size else 1.0)
            if not close_scaled(x, y, max(RTOL.get(a[2], 1e-4), TOL_FLOOR[0]) * mult):
                d = np.abs(x.astype(np.float64) - y.astype(np.float64))
                return (path + ".values", f"maxdiff {np.nanmax(d) if d.size else 0:.3g}: torch {x.ravel()[:6]} nova {y.ravel()[:6]}")
        elif not np.array_equal(x, y):
            return (path + ".values", f"torch {x.ravel()[:6]} nova {y.ravel()[:6]}")
        return None
    if isinstance(a, tuple) and a and a[0] == "IK" and isinstance(b, tuple) and b and b[0] == "IK":
        if a[1:3] != b[1:3]:
            return (path, f"torch {a[3]} nova {b[3]}")
        if norm_repr(a[3]) != norm_repr(b[3]):
            return (path + ".repr", f"torch {a[3]!r} nova {b[3]!r}")
        return None
    if isinstance(a, tuple) and isinstance(b, tuple):
        if len(a) != len(b) or (a and b and a[0] != b[0]):
            return (path, f"torch {short(a)} nova {short(b)}")
        if a and a[0] in ("L", "U", "D"):
            x, y = a[1], b[1]
            if a[0] == "D":
                kx, ky = [k for k, _ in x], [k for k, _ in y]
                if kx != ky:
                    return (path + ".keys", f"torch {kx} nova {ky}")
                x, y = [v for _, v in x], [v for _, v in y]
                keys = kx
            else:
                keys = list(range(len(x)))
            if len(x) != len(y):
                return (path + ".len", f"torch {len(x)}: {short(a)} nova {len(y)}: {short(b)}")
            for k, u, v in zip(keys, x, y):
                d = diff(u, v, f"{path}[{k!r}]")
                if d:
                    return d
            return None
        for i, (u, v) in enumerate(zip(a, b)):
            d = diff(u, v, f"{path}.{i}")
            if d:
                return d
        return None
    if isinstance(a, str) and isinstance(b, str):
        if a != b and norm_repr(a) != norm_repr(b):
            return (path + ".str", f"torch {a!r}\n     nova  {b!r}")
        return None
    if isinstance(a, float) and isinstance(b, float) and abs(a - b) <= 1e-6 * max(1, abs(a)):
        return None
    if type(a) != type(b) or a != b:
        return (path, f"torch {short(a)} nova {short(b)}")
    return None


def short(o, n=300):
    def s(o):
        if isinstance(o, tuple) and o and o[0] == "T":
            return f"T[{o[1]} {o[2]} {o[3]} rg={o[4]} id={o[5]}]"
        if isinstance(o, tuple) and o and o[0] in ("L", "U"):
            return ("[" if o[0] == "L" else "(") + ", ".join(s(x) for x in o[1]) + ("]" if o[0] == "L" else ")")
        if isinstance(o, tuple) and o and o[0] == "D":
            return "{" + ", ".join(f"{k!r}: {s(x)}" for k, x in o[1]) + "}"
        if isinstance(o, tuple) and o and o[0] == "M":
            return f"<{o[1]} {o[2]}>"
        return repr(o)
    t = s(o)
    return t if len(t) <= n else t[:n] + "..."


STRICT = "--strict" in sys.argv


def snapshot(m):
    """The observable state of the root module, as an obs tree, in comparison order."""
    if not is_mod(m):
        return [("root", obs(m, {}))]
    reg = registry(m)
    out = []
    mods = list(m.named_modules(remove_duplicate=False))
    out.append(("named_modules", [(n, type(x).__name__, reg.get(id(x))) for n, x in mods]))
    out.append(("named_modules(dedup)", [n for n, _ in m.named_modules()]))
    out.append(("training", [(n, x.training if isinstance(x.training, bool) else type(x.training).__name__)
                             for n, x in mods]))
    ps = list(m.named_parameters(remove_duplicate=False))
    out.append(("named_parameters", [(n, type(p).__name__, reg.get(id(p))) for n, p in ps]))
    out.append(("named_parameters(dedup)", [n for n, _ in m.named_parameters()]))
    bs = list(m.named_buffers(remove_duplicate=False))
    out.append(("named_buffers", [(n, reg.get(id(b))) for n, b in bs]))
    out.append(("named_buffers(dedup)", [n for n, _ in m.named_buffers()]))
    out.append(("non_persistent", [(n, sorted(x._non_persistent_buffers_set)) for n, x in mods
                                   if x._non_persistent_buffers_set]))
    if STRICT:  # names registered as None (LayerNorm(elementwise_affine=False)'s weight in PyTorch)
        out.append(("none_entries", [(n, t, k) for n, x in mods for t in ("_parameters", "_buffers", "_modules")
                                     for k, v in getattr(x, t).items() if v is None]))
    out.append(("dtypes", [(n, dtname(t), tuple(t.shape), bool(t.requires_grad)) for n, t in ps + bs]))
    out.append(("values", ("D", [(n, obs(t.detach(), {})) for n, t in ps + bs])))
    out.append(("grads", ("D", [(n, None if p.grad is None else obs(p.grad, {})) for n, p in ps])))
    # (gradients through norm chains over 3 rows are ill-conditioned: both frameworks
    # stray ~1e-4 from float64's, so grads get GRAD_MULT times the tolerance)
    return out


# ------------------------------------------------------------------ running programs

class Env:
    """One framework's namespace: a module object (so pickle finds its classes)."""
    count = 0

    def __init__(self, L, parts):
        Env.count += 1
        name = f"_fznn_{L.__name__}_{Env.count}"
        self.mod = types.ModuleType(name)
        sys.modules[name] = self.mod
        self.ns = self.mod.__dict__
        self.ns["L"] = L
        self.L = L
        for _, src in parts:
            exec(src, self.ns)

    def run(self, code):
        self.ns["r"] = None
        self.ns["LOG"].clear()
        try:
            exec(code, self.ns)
            if self.L is nv:    # data-dependent errors surface when values are read
                obs(self.ns.get("r"), {})
                obs(list(self.ns["LOG"]), {})
                snapshot(self.ns.get("m"))
            exc = None
        except Exception as e:
            exc = e
        return exc

    def close(self):
        for h in list(self.ns.get("H", {}).values()):
            try:
                h.remove()
            except Exception:
                pass
        sys.modules.pop(self.mod.__name__, None)


def exc_compatible(te, ne):
    if isinstance(ne, type(te)):
        return True
    for base in (TypeError, KeyError, IndexError, AttributeError, ValueError, NotImplementedError,
                 AssertionError, StopIteration):
        if isinstance(te, base):
            return isinstance(ne, base)
    return isinstance(te, RuntimeError) and isinstance(ne, RuntimeError)


def judge(kind, code, te, ne, tenv, nenv):
    """None (agree) or (status, field, detail) for one call just run in both envs."""
    soft = None
    if te is not None and ne is None:
        if re.search(r"not implemented for|\"(addmm|mm|bmm|.*)_impl\" not", str(te)):
            return ("torch_limit", "torch", str(te)[:200])
        return ("accept", "raise", f"torch raised {type(te).__name__}: {str(te)[:300]}; nova accepted "
                                   f"(r = {short(obs(nenv.ns.get('r'), registry(nenv.ns.get('m'))), 200)})")
    if ne is not None and te is None:
        return ("err", "raise", f"nova raised {type(ne).__name__}: {str(ne)[:400]}; torch gave "
                                f"{short(obs(tenv.ns.get('r'), registry(tenv.ns.get('m'))), 200)}")
    if te is not None and type(ne).__name__ == "RealizationError":
        # a data-dependent failure surfaced at a read (README "Failures poison only what
        # depends on them"): state computed from it (BatchNorm running stats, grads)
        # stays unreadable in nova and untouched in torch; the case ends here
        return ("lazy", "lazy", f"torch {type(te).__name__}: {str(te)[:150]}\n     nova {str(ne)[:200]}")
    if te is not None:
        if not exc_compatible(te, ne):      # (the state is still compared below)
            st = "doc" if isinstance(te, RuntimeError) and isinstance(ne, ValueError) else "exc"
            soft = (st, f"exc:{type(te).__name__}/{type(ne).__name__}",
                    f"torch {type(te).__name__}: {str(te)[:200]}\n     nova {type(ne).__name__}: {str(ne)[:300]}")
        mm = re.search(r"size mismatch for ([\w.]+)", str(te))
        if mm and mm.group(1) not in str(ne):
            return ("bad", "exc:message", f"torch names {mm.group(1)}: {str(te)[:200]}\n     nova: {str(ne)[:300]}")
        d = diff(obs(list(tenv.ns["LOG"]), {}), obs(list(nenv.ns["LOG"]), {}), "LOG")
        if d:       # (always_call hooks run when forward raises)
            return ("bad", "LOG:raised", d[0] + ": " + d[1])
    # results and logs (only when both succeeded)
    set_tol_floor(tenv.ns.get("m"))
    CUR_KIND[0] = kind
    if te is None:
        tm, nm = tenv.ns.get("m"), nenv.ns.get("m")
        rt, rn = obs(tenv.ns.get("r"), registry(tm)), obs(nenv.ns.get("r"), registry(nm))
        d = diff(rt, rn, "r")
        if d and kind == "to_bufid":        # documented: nova keeps buffer identity
            soft = ("doc", d[0], d[1])
        elif d:
            st = "cosmetic" if "repr" in kind or d[0].endswith(".repr") else "bad"
            return (st, d[0], d[1])
        lt, ln = obs(list(tenv.ns["LOG"]), {}), obs(list(nenv.ns["LOG"]), {})
        d = diff(lt, ln, "LOG")
        if d:
            key = lambda e: short(e, 10 ** 6)
            if len(lt[1]) == len(ln[1]) and not diff(("L", sorted(lt[1], key=key)), ("L", sorted(ln[1], key=key)), "LOG"):
                return ("order", "LOG:order", "hooks ran in another order: torch " +
                        str([e[1][:2] for e in lt[1]]) + " nova " + str([e[1][:2] for e in ln[1]]))
            return ("bad", "LOG", d[0] + ": " + d[1])
    st = snapshot(tenv.ns.get("m"))
    GRAD_SCALE[0] = max([1.0] + [float(np.nanmax(np.abs(g[6]))) for _, g in dict(st)["grads"][1]
                                 if g is not None and g[6].size and np.isfinite(g[6]).any()]) \
        if is_mod(tenv.ns.get("m")) else 1.0
    try:
        sn = snapshot(nenv.ns.get("m"))
    except Exception as e:
        return ("err", "state-read", f"reading nova's module state raised {type(e).__name__}: {str(e)[:300]}")
    for (f, a), (_, b) in zip(st, sn):
        d = diff(obs_wrap(a), obs_wrap(b), f)
        if d and kind.startswith("to") and f == "named_buffers":
            # documented: Module.to converts buffers in place, so a buffer shared by two
            # modules stays shared in nova (PyTorch gives each slot its own new tensor);
            # later calls would differ by it, so the case ends here
            return ("doc", "stop:buffer-sharing-after-to", d[0] + ": " + d[1])
        if d:
            return ("bad", "state:" + f, d[0] + ": " + d[1])
    return soft


def obs_wrap(x):
    """Snapshot fields are plain lists of tuples (no tensors) or obs trees."""
    if isinstance(x, tuple) and x and x[0] in ("D", "L", "U", "T"):
        return x
    if isinstance(x, list):
        return ("L", [obs_wrap(v) for v in x])
    if isinstance(x, tuple):
        return ("U", [obs_wrap(v) for v in x])
    return x


def run_program(ops, soft_ok=True):
    """Run ``ops`` [(kind, code)] in both frameworks; the first disagreement (index,
    kind, judgement) -- past soft ones when ``soft_ok`` -- or None; the per-op raise
    flags; the torch env."""
    code_all = "\n".join(c for _, c in ops)
    parts = parts_needed(code_all)
    tenv, nenv = Env(torch, parts), Env(nv, parts)
    TOL_FLOOR[0] = 1e-4
    raised = []
    try:
        for i, (kind, code) in enumerate(ops):
            te = tenv.run(code)
            ne = nenv.run(code)
            raised.append((te is not None, ne is not None, te))
            j = judge(kind, code, te, ne, tenv, nenv)
            if j is not None and (not soft_ok or j[0] not in SOFT or i == len(ops) - 1):
                return (i, kind, j), raised, tenv
        return None, raised, tenv
    finally:
        tenv.close()
        nenv.close()


# ------------------------------------------------------------------ generating programs

BLOCKS = {
    "lin": lambda r: f"nn.Linear(4, 4, bias={r.random() < 0.8})",
    "ln": lambda r: f"nn.LayerNorm(4, elementwise_affine={r.random() < 0.8})",
    "bn": lambda r: f"nn.BatchNorm1d(4, affine={r.random() < 0.8}, track_running_stats={r.random() < 0.8})",
    "drop": lambda r: "nn.Dropout(0.0)",
    "act": lambda r: r.choice(["nn.ReLU()", "nn.Tanh()", "nn.Identity()"]),
    "scale": lambda r: f"Scale(persistent={r.random() < 0.5})",
    "conv": lambda r: "ConvBlk()",
    "emb": lambda r: f"EmbBlk(persistent={r.random() < 0.5})",
}


def gen_block(r, seed):
    k = r.choice(list(BLOCKS))
    c = BLOCKS[k](r)
    return c if k in ("drop", "act") else f"I({c}, {seed})"


def gen_build(r):
    lines = []
    nshared = r.randint(0, 2)
    shared = []
    for i in range(nshared):
        lines.append(f"a{i} = {gen_block(r, 100 + i)}")
        shared.append(f"a{i}")
    seed = [200]

    def blk():
        seed[0] += 1
        if shared and r.random() < 0.25:
            return r.choice(shared)
        return gen_block(r, seed[0])

    kind = r.choice(["seq", "seqdict", "stack", "seqstack"])
    if kind == "seq":
        body = "nn.Sequential(" + ", ".join(blk() for _ in range(r.randint(1, 4))) + ")"
    elif kind == "seqdict":
        names = r.sample(["fc", "norm", "act", "b", "x1", "z"], r.randint(1, 3))
        body = "nn.Sequential(OrderedDict([" + ", ".join(f"({n!r}, {blk()})" for n in names) + "]))"
    else:
        layers = "nn.ModuleList([" + ", ".join(blk() for _ in range(r.randint(0, 3))) + "])"
        hk = r.sample(["h1", "h2", "h3"], r.randint(0, 2))
        heads = "nn.ModuleDict({" + ", ".join(f"{k!r}: {blk()}" for k in hk) + "})"
        plist = "nn.ParameterList([" + ", ".join(f"P((4,), {300 + i})" for i in range(r.randint(0, 2))) + "])"
        pk = r.sample(["pa", "pb", "pc"], r.randint(0, 2))
        pdict = "nn.ParameterDict({" + ", ".join(f"{k!r}: P((4,), {310 + i})" for i, k in enumerate(pk)) + "})"
        body = f"Stack({layers}, {heads}, {plist}, {pdict})"
        if kind == "seqstack":
            body = f"nn.Sequential({blk()}, {body})"
    if r.random() < 0.6:
        lines.append(f"m = Root({body})")
    else:
        lines.append(f"m = {body}")
    return ("build", "\n".join(lines))


class Gen:
    def __init__(self, r, tns):
        self.r, self.ns = r, tns
        self.tag = 0

    @property
    def m(self):
        return self.ns.get("m")

    def newtag(self):
        self.tag += 1
        return f"h{self.tag}"

    def paths(self):
        return [n for n, _ in self.m.named_modules()]

    def path(self):
        return self.r.choice(self.paths())

    def sub(self, p):
        mod = self.m
        for part in p.split(".") if p else ():
            mod = mod._modules[part]
        return mod

    def tensor_paths(self, kind="param"):
        if kind == "param":
            return [n for n, _ in self.m.named_parameters()]
        return [n for n, _ in self.m.named_buffers()]

    def value(self, target_path):
        """A value to assign: (label, code)."""
        r = self.r
        s = r.randint(0, 999)
        opts = [("Parameter", f"P((4,), {s})"), ("Parameter44", f"P((4, 4), {s})"),
                ("tensor", f"T((4,), {s})"), ("Module", f"I(nn.Linear(4, 4), {s})"),
                ("None", "None"), ("int", "3"), ("Buffer", f"nn.Buffer(T((4,), {s}))"),
                ("Buffer_np", f"nn.Buffer(T((4,), {s}), persistent=False)")]
        ps = self.tensor_paths("param")
        if ps:
            opts.append(("shared_param", f"G({r.choice(ps)!r})"))
        bs = self.tensor_paths("buffer")
        if bs:
            opts.append(("shared_buffer", f"G({r.choice(bs)!r})"))
        tgt = self.sub(target_path)
        cands = [p for p in self.paths() if p and tgt not in list(self.sub(p).modules())]
        if cands:
            opts.append(("shared_module", f"S({r.choice(cands)!r})"))
        return r.choice(opts)

    def name_for(self, mod, register=False):
        """(kind, name): an existing parameter/buffer/child name, a new one, or a plain
        attribute (one set by ``op_setplain``, which forward never reads; for the
        register_* calls also ``forward``, a method name)."""
        r = self.r
        plain = [k for k in vars(mod) if k.startswith("plain")]
        groups = [("param", list(mod._parameters)), ("buffer", list(mod._buffers)),
                  ("module", list(mod._modules)), ("new", ["nx", "ny"]),
                  ("attr", (["forward"] if register else []) + plain)]
        groups = [(k, v) for k, v in groups if v]
        k, v = r.choice(groups)
        return k, r.choice(v)

    # ---- the calls
    def op_query(self):
        r = self.r
        p = self.path()
        what = r.choice(["named_parameters", "named_buffers", "named_modules", "named_children",
                         "parameters", "buffers", "children", "modules"])
        args = []
        if what in ("named_parameters", "named_buffers"):
            if r.random() < 0.4: args.append(f"prefix={r.choice(['pre', 'a.b', ''])!r}")
            if r.random() < 0.4: args.append(f"recurse={r.random() < 0.5}")
            if r.random() < 0.5: args.append(f"remove_duplicate={r.random() < 0.5}")
        elif what == "named_modules":
            if r.random() < 0.4: args.append(f"prefix={r.choice(['pre', 'x.y'])!r}")
            if r.random() < 0.5: args.append(f"remove_duplicate={r.random() < 0.5}")
        elif what in ("parameters", "buffers") and r.random() < 0.4:
            args.append(f"recurse={r.random() < 0.5}")
        return (f"query.{what}", f"r = list(S({p!r}).{what}({', '.join(args)}))")

    def op_state_dict(self):
        r = self.r
        p = self.path() if r.random() < 0.5 else ""
        args = []
        if r.random() < 0.3: args.append(f"prefix={r.choice(['x.', 'pre_'])!r}")
        if r.random() < 0.4: args.append(f"keep_vars={r.random() < 0.5}")
        return ("state_dict", f"r = S({p!r}).state_dict({', '.join(args)})")

    def op_load(self):
        r = self.r
        p = self.path() if r.random() < 0.3 else ""
        sd = self.sub(p).state_dict()
        keys = list(sd)
        lines = [f"sd = S({p!r}).state_dict()",
                 "sd = OrderedDict((k, v * 0.5 + 0.25 if v.is_floating_point() else v) for k, v in sd.items())"]
        muts = []
        for _ in range(r.randint(0, 2)):
            mk = r.choice(["drop", "extra", "shape", "extra_child"]) if keys else "extra"
            if mk == "drop":
                k = r.choice(keys)
                lines.append(f"del sd[{k!r}]")
            elif mk == "extra":
                lines.append("sd['bogus'] = T((2,), 5)")
            elif mk == "extra_child":
                k = r.choice(keys)
                lines.append(f"sd[{k.rpartition('.')[0] + '.bogus' if '.' in k else 'x.bogus'!r}] = T((2,), 6)")
            else:
                k = r.choice(keys)
                lines.append(f"sd[{k!r}] = T((5,), 7)")
            muts.append(mk)
        strict = r.random() < 0.6
        args = [f"strict={strict}"] if r.random() < 0.8 else []
        if r.random() < 0.2:
            args.append("assign=True")
        lines.append(f"r = S({p!r}).load_state_dict(sd{', ' if args else ''}{', '.join(args)})")
        return ("load:" + ",".join(sorted(set(muts))) + (":assign" if "assign=True" in args else ""),
                "\n".join(lines))

    def op_setattr(self):
        p = self.path()
        k, name = self.name_for(self.sub(p))
        label, val = self.value(p)
        return (f"setattr:{k}<-{label}", f"S({p!r}).{name} = {val}" if name.isidentifier()
                else f"setattr(S({p!r}), {name!r}, {val})")

    def op_delattr(self):
        p = self.path()
        k, name = self.name_for(self.sub(p))
        return (f"delattr:{k}", f"delattr(S({p!r}), {name!r})")

    def op_register(self):
        r = self.r
        p = self.path()
        k, name = self.name_for(self.sub(p), register=True)
        if r.random() < 0.15:
            name = r.choice(["a.b", "", 5])
            k = "invalid"
        what = r.choice(["register_parameter", "register_buffer", "add_module", "register_module"])
        s = r.randint(0, 999)
        if what == "register_parameter":
            label, val = r.choice([("Parameter", f"P((4,), {s})"), ("None", "None"), ("tensor", f"T((4,), {s})")])
        elif what == "register_buffer":
            label, val = r.choice([("tensor", f"T((4,), {s})"), ("None", "None"), ("Parameter", f"P((4,), {s})"),
                                   ("int", "3")])
            if r.random() < 0.5:
                val += f", persistent={r.random() < 0.5}"
        else:
            label, val = r.choice([("Module", f"I(nn.Linear(4, 4), {s})"), ("None", "None"), ("int", "3")])
        return (f"{what}:{k}<-{label}", f"S({p!r}).{what}({name!r}, {val})")

    def containers(self, cls):
        return [n for n, x in self.m.named_modules() if type(x).__name__ == cls]

    def op_container(self):
        r = self.r
        avail = [c for c in ("Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict")
                 if self.containers(c)]
        if not avail:
            return self.op_query()
        cls = r.choice(avail)
        p = r.choice(self.containers(cls))
        c = self.sub(p)
        n = len(c)
        s = r.randint(0, 999)
        C = f"S({p!r})"
        newmod = f"I({BLOCKS[r.choice(['lin', 'ln', 'scale'])](r)}, {s})"
        i = r.randint(-n - 1, n)
        sl = f"{r.choice(['', '1', '-1', '0'])}:{r.choice(['', '2', '-1'])}"
        if cls in ("Sequential", "ModuleList"):
            parent, _, last = p.rpartition(".")
            ops = {
                "getitem": f"r = {C}[{i}]",
                "slice": f"s = {C}[{sl}]\nr = (type(s).__name__, list(s._modules), list(s))",
                "len": f"r = len({C})",
                "append": f"r = {C}.append({newmod})",
                "insert": f"r = {C}.insert({i}, {newmod})",
                "extend": f"r = {C}.extend([{newmod}, nn.ReLU()])",
                "pop": f"r = {C}.pop({i})",
                "delitem": f"del {C}[{i}]",
                "delslice": f"del {C}[{sl}]",
                "setitem": f"{C}[{i}] = {newmod}",
                "iter": f"r = list({C})",
                "keys": f"r = list({C}._modules)",
                "iadd": f"c = {C}\nc += nn.{cls}([{newmod}]) if {cls == 'ModuleList'} else nn.Sequential({newmod})\nr = list(c._modules)",
            }
            if p:
                ops["add"] = (f"S({parent!r}).{last} = {C} + " +
                              (f"nn.Sequential({newmod})" if cls == "Sequential" else f"[{newmod}]")) \
                    if last.isidentifier() else f"r = list(({C} + {C})._modules)"
                if cls == "Sequential":
                    ops["mul"] = f"r = list(({C} * 2)._modules)"
        elif cls == "ModuleDict":
            keys = list(c.keys()) + ["nk"]
            k = r.choice(keys)
            ops = {
                "getitem": f"r = {C}[{k!r}]",
                "setitem": f"{C}[{k!r}] = {newmod}",
                "delitem": f"del {C}[{k!r}]",
                "pop": f"r = {C}.pop({k!r})",
                "update": f"{C}.update({{{k!r}: {newmod}, 'u2': nn.Tanh()}})",
                "update_pairs": f"{C}.update([({k!r}, {newmod})])",
                "keys": f"r = (list({C}.keys()), list({C}.values()), list({C}.items()), {k!r} in {C}, len({C}))",
                "clear": f"{C}.clear()",
                "iter": f"r = list({C})",
            }
        elif cls == "ParameterList":
            val = r.choice([f"P((4,), {s})", f"T((4,), {s})"])
            ops = {
                "append": f"r = {C}.append({val})",
                "extend": f"r = {C}.extend([{val}, P((4,), {s + 1})])",
                "getitem": f"r = {C}[{i}]",
                "setitem": f"{C}[{i}] = {val}",
                "slice": f"r = list({C}[{sl}])",
                "len": f"r = (len({C}), list({C}))",
                "iadd": f"c = {C}\nc += [{val}]",
                "repr": f"r = repr({C})",
            }
        else:
            keys = list(c.keys()) + ["nk"]
            k = r.choice(keys)
            val = r.choice([f"P((4,), {s})", f"T((4,), {s})"])
            ops = {
                "getitem": f"r = {C}[{k!r}]",
                "setitem": f"{C}[{k!r}] = {val}",
                "delitem": f"del {C}[{k!r}]",
                "pop": f"r = {C}.pop({k!r})",
                "update": f"{C}.update({{{k!r}: {val}}})",
                "get": f"r = {C}.get({k!r})",
                "keys": f"r = (list({C}.keys()), list({C}.values()), {k!r} in {C}, len({C}))",
                "repr": f"r = repr({C})",
            }
        name = r.choice(list(ops))
        return (f"{cls}.{name}", ops[name])

    def op_train(self):
        r = self.r
        p = self.path()
        v = r.choice(["train()", "train(False)", "train(True)", "eval()", "train(0)"])
        return (f"train:{v}", f"r = S({p!r}).{v} is S({p!r})")

    def op_requires_grad(self):
        p = self.path()
        v = self.r.random() < 0.5
        return ("requires_grad_", f"r = S({p!r}).requires_grad_({v}) is S({p!r})")

    def op_zero_grad(self):
        p = self.path()
        a = self.r.choice(["", "set_to_none=False", "True"])
        return ("zero_grad" + (":" + a if a else ""), f"S({p!r}).zero_grad({a})")

    def op_to(self):
        r = self.r
        p = "" if r.random() < 0.7 else self.path()
        conv = r.choice(["half()", "double()", "float()", "bfloat16()", "to(L.float64)", "to(dtype=L.float16)",
                         "to(L.int64)", "to('cpu')", "type(L.float64)"])
        if r.random() < 0.2:
            return ("to_bufid", f"ids = [id(b) for b in S({p!r}).buffers()]\nS({p!r}).{conv}\n"
                                f"r = [id(b) == i for b, i in zip(S({p!r}).buffers(), ids)]")
        return (f"to:{conv}", f"ids = [id(q) for q in S({p!r}).parameters()]\nrr = S({p!r}).{conv}\n"
                              f"r = (rr is S({p!r}), [id(q) == i for q, i in zip(S({p!r}).parameters(), ids)])")

    def op_apply(self):
        r = self.r
        if r.random() < 0.5:
            return ("apply:names", "r = []\nrr = m.apply(lambda mod: r.append(type(mod).__name__))\nr.append(rr is m)")
        return ("apply:init", f"m.apply(lambda mod: I(mod, {r.randint(0, 99)}) if isinstance(mod, nn.Linear) else None)")

    def op_deepcopy(self):
        return ("deepcopy", "m0 = m\nm = copy.deepcopy(m)\nr = [p is q for p, q in zip(m0.parameters(), m.parameters())]")

    def op_pickle(self):
        return ("pickle", "m = pickle.loads(pickle.dumps(m))")

    def op_forward(self):
        r = self.r
        root = type(self.m).__name__
        calls = {"Root": ["m(x)", "m(x, scale=0.5)", "m(x, shift=T((4,), 9))", "m(x=x)", "m(x, 2.0)"],
                 "Sequential": ["m(x)", "m(input=x)"], "Stack": ["m(x)", "m(x=x)"]}.get(root, ["m(x)"])
        call = r.choice(calls) if r.random() < 0.92 else r.choice(["m(x[:, :3])", "m(x, scale=0.5)", "m(input=x)"])
        rg = r.random() < 0.6
        lines = [f"x = xin(m, {rg})", f"out = {call}"]
        kind = "forward"
        if r.random() < 0.75:
            if r.random() < 0.2:
                t = self.newtag()
                lines.append(f"H[{t!r}] = out.register_hook(thook({t!r}, {r.randint(0, 1)}))")
            lines.append("(out * L.tensor(W).to(out.dtype)).sum().backward()")
            lines.append("r = (out, x.grad)")
            kind = "fwd+bwd"
        else:
            lines.append("r = out")
        return (kind + ":" + call, "\n".join(lines))

    def op_hook(self):
        r = self.r
        p = self.path()
        t = self.newtag()
        mode = r.randint(0, 2)
        C = f"S({p!r})"
        what = r.choice(["fpre", "fpre_kw", "fhook", "fhook_kw", "bhook", "bpre", "thook", "global_fpre",
                         "global_fhook", "global_bhook", "sdhook", "sdpre", "lpost", "lpre", "reg", "remove"])
        prep = r.random() < 0.3
        isroot = type(self.sub(p)).__name__ == "Root"
        if what == "fpre":
            code = f"H[{t!r}] = {C}.register_forward_pre_hook(fpre({t!r}, {mode}), prepend={prep})"
        elif what == "fpre_kw":
            mode = mode if (mode != 2 or isroot) else 1
            code = f"H[{t!r}] = {C}.register_forward_pre_hook(fpre({t!r}, {mode}, True), with_kwargs=True, prepend={prep})"
        elif what == "fhook":
            code = f"H[{t!r}] = {C}.register_forward_hook(fhook({t!r}, {mode}), prepend={prep}, always_call={r.random() < 0.3})"
        elif what == "fhook_kw":
            code = f"H[{t!r}] = {C}.register_forward_hook(fhook({t!r}, {mode}, True), with_kwargs=True, prepend={prep})"
        elif what == "bhook":
            code = f"H[{t!r}] = {C}.register_full_backward_hook(bhook({t!r}, {mode}), prepend={prep})"
        elif what == "bpre":
            code = f"H[{t!r}] = {C}.register_full_backward_pre_hook(bpre({t!r}, {mode}), prepend={prep})"
        elif what == "thook":
            ps = self.tensor_paths("param")
            if not ps:
                return self.op_forward()
            code = f"H[{t!r}] = G({r.choice(ps)!r}).register_hook(thook({t!r}, {min(mode, 1)}))"
        elif what == "global_fpre":
            code = f"H[{t!r}] = nn.modules.module.register_module_forward_pre_hook(fpre({t!r}, 0))"
        elif what == "global_fhook":
            code = (f"H[{t!r}] = nn.modules.module.register_module_forward_hook(fhook({t!r}, 0, {prep}), "
                    f"with_kwargs={prep})")
        elif what == "global_bhook":
            code = f"H[{t!r}] = nn.modules.module.register_module_full_backward_hook(bhook({t!r}, 0))"
        elif what == "sdhook":
            code = f"H[{t!r}] = {C}._register_state_dict_hook(sdhook({t!r}, {min(mode, 1)}))"
        elif what == "sdpre":
            code = f"H[{t!r}] = {C}.register_state_dict_pre_hook(sdpre({t!r}))"
        elif what == "lpost":
            code = f"H[{t!r}] = {C}.register_load_state_dict_post_hook(lpost({t!r}, {mode}))"
        elif what == "lpre":
            code = f"H[{t!r}] = {C}.register_load_state_dict_pre_hook(lpre({t!r}))"
        elif what == "reg":
            k = r.choice(["buffer", "module", "parameter"])
            code = f"H[{t!r}] = nn.modules.module.register_module_{k}_registration_hook(reg({t!r}))"
            what = "reg_" + k
        else:
            hs = list(self.ns["H"])
            if not hs:
                return self.op_forward()
            h = r.choice(hs)
            code = f"H[{h!r}].remove()"
        return (f"hook:{what}" + (f":m{mode}" if what in ("fpre", "fpre_kw", "fhook", "fhook_kw", "bhook", "bpre") else ""),
                code)

    def op_repr(self):
        p = self.path()
        if self.r.random() < 0.5:
            return ("repr", f"r = repr(S({p!r}))")
        return ("repr:extra", f"r = S({p!r}).extra_repr()")

    def op_get(self):
        r = self.r
        what = r.choice(["get_submodule", "get_parameter", "get_buffer"])
        cands = self.paths() + self.tensor_paths("param") + self.tensor_paths("buffer") + ["nope", "body.nope.x"]
        t = r.choice(cands)
        if r.random() < 0.2:
            t = t + ".zz"
        return (f"{what}", f"r = m.{what}({t!r})")

    def op_setplain(self):
        p = self.path()
        k = self.r.choice(["plain1", "plain2"])
        return ("setplain", f"S({p!r}).{k} = {self.r.choice(['3', 'None', 'T((4,), 8)', '(1, 2)'])}")

    def op_getattr(self):
        p = self.path()
        mod = self.sub(p)
        names = [k for k in vars(mod) if not k.startswith("_")] + ["nope"]
        k = self.r.choice(names)
        return ("getattr", f"r = getattr(S({p!r}), {k!r})")

    OPS = [("op_setplain", 2), ("op_getattr", 2), ("op_query", 8), ("op_state_dict", 5), ("op_load", 8), ("op_setattr", 10), ("op_delattr", 4),
           ("op_register", 8), ("op_container", 14), ("op_train", 4), ("op_requires_grad", 3),
           ("op_zero_grad", 3), ("op_to", 4), ("op_apply", 2), ("op_deepcopy", 2), ("op_pickle", 1),
           ("op_forward", 14), ("op_hook", 14), ("op_repr", 3), ("op_get", 4)]

    def next(self, only=None):
        ops = [(n, w) for n, w in self.OPS if only is None or n[3:] in only]
        name = self.r.choices([n for n, _ in ops], [w for _, w in ops])[0]
        return getattr(self, name)()


# ------------------------------------------------------------------ the case

SOFT = ("exc", "cosmetic", "doc", "order")   # the case goes on after these


def gen_and_run(seed, only=None):
    """Generate the program of ``seed`` while running it; (ops, failures): the soft
    disagreements met on the way, then the hard one that stopped the case (if any)."""
    r = random.Random(seed)
    ops = [gen_build(r)]
    nops = r.randint(6, 30)
    tenv, nenv = Env(torch, PARTS), Env(nv, PARTS)
    TOL_FLOOR[0] = 1e-4
    gen = Gen(r, tenv.ns)
    fails = []
    try:
        i = 0
        while True:
            kind, code = ops[i]
            te = tenv.run(code)
            ne = nenv.run(code)
            j = judge(kind, code, te, ne, tenv, nenv)
            if j is not None:
                fails.append((i, kind, j))
                if j[0] not in SOFT or j[1].startswith("stop:"):
                    return ops, fails
            if i == 0 and te is not None:
                return ops, fails + [(0, kind, ("harness", "build", f"torch build raised {te!r}"))]
            if len(ops) > nops:
                return ops, fails
            ops.append(gen.next(only))
            i += 1
    finally:
        tenv.close()
        nenv.close()


def signature(kind, j):
    st, field, _ = j
    field = re.sub(r"\[[^\]]*\]", "[]", field)
    field = re.sub(r"\.\d+", ".N", field)
    if st in ("exc", "accept", "err"):       # one cause per call family
        kind = kind.split(":")[0] + (":" + kind.split(":")[1].split("<")[0] if kind.startswith("set") else "")
    return (st, kind.split("(")[0], field)


def shrink(ops, fail, budget=60):
    """Drop calls while the last one still fails the same way."""
    i, kind, j = fail
    sig = signature(kind, j)
    ops = ops[:i + 1]
    k = len(ops) - 2
    tries = 0
    while k >= 1 and tries < budget:
        cand = ops[:k] + ops[k + 1:]
        tries += 1
        res, _, _ = run_program(cand, soft_ok=False)
        if res is not None and res[0] == len(cand) - 1 and signature(res[1], res[2]) == sig:
            ops = cand
            fail = res
        k -= 1
    return ops, fail


def snippet(ops, fail, raised):
    i, kind, (st, field, _) = fail
    code_all = "\n".join(c for _, c in ops)
    parts = parts_needed(code_all)
    lines = ["import numpy as np, torch, nova as nv", "for L in (torch, nv):"]
    for _, src in parts:
        for ln in src.strip("\n").split("\n"):
            lines.append("    " + ln)
    for n, (k, c) in enumerate(ops):
        t_raised, n_raised = (raised[n][0], raised[n][1]) if n < len(raised) else (False, False)
        last = n == len(ops) - 1
        if last or t_raised or n_raised:
            lines.append("    try:")
            lines += ["        " + ln for ln in c.split("\n")]
            lines.append("    except Exception as e:")
            lines.append("        print(L.__name__, 'raised', type(e).__name__, e)" if last else "        pass")
        else:
            lines += ["    " + ln for ln in c.split("\n")]
    if field.startswith("state:"):
        f = field[6:]
        expr = {
            "named_modules": "[(n, type(x).__name__) for n, x in m.named_modules(remove_duplicate=False)]",
            "named_modules(dedup)": "[n for n, _ in m.named_modules()]",
            "training": "[(n, x.training) for n, x in m.named_modules(remove_duplicate=False)]",
            "named_parameters": "[n for n, _ in m.named_parameters(remove_duplicate=False)]",
            "named_parameters(dedup)": "[n for n, _ in m.named_parameters()]",
            "named_buffers": "[n for n, _ in m.named_buffers(remove_duplicate=False)]",
            "named_buffers(dedup)": "[n for n, _ in m.named_buffers()]",
            "non_persistent": "[(n, sorted(x._non_persistent_buffers_set)) for n, x in m.named_modules()]",
            "dtypes": "[(n, t.dtype, tuple(t.shape), t.requires_grad) for n, t in list(m.named_parameters()) + list(m.named_buffers())]",
            "values": "[(n, t.detach().numpy().round(4).tolist()) for n, t in list(m.named_parameters()) + list(m.named_buffers())]",
            "grads": "[(n, None if p.grad is None else p.grad.numpy().round(4).tolist()) for n, p in m.named_parameters()]",
        }.get(f, "m")
        lines.append(f"    print(L.__name__, {expr})")
    elif field.startswith("LOG"):
        lines.append("    print(L.__name__, LOG)")
    elif st != "err" and st != "accept" and not field.startswith("exc"):
        lines.append("    print(L.__name__, r)")
    return "\n".join(lines)


SEEN = {}


RANK = ["harness", "bad", "accept", "err", "exc", "order", "lazy", "doc", "cosmetic", "torch_limit"]


def check(seed, only=None, do_shrink=True, show_repr=False, verbose=False):
    ops, fails = gen_and_run(seed, only)
    if not fails:
        return "ok"
    worst = min((f[2][0] for f in fails), key=RANK.index)
    for fail in fails:
        i, kind, j = fail
        st = j[0]
        sig = signature(kind, j)
        if (st == "cosmetic" and not show_repr) or st in ("doc", "torch_limit", "lazy") and not verbose:
            continue
        print("=" * 70)
        if sig in SEEN:
            print(f"SEED {seed} [{st}] {kind} {j[1]}  (same as SEED {SEEN[sig]})")
            continue
        SEEN[sig] = seed
        pops = ops[:i + 1]
        if do_shrink and st != "harness":
            pops, fail = shrink(pops, fail)
            i, kind, j = fail
        res, raised, _ = run_program(pops)
        print(f"SEED {seed} [{st}] call {i}: {kind}  field {j[1]}")
        print("  -> " + j[2].replace("\n", "\n  "))
        print("  ---- snippet ----")
        print("  " + snippet(pops, fail, raised).replace("\n", "\n  "))
    return worst


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--") and a != "-v"]
    only = set(args[2].split(",")) if len(args) > 2 else None
    run_seeds(lambda s: check(s, only, "--noshrink" not in sys.argv, "--repr" in sys.argv, "-v" in sys.argv),
              int(args[0]), int(args[1]))

"""PyTorch's keyword names for Nova's functions and methods.

Ported code calls functions with PyTorch's parameter names (``torch.sum(input=x, dim=0)``,
``x.permute(dims=(1, 0))``, ``torch.split(tensor=x, split_size_or_sections=2)``). The
table below makes such calls and checks each against the same result computed another
way (positionally, or written in); the last test, which needs torch, reads PyTorch's
names for every function Nova shares with it and checks that Nova takes them all.
"""
from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F

X = nv.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
Y = nv.tensor([[0.5, 2.0, -1.0], [2.0, -4.0, 3.0]])
M = nv.tensor([[1.0, 0.0], [2.0, 1.0], [0.0, -1.0]])
SQ = nv.tensor([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]])
V = nv.tensor([1.0, 2.0, 3.0])
W = nv.tensor([0.5, -1.0, 2.0])
C = nv.tensor([[True, False, True], [False, True, False]])
IDX = nv.tensor([[0, 2], [1, 0]])
ROW = nv.tensor([[1.0, 2.0, 3.0]])
T5 = nv.arange(5.0)
B1 = nv.arange(12.0).reshape(2, 2, 3)
B2 = nv.arange(12.0).reshape(2, 3, 2)
P = nv.tensor([0.25, 0.5, 0.75])
# realized now: module-level pending values would join whatever step another test of
# this process realizes next, and change what it compiles
nv.realize(X, Y, M, SQ, V, W, C, IDX, ROW, T5, B1, B2, P)


def _f(t):
    return t


# (name, call with PyTorch's keywords, the same result computed another way)
CASES = [
    # -- the calls of the issue
    ("sum input= dim=", lambda: nv.sum(input=X, dim=0), lambda: nv.tensor([5.0, 3.0, -3.0])),
    ("add other=", lambda: nv.add(X, other=Y), lambda: X + Y),
    ("Tensor.permute dims=", lambda: X.permute(dims=(1, 0)), lambda: X.t()),
    ("Tensor.reshape shape=", lambda: X.reshape(shape=(6,)),
     lambda: nv.tensor([1.0, -2.0, 3.0, 4.0, 5.0, -6.0])),
    ("where condition= input= other=", lambda: nv.where(condition=C, input=X, other=Y),
     lambda: nv.tensor([[1.0, 2.0, 3.0], [2.0, 5.0, 3.0]])),
    ("Tensor.new_zeros size=", lambda: X.new_zeros(size=(2,)), lambda: nv.zeros(2)),
    ("Tensor.expand size=", lambda: ROW.expand(size=(2, 3)),
     lambda: nv.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])),
    ("Tensor.split split_size=", lambda: T5.split(split_size=2),
     lambda: (nv.tensor([0.0, 1.0]), nv.tensor([2.0, 3.0]), nv.tensor([4.0]))),
    ("swapaxes axis0= axis1=", lambda: nv.swapaxes(X, axis0=0, axis1=1), lambda: X.t()),
    ("split tensor= split_size_or_sections=",
     lambda: nv.split(tensor=T5, split_size_or_sections=2), lambda: nv.split(T5, 2)),
    ("arange end=", lambda: nv.arange(end=5), lambda: nv.tensor([0, 1, 2, 3, 4])),
    ("mul input=", lambda: nv.mul(input=X, other=Y), lambda: X * Y),
    ("div input=", lambda: nv.div(input=X, other=Y), lambda: X / Y),
    ("matmul input= other=", lambda: nv.matmul(input=X, other=M), lambda: X @ M),
    ("mm input= mat2=", lambda: nv.mm(input=X, mat2=M),
     lambda: nv.tensor([[-3.0, -5.0], [14.0, 11.0]])),
    ("bmm input= mat2=", lambda: nv.bmm(input=B1, mat2=B2), lambda: nv.matmul(B1, B2)),
    ("clamp input=", lambda: nv.clamp(input=X, min=-1.0, max=2.0),
     lambda: nv.tensor([[1.0, -1.0, 2.0], [2.0, 2.0, -1.0]])),
    ("exp input=", lambda: nv.exp(input=X), lambda: nv.tensor(np.exp(X.numpy()))),
    ("softmax input=", lambda: nv.softmax(input=X, dim=1), lambda: nv.softmax(X, 1)),
    ("gather input=", lambda: nv.gather(input=X, dim=1, index=IDX),
     lambda: nv.tensor([[1.0, 3.0], [5.0, 4.0]])),
    ("zeros_like input=", lambda: nv.zeros_like(input=X), lambda: nv.zeros(2, 3)),
    ("triu input=", lambda: nv.triu(input=SQ, diagonal=1),
     lambda: nv.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])),
    ("F.linear input=", lambda: F.linear(input=X, weight=M.t(), bias=nv.tensor([1.0, -1.0])),
     lambda: X @ M + nv.tensor([1.0, -1.0])),
    ("F.dropout input=", lambda: F.dropout(input=X, p=0.5, training=False), lambda: X),
    ("F.gelu input=", lambda: F.gelu(input=X, approximate="tanh"), lambda: F.gelu(X, "tanh")),
    ("F.layer_norm input=", lambda: F.layer_norm(input=X, normalized_shape=(3,)),
     lambda: (X - X.mean(1, keepdim=True)) / nv.sqrt(X.var(1, unbiased=False, keepdim=True)
                                                     + 1e-5)),
    ("F.leaky_relu input=", lambda: F.leaky_relu(input=X, negative_slope=0.5),
     lambda: nv.tensor([[1.0, -1.0, 3.0], [4.0, 5.0, -3.0]])),
    ("F.elu input=", lambda: F.elu(input=X, alpha=1.0),
     lambda: nv.where(X > 0, X, nv.expm1(X))),
    # -- the rest of the nova namespace
    ("add input= alpha=", lambda: nv.add(input=X, other=Y, alpha=2), lambda: X + 2 * Y),
    ("sub input= other=", lambda: nv.sub(input=X, other=Y), lambda: X - Y),
    ("pow input= exponent=", lambda: nv.pow(input=X, exponent=2), lambda: X * X),
    ("max input= dim=", lambda: nv.max(input=X, dim=1),
     lambda: (nv.tensor([3.0, 5.0]), nv.tensor([2, 1]))),
    ("max other=", lambda: nv.max(X, other=Y), lambda: nv.maximum(X, Y)),
    ("min other=", lambda: nv.min(X, other=Y), lambda: nv.minimum(X, Y)),
    ("mean input= keepdim=", lambda: nv.mean(input=X, dim=1, keepdim=True),
     lambda: nv.tensor([[2.0 / 3.0], [1.0]])),
    ("reshape input= shape=", lambda: nv.reshape(input=X, shape=(3, 2)), lambda: X.view(3, 2)),
    ("permute input= dims=", lambda: nv.permute(input=X, dims=(1, 0)), lambda: X.t()),
    ("transpose input= dim0= dim1=", lambda: nv.transpose(input=X, dim0=0, dim1=1),
     lambda: X.t()),
    ("tensor_split sections=", lambda: nv.tensor_split(input=T5, sections=3),
     lambda: (T5[:2], T5[2:4], T5[4:])),
    ("tensor_split indices=", lambda: nv.tensor_split(T5, indices=[1, 4]),
     lambda: (T5[:1], T5[1:4], T5[4:])),
    ("flatten input=", lambda: nv.flatten(input=B1, start_dim=1), lambda: B1.reshape(2, 6)),
    ("unsqueeze input=", lambda: nv.unsqueeze(input=V, dim=0), lambda: V[None]),
    ("eq input= other=", lambda: nv.eq(input=X, other=Y),
     lambda: nv.zeros(2, 3, dtype=nv.bool)),
    ("abs input=", lambda: nv.abs(input=X), lambda: nv.tensor(np.abs(X.numpy()))),
    ("logsumexp input=", lambda: nv.logsumexp(input=X, dim=1),
     lambda: nv.tensor(np.log(np.exp(X.numpy()).sum(1)))),
    ("std input=", lambda: nv.std(input=X, dim=1), lambda: nv.tensor(X.numpy().std(1, ddof=1))),
    ("cumsum input=", lambda: nv.cumsum(input=X, dim=1),
     lambda: nv.tensor([[1.0, -1.0, 2.0], [4.0, 9.0, 3.0]])),
    ("zeros size= layout=", lambda: nv.zeros(size=(2, 3), layout=nv.strided),
     lambda: nv.zeros(2, 3)),
    ("full size= fill_value= pin_memory=",
     lambda: nv.full(size=(2,), fill_value=7.0, pin_memory=True), lambda: nv.tensor([7.0, 7.0])),
    ("arange start= end= step= requires_grad=",
     lambda: nv.arange(start=1.0, end=7.0, step=2.0, requires_grad=True),
     lambda: nv.tensor([1.0, 3.0, 5.0])),
    ("empty memory_format=", lambda: nv.empty(2, 2, memory_format=nv.contiguous_format),
     lambda: nv.zeros(2, 2)),
    ("logspace device=", lambda: nv.logspace(0, 2, 3, device="cpu"),
     lambda: nv.tensor([1.0, 10.0, 100.0])),
    ("outer input= vec2=", lambda: nv.outer(input=V, vec2=W), lambda: V[:, None] * W[None, :]),
    ("dot input= tensor=", lambda: nv.dot(input=V, tensor=W), lambda: nv.tensor(4.5)),
    ("mv input= vec=", lambda: nv.mv(input=SQ, vec=V), lambda: SQ @ V),
    ("addmm out_dtype= (same dtype)",
     lambda: nv.addmm(input=nv.ones(2, 2), mat1=X, mat2=M, out_dtype=nv.float32),
     lambda: nv.ones(2, 2) + X @ M),
    ("mm out_dtype=float32 of float16",
     lambda: nv.mm(X.half(), M.half(), out_dtype=nv.float32), lambda: X @ M),
    ("det input=", lambda: nv.det(input=SQ), lambda: nv.tensor(18.0)),
    ("linalg.det A=", lambda: nv.linalg.det(A=SQ), lambda: nv.tensor(18.0)),
    ("inverse input=", lambda: nv.inverse(input=SQ) @ SQ, lambda: nv.eye(3)),
    ("isclose input= other=", lambda: nv.isclose(input=X, other=X + 1e-9), lambda: X == X),
    ("lerp input= end= weight=", lambda: nv.lerp(input=X, end=Y, weight=0.5),
     lambda: (X + Y) / 2),
    ("index_select input=", lambda: nv.index_select(input=X, dim=1, index=nv.tensor([2, 0])),
     lambda: nv.tensor([[3.0, 1.0], [-6.0, 4.0]])),
    ("masked_fill input=", lambda: nv.masked_fill(input=X, mask=C, value=0.0),
     lambda: nv.tensor([[0.0, -2.0, 0.0], [4.0, 0.0, -6.0]])),
    ("relu input=", lambda: nv.relu(input=X), lambda: nv.clamp(X, min=0)),
    ("chunk input=", lambda: nv.chunk(input=T5, chunks=2), lambda: (T5[:3], T5[3:])),
    ("flip input=", lambda: nv.flip(input=V, dims=(0,)), lambda: nv.tensor([3.0, 2.0, 1.0])),
    ("roll input=", lambda: nv.roll(input=V, shifts=1), lambda: nv.tensor([3.0, 1.0, 2.0])),
    ("set_default_device device=", lambda: nv.set_default_device(device=None), lambda: None),
    ("compile model= disable=", lambda: nv.compile(model=_f, disable=True) is _f,
     lambda: True),
    # -- nn.functional
    ("F.softplus input=", lambda: F.softplus(input=X), lambda: nv.log1p(nv.exp(X))),
    ("F.logsigmoid input=", lambda: F.logsigmoid(input=X), lambda: nv.log(nv.sigmoid(X))),
    ("F.sigmoid input=", lambda: F.sigmoid(input=X), lambda: 1 / (1 + nv.exp(-X))),
    ("F.mse_loss weight=", lambda: F.mse_loss(input=X, target=Y, weight=nv.ones(2, 3) * 2),
     lambda: ((X - Y) ** 2).sum() * 2 / 12),
    ("F.l1_loss weight= sum", lambda: F.l1_loss(X, Y, reduction="sum", weight=nv.ones(2, 3)),
     lambda: (X - Y).abs().sum()),
    ("F.huber_loss weight=", lambda: F.huber_loss(X, Y, weight=nv.full((2, 3), 3.0)),
     lambda: F.huber_loss(X, Y) * 3),
    ("F.normalize out=", lambda: F.normalize(input=X, dim=1, out=nv.zeros(2, 3)),
     lambda: X / X.norm(dim=1, keepdim=True)),
    # -- linalg, special, fft
    ("linalg.norm input=", lambda: nv.linalg.norm(input=V), lambda: nv.tensor(14.0 ** 0.5)),
    ("special.erf input=", lambda: nv.special.erf(input=X), lambda: nv.erf(X)),
    ("special.xlogy input= other=", lambda: nv.special.xlogy(input=V, other=W.abs()),
     lambda: V * nv.log(W.abs())),
    ("special.logit input=", lambda: nv.special.logit(input=P),
     lambda: nv.tensor([np.log(1 / 3), 0.0, np.log(3)])),
    ("special.softmax input=", lambda: nv.special.softmax(input=X, dim=1),
     lambda: nv.softmax(X, 1)),
    ("special.chebyshev_polynomial_t out=",
     lambda: nv.special.chebyshev_polynomial_t(P, 2, out=nv.zeros(3)),
     lambda: 2 * P * P - 1),
    ("fft.fft input= n=", lambda: nv.fft.fft(input=V, n=4), lambda: nv.fft.fft(V, 4)),
    ("fft.rfft input= norm=", lambda: nv.fft.rfft(input=T5, norm="ortho"),
     lambda: nv.fft.rfft(T5, None, -1, "ortho")),
    ("fft.irfft out=", lambda: nv.fft.irfft(nv.fft.rfft(T5), n=5, out=nv.zeros(5)),
     lambda: T5),
    ("fft.fftfreq layout=", lambda: nv.fft.fftfreq(4, layout=nv.strided),
     lambda: nv.tensor([0.0, 0.25, -0.5, -0.25])),
    # -- Tensor methods
    ("Tensor.view size=", lambda: X.view(size=(3, 2)), lambda: X.reshape(3, 2)),
    ("Tensor.view dtype=", lambda: V.view(dtype=nv.int32), lambda: V.view(nv.int32)),
    ("Tensor.repeat repeats=", lambda: ROW.repeat(repeats=(2, 1)),
     lambda: ROW.expand(2, 3)),
    ("Tensor.add other= alpha=", lambda: X.add(other=Y, alpha=3), lambda: X + 3 * Y),
    ("Tensor.pow exponent=", lambda: X.pow(exponent=3), lambda: X * X * X),
    ("Tensor.mm mat2=", lambda: X.mm(mat2=M), lambda: X @ M),
    ("Tensor.sum_to_size size=", lambda: X.sum_to_size(size=(1, 3)), lambda: X.sum(0, True)),
    ("Tensor.new_ones size=", lambda: X.new_ones(size=(2, 2), dtype=nv.int64),
     lambda: nv.ones(2, 2, dtype=nv.int64)),
    ("Tensor.new_empty size= pin_memory=", lambda: X.new_empty(size=(3,), pin_memory=True),
     lambda: nv.zeros(3)),
    ("Tensor.float memory_format=",
     lambda: X.int().float(memory_format=nv.preserve_format),
     lambda: nv.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])),
    ("Tensor.copy_ non_blocking=", lambda: nv.zeros(2, 3).copy_(X, non_blocking=True),
     lambda: X),
    ("Tensor.numpy force=", lambda: X.numpy(force=True), lambda: X),
    ("Tensor.cpu memory_format=", lambda: X.cpu(memory_format=nv.contiguous_format),
     lambda: X),
    ("Tensor.eq other=", lambda: X.eq(other=X), lambda: nv.ones(2, 3, dtype=nv.bool)),
    ("Tensor.cholesky_solve input2=",
     lambda: (SQ @ V[:, None]).cholesky_solve(input2=nv.linalg.cholesky(SQ)),
     lambda: V[:, None]),
]


def _values(r):
    if r is None or isinstance(r, bool):
        return [r]
    if isinstance(r, (tuple, list)):
        return [v for item in r for v in _values(item)]
    return [np.asarray(r.numpy() if hasattr(r, "numpy") else r)]


def _numbers(a):
    if a.dtype == bool:
        return a
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def test_the_table_is_broad():
    assert len(CASES) >= 60
    assert len({name for name, _, _ in CASES}) == len(CASES)


@pytest.mark.parametrize("name,call,expected", CASES, ids=[c[0] for c in CASES])
def test_pytorch_keyword_call(name, call, expected):
    got, want = _values(call()), _values(expected())
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, np.ndarray):
            assert g.shape == w.shape, (g, w)
            np.testing.assert_allclose(_numbers(g), _numbers(w), rtol=1e-5, atol=1e-5)
        else:
            assert g == w


def test_keyword_results_keep_their_dtype():
    assert nv.arange(end=5).dtype == nv.int64
    assert nv.mm(X.half(), M.half(), out_dtype=nv.float32).dtype == nv.float32
    assert nv.arange(start=1.0, end=3.0, requires_grad=True).requires_grad
    assert X.new_ones(size=(2,), dtype=nv.int64).dtype == nv.int64


def test_complex_arguments_by_pytorch_keyword():
    z = nv.complex(nv.tensor([1.0, 2.0]), nv.tensor([3.0, 4.0]))
    w = nv.complex(nv.tensor([1.0, 0.0]), nv.tensor([0.0, 1.0]))
    np.testing.assert_allclose(nv.add(input=z, other=w).numpy(), [2 + 3j, 2 + 5j])
    np.testing.assert_allclose(nv.mul(z, other=w).numpy(), [1 + 3j, -4 + 2j])
    np.testing.assert_allclose(nv.zeros_like(input=z).numpy(), [0j, 0j])
    np.testing.assert_allclose(
        nv.where(condition=nv.tensor([True, False]), input=z, other=w).numpy(), [1 + 3j, 1j])
    out = nv.zeros(2, dtype=nv.complex64)
    assert nv.complex(nv.tensor([1.0, 2.0]), nv.tensor([3.0, 4.0]), out=out) is out
    np.testing.assert_allclose(out.numpy(), [1 + 3j, 2 + 4j])


def test_unknown_keywords_still_raise_naming_the_function():
    for call, fn in ((lambda: nv.sum(X, bogus=1), "sum"),
                     (lambda: nv.add(X, Y, inputs=X), "add"),
                     (lambda: F.gelu(x=X), "gelu"),
                     (lambda: X.permute(1, 0, order=(1, 0)), "permute"),
                     (lambda: nv.zeros(2, shape=(2,)), "zeros"),
                     (lambda: nv.swapaxes(X, dim0=0, dim1=1), "swapaxes")):
        with pytest.raises(TypeError, match=fn):
            call()


def test_both_forms_at_once_are_refused():
    for call, match in ((lambda: X.permute(1, 0, dims=(1, 0)),
                         "multiple values for argument 'dims'"),
                        (lambda: X.reshape(6, shape=(6,)), "multiple values for argument 'shape'"),
                        (lambda: ROW.expand(2, 3, size=(2, 3)), "multiple values"),
                        (lambda: nv.split(T5, 2, split_size=2), "multiple values"),
                        (lambda: nv.tensor_split(T5, 2, sections=2), "got both"),
                        (lambda: nv.max(X, 1, other=Y), "not both"),
                        (lambda: V.view(3, dtype=nv.int32), "not both"),
                        (lambda: nv.arange(), "missing 1 required positional argument: 'end'"),
                        (lambda: nv.split(T5), "missing 1 required positional argument")):
        with pytest.raises(TypeError, match=match):
            call()


def test_options_nova_has_no_use_for_are_checked():
    with pytest.raises(ValueError, match="one layout"):
        nv.zeros(2, layout="sparse_coo")
    with pytest.raises(ValueError, match="one layout"):
        nv.arange(3, layout="sparse_coo")
    with pytest.raises(TypeError, match="memory_format"):
        nv.empty(2, memory_format="channels_last")
    with pytest.raises(RuntimeError, match="out_dtype must be the same as input dtype"):
        nv.mm(X, M, out_dtype=nv.float16)
    with pytest.raises(ValueError, match="Weights and input must have the same size"):
        F.mse_loss(X, Y, weight=nv.ones(3))
    with pytest.raises(TypeError, match="options must be a dict"):
        nv.compile(_f, options=["max_autotune"])


def test_signatures_show_the_keywords_the_wrappers_take():
    params = inspect.signature(nv.sum).parameters
    assert list(params)[:3] == ["input", "dim", "keepdim"]
    assert {"dtype", "out", "axis", "keepdims"} <= set(params)
    assert list(inspect.signature(nv.add).parameters)[:2] == ["input", "other"]
    assert "out" in inspect.signature(nv.fft.fft).parameters
    assert "out" in inspect.signature(F.normalize).parameters


# ---------------------------------------------------------------- against torch's names

# PyTorch names Nova deliberately does not take: (namespace, function) -> names.
ALLOWED_MISSING = {
    # ``from`` is a Python keyword: a call can only spell it ``**{"from": v}``; Nova takes
    # it by position (``x.uniform_(0, 1)``), or as ``from_``.
    ("nova.Tensor", "uniform_"): {"from"},
    ("nova.Tensor", "random_"): {"from"},
}

# Bindings PyTorch writes by hand: their keywords are not their JIT schema's.
_HAND_WRITTEN = {"cpu", "cuda", "to", "type", "nonzero", "new_tensor", "size", "stride",
                 "numpy", "tolist", "item", "element_size", "dim_order", "split"}
_IDENT = re.compile(r"^[A-Za-z_]\w*$")


def _split_top(text):
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + ([cur.strip()] if cur.strip() else [])


def _doc_names(obj, name):
    """PyTorch's names from the signature lines of a builtin's docstring (the first line
    and each ``.. function::`` overload); None if none parses."""
    found = None
    lines = (getattr(obj, "__doc__", None) or "").strip().splitlines()
    for i, line in enumerate(lines):
        if i > 0 and ".. function::" not in line and ".. method::" not in line:
            continue
        m = re.match(r"^\s*(?:\.\. (?:function|method)::\s*)?(?:[\w.]+\.)?" + re.escape(name)
                     + r"\(", line)
        if not m:
            continue
        depth, args = 1, None
        for j in range(m.end(), len(line)):
            depth += line[j] in "([{"
            depth -= line[j] in ")]}"
            if depth == 0:
                rest = line[j + 1:].strip()
                args = line[m.end():j] if not rest or rest.startswith("->") else None
                break
        if args is None:
            continue
        names = []
        for p in _split_top(args):
            if p in ("*", "/", "...", "\\*") or p.startswith("**"):
                continue
            n = p.split("=", 1)[0].split(":", 1)[0].strip().lstrip("*").lstrip("\\*")
            n = n.split()[-1] if " " in n else n
            if not _IDENT.match(n):
                names = None
                break
            names.append(n)
        if names is not None:
            found = (found or set()) | set(names)
    return found


def _schema_names(torch, aten, method):
    """The op's names in its JIT schemas (``self`` is a function's ``input``), with the
    ones PyTorch's Python argument parser adds (``out``, factory options, aliases)."""
    if aten in _HAND_WRITTEN:
        return None
    try:
        schemas = torch._C._jit_get_schemas_for_operator("aten::" + aten)
    except Exception:
        return None
    if not schemas:
        return None
    names = set()
    for s in schemas:
        argnames = {a.name for a in s.arguments}
        names |= {("input" if n == "self" else n) for n in argnames
                  if not (n == "self" and method)}
        if any(a.is_out for a in s.arguments):
            names.add("out")
        if {"dtype", "device"} <= argnames:
            names |= {"requires_grad", "pin_memory"}
        if "dim" in argnames:
            names.add("axis")
        if "keepdim" in argnames:
            names.add("keepdims")
    return names


def _takes_no_keywords(torch, obj, name, method):
    fn = getattr(torch.empty(0), name, None) if method else obj
    if fn is None or inspect.isfunction(fn) or inspect.ismethod(fn):
        return False
    try:
        fn(_nova_keyword_probe=None)
    except TypeError as e:
        return "takes no keyword arguments" in str(e)
    except Exception:
        return False
    return False


def _torch_names(torch, obj, name, prefix, method, schema_fallback):
    if inspect.isfunction(obj) or inspect.ismethod(obj):
        try:
            sig = inspect.signature(obj)
        except (TypeError, ValueError):
            return None
        return {p.name for p in sig.parameters.values()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - {"self"}
    if _takes_no_keywords(torch, obj, name, method):
        return set()
    names = _doc_names(obj, name)
    schema = _schema_names(torch, prefix + name, method)
    if names is None:
        return schema - {"self", "out"} if schema_fallback and schema else None
    names -= {"self"}
    return names if schema is None else names & schema


def _nova_accepts(fn, name, method):
    """Whether a layer of ``fn``'s wrapper chain names ``name`` in its own signature, or
    the innermost takes ``**kwargs``."""
    layers, seen = [], set()
    while fn is not None and id(fn) not in seen:
        seen.add(id(fn))
        layers.append(fn)
        fn = getattr(fn, "__wrapped__", None)
    for i, layer in enumerate(layers):
        try:
            params = list(inspect.signature(layer, follow_wrapped=False).parameters.values())
        except (TypeError, ValueError):
            return True          # (no signature to check)
        if method and params and params[0].kind in (params[0].POSITIONAL_ONLY,
                                                     params[0].POSITIONAL_OR_KEYWORD):
            params = params[1:]
        if any(p.name == name and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
               for p in params):
            return True
        if i == len(layers) - 1:
            return any(p.kind == p.VAR_KEYWORD for p in params)
    return False


def _unaccepted(torch, schema_fallback):
    import torch.nn.functional as TF
    spaces = [("nova", nv, torch, "", False), ("nova.nn.functional", F, TF, "", False),
              ("nova.linalg", nv.linalg, torch.linalg, "linalg_", False),
              ("nova.special", nv.special, torch.special, "special_", False),
              ("nova.fft", nv.fft, torch.fft, "fft_", False),
              ("nova.Tensor", nv.Tensor, torch.Tensor, "", True)]
    missing, checked = {}, 0
    for label, nmod, tmod, prefix, method in spaces:
        for name in sorted(n for n in dir(nmod) if not n.startswith("_") and hasattr(tmod, n)):
            nobj, tobj = getattr(nmod, name), getattr(tmod, name)
            if method:
                if isinstance(inspect.getattr_static(nmod, name),
                              (property, staticmethod, classmethod)) \
                        or isinstance(inspect.getattr_static(tmod, name), property):
                    continue
            elif isinstance(nobj, type) or isinstance(tobj, type) or inspect.ismodule(nobj):
                continue
            if not callable(nobj) or not callable(tobj):
                continue
            names = _torch_names(torch, tobj, name, prefix, method, schema_fallback)
            if names is None:
                continue
            checked += 1
            lost = {n for n in names if not _nova_accepts(nobj, n, method)}
            if lost:
                missing[(label, name)] = lost
    return missing, checked


@pytest.mark.parametrize("schema_fallback", [False, True],
                         ids=["docstrings", "docstrings-then-schemas"])
def test_nova_takes_every_pytorch_keyword(schema_fallback):
    """For every function Nova shares with torch (``nv``/``torch``, ``nn.functional``,
    ``linalg``, ``special``, ``fft`` and ``Tensor`` methods), each parameter name PyTorch
    documents (the signature lines of a builtin's docstring, narrowed to the names its
    schema has; a Python function's signature) is one Nova takes. With
    ``schema_fallback``, a builtin without a parsable docstring is checked against its
    schema's names too."""
    torch = pytest.importorskip("torch")
    missing, checked = _unaccepted(torch, schema_fallback)
    assert checked > 1000
    assert missing == ALLOWED_MISSING

"""The reference interpreter: the definition of what every nova op means.

``compile_function`` walks a verified ``func.func`` once and turns it into a flat list of
numpy closures over value slots; running it is then a tight loop. Backends and passes are
tested against this interpreter, so it favours clarity and exactness over speed:
float16/bfloat16 are computed in float32 and rounded per op (accumulations included),
as PyTorch does on the CPU. int8/uint8/int16 are computed natively (numpy wraps each
result to the dtype, as PyTorch does); a float converts to them through int32, as C's
truncation to ``int`` then to the narrow type (the compiled engines' conversion).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.ir import Operation

from nova.compiler import dialect as nd
from nova.core import philox
from nova.core import dtypes as dt
from nova.runtime import collectives

Kernel = Callable[..., np.ndarray]


class InterpreterError(RuntimeError):
    """A nova op could not be executed on its runtime data (e.g. an index out of range).

    ``outputs`` are the positions of the function results that depend on the failure
    (the others are still good), when known.
    """

    def __init__(self, message: str, outputs: tuple[int, ...] | None = None):
        super().__init__(message)
        self.outputs = outputs


def affected_outputs(reads: Sequence[tuple[int, ...]], writes: Sequence[int],
                     outputs: Sequence[int], failed: int) -> tuple[int, ...]:
    """Result positions that depend on step ``failed`` of a straight-line program whose
    step k reads slots ``reads[k]`` and writes slot ``writes[k]``."""
    bad = {writes[failed]}
    for k in range(failed + 1, len(writes)):
        if any(i in bad for i in reads[k]):
            bad.add(writes[k])
    return tuple(pos for pos, slot in enumerate(outputs) if slot in bad)


def run_region(block, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Execute the ops of a region (e.g. one ``nova.fusion`` kernel) on numpy inputs;
    used to explain a compiled kernel's failure with the interpreter's precise error."""
    values = {a: np.asarray(v) for a, v in zip(block.args, args)}
    out: list[np.ndarray] = []
    with np.errstate(all="ignore"):
        for op in block.ops:
            if op.name == "nova.yield":
                out = [values[v] for v in op.operands]
                continue
            try:
                values[op.results[0]] = np.asarray(_kernel(op)(*[values[v] for v in op.operands]))
            except InterpreterError:
                raise
            except (ValueError, IndexError, ArithmeticError) as e:
                raise InterpreterError(f"{op.name} failed: {e}") from e
    return out


def _dtype_of(value) -> dt.DType:
    return dt.from_mlir(nd.element_name(value.type.element_type))


def _compute(x: np.ndarray) -> np.ndarray:
    """Storage-only floats compute in float32."""
    if x.dtype in (dt.float16.np, dt.bfloat16.np):
        return x.astype(np.float32)
    return x



def _erf(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf     # on first use: not a cost of `import nova`
    return np.asarray(erf(x), dtype=x.dtype)


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Truncating division; the divisor -1 negates (wrapping: the smallest integer over
    -1 is itself, as PyTorch's), where numpy's floor_divide warns of the overflow."""
    if np.any(b == 0):
        raise InterpreterError("nova.div: integer division by zero")
    minus_one = b == -1
    d = np.where(minus_one, np.ones_like(b), b)
    q = a // d
    q = q + ((q < 0) & (q * d != a))  # floor -> truncation toward zero
    return np.where(minus_one, np.negative(q), q)


def _int_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a ** b``; a negative ``b`` gives PyTorch's truncated ``1 / a ** -b``: 1 for
    a = 1, +-1 for a = -1 (by the parity of b), 0 otherwise."""
    neg = b < 0
    p = np.power(a, np.where(neg, np.zeros_like(b), b))
    inverse = np.where((a == 1) | (a == -1), np.where(b % 2 != 0, a, np.ones_like(a)), 0)
    return np.where(neg, inverse.astype(p.dtype), p)


def _ints(a) -> tuple[int, ...]:
    return tuple(a.get_values())


def _scalar(attr) -> float | int:
    if isinstance(attr, FloatAttr):
        return attr.value.data
    assert isinstance(attr, IntegerAttr)
    return attr.value.data


Meaning = Callable[[Operation], Kernel]   # an op -> its numpy kernel, attributes bound


def _arith(f: Callable[..., np.ndarray], on_bool: Kernel | None = None,
           on_int: Kernel | None = None) -> Meaning:
    """An elementwise op: ``f`` on the operands (half floats computed in float32), the
    result rounded to the result's dtype; booleans and integers may mean something else
    (``add`` on i1 is logical or, ``div`` on integers truncates and checks for zero)."""
    def meaning(op: Operation) -> Kernel:
        odt = _dtype_of(op.results[0])
        if odt == dt.bool_ and on_bool is not None:
            return on_bool
        if not odt.is_floating_point and on_int is not None:
            return on_int
        store = odt.np
        return lambda *xs: f(*map(_compute, xs)).astype(store, copy=False)
    return meaning


def _ieee_maximum(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """IEEE 754-2019 ``maximum``: NaN propagates and +0 is above -0, whatever the operand
    order (np.maximum returns its second operand on a tie of zeros), as LLVM's
    ``llvm.maximum``, MLIR's ``arith.maximumf`` and the CUDA prelude's ``nv_max``."""
    return np.where(x == y, np.where(np.signbit(x), y, x), np.maximum(x, y))


def _ieee_minimum(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """IEEE 754-2019 ``minimum``: NaN propagates and -0 is below +0 (see _ieee_maximum)."""
    return np.where(x == y, np.where(np.signbit(y), y, x), np.minimum(x, y))


def _constant(op: nd.ConstantOp) -> Kernel:
    shape, store, value = nd.shape_of(op.result), _dtype_of(op.result).np, _scalar(op.value)
    return lambda: np.full(shape, value, dtype=store)


def _iota(op: nd.IotaOp) -> Kernel:
    """Positions counted in int64 and converted (a narrow integer wraps, as a cast)."""
    shape, store, d = nd.shape_of(op.result), _dtype_of(op.result).np, op.dim.value.data
    ax = [1] * len(shape)
    ax[d] = shape[d]
    return lambda: np.broadcast_to(np.arange(shape[d], dtype=np.int64).astype(store).reshape(ax),
                                   shape)


def _rng_uniform(op: nd.RngUniformOp) -> Kernel:
    shape, odt = nd.shape_of(op.result), _dtype_of(op.result)
    return lambda key: philox.uniform(int(key[0]), int(key[1]), shape, odt.name, odt.np)


def _bitcast(op: nd.BitcastOp) -> Kernel:
    """The stored bits read as the result's type (values are held in storage types)."""
    odt, idt = _dtype_of(op.result), _dtype_of(op.input)
    return lambda x: np.ascontiguousarray(np.asarray(x, idt.np)).view(odt.np)


def _cast(op: nd.CastOp) -> Kernel:
    """``x`` converted: to bool ``x != 0``; a float to int8/uint8/int16 truncated to
    int32 first, then wrapped (C's conversions: what the compiled engines do; PyTorch
    leaves a float outside the narrow type's range undefined)."""
    odt, idt = _dtype_of(op.result), _dtype_of(op.input)
    if odt == dt.bool_:
        return lambda x: x != 0
    if odt in dt.NARROW_INTS and idt.is_floating_point:
        return lambda x: _compute(x).astype(np.int32).astype(odt.np)
    return lambda x: x.astype(odt.np)


def _broadcast_in_dim(op: nd.BroadcastInDimOp) -> Kernel:
    shape, dims = nd.shape_of(op.result), _ints(op.dims)
    return lambda x: np.broadcast_to(
        x.reshape([x.shape[dims.index(i)] if i in dims else 1 for i in range(len(shape))]),
        shape)


def _slice(op: nd.SliceOp) -> Kernel:
    idx = tuple(slice(a, b, s) for a, b, s in zip(_ints(op.start), _ints(op.limit),
                                                   _ints(op.stride)))
    return lambda x: x[idx]


def _pad(op: nd.PadOp) -> Kernel:
    shape, store = nd.shape_of(op.result), _dtype_of(op.result).np
    lo, it = _ints(op.low), _ints(op.interior)

    def pad(x, v):
        res = np.full(shape, v[()], dtype=store)
        res[tuple(slice(l, l + (n - 1) * (i + 1) + 1, i + 1)
                  for l, n, i in zip(lo, x.shape, it))] = x
        return res
    return pad


def _reduce(f: Callable[..., np.ndarray]) -> Meaning:
    def meaning(op: Operation) -> Kernel:
        axes, store = _ints(op.axes), _dtype_of(op.results[0]).np
        return lambda x: f(_compute(x), axis=axes).astype(store, copy=False)
    return meaning


def _gather(op: nd.GatherOp) -> Kernel:
    d = op.dim.value.data
    size = nd.shape_of(op.input)[d]

    def gather(x, index):
        _check_index("gather", index, size)
        window = tuple(slice(0, n) if k != d else slice(None)
                       for k, n in enumerate(index.shape))
        return np.take_along_axis(x[window], index.astype(np.int64), axis=d)
    return gather


def _scatter_add(op: nd.ScatterAddOp) -> Kernel:
    d, store = op.dim.value.data, _dtype_of(op.result).np

    def scatter_add(x, index, src):
        _check_index("scatter_add", index, x.shape[d])
        res = _compute(x).copy()
        grid = list(np.indices(index.shape, sparse=True))
        grid[d] = index.astype(np.int64)
        np.add.at(res, tuple(grid), _compute(src))
        return res.astype(store, copy=False)
    return scatter_add


def _scatter(op: nd.ScatterOp) -> Kernel:
    d = op.dim.value.data

    def scatter(x, index, src):
        _check_index("scatter", index, x.shape[d])
        return _scatter_last_wins(x, index.astype(np.int64), src, d)
    return scatter


def _argsort(op: nd.ArgsortOp) -> Kernel:
    """numpy's stable argsort (NaN last); descending is the reverse of the ascending
    order of the reversed row, which keeps equal elements in their order and puts NaN
    first, without negating (an integer minimum has no negation)."""
    descending = bool(op.descending.value.data)

    def argsort(x):
        if not descending:
            return np.argsort(x, axis=-1, kind="stable").astype(np.int64)
        n = x.shape[-1]
        rev = np.argsort(x[..., ::-1], axis=-1, kind="stable")
        return (n - 1 - rev[..., ::-1]).astype(np.int64)
    return argsort


def _scan(f: Callable[..., np.ndarray]) -> Meaning:
    """cumsum/cumprod along the last dim: floats accumulate in float64 and each prefix
    is rounded to the result type once; integers accumulate in their own type."""
    def meaning(op: Operation) -> Kernel:
        store = _dtype_of(op.result).np
        reverse = bool(op.reverse.value.data)
        acc = np.float64 if np.issubdtype(store, np.floating) or store.kind == "V" else store

        def scan(x):
            x = _compute(x).astype(acc, copy=False)
            if reverse:
                return f(x[..., ::-1], axis=-1)[..., ::-1].astype(store)
            return f(x, axis=-1).astype(store, copy=False)
        return scan
    return meaning


def _wrap_index(op: nd.WrapIndexOp) -> Kernel:
    size, d = op.size.value.data, op.dim.value.data

    def wrap_index(index):
        bad = (index < -size) | (index >= size)
        if np.any(bad):
            raise InterpreterError(f"nova.wrap_index: index {index[bad].flat[0]} is out "
                                   f"of bounds for dim {d} with size {size}")
        return np.where(index < 0, index + size, index).astype(index.dtype, copy=False)
    return wrap_index


_COMPARE = {"lt": np.less, "le": np.less_equal, "eq": np.equal, "ne": np.not_equal,
            "gt": np.greater, "ge": np.greater_equal}

# What every nova op means, one row per op class: the definition the backends are
# tested against.

def _hidden(L: int, S: int, causal: bool) -> np.ndarray | bool:
    """Where key j is hidden from query i: j > i with ``causal``, nowhere otherwise."""
    return np.arange(S)[None, :] > np.arange(L)[:, None] if causal else False


def _attention_probabilities(q: np.ndarray, k: np.ndarray, scale: float, causal: bool,
                             with_lse: bool = False):
    """softmax(q k^T * scale) over the keys each query sees, in float64; a hidden key's
    probability is exactly 0, even in a row that is NaN (a NaN or inf score spreads to
    the keys its row sees, not through hidden ones). ``with_lse``: also each row's
    log-sum-exp of its visible scores."""
    s = np.matmul(q.astype(np.float64), np.swapaxes(k, -1, -2).astype(np.float64)) * scale
    hidden = _hidden(s.shape[-2], s.shape[-1], causal)
    s = np.where(hidden, -np.inf, s)
    peak = s.max(axis=-1, keepdims=True)
    e = np.exp(s - peak)
    total = e.sum(axis=-1, keepdims=True)
    p = np.where(hidden, 0.0, e / total)
    return (p, (peak + np.log(total))[..., 0]) if with_lse else p


def _dropout_factor(op: Operation, q: np.ndarray, k: np.ndarray,
                    rng: tuple[np.ndarray, ...]) -> np.ndarray | float:
    """What ``nova.attention(_grad)``'s dropout multiplies each probability by: the
    scale where the key's uniform draw over the (..., L, S) positions is >= the rate
    (the draw ``nova.rng_uniform`` makes for the composite's probability tensor), 0
    where it is not; 1 without dropout."""
    keep_scale = nd.attention_keep_scale(op)
    if keep_scale is None:
        return 1.0
    rate, factor = keep_scale
    key = rng[0]
    shape = q.shape[:-1] + (k.shape[-2],)
    u = philox.uniform(int(key[0]), int(key[1]), shape, "float32", np.float32)
    return np.where(u >= np.float32(rate), np.float64(np.float32(factor)), 0.0)


def _attention(op: nd.AttentionOp) -> Kernel:
    scale, causal = op.scale.value.data, bool(op.causal.value.data)

    def attention(q, k, v, *rng):
        p, lse = _attention_probabilities(q, k, scale, causal, with_lse=True)
        o = np.matmul(p * _dropout_factor(op, q, k, rng), v.astype(np.float64))
        batch = q.shape[:-2]
        return np.concatenate([o.reshape(batch + (-1,)), lse],
                              axis=-1).astype(np.float32)
    return attention


def _attention_grad(op: nd.AttentionGradOp) -> Kernel:
    scale, causal = op.scale.value.data, bool(op.causal.value.data)

    def attention_grad(q, k, v, _o, g, *rng):
        p = _attention_probabilities(q, k, scale, causal)
        z = _dropout_factor(op, q, k, rng)
        g64 = g.astype(np.float64)
        dv = np.matmul(np.swapaxes(p * z, -1, -2), g64)
        dp = np.matmul(g64, np.swapaxes(v, -1, -2).astype(np.float64)) * z
        ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) * scale
        ds = np.where(_hidden(p.shape[-2], p.shape[-1], causal), 0.0, ds)
        dq = np.matmul(ds, k.astype(np.float64))
        dk = np.matmul(np.swapaxes(ds, -1, -2), q.astype(np.float64))
        batch = q.shape[:-2]
        return np.concatenate([x.reshape(batch + (-1,)) for x in (dq, dk, dv)],
                              axis=-1).astype(np.float32)
    return attention_grad


MEANINGS: dict[type[Operation], Meaning] = {
    nd.ConstantOp: _constant,
    nd.IotaOp: _iota,
    nd.RngUniformOp: _rng_uniform,
    nd.NegOp: _arith(np.negative),
    nd.AbsOp: _arith(np.abs),
    nd.ExpOp: _arith(np.exp),
    nd.LogOp: _arith(np.log),
    nd.SqrtOp: _arith(np.sqrt),
    nd.RsqrtOp: _arith(lambda x: 1 / np.sqrt(x)),
    nd.ReciprocalOp: _arith(lambda x: 1 / x),
    nd.SinOp: _arith(np.sin),
    nd.CosOp: _arith(np.cos),
    nd.TanhOp: _arith(np.tanh),
    nd.ErfOp: _arith(_erf),
    nd.Expm1Op: _arith(np.expm1),
    nd.FloorOp: _arith(np.floor),
    nd.CeilOp: _arith(np.ceil),
    nd.RoundOp: _arith(np.round),
    nd.TruncOp: _arith(np.trunc),
    nd.Log1pOp: _arith(np.log1p),
    nd.CastOp: _cast,
    nd.BitcastOp: _bitcast,
    nd.AddOp: _arith(np.add, on_bool=np.logical_or),
    nd.SubOp: _arith(np.subtract),
    nd.MulOp: _arith(np.multiply, on_bool=np.logical_and),
    nd.DivOp: _arith(np.divide, on_int=_int_div),
    nd.MaximumOp: _arith(_ieee_maximum, on_bool=np.logical_or),
    nd.MinimumOp: _arith(_ieee_minimum, on_bool=np.logical_and),
    nd.PowOp: _arith(np.power, on_int=_int_pow),
    nd.RemOp: _arith(np.fmod),
    # (in float64, rounded once: numpy's float32 arctan2 is an ulp off at times)
    nd.Atan2Op: _arith(lambda y, x: np.arctan2(y.astype(np.float64), x.astype(np.float64))),
    nd.AndOp: lambda op: np.bitwise_and,      # (logical on bool arrays)
    nd.OrOp: lambda op: np.bitwise_or,
    nd.XorOp: lambda op: np.bitwise_xor,
    nd.NotOp: lambda op: np.invert,
    nd.CompareOp: lambda op: _COMPARE[op.direction.data],
    nd.WhereOp: lambda op: np.where,
    nd.BroadcastInDimOp: _broadcast_in_dim,
    nd.ReshapeOp: lambda op: (lambda shape: lambda x: x.reshape(shape))(nd.shape_of(op.result)),
    nd.TransposeOp: lambda op: (lambda perm: lambda x: np.transpose(x, perm))(_ints(op.perm)),
    nd.SliceOp: _slice,
    nd.PadOp: _pad,
    nd.ConcatOp: lambda op: (lambda d: lambda *xs: np.concatenate(xs, axis=d))(op.dim.value.data),
    nd.ReduceSumOp: _reduce(np.sum),
    nd.ReduceMaxOp: _reduce(np.max),
    nd.MatmulOp: lambda op: (lambda store: lambda a, b: np.matmul(
        _compute(a), _compute(b)).astype(store, copy=False))(_dtype_of(op.result).np),
    nd.GatherOp: _gather,
    nd.ScatterAddOp: _scatter_add,
    nd.ScatterOp: _scatter,
    nd.WrapIndexOp: _wrap_index,
    nd.ArgsortOp: _argsort,
    nd.CumsumOp: _scan(np.cumsum),
    nd.CumprodOp: _scan(np.cumprod),
    nd.AttentionOp: _attention,
    nd.AttentionGradOp: _attention_grad,
    # the pair is one blocking reduction at the start; the wait passes it on
    nd.AllReduceStartOp: lambda op: lambda x: collectives.reduce_now(op, x),
    nd.AllReduceWaitOp: lambda op: lambda x: x,
}


def _kernel(op: Operation) -> Kernel:
    """The numpy meaning of one nova op, with its attributes bound."""
    meaning = MEANINGS.get(type(op))
    if meaning is None:
        raise NotImplementedError(f"interpreter: no meaning defined for {op.name}")
    return meaning(op)


def _scatter_last_wins(x: np.ndarray, index: np.ndarray, src: np.ndarray,
                       d: int) -> np.ndarray:
    """``x`` with ``src`` written at ``index`` along ``d``; of several updates of one
    element the last in row-major order of ``index`` wins. Stated explicitly, not left to
    numpy's fancy assignment, whose order for duplicates is not specified."""
    res = x.copy()
    if not index.size:
        return res
    grid = [g.ravel() for g in np.indices(index.shape)]
    grid[d] = index.ravel()
    flat = np.ravel_multi_index(tuple(grid), x.shape)
    _, first_from_end = np.unique(flat[::-1], return_index=True)
    last = flat.size - 1 - first_from_end
    res.reshape(-1)[flat[last]] = src.reshape(-1)[last]
    return res


def _check_index(op: str, index: np.ndarray, size: int) -> None:
    if index.size and (index.min() < 0 or index.max() >= size):
        raise InterpreterError(f"nova.{op}: index values must lie in [0, {size}), got "
                               f"range [{index.min()}, {index.max()}]")


class Program:
    """A compiled ``func.func``: a list of (kernel, operand slots) steps."""

    def __init__(self, fn: func.FuncOp):
        slots: dict = {}
        for a in fn.body.block.args:
            slots[a] = len(slots)
        self.n_args = len(slots)
        self.steps: list[tuple[Kernel, tuple[int, ...]]] = []
        self.op_names: list[str] = []
        self.outputs: tuple[int, ...] = ()
        for op in fn.body.block.ops:
            if isinstance(op, func.ReturnOp):
                self.outputs = tuple(slots[v] for v in op.operands)
                continue
            self.steps.append((_kernel(op), tuple(slots[v] for v in op.operands)))
            self.op_names.append(op.name)
            slots[op.results[0]] = len(slots)
        # Free each value after its last reader, so peak memory follows liveness rather
        # than holding every intermediate until the step ends.
        last_use: dict[int, int] = {}
        for k, (_, operands) in enumerate(self.steps):
            for i in operands:
                last_use[i] = k
        keep = set(self.outputs)
        self.release: list[tuple[int, ...]] = [() for _ in self.steps]
        for slot, k in last_use.items():
            if slot not in keep:
                self.release[k] += (slot,)

    def _affected(self, k: int) -> tuple[int, ...]:
        return affected_outputs([ops for _, ops in self.steps],
                                [self.n_args + j for j in range(len(self.steps))],
                                self.outputs, k)

    def __call__(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        if len(args) != self.n_args:
            raise InterpreterError(f"step expects {self.n_args} arguments, got {len(args)}")
        values = list(args)
        with np.errstate(all="ignore"):  # inf/nan follow IEEE, as on every backend
            for k, (kernel, operands) in enumerate(self.steps):
                try:
                    values.append(np.asarray(kernel(*[values[i] for i in operands])))
                    for i in self.release[k]:
                        values[i] = None
                except InterpreterError as e:
                    raise InterpreterError(f"{e} (value %{self.n_args + k})",
                                           self._affected(k)) from None
                except (ValueError, IndexError, ArithmeticError) as e:
                    raise InterpreterError(f"{self.op_names[k]} (value %{self.n_args + k}) "
                                           f"failed: {e}", self._affected(k)) from e
        return [values[i] for i in self.outputs]


def compile_function(fn: func.FuncOp) -> Program:
    return Program(fn)

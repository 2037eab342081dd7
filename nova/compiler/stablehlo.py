"""A step as a StableHLO module: the nova function in the ops XLA and IREE compile.

Nova's ops map almost one to one onto StableHLO, so a step (its ``nova`` stage: after
the graph passes, before fusion) translates op by op, one row of ``LOWERINGS`` per op
class, each producing what the interpreter (``nova.runtime.interpreter``, the
definition of every op) computes:

- float16/bfloat16 compute in float32 and round per op, as the interpreter does; sums
  of a scan accumulate in float64 and round once.
- ``add``/``mul``/``maximum``/``minimum`` on booleans are or/and/or/and; integer
  ``div`` truncates toward zero, and at the quotients StableHLO leaves to the
  implementation it computes Nova's: the smallest integer over -1 is itself (so its
  floor quotient too, and its remainder 0); a zero divisor divides by 1 (``_divide``).
- ``argsort`` is stable with NaN last (descending: the reverse of the ascending order
  of the reversed row, so equal elements keep their order and NaN comes first); the
  comparator breaks ties by position, as IREE's sort is not stable.
- ``scatter``: of several updates of one element the last in row-major order of the
  index wins, exactly (StableHLO leaves the order of a scatter's updates unspecified,
  so the winner is chosen by position and its bits added to zeros as integers).
- ``rng_uniform`` is Nova's Philox4x32-10 written in unsigned integer ops, so a step
  exported with dropout draws the same masks.

What cannot be said in StableHLO is refused, naming the op: a step with collectives
(``nova.distributed``), and the fused attention ops (``nv.export.stablehlo`` keeps
attention as its composite, which XLA and IREE fuse themselves). What a
StableHLO program cannot do is *report* an index out of range or an integer division
by zero, which Nova raises as an error: the exported step assumes in-range indices and
nonzero divisors (StableHLO's gather clamps, its scatter skips; an integer divided by
zero gives itself, the CPU kernel's value before it fails the step).

The text is in MLIR's generic op form (``"stablehlo.add"(%a, %b) : (...) -> ...``),
which every StableHLO consumer parses; ``tests/compiler/test_stablehlo.py`` compiles
steps with IREE and runs them against Nova's CPU engine.
"""
from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp
from xdsl.ir import Operation, SSAValue

from nova.compiler import dialect as nd
from nova.core import philox

HALF = ("f16", "bf16")
INTS = {"i1": 8, "i8": 8, "ui8": 8, "i16": 16, "i32": 32, "i64": 64}   # (i1 as i8 where bits
# matter). Nova's element type names are StableHLO's: i8/i16 signed, ui8 unsigned, and
# StableHLO computes them in their own width, wrapping, as Nova does.
NARROW = ("i8", "ui8", "i16")
_FLOAT_BITS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}


class StableHLOExportError(ValueError):
    """The step holds something StableHLO cannot express (the message names it)."""


def _ttype(shape: Sequence[int], elem: str) -> str:
    return f"tensor<{''.join(f'{n}x' for n in shape)}{elem}>"


def _array(values: Sequence[int]) -> str:
    return f"array<i64: {', '.join(str(int(v)) for v in values)}>" if len(values) else \
        "array<i64>"


def _float_literal(value: float, elem: str) -> str:
    """An exact literal of ``value`` in ``elem``: its bit pattern in hex."""
    if elem == "f32":
        return "0x" + struct.pack(">f", value).hex().upper()
    if elem == "f64":
        return "0x" + struct.pack(">d", value).hex().upper()
    if elem == "f16":
        return "0x" + np.array(value, np.float16).view(np.uint16).item().to_bytes(2, "big").hex().upper()
    import ml_dtypes
    bits = np.array(value, ml_dtypes.bfloat16).view(np.uint16).item()
    return "0x" + bits.to_bytes(2, "big").hex().upper()


class Writer:
    """The module's text, built op by op: SSA names, types, and the common shapes of
    ops (elementwise, constants, conversions) that the lowerings compose."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[SSAValue, str] = {}
        self.count = 0
        self.indent = "    "

    # ---- values

    def fresh(self) -> str:
        self.count += 1
        return f"%v{self.count}"

    def of(self, value: SSAValue) -> str:
        return self.names[value]

    def op(self, name: str, operands: Sequence[str], operand_types: Sequence[str],
           result: str, attrs: str = "", region: str = "") -> str:
        """``result = name(operands) region {attrs}``; returns the result's name."""
        r = self.fresh()
        attr = f" {{{attrs}}}" if attrs else ""
        body = f" ({region})" if region else ""
        self.lines.append(f"{self.indent}{r} = \"{name}\"({', '.join(operands)}){body}{attr} : "
                          f"({', '.join(operand_types)}) -> {result}")
        return r

    def multi(self, name: str, operands: Sequence[str], operand_types: Sequence[str],
              results: Sequence[str], attrs: str = "", region: str = "") -> list[str]:
        """An op with several results; returns their names."""
        r = self.fresh()
        attr = f" {{{attrs}}}" if attrs else ""
        body = f" ({region})" if region else ""
        self.lines.append(f"{self.indent}{r}:{len(results)} = \"{name}\"({', '.join(operands)})"
                          f"{body}{attr} : ({', '.join(operand_types)}) -> "
                          f"({', '.join(results)})")
        return [f"{r}#{k}" for k in range(len(results))]

    # ---- common ops

    def constant(self, value: float | int | bool, shape: Sequence[int], elem: str) -> str:
        if elem == "i1":
            lit = "true" if value else "false"
        elif elem in _FLOAT_BITS:
            lit = _float_literal(float(value), elem)
        else:
            lit = str(int(value))
        t = _ttype(shape, elem)
        return self.op("stablehlo.constant", [], [], t, f"value = dense<{lit}> : {t}")

    def unary(self, name: str, x: str, shape: Sequence[int], elem: str,
              out_elem: str | None = None) -> str:
        return self.op(name, [x], [_ttype(shape, elem)], _ttype(shape, out_elem or elem))

    def binary(self, name: str, a: str, b: str, shape: Sequence[int], elem: str) -> str:
        t = _ttype(shape, elem)
        return self.op(name, [a, b], [t, t], t)

    def convert(self, x: str, shape: Sequence[int], src: str, dst: str) -> str:
        if src == dst:
            return x
        return self.unary("stablehlo.convert", x, shape, src, dst)

    def bitcast(self, x: str, shape: Sequence[int], src: str, dst: str) -> str:
        return self.unary("stablehlo.bitcast_convert", x, shape, src, dst)

    def compare(self, direction: str, a: str, b: str, shape: Sequence[int], elem: str) -> str:
        kind = "FLOAT" if elem in _FLOAT_BITS else ("UNSIGNED" if elem in ("i1",) or
                                                    elem.startswith("ui") else "SIGNED")
        t = _ttype(shape, elem)
        return self.op("stablehlo.compare", [a, b], [t, t], _ttype(shape, "i1"),
                       f"comparison_direction = #stablehlo<comparison_direction "
                       f"{direction.upper()}>, compare_type = #stablehlo<comparison_type "
                       f"{kind}>")

    def select(self, cond: str, a: str, b: str, shape: Sequence[int], elem: str) -> str:
        t = _ttype(shape, elem)
        return self.op("stablehlo.select", [cond, a, b], [_ttype(shape, "i1"), t, t], t)

    def broadcast(self, x: str, src_shape: Sequence[int], dims: Sequence[int],
                  shape: Sequence[int], elem: str) -> str:
        return self.op("stablehlo.broadcast_in_dim", [x], [_ttype(src_shape, elem)],
                       _ttype(shape, elem), f"broadcast_dimensions = {_array(dims)}")

    def reshape(self, x: str, src: Sequence[int], dst: Sequence[int], elem: str) -> str:
        return self.op("stablehlo.reshape", [x], [_ttype(src, elem)], _ttype(dst, elem))

    def reverse(self, x: str, shape: Sequence[int], elem: str, dims: Sequence[int]) -> str:
        t = _ttype(shape, elem)
        return self.op("stablehlo.reverse", [x], [t], t, f"dimensions = {_array(dims)}")

    def iota(self, shape: Sequence[int], elem: str, dim: int) -> str:
        return self.op("stablehlo.iota", [], [], _ttype(shape, elem), f"iota_dimension = {dim} : i64")

    def region(self, elems: Sequence[str],
               body: Callable[[Writer, list[str]], list[tuple[str, str]]]) -> str:
        """A reduction or comparator region: one block over scalars of ``elems``,
        returning what ``body(writer, arguments)`` gives as (name, element) pairs."""
        inner = Writer()
        inner.count = self.count + 1
        inner.indent = self.indent + "  "
        args = [f"%r{inner.count}_{k}" for k in range(len(elems))]
        outs = body(inner, args)
        self.count = inner.count        # names stay unique across the regions
        head = ", ".join(f"{a}: {_ttype((), e)}" for a, e in zip(args, elems))
        out_types = ", ".join(_ttype((), e) for _, e in outs)
        return "\n".join([f"{{\n{self.indent}^bb0({head}):", *inner.lines,
                          f"{inner.indent}\"stablehlo.return\"({', '.join(n for n, _ in outs)})"
                          f" : ({out_types}) -> ()", f"{self.indent}}}"])


def _elem(value: SSAValue) -> str:
    return nd.element_name(value.type.element_type)


def _shape(value: SSAValue) -> tuple[int, ...]:
    return nd.shape_of(value)


def _ints(attr) -> tuple[int, ...]:
    return tuple(attr.get_values())


def _computed(w: Writer, value: SSAValue) -> tuple[str, str]:
    """An operand as it is computed: half floats widened to float32 (name, element)."""
    e = _elem(value)
    if e in HALF:
        return w.convert(w.of(value), _shape(value), e, "f32"), "f32"
    return w.of(value), e


def _rounded(w: Writer, x: str, shape: Sequence[int], elem: str, result: SSAValue) -> str:
    """A value computed in ``elem`` as the result's element type."""
    return w.convert(x, shape, elem, _elem(result))


# ---------------------------------------------------------------- the table

Lowering = Callable[[Writer, Operation], str]


def _elementwise(name: str, on_bool: str | None = None, on_int: str | None = None) -> Lowering:
    """An elementwise op as StableHLO op ``name`` (half floats through float32);
    booleans and integers may map to another op (or: ``add`` on i1)."""
    def lower(w: Writer, op: Operation) -> str:
        out = _elem(op.results[0])
        shape = _shape(op.results[0])
        if out == "i1" and on_bool is not None:
            chosen = on_bool
        elif out not in _FLOAT_BITS and on_int is not None:
            chosen = on_int
        else:
            chosen = name
        args = [_computed(w, v) for v in op.operands]
        elem = args[0][1]
        r = w.op(chosen, [a for a, _ in args], [_ttype(shape, elem)] * len(args),
                 _ttype(shape, elem))
        return _rounded(w, r, shape, elem, op.results[0])
    return lower


def _reciprocal(w: Writer, op: nd.ReciprocalOp) -> str:
    x, elem = _computed(w, op.input)
    shape = _shape(op.input)
    r = w.binary("stablehlo.divide", w.constant(1.0, shape, elem), x, shape, elem)
    return _rounded(w, r, shape, elem, op.result)


def _trunc(w: Writer, op: nd.TruncOp) -> str:
    """Toward zero: ceil below 0, floor above (-0.3 -> -0.0, as numpy)."""
    x, elem = _computed(w, op.input)
    shape = _shape(op.input)
    neg = w.compare("lt", x, w.constant(0.0, shape, elem), shape, elem)
    r = w.select(neg, w.unary("stablehlo.ceil", x, shape, elem),
                 w.unary("stablehlo.floor", x, shape, elem), shape, elem)
    return _rounded(w, r, shape, elem, op.result)


def _divide(w: Writer, op: nd.DivOp) -> str:
    """Floats: IEEE division (half floats through float32). Integers truncate toward
    zero, with Nova's rule where StableHLO leaves the quotient to the implementation
    (and LLVM's ``sdiv``, which a consumer may lower it to, to undefined behaviour;
    x86's ``idiv`` traps): a divisor of -1 negates, so the smallest integer over -1
    wraps to itself (its remainder, built from this quotient, is 0), as every Nova
    engine and PyTorch compute it; a zero divisor, which Nova reports as an error and
    an exported step cannot, divides by 1, as Nova's CPU kernel does before it fails
    the step. The ``divide`` itself only ever sees a divisor other than 0 and -1."""
    out = _elem(op.result)
    if out in _FLOAT_BITS:
        return _elementwise("stablehlo.divide")(w, op)
    shape = _shape(op.result)
    x, y = w.of(op.lhs), w.of(op.rhs)
    one, zero = w.constant(1, shape, out), w.constant(0, shape, out)
    special = w.compare("eq", y, zero, shape, out)
    signed = out in INTS and out != "i1" and not out.startswith("ui")
    if signed:
        minus_one = w.compare("eq", y, w.constant(-1, shape, out), shape, out)
        special = w.binary("stablehlo.or", special, minus_one, shape, "i1")
    q = w.binary("stablehlo.divide", x, w.select(special, one, y, shape, out), shape, out)
    if not signed:
        return q
    # -x for the divisor -1, without an overflowing negate: the smallest integer is kept
    smallest = w.constant(-(1 << (INTS[out] - 1)), shape, out)
    at_min = w.compare("eq", x, smallest, shape, out)
    flipped = w.unary("stablehlo.negate", w.select(at_min, zero, x, shape, out), shape, out)
    negated = w.select(at_min, x, flipped, shape, out)
    return w.select(minus_one, negated, q, shape, out)


def _constant(w: Writer, op: nd.ConstantOp) -> str:
    attr = op.value
    value = attr.value.data if isinstance(attr, (FloatAttr, IntegerAttr)) else attr
    return w.constant(value, _shape(op.result), _elem(op.result))


def _iota(w: Writer, op: nd.IotaOp) -> str:
    return w.iota(_shape(op.result), _elem(op.result), op.dim.value.data)


def _cast(w: Writer, op: nd.CastOp) -> str:
    src, dst, shape = _elem(op.input), _elem(op.result), _shape(op.input)
    x = w.of(op.input)
    if dst == "i1":           # x != 0
        return w.compare("ne", x, w.constant(0, shape, src), shape, src)
    if dst in NARROW and src in _FLOAT_BITS:    # truncated to i32, then wrapped, as Nova
        x, src = w.convert(x, shape, src, "i32"), "i32"
    return w.convert(x, shape, src, dst)


def _bitcast(w: Writer, op: nd.BitcastOp) -> str:
    """Stored bits reinterpreted: StableHLO's ``bitcast_convert`` on the storage types."""
    return w.bitcast(w.of(op.input), _shape(op.input), _elem(op.input), _elem(op.result))


def _compare(w: Writer, op: nd.CompareOp) -> str:
    (a, elem), (b, _) = _computed(w, op.lhs), _computed(w, op.rhs)
    return w.compare(op.direction.data, a, b, _shape(op.lhs), elem)


def _where(w: Writer, op: nd.WhereOp) -> str:
    return w.select(w.of(op.cond), w.of(op.on_true), w.of(op.on_false),
                    _shape(op.result), _elem(op.result))


def _broadcast_in_dim(w: Writer, op: nd.BroadcastInDimOp) -> str:
    return w.broadcast(w.of(op.input), _shape(op.input), _ints(op.dims),
                       _shape(op.result), _elem(op.result))


def _reshape(w: Writer, op: nd.ReshapeOp) -> str:
    return w.reshape(w.of(op.input), _shape(op.input), _shape(op.result), _elem(op.result))


def _transpose(w: Writer, op: nd.TransposeOp) -> str:
    e = _elem(op.result)
    return w.op("stablehlo.transpose", [w.of(op.input)], [_ttype(_shape(op.input), e)],
                _ttype(_shape(op.result), e), f"permutation = {_array(_ints(op.perm))}")


def _slice(w: Writer, op: nd.SliceOp) -> str:
    e = _elem(op.result)
    return w.op("stablehlo.slice", [w.of(op.input)], [_ttype(_shape(op.input), e)],
                _ttype(_shape(op.result), e),
                f"start_indices = {_array(_ints(op.start))}, limit_indices = "
                f"{_array(_ints(op.limit))}, strides = {_array(_ints(op.stride))}")


def _pad(w: Writer, op: nd.PadOp) -> str:
    e = _elem(op.result)
    return w.op("stablehlo.pad", [w.of(op.input), w.of(op.padding_value)],
                [_ttype(_shape(op.input), e), _ttype((), e)], _ttype(_shape(op.result), e),
                f"edge_padding_low = {_array(_ints(op.low))}, edge_padding_high = "
                f"{_array(_ints(op.high))}, interior_padding = {_array(_ints(op.interior))}")


def _concat(w: Writer, op: nd.ConcatOp) -> str:
    e = _elem(op.result)
    return w.op("stablehlo.concatenate", [w.of(v) for v in op.inputs],
                [_ttype(_shape(v), e) for v in op.inputs], _ttype(_shape(op.result), e),
                f"dimension = {op.dim.value.data} : i64")


def _scalar_region(w: Writer, elem: str, name: str) -> str:
    def body(inner: Writer, args: list[str]) -> list[tuple[str, str]]:
        return [(inner.binary(name, args[0], args[1], (), elem), elem)]
    return w.region([elem, elem], body)


def _reduce_to(w: Writer, x: str, shape: Sequence[int], elem: str, axes: Sequence[int],
               init: float | int | bool, combine: str) -> str:
    out = tuple(n for i, n in enumerate(shape) if i not in axes)
    return w.op("stablehlo.reduce", [x, w.constant(init, (), elem)],
                [_ttype(shape, elem), _ttype((), elem)], _ttype(out, elem),
                f"dimensions = {_array(axes)}", _scalar_region(w, elem, combine))


def _reduce(kind: str) -> Lowering:
    def lower(w: Writer, op: nd.ReduceOp) -> str:
        x, elem = _computed(w, op.input)
        shape, axes = _shape(op.input), _ints(op.axes)
        if kind == "sum":
            init, combine = (False, "stablehlo.or") if elem == "i1" else (0, "stablehlo.add")
        elif elem == "i1":
            init, combine = False, "stablehlo.or"
        elif elem in _FLOAT_BITS:
            init, combine = float("-inf"), "stablehlo.maximum"
        else:
            init = 0 if elem == "ui8" else -(2 ** (INTS[elem] - 1))
            combine = "stablehlo.maximum"
        r = _reduce_to(w, x, shape, elem, axes, init, combine)
        return _rounded(w, r, _shape(op.results[0]), elem, op.results[0])
    return lower


def _matmul(w: Writer, op: nd.MatmulOp) -> str:
    (a, elem), (b, _) = _computed(w, op.lhs), _computed(w, op.rhs)
    sa, sb, out = _shape(op.lhs), _shape(op.rhs), _shape(op.result)
    batch = list(range(len(sa) - 2))
    dims = (f"dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = {batch}, "
            f"rhs_batching_dimensions = {batch}, lhs_contracting_dimensions = "
            f"[{len(sa) - 1}], rhs_contracting_dimensions = [{len(sb) - 2}]>")
    r = w.op("stablehlo.dot_general", [a, b], [_ttype(sa, elem), _ttype(sb, elem)],
             _ttype(out, elem), dims)
    return _rounded(w, r, out, elem, op.result)


def _coordinates(w: Writer, index: SSAValue, dim: int) -> tuple[str, str]:
    """Full coordinates of every element of ``index`` into a tensor indexed along
    ``dim`` (torch.gather's addressing): ``index`` along ``dim``, the element's own
    position elsewhere; shape ``index.shape + (rank,)``, and its type."""
    ish, ie = _shape(index), _elem(index)
    rank = len(ish)
    one = ish + (1,)
    parts = []
    for k in range(rank):
        part = w.of(index) if k == dim else w.iota(ish, ie, k)
        parts.append(w.reshape(part, ish, one, ie))
    full = ish + (rank,)
    if rank == 1:
        return parts[0], _ttype(full, ie)
    coords = w.op("stablehlo.concatenate", parts, [_ttype(one, ie)] * rank, _ttype(full, ie),
                  f"dimension = {rank} : i64")
    return coords, _ttype(full, ie)


def _point_dims(rank: int) -> str:
    return ", ".join(str(k) for k in range(rank))


def _gather_at(w: Writer, x: str, xshape: Sequence[int], elem: str, coords: str,
               coords_type: str, out_shape: Sequence[int]) -> str:
    rank = len(xshape)
    return w.op("stablehlo.gather", [x, coords], [_ttype(xshape, elem), coords_type],
                _ttype(out_shape, elem),
                f"dimension_numbers = #stablehlo.gather<collapsed_slice_dims = "
                f"[{_point_dims(rank)}], start_index_map = [{_point_dims(rank)}], "
                f"index_vector_dim = {rank}>, slice_sizes = {_array([1] * rank)}, "
                f"indices_are_sorted = false")


def _scatter_at(w: Writer, x: str, xshape: Sequence[int], elem: str, coords: str,
                coords_type: str, updates: str, ushape: Sequence[int], combine: str) -> str:
    rank = len(xshape)
    return w.op("stablehlo.scatter", [x, coords, updates],
                [_ttype(xshape, elem), coords_type, _ttype(ushape, elem)],
                _ttype(xshape, elem),
                f"scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = "
                f"[{_point_dims(rank)}], scatter_dims_to_operand_dims = "
                f"[{_point_dims(rank)}], index_vector_dim = {rank}>, "
                f"indices_are_sorted = false, unique_indices = false",
                _scalar_region(w, elem, combine))


def _gather(w: Writer, op: nd.GatherOp) -> str:
    coords, ctype = _coordinates(w, op.index, op.dim.value.data)
    return _gather_at(w, w.of(op.input), _shape(op.input), _elem(op.input), coords, ctype,
                      _shape(op.result))


def _scatter_add(w: Writer, op: nd.ScatterAddOp) -> str:
    coords, ctype = _coordinates(w, op.index, op.dim.value.data)
    (x, elem), (src, _) = _computed(w, op.input), _computed(w, op.src)
    combine = "stablehlo.or" if elem == "i1" else "stablehlo.add"
    r = _scatter_at(w, x, _shape(op.input), elem, coords, ctype, src, _shape(op.src), combine)
    return _rounded(w, r, _shape(op.result), elem, op.result)


def _scatter(w: Writer, op: nd.ScatterOp) -> str:
    """Last update wins, by position: each target's winning position is the largest
    that writes it (a max-scatter of positions), and only the winners' bits -- as
    integers, so nothing rounds -- are added to zeros."""
    coords, ctype = _coordinates(w, op.index, op.dim.value.data)
    xshape, ushape, elem = _shape(op.input), _shape(op.src), _elem(op.input)
    n = int(np.prod(ushape, dtype=np.int64))
    order = w.reshape(w.iota((n,), "i64", 0), (n,), ushape, "i64")
    win = _scatter_at(w, w.constant(-1, xshape, "i64"), xshape, "i64", coords, ctype, order,
                      ushape, "stablehlo.maximum")
    mine = w.compare("eq", _gather_at(w, win, xshape, "i64", coords, ctype, ushape), order,
                     ushape, "i64")
    ibits = f"i{_FLOAT_BITS[elem]}" if elem in _FLOAT_BITS else ("i8" if elem == "i1" else elem)

    def as_bits(v: str, shape: Sequence[int]) -> str:
        if elem in _FLOAT_BITS:
            return w.bitcast(v, shape, elem, ibits)
        return w.convert(v, shape, elem, ibits)
    src = w.select(mine, as_bits(w.of(op.src), ushape), w.constant(0, ushape, ibits), ushape, ibits)
    acc = _scatter_at(w, w.constant(0, xshape, ibits), xshape, ibits, coords, ctype, src,
                      ushape, "stablehlo.add")
    if elem in _FLOAT_BITS:
        value = w.bitcast(acc, xshape, ibits, elem)
    elif elem == "i1":
        value = w.compare("ne", acc, w.constant(0, xshape, ibits), xshape, ibits)
    else:
        value = acc
    written = w.compare("ne", win, w.constant(-1, xshape, "i64"), xshape, "i64")
    return w.select(written, value, w.of(op.input), xshape, elem)


def _argsort_ascending(w: Writer, x: str, shape: Sequence[int], elem: str) -> str:
    """Positions of the last axis in ascending order, NaN last, equal elements in
    their order: the comparator orders (value, position) pairs totally, so the result
    does not depend on whether the consumer's sort is stable."""
    last = len(shape) - 1
    positions = w.iota(shape, "i64", last)

    def less(inner: Writer, args: list[str]) -> list[tuple[str, str]]:
        a, b, pa, pb = args

        def before(u: str, v: str) -> str:          # u sorts before v, by value
            lt = inner.compare("lt", u, v, (), elem)
            if elem not in _FLOAT_BITS:
                return lt
            u_num = inner.compare("eq", u, u, (), elem)
            v_nan = inner.compare("ne", v, v, (), elem)
            return inner.binary("stablehlo.or", lt,
                                inner.binary("stablehlo.and", u_num, v_nan, (), "i1"), (), "i1")
        ab, ba = before(a, b), before(b, a)
        tie = inner.unary("stablehlo.not", inner.binary("stablehlo.or", ab, ba, (), "i1"),
                          (), "i1")
        earlier = inner.compare("lt", pa, pb, (), "i64")
        return [(inner.binary("stablehlo.or", ab,
                              inner.binary("stablehlo.and", tie, earlier, (), "i1"), (), "i1"),
                 "i1")]
    region = w.region([elem, elem, "i64", "i64"], less)
    _, order = w.multi("stablehlo.sort", [x, positions], [_ttype(shape, elem), _ttype(shape, "i64")],
                       [_ttype(shape, elem), _ttype(shape, "i64")],
                       f"dimension = {last} : i64, is_stable = true", region)
    return order


def _argsort(w: Writer, op: nd.ArgsortOp) -> str:
    x, elem = _computed(w, op.input)
    shape = _shape(op.input)
    if not op.descending.value.data:
        return _argsort_ascending(w, x, shape, elem)
    last = len(shape) - 1
    rev = _argsort_ascending(w, w.reverse(x, shape, elem, [last]), shape, elem)
    back = w.reverse(rev, shape, "i64", [last])
    return w.binary("stablehlo.subtract", w.constant(shape[last] - 1, shape, "i64"), back,
                    shape, "i64")


def _scan(kind: str) -> Lowering:
    """cumsum/cumprod along the last axis: a reduce_window over each prefix, floats
    accumulated in float64 and rounded once."""
    def lower(w: Writer, op: nd._ScanOp) -> str:
        shape, out = _shape(op.input), _elem(op.result)
        acc = "f64" if out in _FLOAT_BITS else out
        x = w.convert(w.of(op.input), shape, _elem(op.input), acc)
        last = len(shape) - 1
        if op.reverse.value.data:
            x = w.reverse(x, shape, acc, [last])
        n = shape[last] if shape else 1
        window = [1] * len(shape)
        window[last] = n
        padding = [[0, 0]] * len(shape)
        padding[last] = [n - 1, 0]
        pad_text = ", ".join(f"[{a}, {b}]" for a, b in padding)
        init, combine = (0, "stablehlo.add") if kind == "sum" else (1, "stablehlo.multiply")
        r = w.op("stablehlo.reduce_window", [x, w.constant(init, (), acc)],
                 [_ttype(shape, acc), _ttype((), acc)], _ttype(shape, acc),
                 f"window_dimensions = {_array(window)}, window_strides = "
                 f"{_array([1] * len(shape))}, padding = dense<[{pad_text}]> : "
                 f"tensor<{len(shape)}x2xi64>", _scalar_region(w, acc, combine))
        if op.reverse.value.data:
            r = w.reverse(r, shape, acc, [last])
        return w.convert(r, shape, acc, out)
    return lower


def _wrap_index(w: Writer, op: nd.WrapIndexOp) -> str:
    shape, e = _shape(op.input), _elem(op.input)
    x = w.of(op.input)
    neg = w.compare("lt", x, w.constant(0, shape, e), shape, e)
    return w.select(neg, w.binary("stablehlo.add", x, w.constant(op.size.value.data, shape, e),
                                  shape, e), x, shape, e)


def _rng_uniform(w: Writer, op: nd.RngUniformOp) -> str:
    """Philox4x32-10 (``nova.core.philox``) in ui64 arithmetic: element i uses counter
    (i, offset) and key seed, ``key`` = (seed, offset)."""
    shape, out = _shape(op.result), _elem(op.result)
    n = int(np.prod(shape, dtype=np.int64))
    u64, vec = "ui64", (n,)

    def scalar_of_key(k: int) -> str:
        part = w.op("stablehlo.slice", [w.of(op.key)], [_ttype((2,), "i64")], _ttype((1,), "i64"),
                    f"start_indices = {_array([k])}, limit_indices = {_array([k + 1])}, "
                    f"strides = {_array([1])}")
        bits = w.bitcast(part, (1,), "i64", u64)
        return w.broadcast(bits, (1,), [0], vec, u64)

    ops = philox.NamedWordOps(lambda v: w.constant(v, vec, u64),
                              lambda n, a, b: w.binary(n, a, b, vec, u64), _WORD_OPS)
    seed, offset, i = scalar_of_key(0), scalar_of_key(1), w.iota(vec, u64, 0)
    words = philox.rounds([ops.low32(i), ops.shr(i, 32), ops.low32(offset), ops.shr(offset, 32)],
                          [ops.low32(seed), ops.shr(seed, 32)], ops)
    name = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64"}[out]
    word, bits = philox.mantissa(words, name, ops)
    u = w.binary("stablehlo.multiply", w.convert(word, vec, u64, "f64"),
                 w.constant(2.0 ** -bits, vec, "f64"), vec, "f64")
    u = w.convert(u, vec, "f64", out)
    return w.reshape(u, vec, shape, out) if tuple(shape) != vec else u


# Philox's word ops (``philox.NamedWordOps``) as StableHLO ops on ui64 tensors
_WORD_OPS = {"mul": "stablehlo.multiply", "add": "stablehlo.add", "xor": "stablehlo.xor",
             "or": "stablehlo.or", "shr": "stablehlo.shift_right_logical",
             "shl": "stablehlo.shift_left", "and": "stablehlo.and"}


def _refuse(why: str) -> Lowering:
    def lower(w: Writer, op: Operation) -> str:
        raise StableHLOExportError(f"stablehlo export: {op.name} {why}")
    return lower


LOWERINGS: dict[type[Operation], Lowering] = {
    nd.ConstantOp: _constant,
    nd.IotaOp: _iota,
    nd.RngUniformOp: _rng_uniform,
    nd.NegOp: _elementwise("stablehlo.negate"),
    nd.AbsOp: _elementwise("stablehlo.abs"),
    nd.ExpOp: _elementwise("stablehlo.exponential"),
    nd.LogOp: _elementwise("stablehlo.log"),
    nd.SqrtOp: _elementwise("stablehlo.sqrt"),
    nd.RsqrtOp: _elementwise("stablehlo.rsqrt"),
    nd.ReciprocalOp: _reciprocal,
    nd.SinOp: _elementwise("stablehlo.sine"),
    nd.CosOp: _elementwise("stablehlo.cosine"),
    nd.TanhOp: _elementwise("stablehlo.tanh"),
    nd.ErfOp: _elementwise("chlo.erf"),
    nd.Expm1Op: _elementwise("stablehlo.exponential_minus_one"),
    nd.Log1pOp: _elementwise("stablehlo.log_plus_one"),
    nd.FloorOp: _elementwise("stablehlo.floor"),
    nd.CeilOp: _elementwise("stablehlo.ceil"),
    nd.RoundOp: _elementwise("stablehlo.round_nearest_even"),
    nd.TruncOp: _trunc,
    nd.CastOp: _cast,
    nd.BitcastOp: _bitcast,
    nd.AddOp: _elementwise("stablehlo.add", on_bool="stablehlo.or"),
    nd.SubOp: _elementwise("stablehlo.subtract"),
    nd.MulOp: _elementwise("stablehlo.multiply", on_bool="stablehlo.and"),
    nd.DivOp: _divide,             # integers: toward zero, -1 and 0 divisors as Nova's
    nd.MaximumOp: _elementwise("stablehlo.maximum", on_bool="stablehlo.or"),
    nd.MinimumOp: _elementwise("stablehlo.minimum", on_bool="stablehlo.and"),
    nd.PowOp: _elementwise("stablehlo.power"),
    nd.RemOp: _elementwise("stablehlo.remainder"),  # C's fmod on floats
    nd.Atan2Op: _elementwise("stablehlo.atan2"),
    nd.AndOp: _elementwise("stablehlo.and"),       # integers and i1 alike
    nd.OrOp: _elementwise("stablehlo.or"),
    nd.XorOp: _elementwise("stablehlo.xor"),
    nd.NotOp: _elementwise("stablehlo.not"),
    nd.CompareOp: _compare,
    nd.WhereOp: _where,
    nd.BroadcastInDimOp: _broadcast_in_dim,
    nd.ReshapeOp: _reshape,
    nd.TransposeOp: _transpose,
    nd.SliceOp: _slice,
    nd.PadOp: _pad,
    nd.ConcatOp: _concat,
    nd.ReduceSumOp: _reduce("sum"),
    nd.ReduceMaxOp: _reduce("max"),
    nd.MatmulOp: _matmul,
    nd.GatherOp: _gather,
    nd.ScatterAddOp: _scatter_add,
    nd.ScatterOp: _scatter,
    nd.WrapIndexOp: _wrap_index,
    nd.ArgsortOp: _argsort,
    nd.CumsumOp: _scan("sum"),
    nd.CumprodOp: _scan("prod"),
    # found by the attention pass, which the export does not run (nv.export.stablehlo)
    nd.AttentionOp: _refuse("has no StableHLO form: export the step with attention as "
                            "its composite"),
    nd.AttentionGradOp: _refuse("has no StableHLO form: export the step with attention "
                                "as its composite"),
    nd.AllReduceStartOp: _refuse("exchanges data with other processes, which a StableHLO "
                                 "step of one device cannot say"),
    nd.AllReduceWaitOp: _refuse("exchanges data with other processes, which a StableHLO "
                                "step of one device cannot say"),
}


def to_stablehlo(module: ModuleOp, name: str = "main") -> str:
    """The step function of ``module`` (nova stage) as a StableHLO module's text, its
    function called ``name`` with the step's arguments and results in order."""
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    w = Writer()
    block = fn.body.block
    params = []
    for k, arg in enumerate(block.args):
        w.names[arg] = f"%arg{k}"
        params.append(f"%arg{k}: {arg.type}")
    returned: list[str] = []
    result_types: list[str] = []
    for op in block.ops:
        if isinstance(op, func.ReturnOp):
            returned = [w.of(v) for v in op.operands]
            result_types = [str(v.type) for v in op.operands]
            continue
        lower = LOWERINGS.get(type(op))
        if lower is None:
            raise StableHLOExportError(f"stablehlo export: no lowering for {op.name}")
        w.names[op.results[0]] = lower(w, op)
    head = (f"func.func @{name}({', '.join(params)}) -> ({', '.join(result_types)}) {{")
    tail = f"    return {', '.join(returned)} : {', '.join(result_types)}" if returned \
        else "    return"
    return "\n".join(["module {", "  " + head, *w.lines, tail, "  }", "}"]) + "\n"

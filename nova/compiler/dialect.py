"""The ``nova`` dialect: one value-semantic op per primitive of DESIGN.md, on builtin
``tensor<...>`` types.

Every op carries a verifier that re-checks what the front end checked at record time
(shapes, attributes, element types), so a pass or a hand-written program that breaks an
invariant is caught at the IR level, not inside a backend. Each op has a declarative
assembly format, so a module prints and parses back to the same text.

Broadcasting is always explicit (``nova.broadcast_in_dim``): elementwise ops take
operands of exactly the result's type. Reductions drop the reduced axes (``keepdim`` is a
``nova.reshape`` in the front end), which keeps one canonical form for fusion to match.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseArrayBase,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    Signedness,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import HasParent, IsTerminator, OpTrait, Pure
from xdsl.utils.exceptions import VerifyException

AnyTensor = base(TensorType)
FLOAT_TYPES = (Float16Type, BFloat16Type, Float32Type, Float64Type)

# Integers are signless (two's complement, signed where it matters: comparisons,
# division, widening) except uint8, which is ``ui8``: the two 8-bit dtypes must be
# distinct types (a uint8 200 is 200, an int8 holding the same bits is -56).
_ELEMENT_TYPES: dict[str, Attribute] = {
    "f32": Float32Type(), "f64": Float64Type(), "f16": Float16Type(),
    "bf16": BFloat16Type(), "i32": IntegerType(32), "i64": IntegerType(64),
    "i1": IntegerType(1), "i8": IntegerType(8), "ui8": IntegerType(8, Signedness.UNSIGNED),
    "i16": IntegerType(16),
}
# The element types stored narrower than they are computed (in i32, each result wrapped
# back to the storage type), as the half floats are computed in f32.
NARROW_INTS = ("i8", "ui8", "i16")


def element_type(mlir_name: str) -> Attribute:
    return _ELEMENT_TYPES[mlir_name]


def element_name(t: Attribute) -> str:
    for k, v in _ELEMENT_TYPES.items():
        if v == t:
            return k
    raise VerifyException(f"nova: unsupported element type {t}")


def tensor_type(shape: Sequence[int], mlir_name: str) -> TensorType:
    return TensorType(element_type(mlir_name), list(shape))


def shape_of(v) -> tuple[int, ...]:
    return tuple(v.type.get_shape())


def i64_array(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


def _ints(a: DenseArrayBase) -> tuple[int, ...]:
    return tuple(a.get_values())


def _fail(op: IRDLOperation, msg: str) -> None:
    raise VerifyException(f"{op.name}: {msg}")


def _is_float(t: TensorType) -> bool:
    return isinstance(t.element_type, FLOAT_TYPES)


def _is_bool(t: TensorType) -> bool:
    return t.element_type == IntegerType(1)


# ---------------------------------------------------------------- traits
#
# What passes and backends need to know about an op, stated once on the op. Fusion,
# rematerialization, memory planning and the emitters ask ``op.has_trait(...)`` instead
# of keeping lists of op names of their own.

class Elementwise(OpTrait):
    """Result element ``i`` depends only on element ``i`` of each operand (all of the
    result's shape): fusion chains it, remat recomputes it, a kernel made of such ops
    may write its result over an operand it reads."""


class Movement(OpTrait):
    """``result[i] = input[f(i)]`` for an index map ``f`` fixed by the attributes: a
    pure index rewrite that costs no arithmetic on values and never materializes."""


class IndexChanging(OpTrait):
    """Reads an operand at an index other than its own result index (broadcast,
    transpose, slice, pad, concat, gather): downstream of such an op a value is no
    longer "the same element" as its input's."""


class Generator(OpTrait):
    """Computed from the index alone (no tensor operands): free to recompute wherever
    it is read."""


class Expensive(OpTrait):
    """Many instructions per element (exp, log, erf, ...): a target may keep it out of
    a loop it cannot vectorize."""


class NonDifferentiable(OpTrait):
    """Has no vector-Jacobian rule: its result is a source, an integer or a boolean, so
    no gradient flows through it (autograd checks every other op has one) -- or the op
    exists only after differentiation (the fused attention ops, which a pass forms from
    an already differentiated step)."""


class CounterRandom(OpTrait):
    """Random draws from a counter-based generator: recomputing it gives the same bits,
    so rematerialization may recompute it like an elementwise op."""


KERNEL_KINDS = ("elementwise", "reduce", "rows", "matmul", "scatter", "attention", "sort",
                "scan", "collective")


@dataclass(frozen=True)
class KernelRoot(OpTrait):
    """Always roots a kernel of its own, of loop structure ``kind`` (one of
    ``KERNEL_KINDS``); its elementwise producers and consumers fuse around it."""

    kind: str

    def __post_init__(self) -> None:
        if self.kind not in KERNEL_KINDS:
            raise ValueError(f"KernelRoot: kind {self.kind!r} not in {KERNEL_KINDS}")


def kernel_root_kind(op: Operation | type[Operation]) -> str | None:
    """The kernel kind ``op`` (an op or an op class) must root, or None if it may join
    another kernel."""
    trait = op.get_trait(KernelRoot)
    return trait.kind if trait is not None else None


# ---------------------------------------------------------------- sources

@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A tensor filled with one scalar (``full``); data tensors are function arguments."""

    name = "nova.constant"
    value = prop_def(base(FloatAttr) | base(IntegerAttr))
    result = result_def(AnyTensor)
    assembly_format = "$value attr-dict `:` type($result)"
    traits = traits_def(Pure(), Generator(), NonDifferentiable())

    def verify_(self) -> None:
        want_float = _is_float(self.result.type)
        if want_float != isinstance(self.value, FloatAttr):
            _fail(self, f"value {self.value} does not match element type "
                        f"{self.result.type.element_type}")
        if self.value.type != self.result.type.element_type:
            _fail(self, f"value type {self.value.type} != element type "
                        f"{self.result.type.element_type}")


@irdl_op_definition
class IotaOp(IRDLOperation):
    """``result[i0, ..., in] = i_dim``."""

    name = "nova.iota"
    dim = prop_def(IntegerAttr)
    result = result_def(AnyTensor)
    assembly_format = "`dim` `=` $dim attr-dict `:` type($result)"
    traits = traits_def(Pure(), Generator(), NonDifferentiable())

    def verify_(self) -> None:
        rank = len(shape_of(self.result))
        if not 0 <= self.dim.value.data < rank:
            _fail(self, f"dim {self.dim.value.data} out of range for rank {rank}")
        if _is_bool(self.result.type):
            _fail(self, "result must be numeric, not i1")


@irdl_op_definition
class RngUniformOp(IRDLOperation):
    """Uniform floats in [0, 1) from counter-based Philox4x32-10.

    ``key`` is ``tensor<2xi64>`` = (seed, offset), a runtime input: element ``i`` uses
    key = seed and counter = (i, offset), so draws are reproducible, recomputable and
    never baked into the compiled step.
    """

    name = "nova.rng_uniform"
    key = operand_def(AnyTensor)
    result = result_def(AnyTensor)
    assembly_format = "$key attr-dict `:` type($key) `->` type($result)"
    traits = traits_def(CounterRandom(), NonDifferentiable())

    def verify_(self) -> None:
        if shape_of(self.key) != (2,) or self.key.type.element_type != IntegerType(64):
            _fail(self, f"key must be tensor<2xi64>, got {self.key.type}")
        if not _is_float(self.result.type):
            _fail(self, f"result must be floating point, got {self.result.type}")


# ---------------------------------------------------------------- elementwise

class UnaryOp(IRDLOperation):
    T: ClassVar = VarConstraint("T", AnyTensor)
    input = operand_def(T)
    result = result_def(T)
    assembly_format = "$input attr-dict `:` type($result)"
    traits = traits_def(Pure(), Elementwise())
    FLOAT_ONLY: ClassVar[bool] = True

    def verify_(self) -> None:
        t = self.result.type
        if self.FLOAT_ONLY and not _is_float(t):
            _fail(self, f"needs a floating-point tensor, got {t}")
        if _is_bool(t):
            _fail(self, f"not defined on i1 tensors ({t})")


@irdl_op_definition
class NegOp(UnaryOp):
    """Elementwise negation."""

    name = "nova.neg"
    FLOAT_ONLY: ClassVar[bool] = False


@irdl_op_definition
class AbsOp(UnaryOp):
    """Elementwise absolute value."""

    name = "nova.abs"
    FLOAT_ONLY: ClassVar[bool] = False


@irdl_op_definition
class ExpOp(UnaryOp):
    """Elementwise e**x."""

    name = "nova.exp"
    traits = traits_def(Pure(), Elementwise(), Expensive())


@irdl_op_definition
class LogOp(UnaryOp):
    """Elementwise natural logarithm."""

    name = "nova.log"
    traits = traits_def(Pure(), Elementwise(), Expensive())


@irdl_op_definition
class SqrtOp(UnaryOp):
    """Elementwise square root."""

    name = "nova.sqrt"


@irdl_op_definition
class RsqrtOp(UnaryOp):
    """Elementwise 1/sqrt(x)."""

    name = "nova.rsqrt"


@irdl_op_definition
class ReciprocalOp(UnaryOp):
    """Elementwise 1/x."""

    name = "nova.reciprocal"


@irdl_op_definition
class SinOp(UnaryOp):
    """Elementwise sine."""

    name = "nova.sin"
    traits = traits_def(Pure(), Elementwise(), Expensive())


@irdl_op_definition
class CosOp(UnaryOp):
    """Elementwise cosine."""

    name = "nova.cos"
    traits = traits_def(Pure(), Elementwise(), Expensive())


@irdl_op_definition
class TanhOp(UnaryOp):
    """Elementwise hyperbolic tangent."""

    name = "nova.tanh"
    traits = traits_def(Pure(), Elementwise(), Expensive())


@irdl_op_definition
class ErfOp(UnaryOp):
    """Elementwise Gauss error function."""

    name = "nova.erf"
    traits = traits_def(Pure(), Elementwise(), Expensive())


@irdl_op_definition
class Expm1Op(UnaryOp):
    """Elementwise e**x - 1, exact near 0 where exp(x) - 1 cancels."""

    name = "nova.expm1"
    traits = traits_def(Pure(), Elementwise(), Expensive())


@irdl_op_definition
class Log1pOp(UnaryOp):
    """Elementwise log(1 + x), exact near 0 where 1 + x rounds."""

    name = "nova.log1p"
    traits = traits_def(Pure(), Elementwise(), Expensive())


@irdl_op_definition
class FloorOp(UnaryOp):
    """Elementwise largest integer <= x (a float; NaN and infinities pass through)."""

    name = "nova.floor"


@irdl_op_definition
class CeilOp(UnaryOp):
    """Elementwise smallest integer >= x."""

    name = "nova.ceil"


@irdl_op_definition
class RoundOp(UnaryOp):
    """Elementwise nearest integer, ties to even (as PyTorch's and numpy's round)."""

    name = "nova.round"


@irdl_op_definition
class TruncOp(UnaryOp):
    """Elementwise integer part, toward zero."""

    name = "nova.trunc"


UNARY_OPS = (NegOp, AbsOp, ExpOp, LogOp, SqrtOp, RsqrtOp, ReciprocalOp, SinOp, CosOp,
             TanhOp, ErfOp, Expm1Op, Log1pOp, FloorOp, CeilOp, RoundOp, TruncOp)


@irdl_op_definition
class CastOp(IRDLOperation):
    """Element type conversion (float->int truncates toward zero, x->i1 is x != 0)."""

    name = "nova.cast"
    input = operand_def(AnyTensor)
    result = result_def(AnyTensor)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"
    traits = traits_def(Pure(), Elementwise())

    def verify_(self) -> None:
        if shape_of(self.input) != shape_of(self.result):
            _fail(self, f"shape changes {shape_of(self.input)} -> {shape_of(self.result)}")


# The element types a bitcast pairs: same storage width, reinterpreted bit for bit.
BITCAST_PAIRS = frozenset({("f32", "i32"), ("i32", "f32"), ("f64", "i64"), ("i64", "f64"),
                           ("f16", "i16"), ("i16", "f16"), ("bf16", "i16"), ("i16", "bf16"),
                           ("f16", "bf16"), ("bf16", "f16")})


@irdl_op_definition
class BitcastOp(IRDLOperation):
    """The stored bits of each element read as another type of the same width
    (``Tensor.view(dtype)``): a float and the integer of its width, or the two half
    floats. Never differentiable."""

    name = "nova.bitcast"
    input = operand_def(AnyTensor)
    result = result_def(AnyTensor)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"
    traits = traits_def(Pure(), Elementwise(), NonDifferentiable())

    def verify_(self) -> None:
        if shape_of(self.input) != shape_of(self.result):
            _fail(self, f"shape changes {shape_of(self.input)} -> {shape_of(self.result)}")
        pair = (element_name(self.input.type.element_type),
                element_name(self.result.type.element_type))
        if pair not in BITCAST_PAIRS:
            _fail(self, f"cannot reinterpret {pair[0]} as {pair[1]}; valid pairs: "
                        + ", ".join(sorted(f"{a}->{b}" for a, b in BITCAST_PAIRS)))


class BinaryOp(IRDLOperation):
    T: ClassVar = VarConstraint("T", AnyTensor)
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(T)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($result)"
    traits = traits_def(Pure(), Elementwise())
    ALLOW_BOOL: ClassVar[bool] = False

    def verify_(self) -> None:
        if not self.ALLOW_BOOL and _is_bool(self.result.type):
            _fail(self, f"not defined on i1 tensors ({self.result.type})")


@irdl_op_definition
class AddOp(BinaryOp):
    """Elementwise sum (logical or on i1)."""

    name = "nova.add"
    ALLOW_BOOL: ClassVar[bool] = True


@irdl_op_definition
class SubOp(BinaryOp):
    """Elementwise difference."""

    name = "nova.sub"


@irdl_op_definition
class MulOp(BinaryOp):
    """Elementwise product (logical and on i1)."""

    name = "nova.mul"
    ALLOW_BOOL: ClassVar[bool] = True


@irdl_op_definition
class DivOp(BinaryOp):
    """Elementwise quotient (integers truncate toward zero)."""

    name = "nova.div"


@irdl_op_definition
class MaximumOp(BinaryOp):
    """Elementwise maximum (NaN propagates)."""

    name = "nova.maximum"
    ALLOW_BOOL: ClassVar[bool] = True


@irdl_op_definition
class MinimumOp(BinaryOp):
    """Elementwise minimum (NaN propagates)."""

    name = "nova.minimum"
    ALLOW_BOOL: ClassVar[bool] = True


@irdl_op_definition
class PowOp(BinaryOp):
    """Elementwise lhs ** rhs."""

    name = "nova.pow"
    traits = traits_def(Pure(), Elementwise(), Expensive())


@irdl_op_definition
class RemOp(BinaryOp):
    """Elementwise floating-point remainder of truncated division, C's ``fmod``: exact
    (``lhs - rhs * q`` for the integer ``q`` nearest ``lhs / rhs`` toward zero, with no
    rounding), the sign of ``lhs``; ``rem(x, +-inf) = x`` for finite ``x``, NaN for a
    zero ``rhs`` or an infinite ``lhs``. Integer remainders are built from ``div``."""

    name = "nova.rem"
    traits = traits_def(Pure(), Elementwise(), Expensive())

    def verify_(self) -> None:
        if not _is_float(self.result.type):
            _fail(self, f"needs floating-point tensors, got {self.result.type}")


@irdl_op_definition
class Atan2Op(BinaryOp):
    """Elementwise angle of the point (``rhs``, ``lhs``) in radians, in [-pi, pi]
    (C's ``atan2(lhs, rhs)``); floats only."""

    name = "nova.atan2"
    traits = traits_def(Pure(), Elementwise(), Expensive())

    def verify_(self) -> None:
        if not _is_float(self.result.type):
            _fail(self, f"needs floating-point tensors, got {self.result.type}")


class BitwiseOp(BinaryOp):
    """Elementwise bit operation on integers (two's complement), logical on i1;
    not defined on floats."""

    traits = traits_def(Pure(), Elementwise(), NonDifferentiable())

    def verify_(self) -> None:
        if _is_float(self.result.type):
            _fail(self, f"needs integer or i1 tensors, got {self.result.type}")


@irdl_op_definition
class AndOp(BitwiseOp):
    """Elementwise bitwise and (logical and on i1)."""

    name = "nova.and"


@irdl_op_definition
class OrOp(BitwiseOp):
    """Elementwise bitwise or (logical or on i1)."""

    name = "nova.or"


@irdl_op_definition
class XorOp(BitwiseOp):
    """Elementwise bitwise exclusive or (logical on i1: lhs != rhs)."""

    name = "nova.xor"


@irdl_op_definition
class NotOp(IRDLOperation):
    """Elementwise bitwise complement (``~x = -x - 1`` on integers; logical not on i1);
    not defined on floats."""

    name = "nova.not"
    T: ClassVar = VarConstraint("T", AnyTensor)
    input = operand_def(T)
    result = result_def(T)
    assembly_format = "$input attr-dict `:` type($result)"
    traits = traits_def(Pure(), Elementwise(), NonDifferentiable())

    def verify_(self) -> None:
        if _is_float(self.result.type):
            _fail(self, f"needs an integer or i1 tensor, got {self.result.type}")


BINARY_OPS = (AddOp, SubOp, MulOp, DivOp, MaximumOp, MinimumOp, PowOp, RemOp, Atan2Op, AndOp,
              OrOp, XorOp)
COMPARE_DIRECTIONS = ("lt", "le", "eq", "ne", "gt", "ge")


@irdl_op_definition
class CompareOp(IRDLOperation):
    """Elementwise comparison producing i1; ``direction`` is lt, le, eq, ne, gt or ge."""

    name = "nova.compare"
    T: ClassVar = VarConstraint("T", AnyTensor)
    direction = prop_def(StringAttr)
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(AnyTensor)
    assembly_format = "$direction `,` $lhs `,` $rhs attr-dict `:` type($lhs) `->` type($result)"
    traits = traits_def(Pure(), Elementwise(), NonDifferentiable())

    def verify_(self) -> None:
        if self.direction.data not in COMPARE_DIRECTIONS:
            _fail(self, f"direction {self.direction.data!r} not in {COMPARE_DIRECTIONS}")
        if not _is_bool(self.result.type) or shape_of(self.result) != shape_of(self.lhs):
            _fail(self, f"result must be i1 of shape {shape_of(self.lhs)}, got {self.result.type}")


@irdl_op_definition
class WhereOp(IRDLOperation):
    """``cond ? on_true : on_false`` elementwise."""

    name = "nova.where"
    T: ClassVar = VarConstraint("T", AnyTensor)
    cond = operand_def(AnyTensor)
    on_true = operand_def(T)
    on_false = operand_def(T)
    result = result_def(T)
    assembly_format = ("$cond `,` $on_true `,` $on_false attr-dict `:` type($cond) `,` "
                       "type($result)")
    traits = traits_def(Pure(), Elementwise())

    def verify_(self) -> None:
        if not _is_bool(self.cond.type) or shape_of(self.cond) != shape_of(self.result):
            _fail(self, f"cond must be i1 of shape {shape_of(self.result)}, got {self.cond.type}")


# ---------------------------------------------------------------- movement

@irdl_op_definition
class BroadcastInDimOp(IRDLOperation):
    """Input dim ``i`` becomes result dim ``dims[i]`` (size equal, or 1 and repeated)."""

    name = "nova.broadcast_in_dim"
    input = operand_def(AnyTensor)
    dims = prop_def(DenseArrayBase.constr(i64))
    result = result_def(AnyTensor)
    assembly_format = "$input `dims` `=` $dims attr-dict `:` type($input) `->` type($result)"
    traits = traits_def(Pure(), Movement(), IndexChanging())

    def verify_(self) -> None:
        src, dst, dims = shape_of(self.input), shape_of(self.result), _ints(self.dims)
        if self.input.type.element_type != self.result.type.element_type:
            _fail(self, "element type changes")
        if len(dims) != len(src) or any(b <= a for a, b in zip(dims, dims[1:])):
            _fail(self, f"dims {list(dims)} must be increasing, one per input dim of {src}")
        for i, d in enumerate(dims):
            if not 0 <= d < len(dst) or src[i] not in (1, dst[d]):
                _fail(self, f"input {src} cannot broadcast to {dst} with dims {list(dims)}")


@irdl_op_definition
class ReshapeOp(IRDLOperation):
    """Row-major reshape to a result with the same number of elements."""

    name = "nova.reshape"
    input = operand_def(AnyTensor)
    result = result_def(AnyTensor)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"
    traits = traits_def(Pure(), Movement())

    def verify_(self) -> None:
        if self.input.type.element_type != self.result.type.element_type:
            _fail(self, "element type changes")
        if self.input.type.element_count() != self.result.type.element_count():
            _fail(self, f"{shape_of(self.input)} and {shape_of(self.result)} differ in size")


@irdl_op_definition
class TransposeOp(IRDLOperation):
    """``result.shape[i] = input.shape[perm[i]]``."""

    name = "nova.transpose"
    input = operand_def(AnyTensor)
    perm = prop_def(DenseArrayBase.constr(i64))
    result = result_def(AnyTensor)
    assembly_format = "$input `perm` `=` $perm attr-dict `:` type($input) `->` type($result)"
    traits = traits_def(Pure(), Movement(), IndexChanging())

    def verify_(self) -> None:
        src, perm = shape_of(self.input), _ints(self.perm)
        if sorted(perm) != list(range(len(src))):
            _fail(self, f"perm {list(perm)} is not a permutation of rank {len(src)}")
        if shape_of(self.result) != tuple(src[p] for p in perm):
            _fail(self, f"result {shape_of(self.result)} != {src} permuted by {list(perm)}")


def viewed_dim(value: SSAValue, dim: int) -> tuple[SSAValue, int] | None:
    """The value that reading ``value`` along ``dim`` reads through transposes and
    broadcasts, and the dim of it that read walks; None where a broadcast repeats
    along ``dim`` (the read stands still there)."""
    while True:
        owner = value.owner
        if isinstance(owner, TransposeOp):
            dim = owner.perm.get_values()[dim]
        elif isinstance(owner, BroadcastInDimOp):
            dims = owner.dims.get_values()
            if dim not in dims or shape_of(owner.input)[dims.index(dim)] == 1:
                return None
            dim = dims.index(dim)
        else:
            return value, dim
        value = owner.operands[0]


def swaps_last_two(op: object) -> bool:
    """Whether ``op`` is a transpose of the last two dims that keeps the others (a
    matrix transpose, batched or not)."""
    if not isinstance(op, TransposeOp):
        return False
    perm = _ints(op.perm)
    n = len(perm)
    return n >= 2 and perm == (*range(n - 2), n - 1, n - 2)


@irdl_op_definition
class SliceOp(IRDLOperation):
    """Strided window ``input[start:limit:stride]`` per dim (strides >= 1)."""

    name = "nova.slice"
    input = operand_def(AnyTensor)
    start = prop_def(DenseArrayBase.constr(i64))
    limit = prop_def(DenseArrayBase.constr(i64))
    stride = prop_def(DenseArrayBase.constr(i64))
    result = result_def(AnyTensor)
    assembly_format = ("$input `start` `=` $start `limit` `=` $limit `stride` `=` $stride "
                       "attr-dict `:` type($input) `->` type($result)")
    traits = traits_def(Pure(), Movement(), IndexChanging())

    def verify_(self) -> None:
        src = shape_of(self.input)
        st, li, sd = _ints(self.start), _ints(self.limit), _ints(self.stride)
        if not len(st) == len(li) == len(sd) == len(src):
            _fail(self, f"start/limit/stride need {len(src)} entries")
        want = []
        for n, a, b, s in zip(src, st, li, sd):
            if s < 1 or not 0 <= a <= b <= n:
                _fail(self, f"bad window start={list(st)} limit={list(li)} stride={list(sd)} "
                            f"for {src}")
            want.append(-(-(b - a) // s))
        if shape_of(self.result) != tuple(want):
            _fail(self, f"result {shape_of(self.result)} != window shape {tuple(want)}")


@irdl_op_definition
class PadOp(IRDLOperation):
    """Pad with ``padding_value`` (a 0-d tensor): ``low``/``high`` elements at each end
    and ``interior`` elements between neighbours (all >= 0)."""

    name = "nova.pad"
    T: ClassVar = VarConstraint("T", AnyTensor)
    input = operand_def(AnyTensor)
    padding_value = operand_def(AnyTensor)
    low = prop_def(DenseArrayBase.constr(i64))
    high = prop_def(DenseArrayBase.constr(i64))
    interior = prop_def(DenseArrayBase.constr(i64))
    result = result_def(AnyTensor)
    assembly_format = ("$input `,` $padding_value `low` `=` $low `high` `=` $high "
                       "`interior` `=` $interior attr-dict `:` type($input) `,` "
                       "type($padding_value) `->` type($result)")
    traits = traits_def(Pure(), IndexChanging())

    def verify_(self) -> None:
        src = shape_of(self.input)
        lo, hi, it = _ints(self.low), _ints(self.high), _ints(self.interior)
        if shape_of(self.padding_value) != ():
            _fail(self, f"padding value must be 0-d, got {self.padding_value.type}")
        et = self.input.type.element_type
        if self.padding_value.type.element_type != et or self.result.type.element_type != et:
            _fail(self, "element types of input, padding value and result differ")
        if not len(lo) == len(hi) == len(it) == len(src) or min((*lo, *hi, *it), default=0) < 0:
            _fail(self, f"low/high/interior need {len(src)} non-negative entries")
        want = tuple(l + h + n + max(n - 1, 0) * i for n, l, h, i in zip(src, lo, hi, it))
        if shape_of(self.result) != want:
            _fail(self, f"result {shape_of(self.result)} != padded shape {want}")


@irdl_op_definition
class ConcatOp(IRDLOperation):
    """Concatenation along ``dim``."""

    name = "nova.concat"
    inputs = var_operand_def(AnyTensor)
    dim = prop_def(IntegerAttr)
    result = result_def(AnyTensor)
    assembly_format = "$inputs `dim` `=` $dim attr-dict `:` type($inputs) `->` type($result)"
    traits = traits_def(Pure(), IndexChanging())

    def verify_(self) -> None:
        d = self.dim.value.data
        shapes = [shape_of(v) for v in self.inputs]
        out = shape_of(self.result)
        if not shapes or any(v.type.element_type != self.result.type.element_type
                             for v in self.inputs):
            _fail(self, "needs at least one input, all of the result's element type")
        if not 0 <= d < len(out):
            _fail(self, f"dim {d} out of range for rank {len(out)}")
        for s in shapes:
            if len(s) != len(out) or any(a != b for k, (a, b) in enumerate(zip(s, out)) if k != d):
                _fail(self, f"input {s} does not match result {out} outside dim {d}")
        if sum(s[d] for s in shapes) != out[d]:
            _fail(self, f"sizes along dim {d} do not add up to {out[d]}")


# ---------------------------------------------------------------- reductions

class ReduceOp(IRDLOperation):
    input = operand_def(AnyTensor)
    axes = prop_def(DenseArrayBase.constr(i64))
    result = result_def(AnyTensor)
    assembly_format = "$input `axes` `=` $axes attr-dict `:` type($input) `->` type($result)"
    traits = traits_def(Pure())

    def verify_(self) -> None:
        src, axes = shape_of(self.input), _ints(self.axes)
        if list(axes) != sorted(set(axes)) or any(not 0 <= a < len(src) for a in axes):
            _fail(self, f"axes {list(axes)} must be sorted, unique and < rank {len(src)}")
        want = tuple(n for i, n in enumerate(src) if i not in axes)
        if shape_of(self.result) != want:
            _fail(self, f"result {shape_of(self.result)} != reduced shape {want}")
        if self.input.type.element_type != self.result.type.element_type:
            _fail(self, "element type changes")


@irdl_op_definition
class ReduceSumOp(ReduceOp):
    """Sum over ``axes`` (which are dropped)."""

    name = "nova.reduce_sum"
    traits = traits_def(Pure(), KernelRoot("reduce"))


@irdl_op_definition
class ReduceMaxOp(ReduceOp):
    """Maximum over ``axes`` (which are dropped); NaN propagates."""

    name = "nova.reduce_max"
    traits = traits_def(Pure(), KernelRoot("reduce"))


# ---------------------------------------------------------------- contraction, indexing

@irdl_op_definition
class MatmulOp(IRDLOperation):
    """``(..., M, K) @ (..., K, N) -> (..., M, N)`` with identical batch dims."""

    name = "nova.matmul"
    lhs = operand_def(AnyTensor)
    rhs = operand_def(AnyTensor)
    result = result_def(AnyTensor)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"
    traits = traits_def(Pure(), KernelRoot("matmul"))

    def verify_(self) -> None:
        a, b, r = shape_of(self.lhs), shape_of(self.rhs), shape_of(self.result)
        et = self.result.type.element_type
        if self.lhs.type.element_type != et or self.rhs.type.element_type != et:
            _fail(self, "operand and result element types differ")
        if _is_bool(self.result.type):
            _fail(self, "not defined on i1 tensors")
        if len(a) < 2 or len(a) != len(b) or a[:-2] != b[:-2] or a[-1] != b[-2]:
            _fail(self, f"{a} @ {b}: need (..., M, K) @ (..., K, N) with equal batch dims")
        if r != a[:-1] + b[-1:]:
            _fail(self, f"result {r} != {a[:-1] + b[-1:]}")


def _check_index_like(op: IRDLOperation, index, dim: int, data_shape, what: str) -> None:
    if index.type.element_type not in (IntegerType(32), IntegerType(64)):
        _fail(op, f"index must be i32 or i64, got {index.type}")
    ish = shape_of(index)
    if len(ish) != len(data_shape) or not 0 <= dim < len(ish):
        _fail(op, f"index {ish} and {what} {data_shape} need equal rank and 0 <= dim < rank")


@irdl_op_definition
class GatherOp(IRDLOperation):
    """``result[..., i_dim, ...] = input[..., index[..., i_dim, ...], ...]`` (torch.gather)."""

    name = "nova.gather"
    input = operand_def(AnyTensor)
    index = operand_def(AnyTensor)
    dim = prop_def(IntegerAttr)
    result = result_def(AnyTensor)
    assembly_format = ("$input `[` $index `]` `dim` `=` $dim attr-dict `:` type($input) `,` "
                       "type($index) `->` type($result)")
    traits = traits_def(Pure(), IndexChanging())

    def verify_(self) -> None:
        d, src, ish = self.dim.value.data, shape_of(self.input), shape_of(self.index)
        _check_index_like(self, self.index, d, src, "input")
        if any(i > s for k, (i, s) in enumerate(zip(ish, src)) if k != d):
            _fail(self, f"index {ish} exceeds input {src} outside dim {d}")
        if shape_of(self.result) != ish or self.result.type.element_type != self.input.type.element_type:
            _fail(self, f"result must be {ish} of the input's element type")


class _ScatterLike(IRDLOperation):
    """``result = input``, then each element ``src[p]`` (``p`` a position of ``index``)
    is combined into ``result`` at ``p`` with coordinate ``dim`` replaced by
    ``index[p]``. The updates are applied in row-major order of ``p``: updates of one
    element of ``result`` share every coordinate but ``dim``, so they arrive in
    increasing order along ``dim``."""

    input = operand_def(AnyTensor)
    index = operand_def(AnyTensor)
    src = operand_def(AnyTensor)
    dim = prop_def(IntegerAttr)
    result = result_def(AnyTensor)
    assembly_format = ("$input `[` $index `]` `,` $src `dim` `=` $dim attr-dict `:` "
                       "type($input) `,` type($index) `,` type($src) `->` type($result)")
    traits = traits_def(Pure())

    def verify_(self) -> None:
        d, base_shape = self.dim.value.data, shape_of(self.input)
        _check_index_like(self, self.index, d, base_shape, "input")
        ish = shape_of(self.index)
        if shape_of(self.src) != ish:
            _fail(self, f"src {shape_of(self.src)} must have the index shape {ish}")
        if any(i > s for k, (i, s) in enumerate(zip(ish, base_shape)) if k != d):
            _fail(self, f"index {ish} exceeds input {base_shape} outside dim {d}")
        et = self.input.type.element_type
        if self.src.type.element_type != et or self.result.type != self.input.type:
            _fail(self, "input, src and result types must agree")


@irdl_op_definition
class ScatterAddOp(_ScatterLike):
    """Scatter that adds: ``result[..., index[..., j, ...], ...] += src[..., j, ...]``
    along ``dim`` (the transpose of gather); updates of one element all count."""

    name = "nova.scatter_add"
    traits = traits_def(Pure(), KernelRoot("scatter"))


@irdl_op_definition
class ScatterOp(_ScatterLike):
    """Scatter that overwrites: ``result[..., index[..., j, ...], ...] = src[..., j, ...]``
    along ``dim``. Where several updates hit one element, the last in order (the largest
    ``j``) wins, as numpy's ``a[idx] = v`` does: the result never depends on how a
    backend schedules the updates."""

    name = "nova.scatter"
    traits = traits_def(Pure(), KernelRoot("scatter"))


@irdl_op_definition
class ArgsortOp(IRDLOperation):
    """The permutation that sorts ``input`` along its last dim: ``result[..., k]`` is the
    position of the ``k``-th smallest element (largest with ``descending`` = 1), as
    int64. Stable: equal elements keep their order. NaN sorts as larger than every
    number (last ascending, first descending), as PyTorch and numpy place it, and -0.0
    equals 0.0. Sorting along another dim is a transpose around it (the front end's
    job), so one loop structure serves every dim."""

    name = "nova.argsort"
    input = operand_def(AnyTensor)
    descending = prop_def(IntegerAttr)
    result = result_def(AnyTensor)
    assembly_format = "$input `descending` `=` $descending attr-dict `:` type($input) `->` type($result)"
    traits = traits_def(Pure(), KernelRoot("sort"), NonDifferentiable())

    def verify_(self) -> None:
        shape = shape_of(self.input)
        if not shape:
            _fail(self, "input must have at least one dim")
        if self.input.type.element_type == IntegerType(1):
            _fail(self, "input must be a number type, not i1")
        if shape_of(self.result) != shape or self.result.type.element_type != IntegerType(64):
            _fail(self, f"result must be i64 {shape}")


class _ScanOp(IRDLOperation):
    """An inclusive scan along the last dim: ``result[..., j]`` combines ``input[..., 0]``
    through ``input[..., j]`` in order (with ``reverse`` = 1, ``input[..., j]`` through
    the last). Float scans accumulate in float64 and round each prefix to the result
    type once, as PyTorch's CPU kernels do; integers accumulate in their own type
    (wrapping). Scanning another dim is a transpose around it (the front end's job)."""

    input = operand_def(AnyTensor)
    reverse = prop_def(IntegerAttr)
    result = result_def(AnyTensor)
    assembly_format = "$input `reverse` `=` $reverse attr-dict `:` type($input) `->` type($result)"
    traits = traits_def(Pure(), KernelRoot("scan"))

    def verify_(self) -> None:
        if not shape_of(self.input):
            _fail(self, "input must have at least one dim")
        if self.input.type.element_type == IntegerType(1):
            _fail(self, "input must be a number type, not i1")
        if self.result.type != self.input.type:
            _fail(self, "result must have the input's type")


@irdl_op_definition
class CumsumOp(_ScanOp):
    """Running sums (``_ScanOp``)."""

    name = "nova.cumsum"


@irdl_op_definition
class CumprodOp(_ScanOp):
    """Running products (``_ScanOp``)."""

    name = "nova.cumprod"


@irdl_op_definition
class WrapIndexOp(IRDLOperation):
    """``result = index + size`` where ``index < 0``, else ``index``: an integer index
    into a dim of size ``size`` (dim ``dim`` of the indexed tensor) made non-negative, as
    PyTorch and numpy read ``x[i]``. An index outside ``[-size, size)`` is an error that
    names ``dim``, the index and ``size``; so every index of a multi-dim ``x[i, j]`` is
    checked against its own dim before the indices are combined into one."""

    name = "nova.wrap_index"
    T: ClassVar = VarConstraint("T", AnyTensor)
    input = operand_def(T)
    size = prop_def(IntegerAttr)
    dim = prop_def(IntegerAttr)
    result = result_def(T)
    assembly_format = "$input `size` `=` $size `dim` `=` $dim attr-dict `:` type($result)"
    traits = traits_def(Pure(), Elementwise(), NonDifferentiable())

    def verify_(self) -> None:
        if self.input.type.element_type not in (IntegerType(32), IntegerType(64)):
            _fail(self, f"index must be i32 or i64, got {self.input.type}")
        if self.size.value.data < 0 or self.dim.value.data < 0:
            _fail(self, f"size {self.size.value.data} and dim {self.dim.value.data} must be "
                        ">= 0")



# ---------------------------------------------------------------- collectives
#
# A collective across the processes of a group (``nova.distributed``) is two ops, so the
# step's kernel order can overlap the communication with other kernels: the start
# hands its operand to the communication library (non-blocking: MPI's ``Iallreduce``,
# NCCL on a stream) and its result is that buffer while the reduction is in flight; the
# wait completes it and yields the reduced value. The memory plan keeps the in-flight
# buffer alive from start to wait, and the schedule issues starts as early and waits as
# late as their data allow, starts in program order (every rank must issue a group's
# collectives in one order: ``nova.runtime.collectives``). Not ``Pure``: two identical
# collectives are two exchanges, and none is dead code.

REDUCTIONS = ("sum", "prod", "max", "min")


class _Collective(IRDLOperation):
    """One element type in and out, same shape; ``group`` names a process group of
    ``nova.runtime.collectives`` (its registry id) and ``reduction`` the combination."""

    T: ClassVar = VarConstraint("T", AnyTensor)
    input = operand_def(T)
    group = prop_def(IntegerAttr)
    reduction = prop_def(StringAttr)
    result = result_def(T)
    assembly_format = ("$input `group` `=` $group `reduction` `=` $reduction attr-dict `:` "
                       "type($result)")
    traits = traits_def(KernelRoot("collective"), NonDifferentiable())

    def verify_(self) -> None:
        if self.reduction.data not in REDUCTIONS:
            _fail(self, f"reduction {self.reduction.data!r} not in {REDUCTIONS}")
        if _is_bool(self.input.type) or self.input.type.element_type in (
                Float16Type(), BFloat16Type()) or element_name(
                self.input.type.element_type) in NARROW_INTS:
            _fail(self, f"element type {self.input.type.element_type} cannot be reduced "
                        "across processes (f32, f64, i32, i64)")
        if self.group.value.data < 0:
            _fail(self, f"group {self.group.value.data} must be >= 0")


@irdl_op_definition
class AllReduceStartOp(_Collective):
    """Begin reducing ``input`` elementwise across every process of ``group``; the
    result is the buffer being reduced (read only by ``nova.all_reduce_wait``)."""

    name = "nova.all_reduce_start"


@irdl_op_definition
class AllReduceWaitOp(_Collective):
    """Complete the collective ``input`` (a ``nova.all_reduce_start``) began: the result
    is the reduction over the group, the same on every process."""

    name = "nova.all_reduce_wait"

    def verify_(self) -> None:
        super().verify_()
        start = self.input.owner       # (a block argument inside its fused kernel)
        if isinstance(start, Operation) and (
                not isinstance(start, AllReduceStartOp) or start.group != self.group
                or start.reduction != self.reduction):
            _fail(self, "input must be a nova.all_reduce_start of the same group and "
                        "reduction")


COLLECTIVE_OPS = (AllReduceStartOp, AllReduceWaitOp)


# ---------------------------------------------------------------- fused attention
#
# Formed by ``passes.attention`` from the composite that ``scaled_dot_product_attention``
# (or the same code by hand) records and from its derived backward, after autograd: a
# kernel that never stores the ``L x S`` scores.

def _check_attention(op: IRDLOperation, q, k, v) -> tuple[tuple[int, ...], ...]:
    qs, ks, vs = shape_of(q), shape_of(k), shape_of(v)
    if not (len(qs) >= 2 and len(qs) == len(ks) == len(vs) and qs[:-2] == ks[:-2] == vs[:-2]
            and qs[-1] == ks[-1] and ks[-2] == vs[-2]):
        _fail(op, f"query {qs}, key {ks}, value {vs}: need (..., L, E), (..., S, E), "
                  "(..., S, Ev) with equal batch dims")
    if any(x.type.element_type != Float32Type() for x in (q, k, v)):
        _fail(op, "query, key and value must be f32")
    if op.scale.type != Float64Type():
        _fail(op, f"scale must be an f64 attribute, got {op.scale.type}")
    if op.causal.value.data not in (0, 1):
        _fail(op, f"causal must be 0 or 1, got {op.causal.value.data}")
    if op.dropout is None:
        if op.rng or op.dropout_scale is not None:
            _fail(op, "an rng key and a dropout scale need a dropout rate")
    else:
        rate = op.dropout.value.data
        if not 0.0 < rate < 1.0 or op.dropout_scale is None:
            _fail(op, f"dropout {rate} must be in (0, 1), with a dropout scale")
        if len(op.rng) != 1 or shape_of(op.rng[0]) != (2,) or \
                op.rng[0].type.element_type != IntegerType(64):
            _fail(op, "dropout needs one rng key operand, tensor<2xi64>")
    return qs, ks, vs


def attention_keep_scale(op: IRDLOperation) -> tuple[float, float] | None:
    """``nova.attention(_grad)``'s dropout as (rate, scale): probability ``p`` is kept
    where the key's uniform draw for its (..., query, key) position is >= rate, and then
    multiplied by scale (1/(1 - rate) rounded to f32, as ``F.dropout`` records it); None
    without dropout."""
    if op.dropout is None:
        return None
    return op.dropout.value.data, op.dropout_scale.value.data


def attention_parts(q_shape, v_shape) -> tuple[int, int]:
    """The lengths of the output (``L x Ev``) and the log-sum-exp (``L``) in each row of
    ``nova.attention``'s result."""
    return (q_shape[-2] * v_shape[-1], q_shape[-2])


@irdl_op_definition
class AttentionOp(IRDLOperation):
    """``softmax(q k^T * scale + mask) v`` over the last two dims, batch dims equal: with
    ``causal``, key ``j`` is masked for query ``i`` when ``j > i`` (top-left aligned, as
    PyTorch's ``is_causal``). Per batch index, the result row holds the output (``L x
    Ev``, flattened) and then each query's log-sum-exp of its scaled, visible scores
    (``L``), which ``nova.attention_grad`` reads instead of recomputing it (a kernel has
    one result; the output is a slice of it). A hidden key's probability is exactly 0: a NaN or inf
    score makes its row NaN over the keys the row sees (as in the composite), not over
    the hidden ones. (The kernels may skip a block of pairs that are all hidden, where
    this definition's products would form ``0 * NaN``: there they give the exact value,
    never another finite number.)

    With ``dropout`` (and its ``rng`` key, a ``tensor<2xi64>``): the probabilities are
    dropped before the product with ``v`` exactly as ``F.dropout`` on the composite's
    probability tensor would drop them -- position (..., i, j) is kept where
    ``nova.rng_uniform`` of that key over the ``(..., L, S)`` shape is >= ``dropout``,
    and a kept one is multiplied by ``dropout_scale`` (``attention_keep_scale``). The
    log-sum-exp is that of the softmax, before dropout."""

    name = "nova.attention"
    query = operand_def(AnyTensor)
    key = operand_def(AnyTensor)
    value = operand_def(AnyTensor)
    rng = var_operand_def(AnyTensor)
    scale = prop_def(FloatAttr)
    causal = prop_def(IntegerAttr)
    dropout = opt_prop_def(FloatAttr)
    dropout_scale = opt_prop_def(FloatAttr)
    result = result_def(AnyTensor)
    assembly_format = ("$query `,` $key `,` $value (`rng` $rng^)? `scale` `=` $scale `causal` "
                       "`=` $causal (`dropout` `=` $dropout^)? (`x` $dropout_scale^)? "
                       "attr-dict `:` type($query) `,` type($key) `,` type($value) "
                       "(`,` type($rng)^)? `->` type($result)")
    traits = traits_def(Pure(), KernelRoot("attention"), NonDifferentiable())

    def verify_(self) -> None:
        qs, _, vs = _check_attention(self, self.query, self.key, self.value)
        want = qs[:-2] + (sum(attention_parts(qs, vs)),)
        if shape_of(self.result) != want or self.result.type.element_type != Float32Type():
            _fail(self, f"result must be f32 {want}")


def attention_grad_parts(q_shape, k_shape, v_shape) -> tuple[int, int, int]:
    """The lengths of dq, dk and dv in each row of ``nova.attention_grad``'s result."""
    return (q_shape[-2] * q_shape[-1], k_shape[-2] * k_shape[-1], v_shape[-2] * v_shape[-1])


@irdl_op_definition
class AttentionGradOp(IRDLOperation):
    """The gradients of ``nova.attention`` (same ``scale``, ``causal`` and dropout, with
    the same ``rng`` key) for the output gradient ``grad``, given that op's result
    ``output`` (the output and its log-sum-exp): per batch index, one row holding dq
    (``L x E``), dk (``S x E``) and dv (``S x Ev``), flattened in that order (a kernel
    has one result; the three are slices of it)."""

    name = "nova.attention_grad"
    query = operand_def(AnyTensor)
    key = operand_def(AnyTensor)
    value = operand_def(AnyTensor)
    output = operand_def(AnyTensor)
    grad = operand_def(AnyTensor)
    rng = var_operand_def(AnyTensor)
    scale = prop_def(FloatAttr)
    causal = prop_def(IntegerAttr)
    dropout = opt_prop_def(FloatAttr)
    dropout_scale = opt_prop_def(FloatAttr)
    result = result_def(AnyTensor)
    assembly_format = ("$query `,` $key `,` $value `,` $output `,` $grad (`rng` $rng^)? "
                       "`scale` `=` $scale `causal` `=` $causal (`dropout` `=` $dropout^)? "
                       "(`x` $dropout_scale^)? attr-dict `:` type($query) `,` type($key) `,` "
                       "type($value) `,` type($output) `,` type($grad) (`,` type($rng)^)? "
                       "`->` type($result)")
    traits = traits_def(Pure(), KernelRoot("attention"), NonDifferentiable())

    def verify_(self) -> None:
        qs, ks, vs = _check_attention(self, self.query, self.key, self.value)
        for name, x, shape in (("output", self.output,
                                qs[:-2] + (sum(attention_parts(qs, vs)),)),
                               ("grad", self.grad, qs[:-1] + vs[-1:])):
            if shape_of(x) != shape or x.type.element_type != Float32Type():
                _fail(self, f"{name} must be f32 {shape}, got {x.type}")
        want = qs[:-2] + (sum(attention_grad_parts(qs, ks, vs)),)
        if shape_of(self.result) != want or self.result.type.element_type != Float32Type():
            _fail(self, f"result must be f32 {want}")


# ---------------------------------------------------------------- fused kernels

# A discardable attribute on ops recorded by the backward pass: rematerialization and the
# memory report use it to tell forward values (activations) from backward ones.
BACKWARD_ATTR = "nova.backward"



@irdl_op_definition
class FusionOp(IRDLOperation):
    """One kernel: the ops of its region run together, reading ``inputs`` (the block
    arguments) and producing the yielded values as ``outputs``.

    ``kind`` names the loop structure the lowering builds: ``elementwise`` (one loop nest
    over the outputs' shape), ``reduce`` (a reduction with its elementwise producers and
    epilogue), ``rows`` (several passes over each row: reductions, then the output),
    ``matmul`` (a contraction with its epilogue), ``scatter`` or ``attention`` (a fused
    attention op or its gradient, reading its operands through movement ops).
    """

    name = "nova.fusion"
    inputs = var_operand_def(AnyTensor)
    outputs = var_result_def(AnyTensor)
    kind = prop_def(StringAttr)
    body = region_def("single_block")

    def verify_(self) -> None:
        if self.kind.data not in KERNEL_KINDS:
            _fail(self, f"kind {self.kind.data!r} not in {KERNEL_KINDS}")
        block = self.body.block
        if [a.type for a in block.args] != [v.type for v in self.inputs]:
            _fail(self, "block arguments must match the inputs' types")
        last = block.last_op
        if not isinstance(last, YieldOp) or [v.type for v in last.values] != [
                r.type for r in self.outputs]:
            _fail(self, "the region must end in nova.yield of the outputs' types")


@irdl_op_definition
class YieldOp(IRDLOperation):
    """The values a ``nova.fusion`` region produces."""

    name = "nova.yield"
    values = var_operand_def(AnyTensor)
    assembly_format = "$values attr-dict `:` type($values)"
    traits = traits_def(IsTerminator(), HasParent(FusionOp))


Nova = Dialect(
    "nova",
    [ConstantOp, IotaOp, RngUniformOp, *UNARY_OPS, NotOp, CastOp, BitcastOp, *BINARY_OPS,
     CompareOp,
     WhereOp, BroadcastInDimOp, ReshapeOp, TransposeOp, SliceOp, PadOp, ConcatOp,
     ReduceSumOp, ReduceMaxOp, MatmulOp, GatherOp, ScatterAddOp, ScatterOp,
     WrapIndexOp, ArgsortOp, CumsumOp, CumprodOp, AttentionOp, AttentionGradOp,
     AllReduceStartOp, AllReduceWaitOp, FusionOp, YieldOp],
    [],
)

OPS_BY_NAME: dict[str, type[IRDLOperation]] = {
    op.name.removeprefix("nova."): op for op in Nova.operations
    if op not in (FusionOp, YieldOp)
}

# Short names of the ops with the ``Elementwise`` trait (for code that holds op names,
# not ops: the memory plan, the front end).
ELEMENTWISE: frozenset[str] = frozenset(
    name for name, op in OPS_BY_NAME.items() if op.has_trait(Elementwise))

"""Sliced values computed at the slice's size: ``slice(f(a, b))`` becomes
``f(slice(a), slice(b))`` and ``slice(pad(x))`` a pad of a slice of ``x``.

Autograd records a padded input's gradient as the slice of a padded-size gradient: a
convolution pads its input, reads windows of it, and the VJP sums the windows'
gradients, each padded back to the padded size (``pad`` is ``slice``'s VJP), then
slices out the unpadded part (``slice`` is ``pad``'s VJP). Fusion cannot take a
padded-size sum into the kernel of a slice smaller than it, so the sum was stored at
the padded size and copied into the slice by a kernel of its own (stage1 of a ResNet:
a (8, 64, 58, 58) sum, then a (8, 64, 56, 56) copy). Pushed down to the sources, the
slice is index arithmetic in the kernel that computes the sum at the size it is read.

A value is rebuilt only when the slice is its one reader (otherwise it would be
computed twice), and only through ops whose element ``i`` of the slice depends on the
elements of their operands at that slice's positions: elementwise ops of equal shapes
(counter-based random ops excluded: their values depend on the position in the whole
tensor), pads (for unit-stride slices), and slices, which compose; and only when
every operand it would read sliced is as cheap to read that way (``_sinks``). Values
are unchanged: every element is computed by the same ops from the same operand
elements.
"""
from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.traits import Pure
from xdsl.transforms.dead_code_elimination import dce

from nova.compiler import dialect as nd
from nova.compiler.passes.checks import verified_after_pass


class _Window:
    """A slice's window per dim: ``start``, ``limit``, ``stride``."""

    def __init__(self, start, limit, stride):
        self.start, self.limit, self.stride = tuple(start), tuple(limit), tuple(stride)

    @staticmethod
    def of(op: nd.SliceOp) -> _Window:
        return _Window(*(tuple(a.get_values()) for a in (op.start, op.limit, op.stride)))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(-(-(b - a) // s) for a, b, s in zip(self.start, self.limit, self.stride))

    @property
    def unit(self) -> bool:
        return all(s == 1 for s in self.stride)

    def covers(self, shape: tuple[int, ...]) -> bool:
        return self.unit and all(a == 0 and b == n for a, b, n
                                 in zip(self.start, self.limit, shape))

    def within(self, outer: _Window) -> _Window:
        """This window of the result of slicing by ``outer``, as one window of
        ``outer``'s input."""
        start = tuple(o + a * t for o, a, t in zip(outer.start, self.start, outer.stride))
        stride = tuple(s * t for s, t in zip(self.stride, outer.stride))
        limit = tuple(a + (n - 1) * s + 1 if n else a
                      for a, n, s in zip(start, self.shape, stride))
        return _Window(start, limit, stride)


def _sole_reader(v: SSAValue) -> bool:
    return len(list(v.uses)) == 1


def _sinks(v: SSAValue, window: _Window) -> bool:
    """Whether the slice ``window`` of ``v`` can be computed by rebuilding ``v``'s op at
    the window's size (module docstring) without storing anything that was not stored
    before: every operand an elementwise op would then read sliced must sink too, or be
    read through a slice at no cost (``_sliced_freely``) -- a pad kept whole behind a
    slice would no longer be at its reader's size, and fusion would store it."""
    op = v.owner
    if not isinstance(op, Operation) or not _sole_reader(v) or not all(window.shape):
        return False
    if isinstance(op, nd.SliceOp):
        return True
    if isinstance(op, nd.PadOp):
        return window.unit
    return (op.has_trait(nd.Elementwise) and not op.has_trait(nd.CounterRandom)
            and len(op.results) == 1 and bool(op.operands)
            and all(nd.shape_of(o) == nd.shape_of(v) for o in op.operands)
            and all(_sliced_freely(o) or _sinks(o, window) for o in op.operands))


def _sliced_freely(v: SSAValue) -> bool:
    """``v`` is read through a slice as cheaply as whole: a step argument, a constant,
    an iota or a movement op (index arithmetic), or a value that roots a kernel of its
    own (stored whoever reads it)."""
    op = v.owner
    return (not isinstance(op, Operation) or op.has_trait(nd.Movement)
            or op.has_trait(nd.Generator) or nd.kernel_root_kind(op) is not None)


def _typed(v: SSAValue, shape: tuple[int, ...]):
    return nd.tensor_type(shape, nd.element_name(v.type.get_element_type()))


def _insert(op: Operation, before: Operation) -> SSAValue:
    before.parent.insert_op_before(op, before)
    return op.results[0]


def _slice(v: SSAValue, window: _Window, reader: Operation) -> SSAValue:
    """``v[window]`` for ``reader``, which reads ``v``: computed at the window's size
    where ``v``'s op allows it, each rebuilt op where the op it replaces stands (so the
    step's order, and with it what is alive when, stays as it was); else a slice op
    just before ``reader``."""
    if window.covers(nd.shape_of(v)):
        return v
    if not _sinks(v, window):
        return _insert(nd.SliceOp.create(
            operands=[v], result_types=[_typed(v, window.shape)],
            properties={"start": nd.i64_array(window.start),
                        "limit": nd.i64_array(window.limit),
                        "stride": nd.i64_array(window.stride)},
            attributes=dict(reader.attributes)), reader)
    op = v.owner
    if isinstance(op, nd.SliceOp):
        return _slice(op.input, window.within(_Window.of(op)), op)
    if isinstance(op, nd.PadOp):
        return _sliced_pad(op, window)
    operands = [_slice(o, window, op) for o in op.operands]
    return _insert(type(op).create(operands=operands, result_types=[_typed(v, window.shape)],
                                   properties=dict(op.properties),
                                   attributes=dict(op.attributes)), op)


def _sliced_pad(op: nd.PadOp, window: _Window) -> SSAValue:
    """A unit-stride window of a pad: the pad of the source's elements inside the
    window (source element ``i`` sits at ``low + i * (interior + 1)``), padded by what
    of the window lies around them; all padding where none is."""
    src = nd.shape_of(op.input)
    low, interior = (tuple(a.get_values()) for a in (op.low, op.interior))
    shape = window.shape
    start, limit, new_low, new_high = [], [], [], []
    for n, lo, it, a, b, size in zip(src, low, interior, window.start, window.limit, shape):
        step = it + 1
        first = max(0, -(-(a - lo) // step))          # the first source element inside
        last = min(n - 1, (b - 1 - lo) // step)       # and the last
        if first > last:                              # none of them: all padding
            return _insert(nd.BroadcastInDimOp.create(
                operands=[op.padding_value], result_types=[_typed(op.result, shape)],
                properties={"dims": nd.i64_array([])},
                attributes=dict(op.attributes)), op)
        start.append(first)
        limit.append(last + 1)
        new_low.append(lo + first * step - a)
        new_high.append(b - 1 - (lo + last * step))
    inner = _slice(op.input, _Window(start, limit, (1,) * len(src)), op)
    if not any(new_low) and not any(new_high) and not any(interior):
        return inner
    return _insert(nd.PadOp.create(
        operands=[inner, op.padding_value], result_types=[_typed(op.result, shape)],
        properties={"low": nd.i64_array(new_low), "high": nd.i64_array(new_high),
                    "interior": nd.i64_array(interior)},
        attributes=dict(op.attributes)), op)


def _erase_unread(op: Operation) -> None:
    """Erase ``op`` and the producers only it read, so the next slice sees its input's
    true readers (the chain it replaced is no longer one)."""
    frontier = [op]
    while frontier:
        o = frontier.pop()
        if o.parent is None or not o.has_trait(Pure) or \
                any(list(r.uses) for r in o.results):
            continue
        inputs = [v.owner for v in o.operands if isinstance(v.owner, Operation)]
        o.detach()
        o.erase()
        frontier += inputs


def sink_slices(module: ModuleOp) -> ModuleOp:
    """Rewrite every slice whose input can be computed at the slice's size (module
    docstring) in place; the module is re-verified when anything changed."""
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    changed = False
    for s in [op for op in fn.body.block.ops if isinstance(op, nd.SliceOp)]:
        window = _Window.of(s)
        if s.parent is None or not _sinks(s.input, window):
            continue
        s.result.replace_all_uses_with(_slice(s.input, window, s))
        _erase_unread(s)
        changed = True
    if not changed:
        return module
    dce(module)
    return verified_after_pass(module)

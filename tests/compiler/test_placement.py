"""Output placements (``nova.compiler.lowering.placement``): a fused attention kernel
takes over the elementwise kernel that only assembles the parts of its packed result,
and stores each part where that assembly puts it. Input IR, the fused IR it becomes,
the placements, and the CPU kernels against the reference interpreter."""
import numpy as np
import pytest

from nova.compiler.lowering import plan_kernels
from nova.compiler.lowering.placement import Part, Placement, packed_parts, placements
from nova.compiler.passes.fusion import fuse
from tests.compiler.parsing import parse_module

T4 = "tensor<2x2x3x2xf32>"

# A GPT's attention in the small: q, k and v are heads of one (batch 2, T 3, 3 x C 4)
# projection; the gradient's three parts are merged back from heads and padded into
# their columns of the projection's gradient, then summed (what differentiating the
# split and the head reshapes records).
PREFIX = f"""\
builtin.module {{
  func.func @step(%qkv: tensor<2x3x12xf32>, %g: {T4}) -> tensor<2x3xWIDTHxf32> {{
    %qs = nova.slice %qkv start = [0, 0, 0] limit = [2, 3, 4] stride = [1, 1, 1] : tensor<2x3x12xf32> -> tensor<2x3x4xf32>
    %qr = nova.reshape %qs : tensor<2x3x4xf32> -> tensor<2x3x2x2xf32>
    %q = nova.transpose %qr perm = [0, 2, 1, 3] : tensor<2x3x2x2xf32> -> {T4}
    %ks = nova.slice %qkv start = [0, 0, 4] limit = [2, 3, 8] stride = [1, 1, 1] : tensor<2x3x12xf32> -> tensor<2x3x4xf32>
    %kr = nova.reshape %ks : tensor<2x3x4xf32> -> tensor<2x3x2x2xf32>
    %k = nova.transpose %kr perm = [0, 2, 1, 3] : tensor<2x3x2x2xf32> -> {T4}
    %vs = nova.slice %qkv start = [0, 0, 8] limit = [2, 3, 12] stride = [1, 1, 1] : tensor<2x3x12xf32> -> tensor<2x3x4xf32>
    %vr = nova.reshape %vs : tensor<2x3x4xf32> -> tensor<2x3x2x2xf32>
    %v = nova.transpose %vr perm = [0, 2, 1, 3] : tensor<2x3x2x2xf32> -> {T4}
    %o = nova.attention %q, %k, %v scale = 5.000000e-01 : f64 causal = 1 : i64 : {T4}, {T4}, {T4} -> tensor<2x2x9xf32>
    %ag = nova.attention_grad %q, %k, %v, %o, %g scale = 5.000000e-01 : f64 causal = 1 : i64 : {T4}, {T4}, {T4}, tensor<2x2x9xf32>, {T4} -> tensor<2x2x18xf32>
    %z = nova.constant ZERO : f32 : tensor<f32>
"""


def _merged(name: str, start: int, low: int, high: int, width: int = 12) -> str:
    """Part ``name`` (at ``start`` of the packed row) merged from heads and padded into
    columns [low, width - high) of a (2, 3, width) value."""
    return f"""\
    %{name}s = nova.slice %ag start = [0, 0, {start}] limit = [2, 2, {start + 6}] stride = [1, 1, 1] : tensor<2x2x18xf32> -> tensor<2x2x6xf32>
    %{name}r = nova.reshape %{name}s : tensor<2x2x6xf32> -> {T4}
    %{name}t = nova.transpose %{name}r perm = [0, 2, 1, 3] : {T4} -> tensor<2x3x2x2xf32>
    %{name}m = nova.reshape %{name}t : tensor<2x3x2x2xf32> -> tensor<2x3x4xf32>
    %{name} = nova.pad %{name}m, %z low = [0, 0, {low}] high = [0, 0, {high}] interior = [0, 0, 0] : tensor<2x3x4xf32>, tensor<f32> -> tensor<2x3x{width}xf32>
"""


def _step(body: str, result: str, width: int = 12, zero: str = "0.000000e+00") -> str:
    return (PREFIX.replace("WIDTH", str(width)).replace("ZERO", zero) + body +
            f"    func.return %{result} : tensor<2x3x{width}xf32>\n  }}\n}}")


QKV_GRAD = _step(_merged("dq", 0, 0, 8) + _merged("dk", 6, 4, 4) + _merged("dv", 12, 8, 0) + """\
    %s1 = nova.add %dv, %dk : tensor<2x3x12xf32>
    %dqkv = nova.add %s1, %dq : tensor<2x3x12xf32>
""", "dqkv")

# the attention_grad kernel's output is the sum itself; the forward stays a kernel of its own
QKV_GRAD_KERNELS = [
    ("attention", ["slice", "reshape", "transpose"] * 3 + ["attention"]),
    ("attention", ["slice", "reshape", "transpose"] * 3 + ["attention_grad", "constant"]
     + ["slice", "reshape", "transpose", "reshape", "pad"] * 3 + ["add", "add"]),
]


def _kernels(fused):
    fn = next(iter(fused.ops))
    return [(op.kind.data, [o.name[5:] for o in op.body.block.ops][:-1])
            for op in fn.body.block.ops if op.name == "nova.fusion"]


def _grad_op(module):
    fn = next(iter(module.ops))
    return next(op for op in fn.body.block.ops if op.name == "nova.attention_grad")


def test_the_attention_gradient_takes_over_the_assembly_of_its_parts():
    fused = fuse(parse_module(QKV_GRAD))
    assert _kernels(fused) == QKV_GRAD_KERNELS
    assert str(parse_module(str(fused))) == str(fused)   # the fused form parses back
    assert [(p.kind, p.schedule.strategy) for p in plan_kernels(fused)] == [
        ("attention", "attention"), ("attention", "attention_grad")]


def test_each_part_is_placed_where_the_assembly_puts_it():
    """(2, 3, 12) row-major: strides (36, 12, 1). dq's element (b, h, t, d) is column
    2 h + d of row t of batch b; dk's the same, 4 columns on; dv's 8."""
    module = parse_module(QKV_GRAD)
    fn = next(iter(module.ops))
    grad = _grad_op(module)
    parts = packed_parts(grad)
    assert parts == [Part(0, 3, 2), Part(6, 3, 2), Part(12, 3, 2)]
    root = fn.body.block.last_op.operands[0]
    assert placements(root, grad.results[0], parts) == [
        Placement(0, (36, 2, 12, 1)), Placement(4, (36, 2, 12, 1)),
        Placement(8, (36, 2, 12, 1))]
    # the packed result itself: each part where it is packed, rows of its width
    assert placements(grad.results[0], grad.results[0], parts) == [
        Placement(0, (36, 18, 2, 1)), Placement(6, (36, 18, 2, 1)),
        Placement(12, (36, 18, 2, 1))]


def _assembly_only(text: str) -> str:
    """The step's assembly alone: a function of the packed gradient ``%ag``."""
    lines = text.splitlines()
    head = lines[1].replace("(%qkv: tensor<2x3x12xf32>, %g: tensor<2x2x3x2xf32>)",
                            "(%ag: tensor<2x2x18xf32>)")
    start = next(i for i, ln in enumerate(lines) if "%z = " in ln)
    return "\n".join([lines[0], head] + lines[start:])


@pytest.mark.parametrize("case", ["qkv", "two_parts"])
def test_storing_through_the_placements_is_the_assembly(case):
    """Every element of a random packed gradient stored through the placements gives
    the interpreter's assembly of it, element for element."""
    text = QKV_GRAD if case == "qkv" else TWO_PARTS
    module = parse_module(text)
    fn = next(iter(module.ops))
    grad = _grad_op(module)
    root = fn.body.block.last_op.operands[0]
    parts = packed_parts(grad)
    places = placements(root, grad.results[0], parts)
    packed = np.random.default_rng(0).standard_normal((2, 2, 18)).astype(np.float32)
    from nova.runtime.executable import Executable
    (want,) = Executable(parse_module(_assembly_only(text)), "interp").run([packed])
    out = np.full(want.size, np.nan, np.float32)
    for part, place in zip(parts, places):
        if place is None:
            continue
        values = packed[..., part.start:part.start + part.rows * part.cols].reshape(
            2, 2, part.rows, part.cols)
        for idx in np.ndindex(values.shape):
            at = place.offset + sum(i * s for i, s in zip(idx, place.strides))
            assert np.isnan(out[at]), "an element stored twice"
            out[at] = values[idx]
    np.testing.assert_array_equal(out.reshape(want.shape), want)


# dk unused: dv first, then dq, in a value of 8 columns
TWO_PARTS = _step(_merged("dv", 12, 0, 4, 8) + _merged("dq", 0, 4, 0, 8) + """\
    %dqv = nova.add %dv, %dq : tensor<2x3x8xf32>
""", "dqv", width=8)


@pytest.mark.parametrize("case", ["qkv", "two_parts"])
def test_the_cpu_kernels_store_through_the_placements(case):
    from nova.runtime.executable import Executable
    text = QKV_GRAD if case == "qkv" else TWO_PARTS
    rng = np.random.default_rng(1)
    args = [rng.standard_normal((2, 3, 12)).astype(np.float32),
            rng.standard_normal((2, 2, 3, 2)).astype(np.float32)]
    (cpu,) = Executable(parse_module(text), "cpu").run(args)
    (interp,) = Executable(parse_module(text), "interp").run(args)
    assert (interp != 0).any(axis=(0, 1)).all()     # every column holds a gradient
    np.testing.assert_allclose(cpu, interp, rtol=0, atol=2e-5 * np.abs(interp).max())


NOT_AN_ASSEMBLY = {
    # the dk and dv regions overlap in columns 6-7
    "overlapping": _step(_merged("dq", 0, 0, 8) + _merged("dk", 6, 4, 4) + _merged("dv", 12, 6, 2)
                         + """\
    %s1 = nova.add %dv, %dk : tensor<2x3x12xf32>
    %dqkv = nova.add %s1, %dq : tensor<2x3x12xf32>
""", "dqkv"),
    # columns 8-11 are nobody's: the sum's zeros there are not stored by any part
    "gap": _step(_merged("dq", 0, 0, 8) + _merged("dk", 6, 4, 4) + """\
    %dqkv = nova.add %dk, %dq : tensor<2x3x12xf32>
""", "dqkv"),
    # padded with ones: the padding is a value of its own
    "nonzero_padding": _step(_merged("dq", 0, 0, 8) + _merged("dk", 6, 4, 4) + _merged("dv", 12, 8, 0)
                             + """\
    %s1 = nova.add %dv, %dk : tensor<2x3x12xf32>
    %dqkv = nova.add %s1, %dq : tensor<2x3x12xf32>
""", "dqkv", zero="1.000000e+00"),
    # the assembly computes: dq scaled on its way
    "computed": _step(_merged("dq", 0, 0, 8) + _merged("dk", 6, 4, 4) + _merged("dv", 12, 8, 0) + """\
    %two = nova.constant 2.000000e+00 : f32 : tensor<2x3x12xf32>
    %dq2 = nova.mul %dq, %two : tensor<2x3x12xf32>
    %s1 = nova.add %dv, %dk : tensor<2x3x12xf32>
    %dqkv = nova.add %s1, %dq2 : tensor<2x3x12xf32>
""", "dqkv"),
}


@pytest.mark.parametrize("case", sorted(NOT_AN_ASSEMBLY))
def test_an_output_that_is_not_an_assembly_of_the_parts_keeps_its_own_kernel(case):
    module = parse_module(NOT_AN_ASSEMBLY[case])
    fn = next(iter(module.ops))
    grad = _grad_op(module)
    assert placements(fn.body.block.last_op.operands[0], grad.results[0],
                      packed_parts(grad)) is None
    kinds = [k for k, _ in _kernels(fuse(module))]
    assert kinds == ["attention", "attention", "elementwise"]


def test_a_part_placed_with_its_columns_strided():
    """The forward's output transposed (rows and head dim swapped) and returned: the
    attention kernel takes that kernel over too and stores each row's values a row
    length apart in the output (column stride L), against the composite."""
    import nova as nv
    import nova.nn.functional as F
    from nova import config
    from nova.compiler.pipeline import compile_step, front
    from nova.tensor.realize import pending_graph
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((2, 3, 19, 6)).astype(np.float32) for _ in range(3))

    def run():
        y = F.scaled_dot_product_attention(nv.tensor(q), nv.tensor(k), nv.tensor(v),
                                           is_causal=True).transpose(-1, -2)
        plans = compile_step(front(pending_graph(y)), "cpu").plans
        return y.numpy(), [(p.kind, p.schedule.strategy) for p in plans]
    fused, kinds = run()
    with config.FUSED_ATTENTION.overridden("0"):
        composite, _ = run()
    assert kinds == [("attention", "attention")] and fused.shape == (2, 3, 6, 19)
    np.testing.assert_allclose(fused, composite, rtol=0, atol=2e-5 * np.abs(composite).max())

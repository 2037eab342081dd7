"""Kernel naming (``nova.compiler.lowering.plan``): a kernel's name digests its structure
(``body_key``, built without the IR printer), so equal code shares one name -- across
positions in a step and across steps -- and any difference in what the code computes
gives another."""
import numpy as np

import nova as nv
from nova.compiler import pipeline
from nova.compiler.lowering.plan import body_key
from nova.tensor.realize import pending_graph


def _plans(*outs):
    lowered = pipeline.compile_step(pipeline.front(pending_graph(*outs)), "cpu")
    return lowered.plans


def _x(shape=(8, 16), seed=0):
    return nv.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def test_body_key_spells_the_region_op_by_op_with_exact_constants():
    (plan,) = _plans(nv.exp(_x()) * -0.0 + 1e-8)
    assert body_key(plan.fusion).splitlines() == [
        "elementwise", "{", "tensor<8x16xf32>",
        "nova.exp(0)", "tensor<8x16xf32>",
        "nova.constant()", "tensor<8x16xf32>", "value=float -0x0.0p+0 : f32",
        "nova.mul(1,2)", "tensor<8x16xf32>",
        "nova.constant()", "tensor<8x16xf32>", "value=float 0x1.5798ee0000000p-27 : f32",
        "nova.add(3,4)", "tensor<8x16xf32>",
        "nova.yield(5)", "}"]


def test_equal_kernels_share_a_name_wherever_they_are():
    a, b = _x(seed=1), _x(seed=2)
    plans = _plans(nv.exp(a) + 1.0, nv.exp(b) + 1.0)
    assert len(plans) == 2 and plans[0].name == plans[1].name
    (again,) = _plans(nv.exp(_x(seed=3)) + 1.0)        # another step, other values
    assert again.name == plans[0].name


def test_any_difference_in_the_code_gives_another_name():
    x, y = _x(seed=4), _x(seed=5)
    variants = [
        nv.exp(x) + 1.0, nv.exp(x) + 1.0000001, nv.exp(x) * 0.0, nv.exp(x) * -0.0,
        nv.log(x * x + 1.0), nv.exp(x) - y, y - nv.exp(x),
        x.transpose(0, 1) @ y, x @ y.transpose(0, 1),
        (nv.exp(x) + 1.0).sum(0), (nv.exp(x) + 1.0).sum(1),
        (nv.exp(_x((8, 8))) + 1.0).sum(0), nv.exp(x.double()) + 1.0,
    ]
    names = []
    for v in variants:
        names += [p.name for p in _plans(v)]
    keys = {p.name: body_key(p.fusion) for v in variants for p in _plans(v)}
    assert len(set(keys.values())) == len(keys)        # a name per distinct structure
    assert len(set(names)) >= len(variants)


def test_body_key_does_not_print_the_ir(monkeypatch):
    """The point of body_key: no xDSL printer on the compile path."""
    from xdsl.printer import Printer
    (plan,) = _plans(nv.tanh(_x(seed=6)) * 3.0)

    def refuse(*args, **kwargs):
        raise AssertionError("body_key printed an op")
    monkeypatch.setattr(Printer, "print_op", refuse)
    assert "nova.tanh" in body_key(plan.fusion)


def test_a_flat_kernel_has_one_name_and_one_code_for_every_size():
    """An elementwise kernel reading its inputs at its own position (here an AdamW-like
    update: three tensors and two scalars) is flat: planned as one loop over its
    elements, named without its size, and generated from a 1-D form whose size is only
    the launch range -- so the same LLVM IR, byte for byte, at any shape."""
    from nova.runtime.kernel_cache import KERNELS

    def update(shape, seed):
        p, g, m = (_x(shape, seed + i) for i in range(3))
        lr, c = nv.tensor(np.float32(0.1)), nv.tensor(np.float32(0.9))
        (plan,) = _plans(p - lr * (m * c + g) / (nv.sqrt(g * g) + 1e-8))
        return plan

    plans = [update(s, k) for k, s in enumerate([(8, 16), (3,), (5, 7, 2), (1, 1)])]
    assert all(p.schedule.flat and p.schedule.loops == (int(np.prod(p.out[0])),)
               for p in plans)
    assert len({p.name for p in plans}) == 1
    assert len({KERNELS.llvm_ir(p) for p in plans}) == 1
    assert plans[0].out[0] == (8, 16)           # the runtime's view keeps the shape


def test_kernels_that_read_off_their_own_position_are_not_flat():
    """A transpose, a row broadcast, a slice or an iota reads another position than
    the output's: such kernels keep their loop nest and a name per shape."""
    from nova.compiler import dialect as nd

    def off_position(op):
        return isinstance(op, (nd.TransposeOp, nd.SliceOp, nd.IotaOp)) or (
            isinstance(op, nd.BroadcastInDimOp) and op.operands[0].type.get_shape())

    x, y = _x(seed=7), _x(seed=8)
    row = _x((16,), seed=9)
    seen = 0
    for v in (x.transpose(0, 1) + 1.0, x + row, (x + 1.0)[:, 1:] * 2.0, x + nv.arange(16)):
        for p in _plans(v):
            off = any(off_position(op) for op in p.fusion.body.block.ops)
            assert p.schedule.flat == (not off and p.kind == "elementwise"), p.describe()
            seen += off
    assert seen >= 4
    assert all(p.schedule.flat for p in _plans(x * y + 1.0))

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
        nv.exp(_x((8, 8))) + 1.0, nv.exp(x.double()) + 1.0,
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

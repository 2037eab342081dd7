"""Flat elementwise kernels (``nova.compiler.lowering.flat``): the flat form of a kernel
(input IR -> output IR), what has one and what does not, the key that names it, and
that kernels of different sizes share one compiled kernel and still compute their own
values."""
from textwrap import dedent

import numpy as np
import pytest

import nova as nv
from nova.compiler import pipeline
from nova.compiler.lowering.flat import flat_form, flat_key, flat_plan, is_flat
from nova.compiler.lowering.plan import body_key
from nova.runtime.kernel_cache import KERNELS
from nova.tensor.realize import pending_graph


def _plans(*outs):
    return pipeline.compile_step(pipeline.front(pending_graph(*outs)), "cpu").plans


def _t(shape, seed=0, dtype=np.float32):
    return nv.tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def _update(shape, seed=0):
    """An optimizer-like update: a reshaped gradient, a scalar rate, a constant."""
    p, g = _t(shape, seed), _t((int(np.prod(shape)),), seed + 1)
    lr = nv.tensor(np.float32(0.5))
    return p - lr * g.reshape(*shape) * 2.0


def test_the_flat_form_drops_reshapes_and_makes_every_full_size_value_one_dimensional():
    (plan,) = _plans(_update((2, 3)))
    assert str(plan.fusion) == dedent("""\
        %0 = "nova.fusion"(%1, %2, %3) <{kind = "elementwise"}> ({
        ^bb0(%4: tensor<6xf32>, %5: tensor<f32>, %6: tensor<2x3xf32>):
          %7 = nova.reshape %4 : tensor<6xf32> -> tensor<2x3xf32>
          %8 = nova.broadcast_in_dim %5 dims = [] : tensor<f32> -> tensor<2x3xf32>
          %9 = nova.mul %8, %7 : tensor<2x3xf32>
          %10 = nova.constant 2.000000e+00 : f32 : tensor<2x3xf32>
          %11 = nova.mul %9, %10 : tensor<2x3xf32>
          %12 = nova.sub %6, %11 : tensor<2x3xf32>
          nova.yield %12 : tensor<2x3xf32>
        }) : (tensor<6xf32>, tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>""")
    flat, values = flat_form(plan.fusion)
    assert str(flat) == dedent("""\
        %0 = "nova.fusion"() <{kind = "elementwise"}> ({
        ^bb0(%1: tensor<6xf32>, %2: tensor<f32>, %3: tensor<6xf32>):
          %4 = nova.broadcast_in_dim %2 dims = [] : tensor<f32> -> tensor<6xf32>
          %5 = nova.mul %4, %1 : tensor<6xf32>
          %6 = nova.constant 2.000000e+00 : f32 : tensor<6xf32>
          %7 = nova.mul %5, %6 : tensor<6xf32>
          %8 = nova.sub %3, %7 : tensor<6xf32>
          nova.yield %8 : tensor<6xf32>
        }) : () -> tensor<6xf32>""")
    block = flat.body.block
    assert block.args[1] not in values and block.args[0] in values    # the scalar stays 0-d
    # the key names exactly the flat form, without its length
    assert flat_key(plan.fusion) == body_key(flat, symbolic=values)
    assert "tensor<?xf32>" in flat_key(plan.fusion) and "6x" not in flat_key(plan.fusion)
    # the runtime's plan keeps the original region and shapes; code generation the flat
    assert plan.schedule.flat and plan.out[0] == (2, 3) and plan.fusion.inputs
    generated = flat_plan(plan)
    assert generated.fusion is not plan.fusion and generated.out[0] == (6,)
    assert [s for s, _ in generated.arg_types] == [(6,), (), (6,), (6,)]


@pytest.mark.parametrize("make", [
    lambda: _t((4, 5)).transpose(0, 1) * 2.0,             # a transpose
    lambda: _t((4, 5)) + _t((5,), 1),                     # a row broadcast
    lambda: _t((4, 5)) * nv.arange(5),                    # an iota
    lambda: nv.cat([_t((2, 5)), _t((3, 5), 1)]) * 2.0,    # a concat
])
def test_a_kernel_reading_another_position_has_no_flat_form(make):
    plans = _plans(make())
    root = plans[-1]
    assert root.kind == "elementwise" and not is_flat(root.fusion)
    assert flat_key(root.fusion) is None and not root.schedule.flat


def test_the_key_of_any_flat_kernel_is_the_key_of_its_flat_form():
    """``flat_key`` reads the original region (no region built at planning); it must
    say exactly what the flat form generated from is."""
    outs = [_update((3, 4), 1), nv.randn(5, 7), nv.rand(3) * 2.0 - 1.0,
            nv.where(_t((6,)) > 0, _t((2, 3), 2).reshape(6), 0.0),
            (_t((2, 2)) * 3).exp().sqrt() + nv.tensor(np.float32(2.0)) * 4.0]
    checked = 0
    for out in outs:
        for plan in _plans(out):
            if plan.schedule.flat:
                flat, values = flat_form(plan.fusion)
                assert flat_key(plan.fusion) == body_key(flat, symbolic=values)
                checked += 1
    assert checked >= len(outs)


def test_flat_kernels_of_every_size_share_one_compiled_kernel_and_compute_their_own_values():
    """Three sizes of the same update in one step: one name, one compile, and each
    output equals numpy's."""
    shapes = [(3, 5), (7,), (2, 3, 4)]
    ins = [(np.random.default_rng(k).standard_normal(s).astype(np.float32),
            np.random.default_rng(k + 9).standard_normal(s).astype(np.float32))
           for k, s in enumerate(shapes)]
    lr = nv.tensor(np.float32(0.25))
    outs = [nv.tensor(p) - lr * (nv.tensor(g) * 3.0).tanh() for p, g in ins]
    plans = _plans(*outs)
    assert len({p.name for p in plans}) == 1 and all(p.schedule.flat for p in plans)
    before = KERNELS.stats.compiled + KERNELS.stats.disk_hits
    nv.realize(*outs)
    assert KERNELS.stats.compiled + KERNELS.stats.disk_hits - before <= 1
    for out, (p, g) in zip(outs, ins):
        np.testing.assert_allclose(out.numpy(), p - 0.25 * np.tanh(g * 3.0), rtol=1e-6,
                                   atol=1e-6)

"""Rematerialization: input IR, output IR, the min-cut's choices, exactness and memory."""
import numpy as np
import pytest

import nova as nv
from models.gpt import GPT, preset
from nova.compiler import dialect as nd
from nova.compiler.passes import rematerialize
from nova.compiler.passes.remat import choose_saved
from nova.runtime.cache import CACHE
from tests.compiler.parsing import parse_module


# exp's gradient reads exp's output y (64 KiB). y is recomputable from the argument x,
# which is alive anyway, so the cut keeps nothing and the backward recomputes y.
SOURCE = """\
builtin.module {
  func.func @step(%x: tensor<128x128xf32>, %dy: tensor<128x128xf32>) -> (tensor<f32>, tensor<128x128xf32>) {
    %c = nova.constant 2.000000e+00 : f32 : tensor<128x128xf32>
    %h = nova.mul %x, %c : tensor<128x128xf32>
    %y = nova.exp %h : tensor<128x128xf32>
    %s = nova.reduce_sum %y axes = [0, 1] : tensor<128x128xf32> -> tensor<f32>
    %g = nova.mul %dy, %y {nova.backward} : tensor<128x128xf32>
    %gx = nova.mul %g, %c {nova.backward} : tensor<128x128xf32>
    func.return %s, %gx : tensor<f32>, tensor<128x128xf32>
  }
}"""

EXPECTED = """\
builtin.module {
  func.func @step(%x: tensor<128x128xf32>, %dy: tensor<128x128xf32>) -> (tensor<f32>, tensor<128x128xf32>) {
    %c = nova.constant 2.000000e+00 : f32 : tensor<128x128xf32>
    %h = nova.mul %x, %c : tensor<128x128xf32>
    %y = nova.exp %h : tensor<128x128xf32>
    %s = nova.reduce_sum %y axes = [0, 1] : tensor<128x128xf32> -> tensor<f32>
    %h_1 = nova.mul %x, %c {nova.backward} : tensor<128x128xf32>
    %y_1 = nova.exp %h_1 {nova.backward} : tensor<128x128xf32>
    %g = nova.mul %dy, %y_1 {nova.backward} : tensor<128x128xf32>
    %gx = nova.mul %g, %c {nova.backward} : tensor<128x128xf32>
    func.return %s, %gx : tensor<f32>, tensor<128x128xf32>
  }
}"""


def test_default_remat_recomputes_an_elementwise_chain_per_reader():
    assert str(rematerialize(parse_module(SOURCE), "default")) == EXPECTED


def test_off_and_small_values_are_left_alone():
    assert str(rematerialize(parse_module(SOURCE), "off")) == SOURCE
    small = SOURCE.replace("128x128", "4x4")   # 64 bytes: keeping beats a kernel launch
    assert str(rematerialize(parse_module(small), "default")) == small


# The backward reads e = exp(p) of the product p = a b (256 KiB from 2 x 8 KiB
# operands). Default remat never recomputes a contraction, so p or e is kept;
# aggressive recomputes both from the arguments.
MATMUL = """\
builtin.module {
  func.func @step(%a: tensor<256x8xf32>, %b: tensor<8x256xf32>, %dy: tensor<256x256xf32>) -> (tensor<f32>, tensor<256x256xf32>) {
    %p = nova.matmul %a, %b : tensor<256x8xf32>, tensor<8x256xf32> -> tensor<256x256xf32>
    %e = nova.exp %p : tensor<256x256xf32>
    %s = nova.reduce_sum %e axes = [0, 1] : tensor<256x256xf32> -> tensor<f32>
    %g = nova.mul %dy, %e {nova.backward} : tensor<256x256xf32>
    func.return %s, %g : tensor<f32>, tensor<256x256xf32>
  }
}"""


def test_min_cut_keeps_contractions_unless_aggressive():
    module = parse_module(MATMUL)
    fn = next(iter(module.ops))
    saved, needed = choose_saved(fn, "default")
    assert [v.name_hint for v in needed] == ["e"]
    # p and e have equal bytes, but e is an Expensive exp, which its forward reader (the
    # sum) would compute on the fly: keeping it would store one more buffer
    assert [v.name_hint for v in saved] == ["p"]
    saved, _ = choose_saved(fn, "aggressive")
    assert saved == set()                              # recompute from the arguments
    out = str(rematerialize(module, "aggressive"))
    assert "%p_1 = nova.matmul %a, %b {nova.backward}" in out
    assert "%g = nova.mul %dy, %e_1 {nova.backward}" in out


def test_unknown_mode_is_rejected():
    with pytest.raises(ValueError, match="remat: unknown mode 'all'"):
        rematerialize(parse_module(SOURCE), "all")
    with pytest.raises(ValueError, match="set_remat: unknown mode"):
        nv.set_remat("everything")


def _gpt_steps(mode: str, engine: str, steps: int = 2):
    nv.set_remat(mode)
    try:
        nv.manual_seed(0)
        cfg = preset("tiny", d=64, heads=4, block=64, dropout=0.1)
        model = GPT(cfg)
        opt = nv.optim.AdamW(model.parameters(), lr=1e-3)
        rng = np.random.default_rng(0)
        losses = []
        with nv.engine(engine):
            for _ in range(steps):
                x = nv.tensor(rng.integers(0, 256, (4, cfg.block)))
                _, loss = model(x, x)
                loss.backward()
                opt.step()
                opt.zero_grad()
                losses.append(loss.item())
            report = nv.debug.memory_report() if engine == "cpu" else None
        return losses, [p.numpy() for p in model.parameters()], report
    finally:
        nv.set_remat("default")


@pytest.mark.parametrize("engine", ["cpu", "interp"])
def test_remat_preserves_a_training_step_exactly_dropout_included(engine):
    ref_losses, ref_params, _ = _gpt_steps("off", engine)
    for mode in ("default", "aggressive"):
        losses, params, _ = _gpt_steps(mode, engine)
        assert losses == ref_losses
        for a, b in zip(params, ref_params):
            np.testing.assert_array_equal(a, b)


def test_remat_lowers_the_planned_peak():
    arenas = {mode: _gpt_steps(mode, "cpu", steps=1)[2].arena_bytes
              for mode in ("off", "default", "aggressive")}
    assert arenas["default"] < 0.75 * arenas["off"]
    assert arenas["aggressive"] < arenas["default"]
    assert "remat=aggressive" in CACHE.stats.miss_log[-1].engine


# A product and its bias add tie (equal bytes). Keeping the bare product p would leave
# it two readers -- the forward's add and the backward's recomputed add -- so neither
# could be its epilogue: two elementwise kernels. Keeping the sum h makes the add p's
# epilogue and recomputes nothing.
BIAS = """\
builtin.module {
  func.func @step(%a: tensor<256x64xf32>, %w: tensor<64x256xf32>, %bias: tensor<256xf32>, %dy: tensor<256x256xf32>) -> (tensor<f32>, tensor<256x256xf32>) {
    %p = nova.matmul %a, %w : tensor<256x64xf32>, tensor<64x256xf32> -> tensor<256x256xf32>
    %b = nova.broadcast_in_dim %bias dims = [1] : tensor<256xf32> -> tensor<256x256xf32>
    %h = nova.add %p, %b : tensor<256x256xf32>
    %s = nova.reduce_sum %h axes = [0, 1] : tensor<256x256xf32> -> tensor<f32>
    %g = nova.mul %dy, %h {nova.backward} : tensor<256x256xf32>
    func.return %s, %g : tensor<f32>, tensor<256x256xf32>
  }
}"""


def test_a_tie_keeps_the_later_value_so_the_bias_add_is_the_products_epilogue():
    from nova.compiler.passes.fusion import fuse
    module = parse_module(BIAS)
    saved, needed = choose_saved(next(iter(module.ops)), "default")
    assert [v.name_hint for v in saved] == ["h"] and [v.name_hint for v in needed] == ["h"]
    out = rematerialize(module, "default")
    assert str(out) == BIAS                      # nothing recomputed
    kinds = [op.kind.data for op in fuse(out, "cpu").walk() if isinstance(op, nd.FusionOp)]
    assert sorted(kinds) == ["elementwise", "matmul", "reduce"]   # the add is in the matmul

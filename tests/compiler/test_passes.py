"""CSE + DCE over the step function: input IR and output IR."""
from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.parser import Parser

from nova.compiler.dialect import Nova
from nova.compiler.passes import simplify

SOURCE = """\
builtin.module {
  func.func @step(%x: tensor<3xf32>, %key: tensor<2xi64>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
    %zero = nova.constant 0.000000e+00 : f32 : tensor<3xf32>
    %relu = nova.maximum %x, %zero : tensor<3xf32>
    %zero2 = nova.constant 0.000000e+00 : f32 : tensor<3xf32>
    %relu2 = nova.maximum %x, %zero2 : tensor<3xf32>
    %unused = nova.exp %x : tensor<3xf32>
    %u1 = nova.rng_uniform %key : tensor<2xi64> -> tensor<3xf32>
    %u2 = nova.rng_uniform %key : tensor<2xi64> -> tensor<3xf32>
    func.return %relu, %relu2, %u1, %u2 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  }
}"""

EXPECTED = """\
builtin.module {
  func.func @step(%x: tensor<3xf32>, %key: tensor<2xi64>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
    %zero = nova.constant 0.000000e+00 : f32 : tensor<3xf32>
    %relu = nova.maximum %x, %zero : tensor<3xf32>
    %u1 = nova.rng_uniform %key : tensor<2xi64> -> tensor<3xf32>
    %u2 = nova.rng_uniform %key : tensor<2xi64> -> tensor<3xf32>
    func.return %relu, %relu, %u1, %u2 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  }
}"""


def test_cse_merges_pure_duplicates_and_dce_drops_unused_but_keeps_random_draws():
    ctx = Context()
    for d in (builtin.Builtin, func.Func, Nova):
        ctx.load_dialect(d)
    module = Parser(ctx, SOURCE).parse_module()
    assert str(simplify(module)) == EXPECTED


def _verifications(monkeypatch, setting: str) -> int:
    """How many times compiling a small step verifies a whole module."""
    import numpy as np

    import nova as nv
    from nova.compiler import pipeline
    from nova.tensor.realize import pending_graph
    monkeypatch.setenv("NOVA_VERIFY_PASSES", setting)
    calls = []
    original = builtin.ModuleOp.verify

    def counted(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)
    monkeypatch.setattr(builtin.ModuleOp, "verify", counted)
    x = nv.tensor(np.ones((4, 8), np.float32)).requires_grad_()
    loss = (x.exp() * 2.0).sum()
    (g,) = nv.autograd.grad(loss, [x])
    pipeline.compile_step(pipeline.front(pending_graph(loss, g)), "cpu")
    return len(calls)


def test_a_step_is_verified_once_and_after_every_pass_when_asked(monkeypatch):
    """By default only the built step is verified (irgen); NOVA_VERIFY_PASSES=1 (what
    the suite runs with) verifies after simplify, the attention rewrite, remat and fusion
    too."""
    assert _verifications(monkeypatch, "0") == 1
    assert _verifications(monkeypatch, "1") == 5

"""Steps in MLIR's generic form: upstream MLIR (the ``mlir`` extra's bindings) parses and
verifies them, and xDSL reads them back -- directly and after upstream re-prints them --
as the same module. Without the bindings the upstream checks skip, naming the install
line."""
import numpy as np
import pytest

import nova as nv
from models.gpt import GPT, preset
from nova.compiler import mlir_text
from nova.compiler.pipeline import front
from nova.tensor.realize import pending_graph


def _upstream():
    try:
        import mlir.ir  # noqa: F401
    except ImportError:
        pytest.skip(f"upstream MLIR bindings not installed: {mlir_text.INSTALL}")


def _gpt_step(config, vocab: int, length: int, batch: int = 2, grads: bool = False) -> list:
    """A GPT's training step on a batch of ``batch``: the loss, then (with ``grads``)
    every gradient, then each parameter moved along its gradient (forward, backward and
    an update)."""
    nv.manual_seed(0)
    model = GPT(config)
    x = nv.tensor(np.random.default_rng(0).integers(0, vocab, (batch, length + 1)))
    _, loss = model(x[:, :-1], x[:, 1:])
    loss.backward()
    params = list(model.parameters())
    with nv.no_grad():
        updated = [p - 0.01 * p.grad for p in params]
    return [loss] + ([p.grad for p in params] if grads else []) + updated


def _tiny_gpt_step() -> list:
    return _gpt_step(preset("tiny", block=8, dropout=0.1), 256, 8)


def _small_gpt_step() -> list:
    return _gpt_step(preset("small", dropout=0.1), 65, 128)


def _every_op() -> list:
    """A step holding most ops of the dialect, RNG and casts included."""
    x = nv.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = x * 1.0
    y[:, ::2] = 1.0
    y[nv.tensor([1, 0]), nv.tensor([2, -1])] = 4.0
    z = nv.scatter_add(nv.zeros(2, 3), 1, nv.tensor([[0, 0], [2, 1]]), nv.ones(2, 2))
    w = (x.abs().log1p().expm1().log().sqrt().reciprocal().sin().cos().tanh() ** 2).long().float()
    d = nv.nn.functional.dropout(x, 0.5, training=True)
    return [y, z, w, d, x.argsort(dim=0, descending=True), x.cumsum(1), x.half().float(),
            nv.maximum(x, 1.0) - nv.minimum(x, 2.0) / 3.0]


def _attention_and_a_collective() -> list:
    """Fused causal attention with dropout and its gradients, and an all-reduce (a world
    of one)."""
    import nova.distributed as dist
    rng = np.random.default_rng(1)
    q, k, v = (nv.tensor(rng.standard_normal((2, 2, 5, 4)).astype(np.float32),
                         requires_grad=True) for _ in range(3))
    y = nv.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.25)
    (y * y).sum().backward()
    dist.init_process_group("mpi")      # destroyed after the test (``no_group_left``)
    return [y, q.grad, k.grad, dist.reduced(v.grad, "max")]


@pytest.fixture(autouse=True)
def no_group_left():
    yield
    import nova.distributed as dist
    if dist.is_initialized():
        dist.destroy_process_group()


CASES = [_tiny_gpt_step, _small_gpt_step, _every_op, _attention_and_a_collective]
IDS = ["tiny_gpt_step", "small_gpt_step", "every_op", "attention_and_a_collective"]


@pytest.mark.parametrize("make", CASES, ids=IDS)
def test_the_generic_form_reads_back_as_the_same_module(make):
    graph = pending_graph(*make())
    module = front(graph)
    text = mlir_text.generic_text(module)
    assert text.startswith('"builtin.module"() ({') and '"nova.' in text
    assert str(mlir_text.parse(text)) == str(module)


def test_export_and_dump_ir_give_the_generic_form():
    x = nv.tensor(np.ones((2, 3), np.float32))
    y = (x * 2.0).exp().sum(1)
    text = nv.export.mlir(y)
    assert text == nv.debug.dump_ir(y, generic=True)
    assert '"nova.reduce_sum"(%3) <{axes = array<i64: 1>}> : (tensor<2x3xf32>) -> ' \
           'tensor<2xf32>' in text
    fused = nv.export.mlir(y, stage="fused")
    assert '"nova.fusion"' in fused and "// " not in fused
    with pytest.raises(ValueError, match="unknown stage 'llvm'"):
        nv.export.mlir(y, stage="llvm")


@pytest.mark.parametrize("make", CASES, ids=IDS)
@pytest.mark.parametrize("stage", ["nova", "fused"])
def test_upstream_mlir_verifies_the_step_and_its_printing_reads_back(make, stage):
    _upstream()
    tensors = make()
    text = nv.export.mlir(*tensors, stage=stage)
    printed = mlir_text.verify_upstream(text)
    # the same ops, operands and attributes (upstream names the arguments %arg<n>)
    assert mlir_text.parse(printed).is_structurally_equivalent(mlir_text.parse(text))


def test_upstream_mlir_rejects_broken_ir_with_its_diagnostic():
    _upstream()
    with pytest.raises(ValueError, match="upstream MLIR rejects the step"):
        mlir_text.verify_upstream('"nova.add"(%0) : (tensor<2xf32>) -> tensor<2xf32>')


def _golden_modules() -> list[tuple[str, str]]:
    """Every golden IR module of ``tests/compiler/test_golden_stages.py``, by name."""
    from tests.compiler import test_golden_stages as golden
    return [(name, value) for name, value in sorted(vars(golden).items())
            if name.isupper() and isinstance(value, str) and value.startswith("builtin.module")]


@pytest.mark.parametrize("name,text", _golden_modules(), ids=[n for n, _ in _golden_modules()])
def test_upstream_mlir_verifies_every_golden_stage_and_it_reads_back(name, text):
    """The golden of every compiler stage (trace, each pass, fusion for the CPU and for
    CUDA) in generic form: upstream MLIR verifies it, and both xDSL's reading of it and
    of upstream's printing are the module itself."""
    _upstream()
    module = mlir_text.parse(text)                 # (xDSL reads the pretty form too)
    generic = mlir_text.generic_text(module)
    assert mlir_text.parse(generic).is_structurally_equivalent(module)
    printed = mlir_text.verify_upstream(generic)
    assert mlir_text.parse(printed).is_structurally_equivalent(module)

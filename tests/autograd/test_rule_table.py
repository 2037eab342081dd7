"""The vector-Jacobian table covers the dialect: every op of ``nd.OPS_BY_NAME`` has a
rule or the NonDifferentiable trait, never both, and what the tape saves at record
time is read from the same table."""
import pytest

import nova as nv
from nova.autograd import rules
from nova.compiler import dialect as nd
from nova.tensor import tape


@pytest.fixture(autouse=True)
def engine():
    """The table is data: no engine to run it on (overrides the conftest's two)."""
    yield None


def test_every_dialect_op_has_a_rule_or_the_non_differentiable_trait_never_both():
    assert rules.coverage_errors(nd.OPS_BY_NAME, rules.RULES) == []
    assert set(rules.RULES) | {op for op in nd.OPS_BY_NAME.values()
                               if op.has_trait(nd.NonDifferentiable)} == set(
        nd.OPS_BY_NAME.values())


def test_the_coverage_check_names_a_missing_rule_a_doubled_one_and_a_stray_one():
    ops = {"exp": nd.ExpOp, "add": nd.AddOp, "constant": nd.ConstantOp}
    table = {nd.AddOp: rules.RULES[nd.AddOp],
             nd.ConstantOp: rules.Rule(lambda c, g: ()),
             nd.FusionOp: rules.Rule(lambda c, g: ())}
    assert rules.coverage_errors(ops, table) == [
        "nova.constant: has a vector-Jacobian rule and the NonDifferentiable trait",
        "nova.exp: has no vector-Jacobian rule and not the NonDifferentiable trait",
        "FusionOp: has a rule but is not an op of the dialect",
    ]


def test_the_tape_saves_what_the_table_says():
    for op, rule in rules.RULES.items():
        assert tape.saves(op) == (rule.saves_inputs, rule.saves_output), op.__name__
    x = nv.tensor([1.0, 2.0], requires_grad=True)
    w = nv.tensor([3.0, 4.0], requires_grad=True)
    y = (x / w).exp()
    div_fn = y.grad_fn.next[0]
    assert y.grad_fn.op == "exp" and y.grad_fn.saved == (None,)
    assert y.grad_fn.out_node is y.node                 # exp's rule reads its output
    assert div_fn.op == "div" and div_fn.saved[0] is None and div_fn.saved[1] is w.node


def test_a_recorded_op_without_a_rule_names_the_op_shapes_and_dtypes():
    fn = tape.GradFn("compare", {"direction": "lt"}, (None, None),
                     (nv.tensor([1.0]).node, nv.tensor([2.0]).node), None)
    with pytest.raises(RuntimeError, match=r"nova.compare has the NonDifferentiable trait "
                                           r"\(shapes \(\(1,\), \(1,\)\), dtypes \['float32', "
                                           r"'float32'\]\)"):
        rules.rule_for(fn)
    assert rules.rule_for(tape.alias_fn(None, nv.tensor([1.0]).node)) is rules.ALIAS_RULE


def test_one_index_per_line_gathers_have_a_pointwise_gradient():
    """cross_entropy picks one logit per row: the gradient is ``where(iota == index,
    g, 0)``, which fusion computes where it is read, not a scatter into a stored
    buffer of the logits' size; several indices per line still scatter-add."""
    import numpy as np

    import nova as nv
    x = nv.tensor(np.ones((4, 7), np.float32), requires_grad=True)
    x.gather(1, nv.tensor([[1], [6], [0], [6]])).sum().backward()
    ir = nv.debug.dump_ir(x.grad, stage="trace")
    assert "nova.scatter_add" not in ir and "nova.iota" in ir
    np.testing.assert_array_equal(x.grad.numpy(), np.eye(7, dtype=np.float32)[[1, 6, 0, 6]])
    y = nv.tensor(np.ones((4, 7), np.float32), requires_grad=True)
    y.gather(1, nv.tensor([[1, 1], [6, 0], [0, 0], [6, 5]])).sum().backward()
    assert "nova.scatter_add" in nv.debug.dump_ir(y.grad, stage="trace")
    np.testing.assert_array_equal(y.grad.numpy()[0], [0, 2, 0, 0, 0, 0, 0])


@pytest.mark.parametrize("engine", ["cpu", "interp"])
def test_a_one_hot_gather_gradient_still_refuses_an_index_out_of_range(engine):
    """The index is computed in the step, so it is checked only as the step runs; the
    mask's compare must not turn an index past the end into a zero gradient (found by
    review: only the gradient asked, the forward gather was dead code)."""
    import numpy as np

    import nova as nv
    with nv.engine(engine):
        x = nv.tensor(np.ones((3, 5), np.float32), requires_grad=True)
        index = (nv.tensor(np.array([[0.1], [0.7], [0.2]], np.float32)) * 10).long()
        (g,) = nv.autograd.grad(x.gather(1, index).sum(), [x])
        with pytest.raises(nv.RealizationError, match=r"\[0, 5\)"):
            g.numpy()

"""PyTorch's graph introspection on Nova's GradFns (``nova.tensor.tape``): ``name()``,
``next_functions`` with ``AccumulateGrad`` nodes for leaves, ``metadata``, and the
node hooks ``register_prehook``/``register_hook`` (``nova.autograd.hooks``)."""
import numpy as np
import pytest

import nova as nv
from nova.autograd.graph import AccumulateGrad, GradFn, Node


def _leaves():
    a = nv.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = nv.tensor([4.0, -5.0, 6.0], requires_grad=True)
    c = nv.tensor([0.5, 0.25, -1.0], requires_grad=True)
    return a, b, c


def test_walking_a_small_graph_gives_torchs_structure():
    a, b, c = _leaves()
    y = (a * b + c).sum()
    root = y.grad_fn
    assert root.name() == "SumBackward0" and isinstance(root, Node)
    [(add, k)] = root.next_functions
    assert k == 0 and add.name() == "AddBackward0"
    (mul, k0), (acc_c, k1) = add.next_functions
    assert (k0, k1) == (0, 0)
    assert mul.name() == "MulBackward0"
    assert type(acc_c) is AccumulateGrad and acc_c.variable is c
    assert acc_c.name() == "torch::autograd::AccumulateGrad" and acc_c.next_functions == ()
    (acc_a, _), (acc_b, _) = mul.next_functions
    assert acc_a.variable is a and acc_b.variable is b
    # the same node for a leaf while it is held (identity-based walks see one per leaf)
    assert add.next_functions[1][0] is acc_c
    assert str(mul).startswith("<MulBackward0 object at 0x") and repr(mul) == str(mul)


def test_inputs_without_history_are_none_edges():
    a, _, _ = _leaves()
    x = nv.tensor([1.0, 1.0, 1.0])
    assert (a * x).grad_fn.next_functions[1] == (None, 0)
    assert (x * a).grad_fn.next_functions[0] == (None, 0)


def test_torchviz_style_walk_finds_every_node_once():
    """The walk of torchviz's ``make_dot``: nodes by id, ``variable`` for leaves."""
    a, b, c = _leaves()
    y = (a * b + c * a).sum()
    params = {id(a): "a", id(b): "b", id(c): "c"}
    seen, names, leaves = set(), [], []

    def add_nodes(fn):
        if fn in seen:
            return
        seen.add(fn)
        if hasattr(fn, "variable"):
            leaves.append(params[id(fn.variable)])
        else:
            names.append(fn.name())
        for nxt, _ in fn.next_functions:
            if nxt is not None:
                add_nodes(nxt)

    add_nodes(y.grad_fn)
    assert sorted(names) == ["AddBackward0", "MulBackward0", "MulBackward0", "SumBackward0"]
    assert sorted(leaves) == ["a", "b", "c"]        # a once, though it feeds two muls


@pytest.mark.parametrize("make, name", [
    (lambda a: a + 1, "AddBackward0"),
    (lambda a: a - a, "SubBackward0"),
    (lambda a: a / 2, "DivBackward0"),
    (lambda a: a.exp(), "ExpBackward0"),
    (lambda a: a.log1p(), "Log1PBackward0"),
    (lambda a: a.reshape(3, 1) @ a.reshape(1, 3), "MmBackward0"),
    (lambda a: a.reshape(1, 3, 1) @ a.reshape(1, 1, 3), "BmmBackward0"),
    (lambda a: a.sum(), "SumBackward0"),
    (lambda a: a.reshape(3, 1).expand(3, 2).sum(1), "SumBackward1"),
    (lambda a: a.reshape(3, 1), "ViewBackward0"),
    (lambda a: a.expand(2, 3), "ExpandBackward0"),
    (lambda a: a.reshape(3, 1).transpose(0, 1), "TransposeBackward0"),
    (lambda a: a.reshape(1, 3, 1).permute(2, 0, 1), "PermuteBackward0"),
    (lambda a: nv.cat([a, a]), "CatBackward0"),
    (lambda a: a.to(nv.float64), "ToCopyBackward0"),
    (lambda a: a.pow(2), "PowBackward0"),
    (lambda a: a.pow(a), "PowBackward1"),
    (lambda a: a[1:], "SliceBackward0"),
])
def test_names_follow_torch_for_ops_that_are_one_primitive(make, name):
    a, _, _ = _leaves()
    assert make(a).grad_fn.name() == name


def test_a_custom_function_node_is_named_after_its_class():
    class Twice(nv.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    a, _, _ = _leaves()
    fn = Twice.apply(a).grad_fn
    assert fn.name() == "TwiceBackward"
    assert fn.next_functions[0][0].variable is a


def test_metadata_is_a_dict_kept_on_the_node():
    a, b, _ = _leaves()
    y = a * b
    y.grad_fn.metadata["tag"] = 7
    assert y.grad_fn.metadata == {"tag": 7}
    assert (a * b).grad_fn.metadata == {}                 # per node
    acc = y.grad_fn.next_functions[0][0]
    acc.metadata["leaf"] = True
    assert y.grad_fn.next_functions[0][0].metadata == {"leaf": True}


def test_node_prehook_may_replace_the_output_gradient_and_hook_the_input_gradients():
    a, b, _ = _leaves()
    y = a * b
    seen = []

    def pre(grad_outputs):
        seen.append(("pre", len(grad_outputs), grad_outputs[0].tolist()))
        return (grad_outputs[0] * 2,)

    def post(grad_inputs, grad_outputs):
        seen.append(("post", [g.tolist() for g in grad_inputs], grad_outputs[0].tolist()))
        return (nv.zeros_like(grad_inputs[0]), grad_inputs[1])

    y.grad_fn.register_prehook(pre)
    handle = y.grad_fn.register_hook(post)
    y.sum().backward(retain_graph=True)
    av, bv = a.detach().numpy(), b.detach().numpy()
    assert seen == [("pre", 1, [1.0, 1.0, 1.0]),
                    ("post", [(2 * bv).tolist(), (2 * av).tolist()], [2.0, 2.0, 2.0])]
    np.testing.assert_array_equal(a.grad.numpy(), np.zeros(3))
    np.testing.assert_array_equal(b.grad.numpy(), 2 * av)
    handle.remove()
    a.grad = b.grad = None
    y.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), 2 * bv)    # pre-hook only


def test_accumulate_grad_hooks_see_the_leaf_gradient():
    a, b, _ = _leaves()
    y = a * b
    acc = y.grad_fn.next_functions[0][0]
    seen = []
    acc.register_prehook(lambda go: (go[0] + 1,))
    acc.register_hook(lambda gi, go: seen.append((gi, go[0].tolist())))
    y.sum().backward()
    bv = b.detach().numpy()
    assert seen == [((), (bv + 1).tolist())]
    np.testing.assert_array_equal(a.grad.numpy(), bv + 1)


def test_node_hook_errors():
    a, b, _ = _leaves()
    y = a * b
    with pytest.raises(TypeError, match="register_prehook: hook must be callable"):
        y.grad_fn.register_prehook(3)
    y.grad_fn.register_hook(lambda gi, go: (gi[0],))
    with pytest.raises(RuntimeError, match="MulBackward0: hook .* must return None or a tuple "
                                           "of 2 gradients"):
        y.sum().backward(retain_graph=True)
    z = a * b
    z.grad_fn.next_functions[0][0].register_hook(lambda gi, go: go)
    with pytest.raises(RuntimeError, match="AccumulateGrad: hook .* must return None"):
        z.sum().backward()


def test_grad_fn_type_is_still_the_engines_record():
    a, _, _ = _leaves()
    assert type((a * 2).grad_fn) is GradFn

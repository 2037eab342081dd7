"""``nova.tensor.node_template``: captured steps and their stamps, shown as the nodes
they read and make."""
import numpy as np

import nova as nv
from nova.compiler.irgen import build_module
from nova.tensor.node_template import CallTemplate, capture_steps, stamp_steps
from nova.tensor.trace import extract, next_seq


def _recorded():
    """(x * 2 + c).exp() over a realized x and a pending constant c: the slots, the
    result and where its nodes begin."""
    x = nv.tensor(np.ones(3, np.float32))
    c = nv.full((3,), 0.5)
    first = next_seq()
    y = (x * 2 + c).exp()
    return [x.node, c.node], y.node, first


def _describe(nodes, slots):
    names = {id(s): f"slot{k}" for k, s in enumerate(slots)}
    out = []
    for k, n in enumerate(nodes):
        names[id(n)] = f"%{k}"
        out.append(f"%{k} = {n.op}({', '.join(names[id(i)] for i in n.inputs)}) "
                   f"{n.shape} {n.dtype.name} on {n.device}")
    return out


def test_a_stamp_makes_the_captured_nodes_over_new_slots():
    slots, y, first = _recorded()
    steps, index, order = capture_steps([y], {id(s): -1 - k for k, s in enumerate(slots)},
                                        first, len(slots))
    assert _describe(order, slots) == [
        "%0 = constant() (3,) float32 on None",
        "%1 = mul(slot0, %0) (3,) float32 on cpu",
        "%2 = add(%1, slot1) (3,) float32 on cpu",
        "%3 = exp(%2) (3,) float32 on cpu",
    ]
    new_slots = [nv.tensor(np.zeros(3, np.float32)).node, nv.full((3,), 1.5).node]
    made = stamp_steps(steps, new_slots)
    assert _describe(made, new_slots) == _describe(order, slots)
    assert [n.sig for n in made] == [n.sig for n in order]
    assert all(a.seq < b.seq for a, b in zip(made, made[1:])) and made[0].seq > y.seq


def test_stamped_devices_follow_the_slots_as_the_op_front_end_would():
    slots, y, first = _recorded()
    steps, _, _ = capture_steps([y], {id(s): -1 - k for k, s in enumerate(slots)},
                                first, len(slots))
    # another device (only the device marks matter here: nothing runs)
    on_gpu = [nv.tensor(np.zeros(3, np.float32)).node, nv.full((3,), 1.5).node]
    on_gpu[0].device = "cuda"
    assert [n.device for n in stamp_steps(steps, on_gpu)] == [None, "cuda", "cuda", "cuda"]
    # the slot that had a device now has none, the one that had none has one
    swapped = [nv.full((3,), 1.0).node, nv.tensor(np.zeros(3, np.float32)).node]
    assert [n.device for n in stamp_steps(steps, swapped)] == [None, None, "cpu", "cpu"]
    # two devices among the slots: each node's from its inputs
    mixed = [nv.tensor(np.zeros(3, np.float32)).node, nv.full((3,), 1.5).node]
    mixed[1].device = "cuda"
    assert [n.device for n in stamp_steps(steps, mixed)] == [None, "cpu", "cpu", "cpu"]


def test_capture_refuses_a_value_from_outside_its_slots():
    slots, y, first = _recorded()
    assert capture_steps([y], {id(slots[0]): -1}, first, 1) is None


# ---------------------------------------------------------------- calls


def _call_template():
    """The recorded (x * 2 + c).exp() as a CallTemplate keeping its result and the
    product x * 2 (a second kept value), with the slots it was captured over."""
    slots, y, first = _recorded()
    slot_of = {id(s): -1 - k for k, s in enumerate(slots)}
    steps, index, order = capture_steps([y], slot_of, first, len(slots))
    product = order[1]
    return CallTemplate(order, index, [index[id(y)], index[id(product)], -1]), steps, slots


def test_a_call_stamp_is_one_call_node_and_a_result_per_kept_value():
    call, _, slots = _call_template()
    new_slots = [nv.tensor(np.zeros(3, np.float32)).node, nv.full((3,), 1.5).node]
    y, product, slot0 = call.stamp(new_slots)
    assert slot0 is new_slots[0]                 # a result that is a slot is the slot
    # results in step order (the product's step comes first), after their call
    assert (product.op, product.attrs, y.op, y.attrs) == (
        "call_result", {"index": 0}, "call_result", {"index": 1})
    (node,) = {id(n.inputs[0]): n.inputs[0] for n in (y, product)}.values()
    assert node.op == "call" and node.inputs == (new_slots[0], new_slots[1])
    assert node.seq < product.seq < y.seq
    assert [(s[0], s[5]) for s in node.attrs["body"].steps] == [
        ("constant", ()), ("mul", (-1, 0)), ("add", (1, -2)), ("exp", (2,))]
    # one signature per structure: a second stamp's call and results sign alike
    again = call.stamp(new_slots)
    assert [n.sig for n in again[:2]] == [y.sig, product.sig]
    assert again[0].inputs[0].sig == node.sig


def test_a_call_inlines_to_the_stamped_nodes_ir():
    """Input: a step whose values are a call's results. Output: its IR, the IR of the
    same step stamped node by node."""
    call, steps, _ = _call_template()

    def slots():
        return [nv.tensor(np.arange(3, dtype=np.float32)).node, nv.full((3,), 1.5).node]

    s = slots()
    y, product, _ = call.stamp(s)
    graph = extract([y, product])
    # (slot 1, the pending 1.5, is a node of the step too)
    assert [n.op for n in graph.pending_nodes] == ["constant", "call", "call_result",
                                                   "call_result"]
    s2 = slots()
    made = stamp_steps(steps, s2)
    flat = extract([made[3], made[1]])
    assert [n.op for n in flat.pending_nodes] == ["constant", "constant", "mul", "add", "exp"]
    text = str(build_module(graph))
    assert text == str(build_module(flat))
    assert "nova.exp" in text and "call" not in text
    inlined = graph.inlined()
    assert [n.op for n in inlined.nodes] == ["constant", "constant", "mul", "add", "exp"]
    base = len(graph.args)
    assert inlined.outputs == [base + 4, base + 2] and inlined.key == graph.key
    assert graph.describe_value(base + 4) == f"value %{base + 4} nova.exp (3,) float32"
    assert flat.inlined() is flat


def test_call_results_take_the_devices_stamped_nodes_would():
    call, steps, _ = _call_template()
    for devices in ((None, None), ("cuda", None), (None, "cuda"), ("cpu", "cuda")):
        s = [nv.tensor(np.zeros(3, np.float32)).node, nv.full((3,), 1.5).node]
        for n, d in zip(s, devices):
            n.device = d
        y, product, _ = call.stamp(s)
        made = stamp_steps(steps, s)
        assert (y.device, product.device) == (made[3].device, made[1].device), devices


def test_a_capture_refuses_a_call_inside_what_it_captures():
    """A call's body holds primitive steps only: a stamped composite call recorded
    inside a region being captured (say, a custom optimizer update calling softmax)
    makes the capture refuse, so no call ever nests inside another."""
    x = nv.tensor(np.arange(4, dtype=np.float32))
    nv.softmax(x * 1, 0)                        # the template of this structure
    first = next_seq()
    y = nv.softmax(x * 2, 0) + 1                # stamped as a call, then an add
    assert any(n.op == "call" for n in extract([y.node]).pending_nodes)
    assert capture_steps([y.node], {id(x.node): -1}, first, 1) is None
    np.testing.assert_allclose(y.numpy(), np.exp(2 * np.arange(4)) /
                               np.exp(2 * np.arange(4)).sum() + 1, rtol=1e-6)

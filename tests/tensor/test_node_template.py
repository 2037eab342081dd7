"""``nova.tensor.node_template``: captured steps and their stamps, shown as the nodes
they read and make."""
import numpy as np

import nova as nv
from nova.tensor.node_template import capture_steps, stamp_steps
from nova.tensor.trace import next_seq


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

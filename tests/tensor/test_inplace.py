"""In-place ops are functionalized by rebinding the handle, and views write through."""
import numpy as np
import pytest

import nova as nv
from tests.helpers import assert_close


def test_inplace_forms_rebind_the_handle():
    x = nv.ones(2, 3)
    alias = x
    x.add_(1).mul_(3).sub_(nv.ones(3), alpha=2)
    assert alias is x
    assert_close(x, np.full((2, 3), 4.0))
    x.div_(2)
    assert_close(x, np.full((2, 3), 2.0))
    x += 1
    x *= 2
    x -= 1
    x /= 5
    assert_close(x, np.full((2, 3), 1.0))
    x.zero_()
    assert_close(x, np.zeros((2, 3)))
    x.fill_(2.5)
    assert_close(x, np.full((2, 3), 2.5))
    x.copy_(nv.arange(3))
    assert_close(x, np.tile(np.arange(3.0), (2, 1)))
    assert x.dtype == nv.float32


def test_inplace_keeps_dtype_and_rejects_unsafe_casts():
    i = nv.tensor([1, 2, 3])
    i.add_(2)
    assert i.dtype == nv.int64 and i.tolist() == [3, 4, 5]
    with pytest.raises(RuntimeError, match="add_: result type float32 can't be cast to the "
                                           "in-place output type int64"):
        i.add_(0.5)
    with pytest.raises(RuntimeError, match=r"add_: in-place result of shape \(2, 3\) cannot be "
                                           r"written to a tensor of shape \(3,\)"):
        nv.zeros(3).add_(nv.zeros(2, 3))


def test_inplace_on_views_writes_through_to_the_base():
    x = nv.zeros(3, 4)
    row = x[1]
    row.add_(5)
    x[0, 1:3] += 1
    col = x.T[2]
    col.fill_(-1)
    ref = np.zeros((3, 4))
    ref[1] += 5
    ref[0, 1:3] += 1
    ref[:, 2] = -1
    assert_close(x, ref)
    assert_close(row, ref[1])  # a view made before the base changed reads the new values
    flat = x.view(-1)
    flat[0] = 9
    assert x[0, 0].item() == 9
    x.zero_()
    assert flat.sum().item() == 0


def test_views_of_views_and_split_parts():
    x = nv.zeros(4, 4)
    inner = x[1:3][:, 1:3]
    inner.fill_(1)
    a, b = x.split(2, dim=0)
    b.add_(10)
    ref = np.zeros((4, 4))
    ref[1:3, 1:3] = 1
    ref[2:] += 10
    assert_close(x, ref)
    assert_close(a, ref[:2])


def test_views_of_views_see_in_place_updates_of_their_root_and_write_current_values():
    """Regression: a view of a view compared only its direct base's version, and a
    middle view re-derives without an in-place op of its own, so ``x[0][1:]`` kept the
    values from before ``x.add_(1)``, and writing through it put them back into x."""
    x = nv.arange(6.0).view(2, 3)
    v, t, e = x[0][1:], x.t()[0], x[:1].expand(2, 3)
    u = x[0].unsqueeze(0)
    x.add_(1)
    assert v.tolist() == [2.0, 3.0] and t.tolist() == [1.0, 4.0]
    x[0, 0] = 9.0
    assert e.tolist() == [[9.0, 2.0, 3.0]] * 2 and u.tolist() == [[9.0, 2.0, 3.0]]
    y = nv.zeros(4, 4)
    c = y[1:][1:][0]                      # three levels; the write goes up all of them
    y.add_(1)
    c.mul_(10).add_(5)
    ref = np.ones((4, 4))
    ref[2] = 15
    assert_close(y, ref)
    assert_close(c, ref[2])
    lin = nv.nn.Linear(3, 2)               # optimizer updates reach rows of .data/.detach()
    opt = nv.optim.SGD(lin.parameters(), lr=1.0)
    with nv.no_grad():
        lin.weight.fill_(1.0)
    rows = lin.weight.data[0], lin.weight.detach()[1]
    lin(nv.ones(1, 3)).sum().backward()
    opt.step()
    assert rows[0].tolist() == [0.0] * 3 and rows[1].tolist() == [0.0] * 3


def test_gradients_flow_through_a_view_of_a_view_after_its_root_changed():
    w = nv.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    x = (w * 1).view(2, 2)
    v = x[1][1:]                          # w[3]
    x.mul_(3)
    v.sum().mul(2).backward()
    assert w.grad.tolist() == [0.0, 0.0, 0.0, 6.0]


def test_expanded_views_cannot_be_written():
    x = nv.zeros(1, 3)
    with pytest.raises(RuntimeError, match="add_: cannot write in place into the result of "
                                           "expand"):
        x.expand(4, 3).add_(1)


def test_advanced_index_results_are_copies():
    x = nv.zeros(3)
    picked = x[nv.tensor([0, 1])]
    picked.add_(1)
    assert x.tolist() == [0.0, 0.0, 0.0]
    detached = x.detach()          # (not a copy: PyTorch's detach shares the storage)
    detached.add_(1)
    assert x.tolist() == [1.0, 1.0, 1.0]


def test_masked_fill_and_clamp_in_place():
    x = nv.tensor([[1.0, -2.0], [3.0, -4.0]])
    x.masked_fill_(x < 0, 0.0)
    assert x.tolist() == [[1.0, 0.0], [3.0, 0.0]]
    x.clamp_(max=2.0)
    assert x.tolist() == [[1.0, 0.0], [2.0, 0.0]]
    assert nv.masked_fill(x, nv.tensor([True, False]), nv.tensor(7.0)).tolist() == [[7.0, 0.0],
                                                                                 [7.0, 0.0]]


def test_inplace_add_through_repeated_indices_adds_once():
    """``y[i] += v`` reads y[i], adds, and assigns back: a repeated index is one element
    updated once (numpy and PyTorch), not once per repeat (it was summed)."""
    y = nv.tensor([1.0, 2.0, 3.0])
    y[[0, 0]] += 1
    assert y.tolist() == [2.0, 2.0, 3.0]
    y[nv.tensor([2, 2, 2]) * 1] *= 10
    assert y.tolist() == [2.0, 2.0, 30.0]
    m = nv.zeros(2, 3)
    row = m[1]
    row[nv.tensor([2, 2])] += 5          # through a view: writes into m
    assert m.tolist() == [[0.0, 0.0, 0.0], [0.0, 0.0, 5.0]]


def test_index_put_in_place_rebinds_and_writes_through_views():
    m = nv.zeros(2, 3)
    row = m[0]
    alias = row
    out = row.index_put_((nv.tensor([1, 1]),), nv.tensor([4.0, 6.0]), accumulate=True)
    assert out is alias and row.tolist() == [0.0, 10.0, 0.0]
    row.index_put_((nv.tensor([1, 1]),), nv.tensor([4.0, 6.0]))      # the last value wins
    assert m.tolist() == [[0.0, 6.0, 0.0], [0.0, 0.0, 0.0]]


def test_writes_through_data_and_detach_reach_the_tensor_outside_autograd():
    """``p.data.add_(...)``, ``m.weight.data.normal_()``, an EMA's ``copy_`` over
    ``state_dict()`` values: PyTorch's detached handles share the storage. They were
    fresh handles, so every such write was silently lost."""
    p = nv.nn.Parameter(nv.ones(3))
    p.data.add_(nv.ones(3), alpha=-0.5)            # under grad mode, on a leaf
    p.data.mul_(4)
    p.data[0] = 7.0
    assert p.tolist() == [7.0, 2.0, 2.0] and p.requires_grad and p.is_leaf
    d = p.detach()
    d.fill_(3.0)
    assert p.tolist() == [3.0, 3.0, 3.0] and not d.requires_grad
    p.data.add_(1.0)                               # and the other way round
    assert d.tolist() == [4.0, 4.0, 4.0]
    m, ema = nv.nn.Linear(2, 2), nv.nn.Linear(2, 2)
    before = {k: v.numpy() for k, v in ema.state_dict().items()}
    with nv.no_grad():
        for e, v in zip(ema.state_dict().values(), m.state_dict().values()):
            e.copy_(0.5 * e + 0.5 * v)
    for k, v in m.state_dict().items():
        np.testing.assert_allclose(ema.state_dict()[k].numpy(), 0.5 * before[k] + 0.5 * v.numpy(),
                                   rtol=1e-6)


def test_a_write_through_data_keeps_a_non_leaf_in_its_graph():
    x = nv.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.data.zero_()
    assert y.tolist() == [0.0, 0.0] and y.grad_fn is not None
    (y * 3).sum().backward()
    assert x.grad.tolist() == [6.0, 6.0]


def test_a_write_through_a_detached_view_reaches_a_non_leaf_base_and_keeps_its_history():
    """Through a temporary view (``x[0:2].detach().zero_()``): the write lands in ``x``
    and ``x`` keeps its GradFn (it lost both: the view died, or its history went)."""
    a = nv.ones(3, requires_grad=True)
    x = a * 2
    x[0:2].detach().zero_()
    b = nv.ones(3, requires_grad=True)
    y = b * 2
    y.view(3).detach().mul_(5)
    assert x.tolist() == [0.0, 0.0, 2.0] and y.tolist() == [10.0, 10.0, 10.0]
    (x.sum() + a.sum() + y.sum()).backward()
    assert a.grad.tolist() == [3.0, 3.0, 3.0] and b.grad.tolist() == [2.0, 2.0, 2.0]


def test_aliases_keep_no_graph_alive_and_data_assignment_keeps_old_snapshots():
    import copy
    import gc
    import weakref
    x = nv.ones(3, requires_grad=True)
    y = (x * 2).exp()
    fn = weakref.ref(y.grad_fn)
    kept = y.detach()              # an eval loop's preds.append(out.detach())
    del y
    gc.collect()
    assert fn() is None and kept.tolist()[0] > 7
    assert copy.deepcopy((x * 3).detach()).tolist() == [3.0, 3.0, 3.0]
    m = nv.nn.Linear(2, 2)
    sd = m.state_dict()
    m.double()
    assert sd["weight"].dtype == nv.float32     # PyTorch's state_dict keeps the old storage
    p = nv.nn.Parameter(nv.ones(3))
    snap, view = p.detach(), p.view(3)
    p.data = nv.zeros(5)
    p.data.add_(1.0)
    assert snap.tolist() == [1.0] * 3 and view.tolist() == [1.0] * 3 and p.tolist() == [1.0] * 5


def test_contiguous_is_the_tensor_itself_unless_it_is_a_view():
    """As PyTorch's for a contiguous tensor: ``y = x.contiguous()`` is ``x``, so writes
    through either are seen by both; a transposed view is copied."""
    x = nv.zeros(2, 3)
    y = x.contiguous()
    assert y is x
    y[0, 0] = 1.0
    t = x.t().contiguous()
    x[0, 1] = 5.0
    assert x.tolist()[0][:2] == [1.0, 5.0] and t.tolist()[1][0] == 0.0


@pytest.mark.parametrize("write", [
    lambda y: y.add_(1.0),
    lambda y: y.clamp_(max=3.0),
    lambda y: y.copy_(y.round()),                 # straight-through estimator
    lambda y: y.__setitem__(y < 3.0, 0.0),        # a masked hidden activation
    lambda y: y[1:].zero_(),                      # through a view
], ids=["add_", "clamp_", "copy_", "masked-setitem", "view-zero_"])
def test_a_write_under_no_grad_keeps_a_non_leafs_history(write):
    """As in PyTorch, an in-place op under ``no_grad`` joins no history: the written
    non-leaf keeps its GradFn, so gradients reach what it was computed from as if the
    write were not there (it used to lose its history: no gradient, or a silently
    missing term)."""
    x = nv.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2.0
    with nv.no_grad():
        write(y)
    assert y.requires_grad and y.grad_fn is not None
    ((y * 3.0).sum() + (x ** 2).sum()).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [8.0, 10.0, 12.0])


def test_a_copy_under_no_grad_takes_no_history_from_its_source():
    x = nv.tensor([1.0, 2.0], requires_grad=True)
    z = nv.tensor([5.0, 7.0], requires_grad=True)
    y = nv.zeros(2)
    with nv.no_grad():
        y.copy_(z * 2.0)
    assert not y.requires_grad
    y2 = x * 1.0
    with nv.no_grad():
        y2.copy_(z * 3.0)
    (y2 * 2.0).sum().backward()
    assert z.grad is None
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(y2.detach().numpy(), [15.0, 21.0])




@pytest.mark.parametrize("write, whole", [
    (lambda v, a: v.copy_(a), True),
    (lambda v, a: v.__setitem__(slice(None), a), True),
    (lambda v, a: v[:].copy_(a), True),
    (lambda v, a: v.__setitem__(1, a), False),
], ids=["copy_", "setitem-all", "view-copy_", "setitem-row"])
def test_writing_a_leaf_into_a_tensor_makes_the_leaf_its_history(write, whole):
    """Regression: a leaf that requires grad written whole, at the tensor's own shape,
    into a tensor (``v.copy_(a)``, ``v[:] = a``) gave the tensor the leaf's value
    without history: the gradient to the leaf was silently 0 (or backward refused).
    PyTorch's copy_ is differentiable in its source."""
    a = nv.tensor([[3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    b = nv.tensor([[5.0, 6.0], [7.0, 8.0]], requires_grad=True)
    w = np.array([[1.0, 10.0], [100.0, 1000.0]])
    v = b * 1.0
    row = a[0].detach().requires_grad_()
    write(v, a if whole else row)
    assert v.requires_grad and v.grad_fn is not None
    (v * nv.tensor(w)).sum().backward()
    if whole:
        np.testing.assert_array_equal(a.grad.numpy(), w)
        assert b.grad is None or not b.grad.numpy().any()   # (PyTorch's: zeros)
    else:
        np.testing.assert_array_equal(b.grad.numpy(), [w[0], [0.0, 0.0]])
        np.testing.assert_array_equal(row.grad.numpy(), w[1])


def test_copy_from_a_python_number_casts_as_pytorch_and_checks_the_range():
    """``t.copy_(number)`` (PyTorch's wrapped number: a 64-bit 0-d tensor, then cast) was
    refused with a TypeError; a number ``t``'s dtype cannot hold raises as ``fill_``."""
    assert nv.ones(2, dtype=nv.int64).copy_(2.7).tolist() == [2, 2]
    assert nv.ones(2, dtype=nv.float64).copy_(0.1).tolist() == [0.1, 0.1]
    assert nv.zeros(2, dtype=nv.bool).copy_(0.5).tolist() == [True, True]
    assert nv.ones(2, 3).copy_(True).tolist() == [[1.0] * 3] * 2
    assert nv.ones(2, dtype=nv.float16).copy_(np.float64("inf")).tolist() == [np.inf] * 2
    t = nv.ones(3)
    view = t[1:]
    view.copy_(-4)
    assert t.tolist() == [1.0, -4.0, -4.0]
    with pytest.raises(OverflowError, match="copy_: value 300 .* int8"):
        nv.ones(2, dtype=nv.int8).copy_(300)
    with pytest.raises(TypeError, match="copy_: src must be a Tensor or a real number, got str"):
        nv.ones(2).copy_("a")

"""Tensor gradient hooks (``nova.autograd.hooks``) with PyTorch's semantics: what a hook
sees (the total gradient of its tensor), what its return value replaces, leaves'
hooks before accumulation and post-accumulate hooks after, removal, ``autograd.grad``,
and the passes a template would otherwise stamp without running them."""
import numpy as np
import pytest

import nova as nv


def test_a_non_leaf_hook_sees_its_total_gradient_and_may_replace_it():
    x = nv.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    seen = []
    y.register_hook(lambda g: seen.append(g.tolist()))
    y.register_hook(lambda g: g * 10)            # runs second, replaces
    ((y * y).sum() + y.sum()).backward()         # two uses of y: one total
    assert seen == [[5.0, 9.0, 13.0]]            # 2y + 1
    assert x.grad.tolist() == [100.0, 180.0, 260.0]


def test_leaf_hooks_see_the_pass_total_before_accumulation_then_post_hooks():
    x = nv.tensor([1.0, 2.0, 3.0], requires_grad=True)
    seen, after = [], []
    x.register_hook(lambda g: seen.append(g.tolist()) or g.clamp(max=5))
    x.register_post_accumulate_grad_hook(lambda t: after.append(t.grad.tolist()))
    (x * x * 3 + x).sum().backward()             # 6x + 1, clamped to 5
    (x * 2).sum().backward()
    assert seen == [[7.0, 13.0, 19.0], [2.0, 2.0, 2.0]]
    assert after == [[5.0, 5.0, 5.0], [7.0, 7.0, 7.0]]
    (g,) = nv.autograd.grad((x * 9).sum(), [x])
    assert g.tolist() == [5.0, 5.0, 5.0]         # autograd.grad's inputs are hooked too


def test_removed_hooks_stop_and_templated_passes_still_run_hooks():
    w = nv.tensor(np.ones((3, 2), np.float32), requires_grad=True)
    calls = []

    def step():
        w.grad = None
        (nv.tensor([[1.0, 2.0, 3.0]]) @ w).sum().backward()
        return w.grad.numpy().copy()

    plain = step()
    handle = w.register_hook(lambda g: calls.append(1) or g * 0)
    hooked = [step(), step(), step()]            # the same structure three times
    assert len(calls) == 3 and all((h == 0).all() for h in hooked)
    handle.remove()
    handle.remove()                              # twice is fine
    np.testing.assert_array_equal(step(), plain)
    assert len(calls) == 3


def test_bad_hooks_and_tensors_are_refused():
    x = nv.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        nv.tensor([1.0]).register_hook(lambda g: g)
    with pytest.raises(TypeError, match="must be callable"):
        x.register_hook(3)
    with pytest.raises(RuntimeError, match="only leaf tensors"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)
    y = x * 2
    y.register_hook(lambda g: g.sum())
    with pytest.raises(RuntimeError, match="must return None or a tensor of that shape"):
        y.sum().backward()


def test_retains_grad_reports_retain_grad():
    x = nv.tensor([1.0], requires_grad=True)
    y = x * 2
    assert not y.retains_grad and not x.retains_grad
    y.retain_grad()
    assert y.retains_grad


def test_a_hook_makes_nv_compile_record_every_call():
    w = nv.tensor([1.0, 2.0], requires_grad=True)
    calls = []
    w.register_hook(lambda g: calls.append(1) or g)

    @nv.compile
    def step(x):
        w.grad = None
        (w * x).sum().backward()
        return w.grad

    for _ in range(3):
        assert step(nv.tensor([3.0, 4.0])).tolist() == [3.0, 4.0]
    assert len(calls) == 3 and step.replays == 0


def test_hooks_on_inputs_of_autograd_grad_and_backward_inputs():
    a = nv.tensor([1.0, 2.0], requires_grad=True)
    x = a * 2
    x.register_hook(lambda g: g * 10)
    assert nv.autograd.grad((x * 3).sum(), x)[0].tolist() == [30.0, 30.0]
    b = nv.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    b.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    (b * 3).sum().backward(inputs=[b])
    assert seen == [[3.0, 3.0]]


def test_a_hook_that_refers_to_its_tensor_does_not_keep_it_alive():
    import gc
    import weakref
    x = nv.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: g + y.detach() * 0)
    ref = weakref.ref(y)
    del y
    gc.collect()
    assert ref() is None


def test_a_hooked_parameters_grad_is_set_once_its_last_gradient_arrived():
    """A parameter with a gradient hook had its hook run and ``.grad`` set at the end of
    ``backward``: a module backward hook of an earlier layer saw it None (PyTorch's
    AccumulateGrad runs as soon as its inputs are ready; fuzz_nn_api)."""
    log = []
    m = nv.nn.Sequential(nv.nn.Linear(2, 2), nv.nn.Linear(2, 2))
    m[1].weight.register_hook(lambda g: log.append("hook"))
    m[0].register_full_backward_hook(
        lambda mod, gi, go: log.append(("grad set", m[1].weight.grad is not None)))
    m[1].weight.register_post_accumulate_grad_hook(lambda p: log.append("accumulated"))
    m(nv.ones(1, 2, requires_grad=True)).sum().backward()
    assert log == ["hook", "accumulated", ("grad set", True)]
    # a parameter reached twice (tied) gets one hook call with the sum
    w = nv.nn.Parameter(nv.ones(2))
    seen = []
    w.register_hook(lambda g: seen.append(g.numpy().tolist()))
    ((w * 2).sum() + (w * 3).sum()).backward()
    assert seen == [[5.0, 5.0]] and w.grad.numpy().tolist() == [5.0, 5.0]

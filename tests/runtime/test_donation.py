"""Donation: results written over parameters and optimizer state nobody else holds."""
import numpy as np
import pytest

import nova as nv
from nova.runtime.cache import CACHE


def _train(steps, keep_old=False, hold_grads=False, engine="cpu"):
    nv.manual_seed(0)
    model = nv.nn.Sequential(nv.nn.Linear(8, 32), nv.nn.GELU(), nv.nn.Linear(32, 3))
    opt = nv.optim.AdamW(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    kept, donated = [], []
    with nv.engine(engine):
        for _ in range(steps):
            x = nv.tensor(rng.standard_normal((16, 8)).astype(np.float32))
            y = nv.tensor(rng.integers(0, 3, 16))
            loss = nv.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            if keep_old:   # holding the old values forbids writing over them
                kept.append([p.clone() for p in model.parameters()] +
                            [v.clone() for s in opt.state.values() for v in s.values()
                             if isinstance(v, nv.Tensor)])
            grads = [p.grad for p in model.parameters()] if hold_grads else None
            opt.step()
            opt.zero_grad()             # (the step runs here: realize.end_of_step)
            donated.append(len(CACHE.last.last_donated))
    state = [v.numpy() for s in opt.state.values() for v in s.values() if isinstance(v, nv.Tensor)]
    return [p.numpy() for p in model.parameters()], state, donated, kept, grads


def test_twenty_donated_steps_equal_undonated_ones():
    params, state, donated, _, _ = _train(20)
    assert min(donated) == 12       # 4 parameters and 8 Adam moments, every step
    ref_params, ref_state, ref_donated, _, _ = _train(20, keep_old=True)
    # only the fresh zero moments of the first step (nobody holds them) are written over
    assert ref_donated[0] == 8 and max(ref_donated[1:]) == 0
    for a, b in zip(params + state, ref_params + ref_state):
        np.testing.assert_array_equal(a, b)
    interp_params, _, interp_donated, _, _ = _train(20, engine="interp")
    assert max(interp_donated) == 0
    for a, b in zip(params, interp_params):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_values_held_by_the_user_survive_the_step():
    nv.manual_seed(1)
    lin = nv.nn.Linear(4, 4)
    opt = nv.optim.SGD(lin.parameters(), lr=0.5, momentum=0.9)
    x = nv.tensor(np.ones((2, 4), np.float32))
    lin(x).sum().backward()
    opt.step()                     # momentum buffers exist from now on
    opt.zero_grad()
    before = lin.weight.numpy()
    old = lin.weight.clone()       # another handle on the current value: must stay intact
    lin(x).sum().backward()
    grad = lin.weight.grad         # a gradient the user keeps past the step
    expected_grad = np.full((4, 4), 2.0, np.float32)
    opt.step()
    assert not np.array_equal(lin.weight.numpy(), before)
    np.testing.assert_array_equal(old.numpy(), before)
    np.testing.assert_allclose(grad.numpy(), expected_grad)


def test_a_retained_graph_still_sees_the_old_parameters():
    nv.manual_seed(2)
    lin = nv.nn.Linear(3, 1, bias=False)
    opt = nv.optim.SGD(lin.parameters(), lr=0.1)
    x = nv.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    out = (lin(x) ** 2).sum()
    w0 = lin.weight.numpy()
    out.backward(retain_graph=True)
    opt.step()
    opt.zero_grad()
    out.backward()                 # the saved w0 must not have been overwritten
    xs = np.arange(6, dtype=np.float32).reshape(2, 3)
    expected = 2 * (xs @ w0.T).T @ xs
    np.testing.assert_allclose(lin.weight.grad.numpy(), expected, rtol=1e-5)


def test_memory_report_names_roles_and_donations():
    nv.manual_seed(3)
    model = nv.nn.Sequential(nv.nn.Linear(16, 64), nv.nn.GELU(), nv.nn.Linear(64, 4))
    opt = nv.optim.Adam(model.parameters())
    x = nv.tensor(np.ones((32, 16), np.float32))
    for _ in range(2):
        loss = nv.nn.functional.cross_entropy(model(x), nv.tensor(np.arange(32) % 4))
        loss.backward()
        opt.step()
        opt.zero_grad()
    report = nv.debug.memory_report()
    params = sum(p.numel() * 4 for p in model.parameters())
    assert report.categories["parameter"] == params
    assert report.categories["optimizer state"] == 2 * params
    assert report.donated_bytes == 3 * params
    assert report.peak_bytes == report.argument_bytes + report.arena_bytes + report.result_bytes
    assert report.peak_intermediate_bytes <= report.arena_bytes
    text = str(report)
    assert "optimizer state" in text and "donated" in text


def test_out_of_memory_names_the_plan_and_the_knobs():
    x = nv.tensor(np.ones((256, 256), np.float32))
    y = ((x * 2).exp() @ (x + 1)).sum()
    nv.debug.set_memory_limit(100_000)
    try:
        with pytest.raises(nv.NovaOutOfMemoryError, match=r"(?s)needs .* MiB.*"
                           r"memory limit.*nova memory report.*set_remat"):
            y.item()
    finally:
        nv.debug.set_memory_limit(None)
    assert y.item() > 0            # the step stayed pending and runs without the limit
    with pytest.raises(ValueError, match="set_memory_limit"):
        nv.debug.set_memory_limit(-1)


def test_a_retained_graph_keeps_the_arguments_behind_its_pending_values():
    """tanh's saved output is a pending value of the step that nobody holds as a
    tensor, only the retained graph: it escapes, so the weight it is computed from
    must not be written over (the second backward recomputes it from the old weight)."""
    nv.manual_seed(3)
    lin = nv.nn.Linear(3, 2, bias=False)
    opt = nv.optim.SGD(lin.parameters(), lr=0.1)
    xs = np.arange(6, dtype=np.float32).reshape(2, 3) / 6
    w0 = lin.weight.numpy().astype(np.float64)
    out = lin(nv.tensor(xs)).tanh().sum()
    out.backward(retain_graph=True)
    opt.step()
    assert CACHE.last.last_donated == frozenset()
    opt.zero_grad()
    out.backward()
    t = np.tanh(xs @ w0.T)
    expected = ((1 - t * t).T @ xs)
    np.testing.assert_allclose(lin.weight.grad.numpy(), expected, rtol=1e-5)
    assert not np.allclose(lin.weight.numpy(), w0)

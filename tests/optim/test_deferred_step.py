"""The step ``opt.step()`` leaves waiting (``nova.tensor.realize.end_of_step``): it runs
at the next ``zero_grad()``, ``step()`` or read, computes the tensors live at its
``step()`` that are still alive -- so not the gradients ``zero_grad()`` cleared -- and
nothing recorded since. Every test compares with the same training read right after
each ``step()`` (the step then runs at once, with everything live), bit for bit."""
import numpy as np
import pytest

import nova as nv
import nova.nn as nn
import nova.nn.functional as F
from nova.runtime.cache import CACHE


def _setup(seed=0):
    nv.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 3))
    nv.realize(*model.parameters())
    return model, nv.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)


def _batches(n, seed=1):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((8, 6)).astype(np.float32), rng.integers(0, 3, 8))
            for _ in range(n)]


def _loss(model, x, y):
    return F.cross_entropy(model(nv.tensor(x)), nv.tensor(y))


def _reference(steps=5):
    """Read after every step(): each step runs at once."""
    model, opt = _setup()
    losses = []
    for x, y in _batches(steps):
        loss = _loss(model, x, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        opt.zero_grad()
    return losses, [p.numpy().copy() for p in model.parameters()]


def _same(got, want):
    assert got[0] == want[0]
    for a, b in zip(got[1], want[1]):
        np.testing.assert_array_equal(a, b)


def test_the_step_waits_for_zero_grad_and_leaves_the_gradients_out():
    model, opt = _setup()
    (x, y), = _batches(1)
    loss = _loss(model, x, y)
    loss.backward()
    grads = sum(p.numel() * 4 for p in model.parameters())
    misses = CACHE.stats.misses
    opt.step()
    assert not model[0].weight.node.realized and CACHE.stats.misses == misses  # waiting
    opt.zero_grad()
    assert model[0].weight.node.realized and loss.node.realized
    report = nv.debug.memory_report()
    assert report.result_bytes < grads      # parameters donated, no gradient a result
    want = _reference(1)
    assert loss.item() == want[0][0]
    for a, b in zip(model.parameters(), want[1]):
        np.testing.assert_array_equal(a.numpy(), b)


def test_a_read_before_zero_grad_runs_the_step_with_everything_live():
    model, opt = _setup()
    (x, y), = _batches(1)
    loss = _loss(model, x, y)
    loss.backward()
    opt.step()
    g = model[0].weight.grad
    assert not g.node.realized
    first = loss.item()                      # a read: the waiting step runs, whole
    assert g.node.realized and model[0].weight.node.realized
    opt.zero_grad()
    assert first == _reference(1)[0][0]


def test_zero_grad_before_backward_runs_the_step_without_the_next_forward():
    """minGPT's order: the next forward is recorded before ``zero_grad()``; the waiting
    step computes only its own values (the forward is not computed twice), and the
    training is the reference's."""
    model, opt = _setup()
    losses = []
    for x, y in _batches(5):
        loss = _loss(model, x, y)            # reads the parameters the last step updates
        model.zero_grad()                    # runs that step: not this forward
        assert not loss.node.realized
        loss.backward()
        opt.step()
        losses.append(loss)
    losses = [l.item() for l in losses]
    _same((losses, [p.numpy() for p in model.parameters()]), _reference(5))


def test_steps_without_zero_grad_or_reads_stay_one_step_each():
    """Nothing clears or reads between steps (the gradients accumulate): the next
    ``step()`` runs the waiting one first, so the steps' graphs do not grow -- after
    the first ones, every step replays one executable."""
    model, opt = _setup()
    batches = _batches(7)
    CACHE.clear()
    for k, (x, y) in enumerate(batches):
        _loss(model, x, y).backward()
        opt.step()
        if k == 3:
            settled = CACHE.stats.misses
    nv.realize()
    assert CACHE.stats.misses <= settled + 1      # (+1: the last, run by the read)
    ref_model, ref_opt = _setup()
    for x, y in batches:
        _loss(ref_model, x, y).backward()
        ref_opt.step()
        nv.realize()
    for a, b in zip(model.parameters(), ref_model.parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_an_in_place_update_after_the_step_is_computed_with_its_new_value():
    """An EMA of the weights updated between ``step()`` and ``zero_grad()`` reads the
    stepped weights; the parameter rebound in place meanwhile gets its new value. The
    waiting step computes what the EMA held at its ``step()``, so the EMA's chain of
    updates never grows: after the first steps, one executable per step."""
    def run(read_first):
        model, opt = _setup()
        ema = [p.detach().clone() for p in model.parameters()]
        nv.realize(*ema)
        CACHE.clear()
        for k, (x, y) in enumerate(_batches(7)):
            if k == 4:
                settled = CACHE.stats.misses
            _loss(model, x, y).backward()
            opt.step()
            if read_first:
                nv.realize()
            with nv.no_grad():
                for e, p in zip(ema, model.parameters()):
                    e.mul_(0.9).add_(p, alpha=0.1)
                model[0].bias.mul_(0.5)
            opt.zero_grad()
        assert CACHE.stats.misses == settled
        return [e.numpy() for e in ema] + [p.numpy() for p in model.parameters()]
    for a, b in zip(run(False), run(True)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("order", ["step-zero_grad", "zero_grad-first"])
def test_one_compile_for_the_training_step(order):
    model, opt = _setup()
    batches = _batches(6)
    CACHE.clear()
    for x, y in batches:
        if order == "zero_grad-first":
            opt.zero_grad()
        loss = _loss(model, x, y)
        loss.backward()
        opt.step()
        if order == "step-zero_grad":
            opt.zero_grad()
    loss.item()
    # the step with the moments' creation and the later ones are one structure; the
    # last step, run by the read, holds its gradients (zero_grad-first) or not
    assert CACHE.stats.misses <= 2, [m.reason for m in CACHE.stats.miss_log]


def test_a_failing_step_raises_at_the_zero_grad_that_runs_it():
    """The step waits for zero_grad(); when it fails, zero_grad() raises, naming itself,
    instead of returning with the parameters silently left pending or poisoned (found
    when the first GPU run failed every step inside zero_grad() and the next line read
    a parameter that had no value)."""
    emb = nn.Embedding(10, 4)
    opt = nv.optim.SGD(emb.parameters(), lr=0.1)
    idx = nv.tensor([1, 2, 3]) * 5        # 10 and 15 are out of range, known only in the step
    emb(idx).sum().backward()
    opt.step()
    # (the embedding reads its rows through a gather: its kernels name the valid range)
    with pytest.raises(nv.RealizationError,
                       match=r"index 10 is out of bounds|must lie in \[0, 10\)") as info:
        opt.zero_grad()
    assert any("raised by zero_grad()" in n for n in info.value.__notes__)
    with pytest.raises(nv.RealizationError):      # the failure stays with the value
        emb.weight.numpy()
    assert idx.tolist() == [5, 10, 15]    # (computed before the failure, not reached by it)
    # the module's zero_grad() says the same
    emb = nn.Embedding(10, 4)
    opt = nv.optim.SGD(emb.parameters(), lr=0.1)
    idx = nv.tensor([1, 2, 3]) * 5        # pending again: checked only in the step
    emb(idx).sum().backward()
    opt.step()
    with pytest.raises(nv.RealizationError, match="out of bounds|must lie in"):
        emb.zero_grad()

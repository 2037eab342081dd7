"""A value that fails when its step runs (an index out of range, an integer division by
zero) poisons only what depends on it, also in a step that donates buffers -- one that
writes in-place updates (an optimizer's parameters) over the old values' memory, and so
cannot be repeated once it has begun. The values the step computed before the failure
are kept, bit-identical to a run without the failing value; reading them again works.

Every test runs on each engine (``conftest``); only the compiled ``cpu`` engine
donates, the others check that the outcome is the same there."""
import numpy as np
import pytest

import nova as nv
from nova.runtime.cache import CACHE

# (a failure retries the step's other values as a smaller step, and warns that it does)
pytestmark = pytest.mark.filterwarnings("ignore:nova. a step computing:RuntimeWarning")

GATHER_ERROR = r"nova\.gather: index values must lie in \[0, 2\), got range \[8, 9\]"


def _bad_gather() -> nv.Tensor:
    """A pending gather whose indices (known only when its step runs) are out of range."""
    table = nv.tensor(np.array([5.0, 6.0], np.float32))
    return nv.gather(table, 0, nv.tensor(np.array([0, 1])) + 8)


def _sgd_step() -> nv.Tensor:
    """A parameter after one SGD step, its update pending (written over the old value
    where the step donates)."""
    w = nv.nn.Parameter(nv.tensor(np.array([1.0, 2.0, 3.0, 4.0], np.float32)))
    opt = nv.optim.SGD([w], lr=0.1)
    (w * w).sum().backward()
    opt.step()
    return w


def _donated(engine: str) -> None:
    """On the cpu engine the failing step did write over a donated buffer (the case
    under test); the other engines donate nothing."""
    assert bool(CACHE.last.last_donated) == (engine == "cpu")


def test_an_optimizer_update_survives_an_unrelated_failing_gather(engine):
    ref = _sgd_step().detach().numpy()
    np.testing.assert_allclose(ref, np.array([0.8, 1.6, 2.4, 3.2], np.float32), rtol=1e-6)
    w = _sgd_step()
    bad = _bad_gather()                  # unrelated to w, pending beside its update
    np.testing.assert_array_equal(w.detach().numpy(), ref)
    _donated(engine)
    np.testing.assert_array_equal(w.detach().numpy(), ref)     # read again
    for _ in range(2):                   # the failing value says why, every time
        with pytest.raises(nv.RealizationError, match=GATHER_ERROR):
            bad.numpy()
    np.testing.assert_array_equal((w * 1).detach().numpy(), ref)   # and w computes on


def test_a_value_written_over_its_input_survives_a_failing_gather_of_it(engine):
    """``c`` is written over its (donated) input; ``c * 3`` and a failing gather of
    ``c`` follow in the same step: only the gather fails."""
    arr = np.array([1.0, 2.0, 3.0], np.float32)
    c = nv.tensor(arr) + 0
    y = c * 3
    bad = nv.gather(c, 0, nv.tensor(np.array([0, 1])) + 8)
    expected = arr * np.float32(3)
    np.testing.assert_array_equal(y.numpy(), expected)
    _donated(engine)
    np.testing.assert_array_equal(y.numpy(), expected)
    np.testing.assert_array_equal(c.numpy(), arr)
    with pytest.raises(nv.RealizationError, match=r"nova\.gather: index values must "
                                                  r"lie in \[0, 3\)"):
        bad.numpy()


def test_an_integer_division_by_zero_fails_only_its_own_value(engine):
    def mk():
        return nv.tensor(np.array([3, -2, 5, 0], np.int32))

    bad = 2 // mk()
    got = (mk() // -3).numpy()
    np.testing.assert_array_equal(got, np.array([-1, 0, -2, 0], np.int32))  # floor
    assert got.dtype == np.int32
    for _ in range(2):
        with pytest.raises(nv.RealizationError, match="integer division by zero"):
            bad.numpy()


def _adam_run(fail_at: int | None) -> tuple[list[np.ndarray], list[str]]:
    """Three Adam steps; before step ``fail_at`` an unrelated failing value is pending,
    so that step (run by ``zero_grad()``) raises, and the caller carries on."""
    w = nv.nn.Parameter(nv.tensor(np.array([[0.5, -1.0], [2.0, 0.25]], np.float32)))
    opt = nv.optim.Adam([w], lr=0.1)
    errors, bad = [], None
    for k in range(3):
        ((w * w).sum() + w.sum()).backward()
        if k == fail_at:
            bad = _bad_gather()
        opt.step()
        try:
            opt.zero_grad()
        except nv.RealizationError as e:
            errors.append(str(e))
    if bad is not None:
        with pytest.raises(nv.RealizationError, match=GATHER_ERROR):
            bad.numpy()
    state = opt.state[w]
    return [w.detach().numpy(), state["exp_avg"].numpy(), state["exp_avg_sq"].numpy()], errors


def test_training_goes_on_bit_identically_after_a_step_with_a_failing_value(engine):
    ref, errors = _adam_run(None)
    assert not errors
    got, errors = _adam_run(1)
    assert len(errors) == 1 and "nova.gather: index values must lie in [0, 2)" in errors[0]
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)


def test_a_value_that_needs_an_overwritten_buffer_is_lost_not_wrong(engine):
    """``y`` reads ``exp(w)`` of the old ``w``, which the step writes over with
    ``w - 1``; on the cpu engine the failing gather (of an intermediate ``y`` shares)
    runs after that write and before ``y``'s last kernel. ``y`` cannot be computed
    again from the overwritten buffer: it fails saying so -- never a value computed
    from ``w - 1``. Without donation (the other engines) it is computed."""
    rng = np.random.default_rng(0)
    W, M, N = (rng.standard_normal(s).astype(np.float32) for s in ((4, 4), (4, 4), (4, 8)))
    w = nv.tensor(W)
    t = w.exp() @ nv.tensor(M)
    bad = nv.gather(t.reshape(-1), 0, nv.tensor(np.array([0, 1])) + 99)
    y = t @ nv.tensor(N)
    del t
    with nv.no_grad():
        w.sub_(1.0)
    np.testing.assert_array_equal(w.numpy(), W - np.float32(1))
    _donated(engine)
    with pytest.raises(nv.RealizationError, match=r"nova\.gather: index values must "
                                                  r"lie in \[0, 16\)"):
        bad.numpy()
    if engine == "cpu":
        with pytest.raises(nv.RealizationError, match="does not depend on that failure "
                                                      "but is lost"):
            y.numpy()
    else:
        np.testing.assert_allclose(y.numpy(), (np.exp(W) @ M) @ N, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(w.numpy(), W - np.float32(1))


def _compiled_sgd_run(bad_call: int | None) -> tuple[list[np.ndarray], list[str], int]:
    """Five calls of a compiled SGD step that also returns a gather of an unrelated
    table; call ``bad_call`` passes indices out of range (a replay by then)."""
    w = nv.nn.Parameter(nv.tensor(np.array([1.0, 2.0, 3.0, 4.0], np.float32)))
    opt = nv.optim.SGD([w], lr=0.1)
    table = nv.tensor(np.array([5.0, 6.0], np.float32))

    @nv.compile
    def step(idx):
        (w * w).sum().backward()
        opt.step()
        opt.zero_grad()
        return nv.gather(table, 0, idx)

    params, errors = [], []
    for k in range(5):
        try:
            got = step(nv.tensor(np.array([0, 1]) + (8 if k == bad_call else 0))).numpy()
            np.testing.assert_array_equal(got, [5.0, 6.0])
        except (nv.RealizationError, IndexError) as e:
            errors.append(str(e))
        params.append(w.detach().numpy())
    return params, errors, step.replays


@pytest.mark.parametrize("engine", ["cpu"], indirect=True)   # (the one engine that donates)
def test_a_compiled_step_keeps_its_update_when_a_replay_fails_after_it(engine):
    ref, errors, _ = _compiled_sgd_run(None)
    assert not errors
    got, errors, replays = _compiled_sgd_run(3)
    assert len(errors) == 1 and "index" in errors[0]
    if engine == "cpu":     # the failing call was a replay, which had donated w
        assert replays >= 2 and "begun overwriting donated buffers" in errors[0]
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)

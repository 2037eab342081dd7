"""The ``fresh_cache`` fixture's promise: a test counts only its own compiles, even when
an earlier test in the process left work pending (an optimizer step deferred to the
next read, a tensor kept alive past its test). A CI run saw the MNIST example count one
compile too many after such leftovers."""
import numpy as np

import nova as nv
from tests.conftest import finish_earlier_work

_KEPT: list = []


def test_earlier_pending_work_is_finished_before_a_fresh_cache():
    w = nv.tensor(np.ones(3, np.float32), requires_grad=True)
    opt = nv.optim.SGD([w], lr=0.1)
    (w * 2).sum().backward()
    opt.step()                                     # deferred: runs at the next read
    _KEPT.append(w * 3)                            # pending, kept past "its test"
    finish_earlier_work()
    assert _KEPT[0].node.realized
    nv.debug.reset_cache()
    x = nv.tensor(np.arange(4.0, dtype=np.float32))
    assert (x + 1).numpy().tolist() == [1.0, 2.0, 3.0, 4.0]
    assert nv.debug.cache_stats().misses == 1      # only this realization compiled
    np.testing.assert_allclose(_KEPT.pop().numpy(), [2.4] * 3, rtol=1e-6)

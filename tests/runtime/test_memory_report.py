"""The memory report: liveness over a step's kernels."""
import numpy as np
import pytest

import nova as nv
from nova.runtime.memory_report import Buffer, liveness_report


def test_liveness_report_on_a_hand_built_program():
    # args: slot 0 (100 B). k0: 0 -> 1 (40 B); k1: 1 -> 2 (60 B), 1 dies; k2: 2 -> 3 (10 B,
    # the result), 2 dies. Live intermediates: 40, then 40 + 60 = 100 (peak at k1).
    steps = [((0,), 1, Buffer(40, (10,), "float32", "a")),
             ((1,), 2, Buffer(60, (15,), "float32", "b")),
             ((2,), 3, Buffer(10, (), "float64", "c"))]
    report = liveness_report([100], steps, [[], [1], [2]], outputs=(3,))
    assert (report.argument_bytes, report.result_bytes) == (100, 10)
    assert (report.peak_intermediate_bytes, report.peak_kernel) == (100, 1)
    assert report.peak_bytes == 210
    assert [b.kernel for b in report.top] == ["b", "a"]


def test_report_of_a_training_step():
    model = nv.nn.Sequential(nv.nn.Linear(16, 64), nv.nn.GELU(), nv.nn.Linear(64, 4))
    opt = nv.optim.AdamW(model.parameters())
    x = nv.tensor(np.ones((32, 16), np.float32))
    loss = nv.nn.functional.cross_entropy(model(x), nv.tensor(np.arange(32) % 4))
    loss.backward()
    with nv.engine("cpu"):
        opt.step()
        report = nv.debug.memory_report()
    params = sum(p.numel() * 4 for p in model.parameters())
    assert report.result_bytes >= 3 * params          # new params and both Adam moments
    assert report.argument_bytes >= 3 * params + x.numel() * 4
    sizes = [b.nbytes for b in report.top]
    assert sizes == sorted(sizes, reverse=True) and sum(sizes) <= report.peak_intermediate_bytes
    assert "nova memory report: peak" in str(report)
    with nv.engine("interp"):
        (x * 2).sum().item()
    with pytest.raises(ValueError, match="only the cpu engine"):
        nv.debug.memory_report()

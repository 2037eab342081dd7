"""The memory cap of the memory benchmark: a cgroup the kernel enforces (root only)."""
import sys

import pytest

from benchmarks.memory_cap import cap_support, run_capped

pytestmark = pytest.mark.skipif(cap_support() is not None,
                                reason=f"memory cap: {cap_support()}")

ALLOCATE = ("import numpy as np; a = np.ones({mib} << 18, np.float32); "
            "print('kept', a.nbytes >> 20)")


def test_a_process_over_the_cap_is_killed_and_one_under_it_runs():
    over = run_capped([sys.executable, "-c", ALLOCATE.format(mib=600)], 300 << 20, 60)
    assert over.returncode != 0 and over.oom_killed
    assert over.peak_bytes is None or over.peak_bytes <= 300 << 20
    under = run_capped([sys.executable, "-c", ALLOCATE.format(mib=100)], 300 << 20, 60)
    assert under.returncode == 0 and not under.oom_killed and "kept 100" in under.stdout
    assert under.peak_bytes is None or 100 << 20 < under.peak_bytes <= 300 << 20


def test_a_timeout_is_not_an_out_of_memory():
    run = run_capped([sys.executable, "-c", "import time; time.sleep(30)"], 300 << 20, 1)
    assert run.returncode != 0 and not run.oom_killed and run.seconds < 20

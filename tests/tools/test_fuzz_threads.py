"""``tools/fuzz_torch/fuzz_threads.py`` (random programs on several threads, and SIGINT at
random moments, against one thread uninterrupted) on fixed seeds. It needs no torch, so
CI runs it; where an interrupt lands depends on timing, so each run tests other moments."""
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools" / "fuzz_torch"


@pytest.mark.parametrize("args", [["0", "8", "--mode=sigint"], ["0", "3", "--mode=threads"]],
                         ids=["sigint", "threads"])
def test_fuzz_threads_finds_nothing_on_its_fixed_seeds(args):
    done = subprocess.run([sys.executable, "fuzz_threads.py", *args], cwd=TOOLS,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    counters = [line for line in done.stdout.splitlines() if line.startswith("Counter(")]
    assert counters, done.stdout[-2000:]
    for failure in ("bad", "err", "hang", "harness"):
        assert f"'{failure}'" not in counters[-1], done.stdout[-4000:]

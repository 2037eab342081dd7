"""``tools/fuzz_torch``: the differential fuzzers against PyTorch run, and on a fixed
stretch of seeds find no mismatch (the cases the 2026-12-07 fixes made pass; a
regression there shows up as a reported case). Needs torch, so CI skips it."""
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

TOOLS = Path(__file__).resolve().parents[2] / "tools" / "fuzz_torch"

# (script, its arguments, the summary's first word); each finishes in seconds
RUNS = [("fuzz_elem.py", ["1", "50"], "stats"), ("fuzz_red.py", ["1", "30"], "stats"),
        ("fuzz_chain.py", ["1", "15"], "stats"), ("fuzz_idx.py", ["1", "30"], "stats"),
        ("fuzz_autograd.py", ["0", "30"], "Counter"),
        ("fuzz_functional.py", ["0", "20"], "Counter"),
        ("fuzz_modules.py", ["0", "6"], "Counter"), ("fuzz_optim.py", ["0", "6"], "Counter"),
        ("fuzz_spectral.py", ["0", "40"], "Counter"), ("fuzz_linalg.py", ["0", "8"], "Counter"),
        ("fuzz_double_backward.py", ["0", "30"], "Counter"),
        ("fuzz_special.py", ["0", "200"], "Counter"), ("fuzz_cache.py", ["0", "12"], "{"),
        ("fuzz_compile.py", ["50", "12"], "{")]


# The fourth round's fuzzers (2026-12-08): (script, arguments, the failure keys of their
# final Counter line); fuzz_threads needs no torch and runs in tests/tools/test_fuzz_threads.py
COUNTED = [("fuzz_engines.py", ["0", "20"], ("bad", "ref_bad", "err", "nonbit", "harness")),
           ("fuzz_serial.py", ["0", "60", "module"], ("bad", "err", "laxer", "harness")),
           ("fuzz_serial.py", ["0", "90", "craft"], ("bad", "err", "laxer", "harness")),
           ("fuzz_serial.py", ["15", "7", "t2optim"], ("bad", "err", "laxer", "harness")),
           ("fuzz_serial.py", ["19", "1", "optim"], ("bad", "err", "laxer", "harness")),
           ("fuzz_nn_api.py", ["527", "9"],
            ("bad", "accept", "err", "exc", "order", "harness"))]


@pytest.mark.parametrize("script, args, failures", COUNTED,
                         ids=[f"{r[0]}-{'-'.join(r[1])}" for r in COUNTED])
def test_fourth_round_fuzzer_finds_nothing_on_its_fixed_seeds(script, args, failures):
    done = subprocess.run([sys.executable, script, *args], cwd=TOOLS, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    counters = [line for line in done.stdout.splitlines() if line.startswith("Counter(")]
    assert counters, done.stdout[-2000:]
    for failure in failures:
        assert f"'{failure}'" not in counters[-1], done.stdout[-4000:]


@pytest.mark.parametrize("script, args, summary", RUNS, ids=[r[0] for r in RUNS])
def test_fuzzer_runs_and_finds_nothing_on_its_fixed_seeds(script, args, summary):
    done = subprocess.run([sys.executable, script, *args], cwd=TOOLS, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith(summary), done.stdout[-2000:]
    assert "=== case" not in done.stdout and "mismatch" not in last, done.stdout[-3000:]
    for failure in ("bad", "err", "harness"):          # (the Counter fuzzers' failure kinds)
        assert f"'{failure}'" not in last, last

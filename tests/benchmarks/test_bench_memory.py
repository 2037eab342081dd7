"""The memory benchmark's harness on the tiny preset (PyTorch where installed)."""
import json

from benchmarks import bench_memory
from benchmarks.common import Result
from benchmarks.run_one import available


def test_bench_memory_writes_ratios_against_torch(tmp_path):
    rows = bench_memory.main(["--preset", "tiny", "--steps", "2", "--batch-size", "2",
                              "--runs", "nova (remat default)", "torch-eager",
                              "--out", str(tmp_path)])
    nova = rows[0][1]
    assert nova.available and nova.planned_peak_mb > 0 and nova.peak_rss_mb >= 0
    md = (tmp_path / "memory_tiny.md").read_text()
    assert "| tiny | 2 | nova (remat default) |" in md
    data = json.loads((tmp_path / "memory_tiny.json").read_text())
    assert data[0]["run"] == "nova (remat default)" and data[0]["planned_peak_mb"] > 0
    if not available("torch-eager"):
        assert "not installed" in md


def test_memory_table_ratio_is_nova_over_torch():
    nova = Result("nova", "p", 2, 10, [1.0, 1.0], [2.0], 50.0, planned_peak_mb=40.0)
    torch = Result("torch-eager", "p", 2, 10, [1.0, 1.0], [2.0], 200.0)
    md = bench_memory.table([("nova (remat default)", nova), ("torch-eager", torch)])
    assert "| p | – | nova (remat default) | 50 | 0.25x | 40 |" in md
    assert "| p | – | torch-eager | 200 | 1.00x | – |" in md
    real = Result("nova", "gpt-42m", 2, 2 * 1024, [1.0, 1.0], [2.0], 50.0)
    assert "| gpt-42m | 2 | nova-compiled | 50 |" in bench_memory.table([("nova-compiled", real)])


def test_the_largest_batch_search_doubles_then_bisects(monkeypatch):
    """Batches double until one fails, then the gap is bisected; every trial is kept."""
    tried = []

    def fake(framework, preset, batch, steps, cap, timeout):
        tried.append(batch)
        if batch <= 5:
            r = Result(framework, preset, steps, batch * 10, [1.0] * steps, [1.0], 1.0)
            return r, "trained", 100.0 * batch
        return None, "killed by the cap (out of memory)", 999.0
    monkeypatch.setattr(bench_memory, "_trial", fake)
    trials = bench_memory.largest_batch("nova", "p", [1, 2, 3, 4, 6, 8, 12, 16], 2, 1 << 30,
                                        60, log=lambda m: None)
    assert tried == [1, 2, 4, 8, 6]            # 8 fails: 6, between 4 and 8, fails too
    tried.clear()
    trials = bench_memory.largest_batch("nova", "p", list(range(1, 17)), 2, 1 << 30, 60,
                                        log=lambda m: None)
    assert tried == [1, 2, 4, 8, 6, 5]
    md = bench_memory.cap_table("p", 4, {"nova": trials})
    assert "| nova | 5 | 50 | 500 | 6: killed by the cap (out of memory) |" in md
    md = bench_memory.cap_table("p", 4, {"torch": [dict(trials[-2])]})
    assert "| torch | none | – | – | 6: killed by the cap" in md

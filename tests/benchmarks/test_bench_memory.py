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
    assert "| tiny | nova (remat default) |" in md
    data = json.loads((tmp_path / "memory_tiny.json").read_text())
    assert data[0]["run"] == "nova (remat default)" and data[0]["planned_peak_mb"] > 0
    if not available("torch-eager"):
        assert "not installed" in md


def test_memory_table_ratio_is_nova_over_torch():
    nova = Result("nova", "p", 2, 10, [1.0, 1.0], [2.0], 50.0, planned_peak_mb=40.0)
    torch = Result("torch-eager", "p", 2, 10, [1.0, 1.0], [2.0], 200.0)
    md = bench_memory.table([("nova (remat default)", nova), ("torch-eager", torch)])
    assert "| p | nova (remat default) | 50 | 0.25x | 40 |" in md
    assert "| p | torch-eager | 200 | 1.00x | – |" in md

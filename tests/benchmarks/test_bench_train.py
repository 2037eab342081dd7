"""The benchmark harness itself, on the tiny preset with Nova (peers where installed)."""
import json

import pytest

from benchmarks import bench_train
from benchmarks.common import Result, Work
from benchmarks.run_one import available, run


def test_run_one_measures_nova_in_process():
    r = run("nova", Work("tiny", 3, 2))
    assert r.available and len(r.step_times) == 3 and len(r.losses) == 3
    assert r.tokens_per_step == 64 and r.tokens_per_s > 0 and r.peak_rss_mb >= 0


def test_harness_writes_table_json_and_reports_missing_peers(tmp_path):
    results = bench_train.main(["--preset", "tiny", "--steps", "3", "--batch-size", "2",
                                "--frameworks", "nova", "jax", "--out", str(tmp_path)])
    assert [r.framework for r in results] == ["nova", "jax"]
    md = (tmp_path / "train_tiny.md").read_text()
    assert "| tiny | nova |" in md and "1.00x" in md
    data = json.loads((tmp_path / "train_tiny.json").read_text())
    assert data["results"][0]["framework"] == "nova" and data["results"][0]["tokens_per_s"] > 0
    if not available("jax"):
        assert "not installed" in md


def test_table_ratios_are_peer_over_nova():
    nova = Result("nova", "p", 3, 100, [1.0, 0.5, 0.5, 0.5], [1.0], 100.0)
    peer = Result("torch-eager", "p", 3, 100, [1.0, 1.0, 1.0, 1.0], [1.0], 300.0)
    md = bench_train.table([nova, peer])
    assert "| p | torch-eager | 1.00 | 100 | 0.50x | 300 | 3.00x |" in md


@pytest.mark.skipif(not available("torch-eager"), reason="PyTorch is not installed")
def test_loss_parity_with_pytorch_on_tiny():
    assert bench_train.parity("tiny", 5, 2) < 1e-3

"""bench_conv on tiny shapes: it checks Nova against PyTorch before timing and reports
milliseconds, GFLOP/s and the ratio for every shape asked for."""
import pytest

from benchmarks import bench_conv


def test_bench_conv_reports_every_shape(capsys):
    rows = bench_conv.main(["--batch", "1", "--reps", "1", "--size", "6",
                            "--shapes", "stem 7x7/2,stage2 3x3/2"])
    out = capsys.readouterr().out
    assert [r["shape"] for r in rows] == ["stem 7x7/2", "stage2 3x3/2"]
    assert "stage2 3x3/2 (128, 6x6, 128, 3/2)" in out and "torch/nova" in out
    assert "torch/compiled" in out and "kernels ms" in out
    assert all(r["nova_s"] > 0 and r["compiled_s"] > 0 for r in rows)
    assert all(0 < r["kernels_s"] < 10 * r["compiled_s"] for r in rows)


def test_flops_count_forward_and_both_gradients():
    # 1 image, 1 channel in and out, a 1x1 kernel on 2x2: 4 multiply-adds, x2, x3
    assert bench_conv.flops(1, (1, 2, 1, 1, 1, 0)) == 24.0
    with pytest.raises(KeyError):
        bench_conv.main(["--shapes", "nonexistent"])

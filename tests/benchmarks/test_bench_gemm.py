"""The GEMM benchmark harness runs and reports every peer it finds."""
from benchmarks import bench_gemm


def test_bench_gemm_quick_run():
    rows = bench_gemm.main(["--quick", "--reps", "1", "--tokens", "64"])
    assert len(rows) == 4 and all(r["nova"] > 0 and r["numpy"] > 0 for r in rows)
    assert rows[0]["shape"] == "square 256"
    assert all(r["nova_kernel"] > 0 and r["kernel/numpy*"] > 0 for r in rows)


def test_gemm_shapes_cover_forward_and_both_backward_products():
    labels = [s[0] for s in bench_gemm.shapes(128)]
    for preset in ("small", "medium", "gpt-42m"):
        for product in ("fwd", "dX", "dW"):
            assert f"{preset} qkv {product}" in labels

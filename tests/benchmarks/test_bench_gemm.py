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


def test_summary_groups_the_target_shapes_and_counts_those_at_parity():
    def row(shape, call, kernel, control):
        return {"shape": shape, "nova/numpy*": call, "kernel/numpy*": kernel,
                "numpy/numpy*": control}

    rows = [row("square 256", 0.5, 0.5, 0.5),          # below the target's N >= 512
            row("square 512", 0.9, 1.1, 1.0), row("square 1024", 1.2, 1.3, 0.8),
            row("small qkv fwd", 1.0, 0.9, 1.1)]
    lines = bench_gemm.summarize(rows).splitlines()
    assert lines[1] == "squares N >= 512 | 2 | 1.05 | 1 | 1.20 | 2 | 0.90 | 1"
    assert lines[2] == "small | 1 | 1.00 | 1 | 0.90 | 0 | 1.10 | 1"
    assert len(lines) == 3

"""The GPU benchmark driver's report: written (with the reason) without a GPU, and its
markdown for a full report, so gpu_check.sh cannot fail at its last step on a GPU."""
import json

import pytest

import nova as nv
from benchmarks import bench_gpu


@pytest.mark.skipif(nv.cuda.is_available(), reason="a GPU is present: gpu_check.sh runs it")
def test_without_a_gpu_the_driver_writes_why(tmp_path):
    assert bench_gpu.main(["--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "gpu_bench.json").read_text())
    assert report["skipped"].startswith("CUDA is not available: ")
    assert "GPU benchmarks skipped: CUDA is not available" in (tmp_path / "gpu_bench.md").read_text()


def test_markdown_of_a_full_report():
    gemm = {"label": "square 1024", "M": 1024, "K": 1024, "N": 1024,
            "nova": {"gflops": 100000.0, "rel_fro": 2e-4},
            "cupy": {"gflops": 200000.0, "rel_fro": 1.9e-4},
            "torch": {"gflops": 210000.0, "rel_fro": 1.9e-4}}
    train = {"preset": "medium", "batch": 16, "framework": "nova", "tokens_per_s": 5e5,
             "step_s": 0.008, "first_step_s": 20.0, "peak_gpu_mb": 900.0,
             "planned_peak_mb": 700.0, "losses": [5.6, 5.4], "graph_replays": 6}
    text = bench_gpu.markdown({"gpu": "NVIDIA H200", "environment": "env", "gemm": [
        gemm, {"label": "square 8192", "skipped": "time budget"}], "train": [
        train, {"preset": "gpt-42m", "batch": 8, "framework": "torch-compile",
                "error": "RuntimeError: x"}]})
    assert "| square 1024 | 1024×1024×1024 | 100000 | 200000 | 210000 | 0.50 | 2.0e-04 |" in text
    assert "| medium | 16 | nova | 500000 | 8.0 | 20.0 | 900 (plan 700) | 5.400 | 6 |" in text
    assert "time budget" in text and "RuntimeError: x" in text


def test_gemm_shapes_cover_square_and_gpt_products():
    shapes = bench_gpu.gemm_shapes(8192, quick=False)
    labels = [s[0] for s in shapes]
    assert labels[:4] == ["square 1024", "square 2048", "square 4096", "square 8192"]
    assert "gpt-144m lm head dW" in labels and len(shapes) == 4 + 3 * 4 * 3
    fwd = next(s for s in shapes if s[0] == "gpt-42m mlp up fwd")
    assert fwd[1:] == (8192, 512, 2048, False, True)


def test_attention_section_on_the_emulator_and_its_markdown():
    """``bench_attention`` end to end on the emulated GPU (a tiny shape, wall-clock
    timer): both Nova variants run and agree with each other; then the report's table."""
    import shutil
    import time

    if shutil.which("g++") is None:
        pytest.skip("the emulator needs g++ (C++20)")
    from nova.runtime.cuda_runtime import use_backend
    from tests.runtime.emulated_cuda import EmulatorBackend

    def timer(run, reps):
        t0 = time.perf_counter()
        for _ in range(reps):
            run()
        return (time.perf_counter() - t0) / reps
    nv.debug.reset_cache()
    with use_backend(EmulatorBackend()):
        row = bench_gpu.bench_attention((1, 2, 20, 8), 1, {}, timer)
    nv.debug.reset_cache()
    assert row["label"] == "attention 1x2x20x8" and "torch" not in row
    assert row["nova"]["kernels"] < row["nova_composite"]["kernels"]
    assert row["nova"]["s"] > 0 and row["nova"]["tflops"] > 0
    assert 0 < row["nova"]["vs_composite"] < 3e-3        # TF32 products, both ways
    text = bench_gpu.markdown({"gpu": "g", "environment": "env", "gemm": [], "train": [],
                               "attention": [row, {"label": "attention (8, 16, 1024, 64)",
                                                   "skipped": "time budget"}]})
    assert "| attention 1x2x20x8 | " in text and "| — | — |" in text
    assert "| attention (8, 16, 1024, 64) | time budget" in text

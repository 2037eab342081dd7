"""bench_ddp's harness: a one-rank child job and the report (the 2-rank job is the
distributed tests' mpiexec path)."""
import argparse

from benchmarks import bench_ddp


def test_a_one_rank_job_trains_and_reports():
    got = bench_ddp.run(1, "tiny", 5, 2, 1)
    assert got["world"] == 1 and got["tokens_per_s"] > 0 and got["step_s"] > 0
    assert got["waited_s"] == 0.0 and got["alone_s"] == 0.0 and got["kernel_s"] > 0
    assert (got["device"], got["backend"]) == ("cpu", "mpi")


def test_the_report_gives_efficiency_and_the_hidden_share():
    one = {"tokens_per_s": 1000.0}
    two = {"tokens_per_s": 1800.0, "alone_s": 0.004, "waited_s": 0.001, "grad_mb": 3.2,
           "buckets": 3}
    skewed = dict(two, waited_s=0.009)
    gpu = dict(two, waited_s=None)
    args = argparse.Namespace(uptime="(0.1, 0.1, 0.1)", batch=8, steps=10, rounds=1,
                              presets=["small", "medium"])
    text = bench_ddp.report({("small", 1): [one], ("small", 2): [two],
                             ("medium", 1): [one], ("medium", 2): [skewed]}, args)
    args.presets = ["small"]
    on_gpu = bench_ddp.report({("small", 1): [one], ("small", 2): [gpu]}, args)
    assert "| small | 1,000 | 1,800 | 0.90 | 3.2 MiB | 3 | 4.00 ms | - | - |" in on_gpu
    assert "| small | 1,000 | 1,800 | 0.90 | 3.2 MiB | 3 | 4.00 ms | 1.00 ms | 75% |" in text
    assert "| medium | 1,000 | 1,800 | 0.90 | 3.2 MiB | 3 | 4.00 ms | 9.00 ms | 0% |" in text

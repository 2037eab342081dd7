"""bench_compile's harness: a child's first step, and the report from known runs."""
import json

from benchmarks import bench_compile


def test_a_child_times_its_first_step_and_counts_compiles(capsys):
    bench_compile.child("tiny")
    line = capsys.readouterr().out.strip().splitlines()[-1]
    result = json.loads(line[len("RESULT "):])
    assert result["first_step_s"] > 0 and result["import_s"] >= 0
    assert result["compiled"] >= 0 and result["compile_s"] >= 0


def test_the_report_names_each_case_and_the_speedup(tmp_path, monkeypatch):
    seconds = {1: 12.0, None: 8.0}
    calls = []

    def fake(preset, cache, jobs, generate=0):
        calls.append((cache, jobs))
        warm = len(calls) % 3 == 0
        return {"first_step_s": 1.0 if warm else seconds[jobs], "import_s": 0.5,
                "compiled": 0 if warm else 121, "disk_hits": 121 if warm else 0,
                "compile_s": 0.0 if warm else seconds[jobs] - 1}
    monkeypatch.setattr(bench_compile, "run", fake)
    median = bench_compile.main(["--preset", "tiny", "--rounds", "2", "--out", str(tmp_path)])
    assert median == {"cold, 1 worker": 12.0, "cold, default workers": 8.0, "warm cache": 1.0}
    assert calls[1][0] == calls[2][0] != calls[0][0]     # warm reuses the cold run's cache
    md = (tmp_path / "compile_tiny.md").read_text()
    assert "| cold, 1 worker | 12.00 |" in md and "1 worker / default workers = 1.50x" in md


def test_a_child_times_a_generation(capsys):
    bench_compile.child("tiny", generate=3)
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1][len("RESULT "):])
    assert result["first_step_s"] > 0


def test_the_generation_cases_are_reported_cold_and_warm(tmp_path, monkeypatch):
    calls = []

    def fake(preset, cache, jobs, generate=0):
        calls.append((cache, generate))
        return {"first_step_s": 2.0 if generate else 5.0, "import_s": 0.5, "compiled": 9,
                "disk_hits": 0, "compile_s": 1.0}
    monkeypatch.setattr(bench_compile, "run", fake)
    median = bench_compile.main(["--preset", "tiny", "--rounds", "1", "--generate", "64",
                                 "--out", str(tmp_path)])
    assert median["generate 64 tokens, cold"] == 2.0
    assert calls[3][0] == calls[4][0] and calls[3][1] == calls[4][1] == 64
    md = (tmp_path / "compile_tiny.md").read_text()
    assert "| generate 64 tokens, warm cache | 2.00 |" in md and "--generate 64" in md

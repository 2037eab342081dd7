"""bench_contention's harness: a child run, the spinner it starts and stops, the report."""
import json
import os

import pytest

from benchmarks import bench_contention


def test_a_child_run_trains_and_reports_tokens_per_second(capsys):
    import nova as nv
    before = nv.get_num_threads()
    bench_contention.child("nova", 5, preset="tiny", batch=2)
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("RESULT ")
    result = json.loads(line[len("RESULT "):])
    assert result["tokens_per_s"] > 0 and result["threads"] == before
    assert result["loss"] > 0


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity")
def test_the_spinner_runs_on_its_cpu_until_stopped():
    cpu = sorted(os.sched_getaffinity(0))[-1]
    proc = bench_contention._spinner(cpu)
    try:
        assert proc.poll() is None and os.sched_getaffinity(proc.pid) == {cpu}
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode is not None


def test_the_report_has_every_condition_and_the_ratios(tmp_path, monkeypatch):
    """The report from runs of known throughput (the runs themselves are the child's
    and the spinner's, tested above)."""
    speed = {("nova", "quiet"): 200.0, ("nova", "busy-last"): 120.0,
             ("nova", "busy-first"): 110.0, ("nova-1thread", "quiet"): 100.0,
             ("nova-1thread", "busy-last"): 100.0, ("nova-1thread", "busy-first"): 100.0}
    monkeypatch.setattr(bench_contention, "run",
                        lambda fw, condition, *a: {"tokens_per_s": speed[(fw, condition)]})
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    median = bench_contention.main(["--rounds", "2", "--frameworks", "nova", "nova-1thread",
                                    "--out", str(tmp_path)])
    assert median == speed
    md = (tmp_path / "contention_nova_nova-1thread.md").read_text()
    assert "| nova | 200 | 120 | 110 |" in md
    assert "busy-last: Nova default / Nova 1 thread = 1.20" in md
    assert "--frameworks nova nova-1thread" in md
    runs = json.loads((tmp_path / "contention_nova_nova-1thread.json").read_text())
    assert len(runs["nova/busy-first"]) == 2

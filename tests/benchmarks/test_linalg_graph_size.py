"""benchmarks/linalg_graph_size.py runs and reports every case (tiny n)."""
import pytest

from benchmarks import linalg_graph_size


def test_reports_nodes_for_every_case_and_the_first_compilations(capsys):
    linalg_graph_size.main(n=4, sizes=(2, 3), timed=())
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == ["cholesky_ex", "lu_factor_ex", "solve_ex",
                                                  "inv_ex", "det", "cholesky_ex", "inv_ex",
                                                  "qr", "eigh", "svd"]
    assert all(int(line.split(": ")[1].split()[0]) > 0 for line in out[:5])
    assert all("first realization" in line for line in out[5:7])
    for line in out[7:]:
        counts = [int(part.split(": ")[1].split()[0]) for part in line.split(", ")]
        assert line.endswith("nodes recorded") and len(counts) == 2 and 0 < counts[0] < counts[1]


@pytest.mark.slow
def test_times_the_first_realization_and_a_replay(capsys):
    linalg_graph_size.spectral(sizes=(), timed=(2,))
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out if "first realization" in line] == ["qr", "eigh", "svd"]
    assert all("replay" in line and "first compilation" in line
               for line in out if "first realization" in line)

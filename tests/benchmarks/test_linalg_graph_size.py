"""benchmarks/linalg_graph_size.py runs and reports every case (tiny n)."""
from benchmarks import linalg_graph_size


def test_reports_nodes_for_every_case_and_the_first_compilations(capsys):
    linalg_graph_size.main(n=4)
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == ["cholesky_ex", "lu_factor_ex", "solve_ex",
                                                  "inv_ex", "det", "cholesky_ex", "inv_ex"]
    assert all(int(line.split(": ")[1].split()[0]) > 0 for line in out[:5])
    assert all("first realization" in line for line in out[5:])

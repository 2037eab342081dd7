from benchmarks import bench_shapes


def test_bench_shapes_reports_growth_and_the_cache_for_both_limits(capsys):
    bench_shapes.main(["--shapes", "3"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["default step-cache limit",
                                                      "1 MB step-cache limit"]
    assert all("RSS growth" in line and "MiB over 3 shapes" in line for line in lines)
    assert "5 misses" in lines[0] and "evicted" in lines[1]

"""``tools/first_run.py`` times each native run of a compiled GPT training loop with the
page faults it took (the first training step writes its arena for the first time)."""
import importlib.util
from pathlib import Path

from nova.runtime import threads

TOOL = Path(__file__).resolve().parents[2] / "tools" / "first_run.py"


def test_each_native_run_is_timed_with_its_page_faults(capsys):
    spec = importlib.util.spec_from_file_location("first_run", TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    drive = threads.drive
    runs = tool.main(["--preset", "small", "--steps", "2"])
    assert threads.drive is drive                       # restored
    assert len(runs) == 3                               # the initialization, two steps
    assert all(seconds > 0 and faults >= 0 for seconds, faults in runs)
    assert runs[1][1] > 0        # the first step touched its fresh arena's pages
    out = capsys.readouterr().out.splitlines()
    assert out[-2] == "small GPT, drive per run (s, minor page faults):"
    assert out[-1].split()[0] == "1:" and "3:" in out[-1].split()

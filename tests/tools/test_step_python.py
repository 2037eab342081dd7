"""``tools/step_python.py`` times a recorded GPT step's phases without its kernels and
counts the nodes the step extracted."""
import importlib.util
from pathlib import Path

from nova.runtime import threads
from nova.tensor import realize

TOOL = Path(__file__).resolve().parents[2] / "tools" / "step_python.py"


def _tool():
    spec = importlib.util.spec_from_file_location("step_python", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_phases_are_timed_apart_from_the_driver_and_nodes_counted(capsys):
    tool = _tool()
    drive, extract = threads.WorkerPool.drive, realize.extract
    ms = tool.main(["--preset", "small", "--steps", "3", "--warmup", "2"])
    assert threads.WorkerPool.drive is drive and realize.extract is extract   # restored
    assert set(ms) == {"forward", "backward", "optimizer", "zero_grad", "total"}
    assert all(v > 0 for v in ms.values())
    assert abs(ms["total"] - sum(ms[p] for p in tool.PHASES)) < 0.5 * ms["total"]
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("recorded small GPT step, batch 1, median of 3 steps")
    nodes = out[2].split()
    assert nodes[:2] == ["nodes", "extracted:"] and int(nodes[2]) > 100
    calls = int(nodes[3].lstrip("("))
    assert calls > 1            # the backward pass, the updates and the composite calls

"""The README's main job runs and shows IR, values and a loop that compiled once."""
import runpy
from pathlib import Path

DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo.py"


def test_demo_runs_and_prints_ir_values_and_cache(capsys, fresh_cache):
    runpy.run_path(str(DEMO), run_name="__main__")
    out = capsys.readouterr().out
    assert "func.func @step" in out and "nova.matmul" in out
    assert "loss  =" in out
    assert "99 hits" in out


def test_readme_python_blocks_run(capsys):
    readme = (DEMO.parents[1] / "README.md").read_text()
    blocks = [b.split("```", 1)[0] for b in readme.split("```python")[1:]]
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)
    assert "func.func @step" in capsys.readouterr().out

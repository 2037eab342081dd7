"""``tools/vector_loop_cost.py`` finds each unary op's main vector loop in this host's
assembly and counts it per 16 elements."""
import importlib.util
import platform
from pathlib import Path

import llvmlite.binding as llvm
import pytest

pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                                reason="the tool reads x86-64 assembly")
TOOL = Path(__file__).resolve().parents[2] / "tools" / "vector_loop_cost.py"


def _tool():
    spec = importlib.util.spec_from_file_location("vector_loop_cost", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return module


def test_the_main_loop_is_the_vector_loop_with_the_op_in_it():
    tool = _tool()
    step, body = tool.main_loop(tool.kernel_assembly(tool.OPS["exp"]))
    assert step >= 8 and step % 4 == 0          # whole vectors of 4, 8 or 16 floats
    text = "\n".join(body)
    assert "ps\t" in text and "fmadd" in text   # packed single-precision math
    assert "call" not in text                   # no libm call left in it


def test_sin_main_loop_leaves_the_huge_argument_path_outside(capsys):
    tool = _tool()
    _, body = tool.main_loop(tool.kernel_assembly(tool.OPS["sin"]))
    assert not any("call" in line for line in body)
    tool.main(["add", "sin"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["op", "elements/iter", "instr/16", "stack/16", "div/16"]
    assert [line.split()[0] for line in lines[1:]] == ["add", "sin"]

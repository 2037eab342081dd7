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


def test_another_cpu_is_counted_with_its_own_instructions(capsys):
    """``--cpu``/``--features``: an AVX2 CPU's loop holds ymm registers only, and exp's
    scale is built in the exponent bits there (no vscalefps, AVX-512's, which
    ``llvm.ldexp`` becomes on the host)."""
    tool = _tool()
    avx2 = "+avx2,+fma,+avx,+sse4.2,+f16c"
    tool.main(["exp"], "znver3", avx2)
    assert capsys.readouterr().out.splitlines()[1].split()[0] == "exp"
    from nova.compiler.targets.cpu.llvm_emit import Emitter
    Emitter.VECTOR_LDEXP = False
    try:
        _, body = tool.main_loop(tool.kernel_assembly(tool.OPS["exp"], "znver3", avx2))
    finally:
        Emitter.VECTOR_LDEXP = None
    text = "\n".join(body)
    assert "%ymm" in text and "%zmm" not in text and "vscalef" not in text


def test_time_adds_each_kernels_nanoseconds_per_16_elements(capsys):
    """``--time``: the kernel compiled and called here on an L2-resident array; exp
    takes longer than add's single instruction per vector."""
    tool = _tool()
    ns = tool.least_times({name: tool.kernel_timer(tool.OPS[name]) for name in ("add", "exp")},
                          rounds=5)
    assert 0 < ns["add"] < ns["exp"]
    tool.main(["add"], timed=True)
    header, row = capsys.readouterr().out.splitlines()
    assert header.split()[-1] == "ns/16" and float(row.split()[-1]) > 0

"""The LLVM IR of a test's kernels, before and after the O3 pipeline the compile
worker runs (shared by the tests that read it)."""
from nova.compiler.pipeline import compile_step, front
from nova.compiler.targets import get_target
from nova.tensor.realize import pending_graph


def kernel_llvm(*tensors, strategy: str = "elementwise") -> list[str]:
    """The LLVM IR of each kernel of the step computing ``tensors`` whose schedule has
    ``strategy`` (``"elementwise"``, ``"tiled"`` for a blocked GEMM, ...)."""
    step = compile_step(front(pending_graph(*tensors)), "cpu")
    cpu = get_target("cpu")
    return [cpu.emit(p) for p in step.plans if p.schedule.strategy == strategy]


def elementwise_llvm(*tensors) -> list[str]:
    """The LLVM IR of each elementwise kernel of the step computing ``tensors``."""
    return kernel_llvm(*tensors)


def loop_metadata(text: str, loop: str) -> list[str]:
    """The ``llvm.loop`` metadata of every back edge to loop ``loop``'s header (its
    block ``<loop>.head``, or ``<loop>.head.N`` for the N-th loop of that name) in
    ``text``, each as the sorted hints it holds (``name`` or ``name=value``)."""
    import re
    nodes = dict(re.findall(r"^(![0-9]+) = (?:distinct )?(!\{.*\})$", text, re.M))
    found = []
    back_edge = rf'br label %"{re.escape(loop)}\.head(?:\.[0-9]+)?", !llvm\.loop (![0-9]+)'
    for ref in re.findall(back_edge, text):
        hints = []
        for part in re.findall(r"![0-9]+", nodes[ref]):
            if part != ref:
                hints += re.findall(r'!"([^"]+)"(?:, i1 (\w+))?', nodes[part])
        found.append(sorted(f"{h}={v}" if v else h for h, v in hints))
    return found


def optimized(text: str) -> str:
    """``text`` through the O3 pipeline the compile worker runs, for this host."""
    import llvmlite.binding as llvm

    from nova.runtime.compile_worker import optimize, target_machine
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = llvm.parse_assembly(text)
    module.verify()
    optimize(target_machine(llvm.get_host_cpu_name(),
                            llvm.get_host_cpu_features().flatten()), module, 3)
    return str(module)

"""The LLVM IR of a test's elementwise kernels, before and after the O3 pipeline the
compile worker runs (shared by the tests that read it)."""
from nova.compiler.pipeline import compile_step, front
from nova.compiler.targets import get_target
from nova.tensor.realize import pending_graph


def elementwise_llvm(*tensors) -> list[str]:
    """The LLVM IR of each elementwise kernel of the step computing ``tensors``."""
    step = compile_step(front(pending_graph(*tensors)), "cpu")
    cpu = get_target("cpu")
    return [cpu.emit(p) for p in step.plans if p.schedule.strategy == "elementwise"]


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

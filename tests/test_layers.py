"""The package layers of DESIGN.md: imports point down ``nn/optim -> autograd -> tensor
-> runtime -> compiler -> core``, never up, and no two top-level parts of nova import
each other, even through others. Checked on the source (every ``import`` statement,
inside functions too), so a late import cannot hide a dependency."""
import ast
import pathlib
from collections import defaultdict

import pytest

import nova

ROOT = pathlib.Path(nova.__file__).parent

# Package -> the nova packages it must never import.
# (``distributed`` and ``export`` sit beside ``nn``: nothing below imports them.)
FORBIDDEN = {
    "core": ("compiler", "runtime", "tensor", "autograd", "nn", "optim", "serialization",
             "debug", "cuda", "distributed", "export"),
    "compiler": ("runtime", "tensor", "autograd", "nn", "optim", "serialization", "debug",
                 "distributed", "export"),
    "runtime": ("tensor", "autograd", "nn", "optim", "serialization", "debug",
                "distributed", "export"),
    "tensor": ("autograd", "nn", "optim", "distributed", "export"),
    "autograd": ("nn", "optim", "distributed", "export"),
}


def _imports(path: pathlib.Path, root: pathlib.Path) -> list[tuple[int, str]]:
    """(line, module) for every import in the file, relative imports resolved."""
    tree = ast.parse(path.read_text(), str(path))
    package = ".".join(("nova",) + path.relative_to(root).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            if module == "nova":     # ``from nova import tensor``
                found += [(node.lineno, f"nova.{alias.name}") for alias in node.names]
    return found


def _violations(layer: str, root: pathlib.Path = ROOT) -> list[str]:
    bad = []
    for path in sorted((root / layer).rglob("*.py")):
        for line, module in _imports(path, root):
            parts = module.split(".")
            if parts[0] == "nova" and len(parts) > 1 and parts[1] in FORBIDDEN[layer]:
                bad.append(f"{path.relative_to(root.parent)}:{line} imports {module}")
    return bad


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_no_layer_imports_a_layer_above_it(layer):
    assert _violations(layer) == []


def test_the_check_sees_late_and_relative_imports(tmp_path):
    """The walker finds an import inside a function and a relative one (so the test
    above can fail)."""
    (tmp_path / "nova" / "runtime").mkdir(parents=True)
    (tmp_path / "nova" / "runtime" / "probe.py").write_text(
        "from nova.compiler import irgen\n"
        "def f():\n    from ..tensor import trace\n    import nova.nn\n"
        "    from nova import optim\n")
    assert _violations("runtime", tmp_path / "nova") == [
        "nova/runtime/probe.py:3 imports nova.tensor",
        "nova/runtime/probe.py:4 imports nova.nn",
        "nova/runtime/probe.py:5 imports nova.optim",
    ]


# ---------------------------------------------------------------- no import cycles

def _unit(path: pathlib.Path, root: pathlib.Path) -> str | None:
    """The top-level part of nova a file belongs to: its package (``tensor`` for
    nova/tensor/ops.py) or, for a top-level module, the module (``debug``); None for
    nova/__init__.py, the public facade that re-exports from every part."""
    parts = path.relative_to(root).parts
    if parts == ("__init__.py",):
        return None
    return parts[0].removesuffix(".py")


def _unit_graph(root: pathlib.Path = ROOT) -> dict[str, dict[str, str]]:
    """part -> {part it imports: the first ``file:line`` that does}."""
    graph: dict[str, dict[str, str]] = defaultdict(dict)
    for path in sorted(root.rglob("*.py")):
        source = _unit(path, root)
        if source is None:
            continue
        graph[source]      # a part that imports nothing is still a node
        for line, module in _imports(path, root):
            parts = module.split(".")
            if parts[0] == "nova" and len(parts) > 1 and parts[1] != source:
                graph[source].setdefault(parts[1], f"{path.relative_to(root.parent)}:{line}")
    return dict(graph)


def _find_cycle(graph: dict[str, dict[str, str]]) -> list[str]:
    """One import cycle as ``a -> b (where) ...`` steps back to its start, or []."""
    state: dict[str, int] = {}      # 1: on the current path, 2: done
    path: list[str] = []

    def visit(unit: str) -> list[str]:
        state[unit] = 1
        path.append(unit)
        for nxt in sorted(graph.get(unit, {})):
            if state.get(nxt) == 1:
                loop = path[path.index(nxt):] + [nxt]
                return [f"{a} -> {b} ({graph[a][b]})" for a, b in zip(loop, loop[1:])]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[unit] = 2
        return []

    for unit in sorted(graph):
        if unit not in state:
            found = visit(unit)
            if found:
                return found
    return []


def test_the_parts_of_nova_import_each_other_without_a_cycle():
    graph = _unit_graph()
    assert {"tensor", "autograd", "nn", "optim", "runtime", "compiler", "core", "debug",
            "serialization", "config", "cuda"} <= set(graph)
    assert _find_cycle(graph) == []


def test_the_cycle_check_reports_a_cycle_through_a_late_import(tmp_path):
    """A crafted tree where tensor imports autograd inside a function and autograd
    imports tensor through a top-level module: the check names every step."""
    nova_dir = tmp_path / "nova"
    for package in ("tensor", "autograd"):
        (nova_dir / package).mkdir(parents=True)
        (nova_dir / package / "__init__.py").write_text("")
    (nova_dir / "__init__.py").write_text("from nova import tensor, autograd, debug\n")
    (nova_dir / "tensor" / "tensor.py").write_text(
        "import numpy\n\ndef backward():\n    from nova.autograd import engine\n")
    (nova_dir / "autograd" / "engine.py").write_text("from .. import debug\n")
    (nova_dir / "debug.py").write_text("from nova.tensor.tensor import backward\n")
    graph = _unit_graph(nova_dir)
    assert graph == {
        "autograd": {"debug": "nova/autograd/engine.py:1"},
        "debug": {"tensor": "nova/debug.py:1"},
        "tensor": {"autograd": "nova/tensor/tensor.py:4"},
    }
    assert _find_cycle(graph) == [
        "autograd -> debug (nova/autograd/engine.py:1)",
        "debug -> tensor (nova/debug.py:1)",
        "tensor -> autograd (nova/tensor/tensor.py:4)",
    ]
    (nova_dir / "tensor" / "tensor.py").write_text("import numpy\n")
    assert _find_cycle(_unit_graph(nova_dir)) == []

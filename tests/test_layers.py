"""The package layers of DESIGN.md: imports point down ``nn/optim -> tensor/autograd ->
runtime -> compiler -> core``, never up. Checked on the source (every ``import``
statement, inside functions too), so a late import cannot hide a dependency."""
import ast
import pathlib

import pytest

import nova

ROOT = pathlib.Path(nova.__file__).parent

# Package -> the nova packages it must never import.
FORBIDDEN = {
    "core": ("compiler", "runtime", "tensor", "autograd", "nn", "optim", "serialization",
             "debug", "cuda"),
    "compiler": ("runtime", "tensor", "autograd", "nn", "optim", "serialization", "debug"),
    "runtime": ("tensor", "autograd", "nn", "optim", "serialization", "debug"),
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

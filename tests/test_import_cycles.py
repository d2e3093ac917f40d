"""No module of treadle imports itself back at run time, through any chain.

The layer contracts (``test_layers.py``) keep imports pointing down across
floors, but modules on one floor, or in one package, may still import each
other in a circle. Such a circle works only by the order of the import
statements (a module finished enough when the other reads it), so moving a
line breaks it. Imports under ``TYPE_CHECKING`` are not run and do not count;
imports inside functions are run and do.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parent.parent / "src"


def _module_name(path: Path, source: Path) -> str:
    parts = path.relative_to(source).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    name = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", None)
    return name == "TYPE_CHECKING"


class _RunTimeImports(ast.NodeVisitor):
    """The treadle modules a module imports when it, or any of its functions, runs."""

    def __init__(self, modules: set[str]) -> None:
        self.modules = modules
        self.imported: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            self.generic_visit(node)
        else:
            for statement in node.orelse:
                self.visit(statement)

    def visit_Import(self, node: ast.Import) -> None:
        self.imported.update(alias.name for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                self.imported.add(submodule if submodule in self.modules else node.module)


def import_graph(source: Path) -> dict[str, set[str]]:
    """Each module of ``source/treadle`` and the treadle modules it imports at run time."""
    paths = {_module_name(path, source): path for path in (source / "treadle").rglob("*.py")}
    modules = set(paths)
    graph = {}
    for name, path in paths.items():
        imports = _RunTimeImports(modules)
        imports.visit(ast.parse(path.read_text()))
        graph[name] = (imports.imported & modules) - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan), each sorted."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for imported in sorted(graph[module]):
            if imported not in order:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], order[imported])
        if low[module] == order[module]:
            part = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(part) > 1:
                found.append(sorted(part))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return found


def test_no_module_imports_itself_back_at_run_time():
    assert cycles(import_graph(SOURCE)) == []


@pytest.mark.parametrize(
    ("module", "back_import", "closed"),
    [
        # at the top of the module
        ("_exceptions/_core.py", "import treadle._exceptions\n", "treadle._exceptions"),
        # inside a function: run later, still a circle
        (
            "_cli/_views.py",
            "def _late() -> None:\n    from treadle._cli import _execute\n",
            "treadle._cli._execute",
        ),
    ],
)
def test_an_import_back_is_found(tmp_path, module, back_import, closed):
    copy = tmp_path / "src"
    shutil.copytree(SOURCE / "treadle", copy / "treadle")
    target = copy / "treadle" / module
    target.write_text(target.read_text() + "\n" + back_import)
    assert any(closed in cycle for cycle in cycles(import_graph(copy)))


def test_an_import_for_the_type_checker_only_is_no_circle(tmp_path):
    copy = tmp_path / "src"
    shutil.copytree(SOURCE / "treadle", copy / "treadle")
    target = copy / "treadle" / "_exceptions" / "_core.py"
    target.write_text(
        target.read_text() + "\nif TYPE_CHECKING:\n    from treadle._engine._loop import RunLoop\n"
    )
    assert cycles(import_graph(copy)) == cycles(import_graph(SOURCE))

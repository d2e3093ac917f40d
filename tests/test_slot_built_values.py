"""Every value the engine builds slot by slot has every slot set.

The hot paths make some values without calling their classes
(``_engine/_slots.py``: ``blank(Cls)``, then one assignment per slot),
because calling a class with a Python ``__init__`` costs several hundred
instructions more. The cost of that speed: a field added to such a class is
not set where it is built that way, and nothing says so until something
reads it (``AttributeError``, in whichever run reads it first). This test
reads ``src/`` and, for each ``blank(...)`` of a class, gathers the slots
assigned in the function that makes it (and in the module's functions it
hands the value to as their first argument), and compares them with the
class's slots.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType

SRC = Path(__file__).resolve().parent.parent / "src"
BLANK_NAMES = {"blank", "_blank"}

# Slots left unset on purpose, as the class's own __init__ leaves them.
LEFT_UNSET = {
    "Invocation": {"outcome"},  # set when the invocation has run
    # Set when a worker thread hands events over, or under call limits.
    "WorkflowContext": {"_abandoned", "_held", "_loop_thread"},
}


Function = ast.FunctionDef | ast.AsyncFunctionDef


def _parsed(function: object) -> Function | None:
    """The syntax tree of a Python function (a class's ``__init__`` aliased, too)."""
    code = getattr(function, "__code__", None)
    if code is None:
        return None
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    found = tree.body[0]
    return found if isinstance(found, ast.FunctionDef | ast.AsyncFunctionDef) else None


def _assigned(function: Function, name: str, module: ModuleType, seen: set[str]) -> set[str]:
    """The attributes of ``name`` that ``function`` assigns, or a function it hands it to first.

    A function is looked up by its name in ``module``: the hot paths hand a
    blank value to its class's ``__init__`` aliased as a plain function
    (``_start_loop = RunLoop.__init__``) or to a module's helper.
    """
    attributes: set[str] = set()
    for node in ast.walk(function):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        for target in targets:
            for part in ast.walk(target):
                if (
                    isinstance(part, ast.Attribute)
                    and isinstance(part.value, ast.Name)
                    and part.value.id == name
                ):
                    attributes.add(part.attr)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id not in seen
            and node.args
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == name
        ):
            seen.add(node.func.id)
            callee = _parsed(getattr(module, node.func.id, None))
            if callee is not None and callee.args.args:
                callee_module = importlib.import_module(
                    getattr(getattr(module, node.func.id), "__module__", module.__name__)
                )
                first = callee.args.args[0].arg
                attributes |= _assigned(callee, first, callee_module, seen)
    return attributes


def _slots(cls: type) -> set[str]:
    names: set[str] = set()
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names |= {slots} if isinstance(slots, str) else set(slots)
    return names - {"__weakref__", "__dict__"}


def _slot_built() -> list[tuple[str, str, type, set[str]]]:
    """(module, function, class, slots assigned) for each ``blank(Class)`` in ``src/``."""
    built = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        module_name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        functions = [
            n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        ]
        for function in functions:
            for node in ast.walk(function):
                value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
                if not (
                    isinstance(value, ast.Call)
                    and isinstance(value.func, ast.Name)
                    and value.func.id in BLANK_NAMES
                    and len(value.args) == 1
                    and isinstance(value.args[0], ast.Name)
                ):
                    continue
                target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                assert isinstance(target, ast.Name), f"{module_name}:{node.lineno}"
                module = importlib.import_module(module_name)
                cls = getattr(module, value.args[0].id)
                assigned = _assigned(function, target.id, module, {function.name})
                built.append((module_name, function.name, cls, assigned))
    return built


def test_the_guard_finds_the_engines_slot_built_values():
    classes = {cls.__name__ for _, _, cls, _ in _slot_built()}
    assert {"BarrierState", "Invocation", "Envelope", "RunLoop", "SuperstepStarted"} <= classes


def test_every_value_built_slot_by_slot_has_every_slot_set():
    unset = []
    for module, function, cls, assigned in _slot_built():
        missing = _slots(cls) - assigned - LEFT_UNSET.get(cls.__name__, set())
        if missing:
            unset.append(f"{module}.{function} leaves {cls.__name__}.{sorted(missing)} unset")
    assert unset == []

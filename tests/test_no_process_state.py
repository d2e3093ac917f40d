"""No state shared by a whole process in ``src/``, and no task without an owner.

State kept per process (a module's table, a class attribute every instance
shares, a ``global``) is what made leases process-wide: two drivers in one
process saw each other's runs. A task nobody awaits or cancels outlives
whoever started it, and its failure goes unseen. This test reads every
module's syntax tree and holds ``src/treadle`` to three rules:

1. No mutable container at module or class level: no ``{...}``, ``[...]``,
   ``{a, b}`` or comprehension, and no call of ``dict``, ``list``, ``set``,
   ``bytearray``, ``defaultdict``, ``OrderedDict``, ``Counter``, ``deque``,
   ``ChainMap``, ``WeakKeyDictionary``, ``WeakValueDictionary`` or
   ``WeakSet`` bound there. A constant table is a ``MappingProxyType``, a
   tuple or a ``frozenset``, or is annotated ``Final[Mapping[...]]`` (or
   ``Sequence``, ``AbstractSet``), which mypy (strict on ``src/``) keeps
   from being changed: JSON trees that are dumped as they are. (``__all__``,
   read by the import system only, may stay a list.) A memo of a pure
   function is ``functools.cache``.
2. No ``global`` statement.
3. Every ``create_task`` and ``ensure_future`` has an owner: it is called on
   a task group (an expression named ``...group``), or the task is bound to
   a name (or an attribute, or kept in a table that is one) that the same
   function (or, for an attribute, class) awaits, cancels, or hands to
   ``asyncio.wait``/``gather``/``wait_for``/``shield``.

Anything else must be in :data:`ALLOWED`, with the reason it is sound.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "treadle"

MUTABLE_CALLS = frozenset(
    {
        "dict",
        "list",
        "set",
        "bytearray",
        "defaultdict",
        "OrderedDict",
        "Counter",
        "deque",
        "ChainMap",
        "WeakKeyDictionary",
        "WeakValueDictionary",
        "WeakSet",
    }
)
MUTABLE_NODES = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)
READ_ONLY_TYPES = frozenset({"Mapping", "Sequence", "AbstractSet"})
SPAWNS = frozenset({"create_task", "ensure_future"})
AWAITERS = frozenset({"wait", "gather", "wait_for", "shield"})

ALLOWED: dict[tuple[str, str], str] = {
    ("_cli/_stopping.py", "mutable _listening"): (
        "signal handlers and the standard output are the process's, so is the stack of the"
        " commands told when they fire or close (the innermost is told; one CLI command a process)"
    ),
}
"""The reviewed exceptions: (module, finding) -> the reason. Keep it tiny."""


def _name_of(node: ast.expr) -> str | None:
    """The last identifier of a name or attribute chain (``a.b.c`` -> ``c``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_mutable(value: ast.expr | None) -> bool:
    if isinstance(value, MUTABLE_NODES):
        return True
    return isinstance(value, ast.Call) and _name_of(value.func) in MUTABLE_CALLS


def _read_only(annotation: ast.expr) -> bool:
    """``Final[Mapping[...]]`` (or ``Sequence``, ``AbstractSet``): mypy refuses any change."""
    if not (isinstance(annotation, ast.Subscript) and _name_of(annotation.value) == "Final"):
        return False
    inner = annotation.slice
    base = inner.value if isinstance(inner, ast.Subscript) else inner
    return _name_of(base) in READ_ONLY_TYPES


def _shared_bindings(tree: ast.Module) -> list[str]:
    """Module- and class-level bindings of mutable containers, as ``line: target``."""
    found = []

    def scan(body: list[ast.stmt]) -> None:
        for statement in body:
            if isinstance(statement, ast.ClassDef):
                scan(statement.body)
            elif isinstance(statement, ast.If | ast.Try | ast.With):
                scan(statement.body)
                scan(getattr(statement, "orelse", []))
                scan(getattr(statement, "finalbody", []))
                for handler in getattr(statement, "handlers", []):
                    scan(handler.body)
            elif isinstance(statement, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = (
                    statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                )
                names = ", ".join(ast.unparse(target) for target in targets)
                read_only = isinstance(statement, ast.AnnAssign) and _read_only(
                    statement.annotation
                )
                if _is_mutable(statement.value) and names != "__all__" and not read_only:
                    found.append(f"mutable {names}")

    scan(tree.body)
    return found


def _refers_to(node: ast.AST, bound: str) -> bool:
    """Whether ``node`` mentions the name or attribute ``bound``."""
    return any(_name_of(inner) == bound for inner in ast.walk(node) if isinstance(inner, ast.expr))


def _owned_in(scope: ast.AST, bound: str) -> bool:
    """Whether ``scope`` awaits, cancels or waits for what is bound to ``bound``.

    A loop over it counts through its loop variable (``for t in tasks: t.cancel()``).
    """
    names = {bound}
    for node in ast.walk(scope):
        if isinstance(node, ast.For) and _refers_to(node.iter, bound):
            names.update(t.id for t in ast.walk(node.target) if isinstance(t, ast.Name))
        if isinstance(node, ast.Assign):  # taken out first: ``task, self._task = self._task, None``
            names.update(_aliases(node, bound))
    for node in ast.walk(scope):
        for name in names:
            if isinstance(node, ast.Await) and _refers_to(node.value, name):
                return True
            if isinstance(node, ast.Call):
                func = node.func
                if (
                    isinstance(func, ast.Attribute)
                    and func.attr == "cancel"
                    and _refers_to(func.value, name)
                ):
                    return True
                if _name_of(func) in AWAITERS and any(_refers_to(arg, name) for arg in node.args):
                    return True
    return False


def _aliases(assign: ast.Assign, bound: str) -> set[str]:
    """Names ``assign`` binds to what ``bound`` held (``t, self.t = self.t, None``)."""
    found = set()
    for target in assign.targets:
        pairs: list[tuple[ast.expr, ast.expr]] = [(target, assign.value)]
        if isinstance(target, ast.Tuple) and isinstance(assign.value, ast.Tuple):
            pairs = list(zip(target.elts, assign.value.elts, strict=False))
        for name, value in pairs:
            if isinstance(name, ast.Name) and _refers_to(value, bound) and _name_of(value) == bound:
                found.add(name.id)
    return found


def _binding_of(parents: dict[ast.AST, ast.AST], call: ast.Call) -> tuple[str, bool] | None:
    """What the task made by ``call`` is bound to: (name, is a ``self`` attribute)."""
    child: ast.AST = call
    parent = parents.get(call)
    while parent is not None:
        if isinstance(parent, ast.Assign | ast.AnnAssign):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            for target in targets:
                if isinstance(target, ast.Subscript):
                    target = target.value  # noqa: PLW2901 - a task kept in a table of tasks
                if isinstance(target, ast.Name):
                    return target.id, False
                if isinstance(target, ast.Attribute):  # kept by an object: its class owns it
                    return target.attr, True
            return None
        if isinstance(parent, ast.Subscript) and child is parent.slice:
            child, parent = parent, parents.get(parent)  # the task as the key of a table
            continue
        if isinstance(parent, ast.Call) and child in parent.args:
            func = parent.func
            if isinstance(func, ast.Attribute) and func.attr in {"add", "append"}:
                bound = func.value
                if isinstance(bound, ast.Attribute) and _name_of(bound.value) == "self":
                    return bound.attr, True
                if isinstance(bound, ast.Name):
                    return bound.id, False
            return None
        return None
    return None


def _unowned_tasks(tree: ast.Module) -> list[str]:
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _name_of(node.func) in SPAWNS):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and (_name_of(func.value) or "").endswith("group"):
            continue  # a task group owns it
        binding = _binding_of(parents, node)
        if binding is not None:
            name, on_self = binding
            scope_type = ast.ClassDef if on_self else ast.FunctionDef | ast.AsyncFunctionDef
            scope: ast.AST | None = parents.get(node)
            while scope is not None and not isinstance(scope, scope_type):
                scope = parents.get(scope)
            # A local may be awaited or cancelled from the function that encloses it too.
            while not on_self and scope is not None:
                outer = parents.get(scope)
                while outer is not None and not isinstance(outer, scope_type):
                    outer = parents.get(outer)
                if outer is None:
                    break
                scope = outer
            if scope is not None and _owned_in(scope, name):
                continue
        found.append(f"unowned {ast.unparse(func)}() on line {node.lineno}")
    return found


def _globals(tree: ast.Module) -> list[str]:
    return [
        f"global {', '.join(node.names)}" for node in ast.walk(tree) if isinstance(node, ast.Global)
    ]


@functools.cache  # the tree of src/ is read once for the tests of this module
def findings() -> dict[tuple[str, str], None]:
    """Every finding in ``src/treadle``, as (module, what) pairs."""
    found: dict[tuple[str, str], None] = {}
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        module = path.relative_to(SRC).as_posix()
        for what in [*_shared_bindings(tree), *_globals(tree), *_unowned_tasks(tree)]:
            found[module, what.split(" on line ")[0]] = None
    return found


def test_no_process_state_and_no_unowned_task_in_src() -> None:
    unexplained = [
        f"{module}: {what}" for module, what in findings() if (module, what) not in ALLOWED
    ]
    assert not unexplained, "\n".join(unexplained)


def test_every_allowed_finding_is_still_there() -> None:
    stale = [f"{module}: {what}" for module, what in ALLOWED if (module, what) not in findings()]
    assert not stale, "no longer found, drop from ALLOWED:\n" + "\n".join(stale)


def test_the_rules_catch_what_they_are_about() -> None:
    caught = ast.parse(
        "import asyncio, weakref\n"
        "TABLE = {}\n"
        "CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()\n"
        "NAMES: list[str] = ['a']\n"
        "class C:\n"
        "    seen = set()\n"
        "def f():\n"
        "    global TABLE\n"
        "    asyncio.get_running_loop().create_task(g())\n"
        "    kept = asyncio.ensure_future(g())\n"
    )
    assert _shared_bindings(caught) == [
        "mutable TABLE",
        "mutable CACHE",
        "mutable NAMES",
        "mutable seen",
    ]
    assert _globals(caught) == ["global TABLE"]
    assert len(_unowned_tasks(caught)) == 2
    fine = ast.parse(
        "import asyncio, types\n"
        "TABLE = types.MappingProxyType({})\n"
        "NAMES = ('a', 'b')\n"
        "SCHEMA: Final[Mapping[str, Any]] = {'type': 'string'}\n"
        "async def f(group):\n"
        "    group.create_task(g())\n"
        "    task = asyncio.ensure_future(g())\n"
        "    def stop():\n"
        "        task.cancel()\n"
        "    await task\n"
        "class C:\n"
        "    def start(self):\n"
        "        self._task = asyncio.create_task(g())\n"
        "    async def stop(self):\n"
        "        self._task.cancel()\n"
    )
    assert (_shared_bindings(fine), _globals(fine), _unowned_tasks(fine)) == ([], [], [])

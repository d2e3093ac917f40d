"""One door (issue 29): no module but ``treadle._workflow._actions`` takes an action on a run.

Every action that changes a run from outside it (an answer, a message, a
cancel, a pause, an unpause, a delete, a prune, a migration, a queued
start) is a store write that must come with its actor's check and record:
the door makes all of them. This reads every module of the package and
names each call of such a store write made anywhere else, so a door added
later (a route, a command, a client method) cannot skip the check.
"""

from __future__ import annotations

import ast
from pathlib import Path

import treadle

PACKAGE = Path(treadle.__file__).parent

ACTIONS = frozenset({"deliver", "cancel", "pause", "unpause", "delete_run", "prune", "migrate_run"})
"""The store's writes that are actions on a run (``Store``'s methods of these names)."""

QUEUE = frozenset({"enqueue_run"})
"""The run queue's write that starts a run (``_stores._postgres_queue``)."""

ALLOWED = {
    "_workflow/_actions.py": "the door itself",
    "_checkpoints/_inbox.py": "a request's timeout, decided by its owner as the timer",
    "_testing/_replay.py": "a replay into a scratch MemoryStore of its own",
}
"""Modules that may make these writes besides the stores themselves, and why."""


def _is_store(receiver: ast.expr) -> bool:
    """Whether a call's receiver names a store (``store``, ``self.store``, ``store_for(...)``)."""
    text = ast.unparse(receiver)
    last = text.rsplit(".", 1)[-1]
    return "store" in last.lower() or last in {"chosen", "memory", "s"}


def door_breaches(source: str, where: str) -> list[str]:
    """Each call in ``source`` of a store's action write: ``where:line: call``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ACTIONS and _is_store(func.value):
            found.append(f"{where}:{node.lineno}: {ast.unparse(func)}(...)")
        named = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if named in QUEUE:
            found.append(f"{where}:{node.lineno}: {named}(...)")
    return found


def test_no_module_but_the_door_takes_an_action_on_a_run() -> None:
    breaches = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        if where.startswith("_stores/") or where in ALLOWED:
            continue
        breaches += door_breaches(path.read_text(), where)
    assert breaches == [], "store actions outside the door:\n" + "\n".join(breaches)


def test_the_check_finds_a_route_that_delivers_on_its_own() -> None:
    route = (
        "async def send(served, run_id, payload):\n"
        "    await served.store.deliver(run_id, [('message', None, payload)])\n"
        "    await store.cancel(run_id)\n"
        "    await enqueue_run(store, run_id, 'w', b'')\n"
        "    task.cancel()\n"
    )
    assert door_breaches(route, "route.py") == [
        "route.py:2: served.store.deliver(...)",
        "route.py:3: store.cancel(...)",
        "route.py:4: enqueue_run(...)",
    ]

"""The executors a builder has met: by id, in rank order, each with how a run gets its own.

Executors may be named three ways wherever the builder takes one: the
instance (shared by every run), its id (a string, resolved at ``build()``),
or a factory (an ``Executor`` subclass or any zero-argument callable that
returns an executor; each run gets a fresh instance). A built workflow
named where an executor may be is a sub-workflow, one executor per workflow
object. An executor's rank, the tie-breaker of every ordering guarantee, is
the order in which the builder first met it, the start executor first.

A mistake (a factory that raises, two executors with one id) is added to
the builder's problems, reported whole by ``build()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from treadle._engine._pool import ExecutorNode
from treadle._engine._subworkflow import SubWorkflow
from treadle._graph._executor import Executor
from treadle._graph._function_executor import FunctionExecutor
from treadle._workflow._workflow_graph import WorkflowGraph

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from treadle._graph._remote import RemotePool


class Entry:
    """An executor met by the builder: the instance its handlers are read from, and its factory."""

    __slots__ = ("factory", "prototype")

    def __init__(self, prototype: Executor, factory: Callable[[], Executor] | None) -> None:
        self.prototype = prototype
        self.factory = factory


class ExecutorSet:
    """The builder's executors, registered as it meets them; problems go to ``problems``."""

    __slots__ = ("_entries", "_problems", "_subworkflows", "stand_ins")

    def __init__(self, problems: list[str]) -> None:
        self._problems = problems
        self._entries: dict[str, Entry] = {}
        self._subworkflows: dict[int, SubWorkflow] = {}  # by the workflow object's identity
        # The ids given to refs that were no executor (a problem each already): the graph's
        # checks skip them, and only them, rather than report each again as unknown.
        self.stand_ins: set[str] = set()

    @property
    def entries(self) -> Mapping[str, Entry]:
        """Every executor met, by id, in rank order."""
        return self._entries

    def resolve(self, ref: object, where: str) -> str:
        """Register ``ref`` if new; return its id (unknown strings stay as is)."""
        if isinstance(ref, str):
            return ref
        if isinstance(ref, Executor):
            return self._register(ref, None, where)
        if isinstance(ref, WorkflowGraph):  # a built workflow: a sub-workflow
            return self._register(self._subworkflow(ref), None, where)
        if callable(ref):
            try:
                made = ref()
            except Exception as error:  # noqa: BLE001 - reported with every other problem
                self._problems.append(
                    f"{where}: the factory {_name_of(ref)} raised {type(error).__name__}: {error}"
                )
                return self._stand_in(f"<{_name_of(ref)}>")
            if not isinstance(made, Executor):
                self._problems.append(
                    f"{where}: the factory {_name_of(ref)} returned {made!r}, not an Executor"
                )
                return self._stand_in(f"<{_name_of(ref)}>")
            return self._register(made, ref, where)
        self._problems.append(f"{where}: {ref!r} is not an executor, an executor id or a factory")
        return self._stand_in(f"<{ref!r}>")

    def _stand_in(self, name: str) -> str:
        self.stand_ins.add(name)
        return name

    def add_workflow(
        self, workflow: WorkflowGraph, id_: str | None, outputs: tuple[type, ...] | None
    ) -> None:
        """Register ``workflow`` as a sub-workflow with this id and these outputs.

        Every later mention of the same workflow object means this executor.
        """
        made = SubWorkflow(workflow, id=id_, outputs=outputs)
        self._subworkflows[id(workflow)] = made
        self._register(made, None, "add_workflow")

    def nodes(self, pool: RemotePool | None) -> list[ExecutorNode]:
        """The workflow's executors, ranked, those that can on ``pool``."""
        return [
            ExecutorNode(
                id=eid,
                rank=rank,
                prototype=_pooled(entry.prototype, pool),
                factory=_pooled_factory(entry.factory, pool),
            )
            for rank, (eid, entry) in enumerate(self._entries.items())
        ]

    def _subworkflow(self, workflow: WorkflowGraph) -> SubWorkflow:
        """The executor a workflow object stands for here: one per object."""
        made = self._subworkflows.get(id(workflow))
        if made is None:
            made = self._subworkflows[id(workflow)] = SubWorkflow(workflow)
        return made

    def _register(
        self, prototype: Executor, factory: Callable[[], Executor] | None, where: str
    ) -> str:
        if not hasattr(prototype, "id"):  # its class's __init__ never called Executor's
            self._problems.append(
                f"{where}: {type(prototype).__qualname__} never ran Executor.__init__: "
                f"call super().__init__(...) in its __init__"
            )
            return self._stand_in(f"<{type(prototype).__qualname__}>")
        existing = self._entries.get(prototype.id)
        if existing is None:
            self._entries[prototype.id] = Entry(prototype, factory)
        elif factory is not None and existing.factory is not factory:
            self._problems.append(
                f"{where}: duplicate executor id {prototype.id!r} (two different factories make it)"
            )
        elif factory is None and existing.prototype is not prototype:
            self._problems.append(
                f"{where}: duplicate executor id {prototype.id!r} (two different instances)"
            )
        return prototype.id


def _pooled(executor: Executor, pool: RemotePool | None) -> Executor:
    """``executor`` on the workflow's pool, if it is one that runs there.

    Those are function executors with a plain ``def`` handler that name no
    pool of their own and are not pinned to the loop; the rest stay as they are.
    """
    if (
        pool is None
        or not isinstance(executor, FunctionExecutor)
        or executor.pool is not None
        or executor.pool_problem(pool) is not None
    ):
        return executor
    return executor.on_pool(pool)


def _pooled_factory(
    factory: Callable[[], Executor] | None, pool: RemotePool | None
) -> Callable[[], Executor] | None:
    """A factory whose executors run on the workflow's pool where they can."""
    if factory is None or pool is None:
        return factory
    return lambda: _pooled(factory(), pool)


def _name_of(ref: object) -> str:
    return getattr(ref, "__qualname__", None) or repr(ref)

"""Sub-workflows in the builder: ``add_workflow``, and a workflow object as an executor.

A built workflow given to the builder becomes one :class:`SubWorkflow`
executor; the builder keeps one per workflow object, so every mention of
the same object (``start=``, an edge, ``add_workflow``) means the same
executor, with the id it was first given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

from treadle._engine._subworkflow import SubWorkflow

if TYPE_CHECKING:
    from treadle._graph._executor import Executor
    from treadle._workflow._workflow import Workflow
    from treadle._workflow._workflow_graph import WorkflowGraph


def _identity(workflow: WorkflowGraph) -> int:
    """What tells workflow objects apart (``add_workflow`` shadows the built-in ``id``)."""
    return id(workflow)


class Composing:
    """The builder's ``add_workflow`` (a base of ``WorkflowBuilder``)."""

    __slots__ = ()

    _subworkflows: dict[int, SubWorkflow]  # by the workflow object's identity

    if TYPE_CHECKING:

        def _register(self, prototype: Executor, factory: None, where: str) -> str:
            """Register an executor instance (the builder's own)."""
            ...

    def add_workflow(
        self,
        workflow: Workflow,
        *,
        id: str | None = None,  # noqa: A002 - `id` is the contract's name
        outputs: type | tuple[type, ...] | None = None,
    ) -> Self:
        """Add a built workflow as one executor: a sub-workflow.

        It takes what its start executor takes, runs its own supersteps
        inside one invocation, and sends what it outputs along its edges
        here (with no edge from it, its outputs are this workflow's). Its
        requests, timers, progress and events are this run's, named by
        their path (``review/approve``); it is checkpointed with this run.
        Mentioning the workflow object elsewhere in the builder (an edge,
        ``start=``) means this same executor.

        Args:
            workflow: The workflow to run.
            id: Its id here (default: the workflow's name).
            outputs: The classes it outputs, when you want them checked
                against the edges leaving it (at build time) and each
                output against them (at run time).
        """
        chosen = (outputs,) if isinstance(outputs, type) else outputs
        made = SubWorkflow(workflow, id=id, outputs=chosen)
        self._subworkflows[_identity(workflow)] = made
        self._register(made, None, "add_workflow")
        return self

    def _subworkflow(self, workflow: WorkflowGraph) -> SubWorkflow:
        """The executor a workflow object stands for here: one per object."""
        made = self._subworkflows.get(_identity(workflow))
        if made is None:
            made = self._subworkflows[_identity(workflow)] = SubWorkflow(workflow)
        return made

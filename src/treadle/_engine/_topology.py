"""What the engine needs to know of the graph it runs, as a port.

The engine sits below the ``Workflow`` API, so it cannot name ``Workflow``;
it names this Protocol instead, and ``WorkflowGraph`` satisfies it. The
checkpoint layer's graph description reads the same port.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from treadle._graph._render import Drawable

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from treadle._engine._routing import Router
    from treadle._engine._state import StateKey
    from treadle._engine._waits import Waiting
    from treadle._graph._executor import Executor
    from treadle._values._serialization import Serializer


class Topology(Drawable, Protocol):
    """A validated graph: its executors, edges, ranks, state keys and router.

    A ``Drawable`` (name, start, executors, edges) with what running it needs.
    """

    @property
    def ranks(self) -> Mapping[str, int]:
        """Executor id → rank (its position in the definition)."""
        ...

    @property
    def state_specs(self) -> Mapping[str, StateKey]:
        """The declared state keys."""
        ...

    @property
    def router(self) -> Router:
        """The graph's compiled routes."""
        ...

    @property
    def serializer(self) -> Serializer:
        """How the workflow's values become bytes: its checkpoints, and what crosses to a pool."""
        ...

    @property
    def origin(self) -> str | None:
        """Where the workflow was imported from (``module:attribute``), if known."""
        ...

    def prototype(self, executor_id: str) -> Executor:
        """The executor definition behind an id (not a run's own instance)."""
        ...

    def loop_members(self, executor_ids: Iterator[str] | Mapping[str, Any]) -> tuple[str, ...]:
        """Which of these executors sit on a cycle of the graph."""
        ...

    def response_type_name(self, cls: type) -> str:
        """The name an answer type is stored under."""
        ...

    def validate_response(self, request_id: str, type_name: str | None, value: Any) -> Any:
        """An answer checked against the type its request asked for."""
        ...

    def check_answer(self, request_id: str, waiting: Waiting, value: Any) -> Any:
        """An answer checked against its type and by the executor that asked."""
        ...

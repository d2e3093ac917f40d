"""The start-policy flags of ``treadle run`` and ``treadle start`` (``docs/flow-control.md``).

The flags make one frozen
:class:`~treadle._operations._starting.StartChoice`: flags left out are the
workflow's own policy, and ``--dedup-id`` is the start's alone. A command
decorated with :func:`with_start_flags` receives it as ``choice``.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated

import typer

from treadle._cli._flags import with_flags
from treadle._operations._starting import StartChoice

if TYPE_CHECKING:
    from collections.abc import Callable

DedupOption = Annotated[
    str | None,
    typer.Option(
        "--dedup-id",
        help="A second start with this id starts nothing: it is told the first run.",
    ),
]
KeyOption = Annotated[
    str | None,
    typer.Option(
        "--key", help="The start policy's key for this input (with --singleton, --debounce)."
    ),
]
SingletonOption = Annotated[
    bool,
    typer.Option(
        "--singleton", help="One run per key at a time: this start waits (or is refused)."
    ),
]
QueueConcurrencyOption = Annotated[
    int | None,
    typer.Option("--queue-concurrency", help="Most runs of the workflow at once; others wait."),
]
WhenBusyOption = Annotated[
    str | None,
    typer.Option("--when-busy", help="queue (default) or refuse, when there is no room."),
]
DebounceOption = Annotated[
    float | None,
    typer.Option(
        "--debounce", help="Seconds to wait for a later start of the key (its input wins)."
    ),
]


START_OPTIONS = MappingProxyType(
    {
        "dedup_id": DedupOption,
        "key": KeyOption,
        "singleton": SingletonOption,
        "queue_concurrency": QueueConcurrencyOption,
        "when_busy": WhenBusyOption,
        "debounce": DebounceOption,
    }
)
"""The option each field of ``StartChoice`` is parsed from."""


def with_start_flags(command: Callable[..., None]) -> Callable[..., None]:
    """``command``, taking the start-policy flags as one ``choice: StartChoice``."""
    return with_flags(command, StartChoice, "choice", START_OPTIONS)

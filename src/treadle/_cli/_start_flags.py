"""The start-policy flags of ``treadle run`` and ``treadle start`` (``docs/flow-control.md``).

The flags make one frozen
:class:`~treadle._operations._starting.StartChoice`: flags left out are the
workflow's own policy, and ``--dedup-id`` is the start's alone.
"""

from __future__ import annotations

from typing import Annotated

import typer

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

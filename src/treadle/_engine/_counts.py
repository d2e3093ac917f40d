"""How many messages each executor has handled: an immutable mapping, O(1) to add a superstep to.

Each committed point holds one (``BarrierState.iterations``), and each
barrier makes the next. Copying a table of every executor at every
barrier would cost a long chain a copy per superstep; a :class:`Counts`
instead holds the superstep it adds and the counts before it, and works
the whole table out only when someone reads it (a checkpoint, a limit, a
result), once: reading keeps the table and lets go of the counts before.
One is never changed as others see it: working the table out changes
only how it is kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from itertools import chain

from treadle._engine._slots import blank as _blank

_update = Counter.update


class Counts(Mapping[str, int]):
    """Executor id → messages handled; never changed once made (see :meth:`added`)."""

    __slots__ = ("before", "known", "step")

    def __init__(
        self,
        table: dict[str, int] | None = None,
        before: Counts | None = None,
        this: Sequence[str] = (),
    ) -> None:
        self.known = table  # the whole table, once worked out
        self.before = before  # until then: the counts before ...
        # ... and the superstep added: the id of the executor that handled each
        # message (a barrier's usual case, one message each: its order as is).
        self.step = this

    def added(self, handled: Sequence[str]) -> Counts:
        """These counts with one superstep's ``handled`` (an executor id per message) added.

        Made without ``Counts(...)``: calling a class with a Python
        ``__init__`` costs a barrier several times what these three slots do.
        """
        counts: Counts = _blank(Counts)
        counts.known = None
        counts.before = self
        counts.step = handled
        return counts

    def _whole(self) -> dict[str, int]:
        table = self.known
        if table is not None:
            return table
        # Walk back (without recursion) to the newest counts worked out already.
        steps: list[Sequence[str]] = []
        node: Counts | None = self
        while node is not None and node.known is None:
            steps.append(node.step)
            node = node.before
        counted: Counter[str] = Counter()
        if node is not None and node.known is not None:
            counted.update(node.known)
        steps.reverse()
        # Counted in C, an id at a time (Counter's own loop), oldest superstep first.
        _update(counted, chain.from_iterable(steps))
        table = dict(counted)  # a Counter answers 0 for an unknown id; a Mapping must not
        # Kept; what it was worked out from goes (unless someone else holds it).
        self.known, self.before, self.step = table, None, ()
        return table

    def changed_since(self, earlier: Counts) -> Sequence[str] | None:
        """The executor ids whose counts may differ from ``earlier``'s, if that is cheap to say.

        Known when these counts were made from ``earlier`` by adding one
        superstep and are not worked out yet (ask before reading them):
        then they are that superstep's ids, repeats and all. ``None``
        otherwise. A checkpoint writes its counts again from the ones
        that changed (see ``_checkpoints/_frame``), not every executor's.
        """
        if self.known is None and self.before is earlier:
            return self.step
        return None

    def table(self) -> dict[str, int]:
        """The whole table at once (a checkpoint copies it), not a key at a time.

        It is kept, not copied: the caller must not change it.
        """
        return self._whole()

    def __getitem__(self, executor_id: str) -> int:
        return self._whole()[executor_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._whole())

    def __len__(self) -> int:
        return len(self._whole())

    def __repr__(self) -> str:
        return f"Counts({self._whole()!r})"


def counts_of(iterations: Mapping[str, int]) -> Counts:
    """``iterations`` as :class:`Counts` (itself, if it is one already)."""
    return iterations if isinstance(iterations, Counts) else Counts(dict(iterations))

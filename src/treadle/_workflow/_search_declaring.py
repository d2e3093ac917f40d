"""Search fields in the builder: ``add_search_field``, checked where it is called.

A search field is a typed value of each run that its commits keep in an
index (see :mod:`treadle._values._search_fields`), so filters find runs
without reading them. Declared on the builder beside the state it reads;
a bad declaration is one more of ``build()``'s problems.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from treadle._values._search_fields import FieldKind, SearchField, SearchFields

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


class SearchDeclaring:
    """The builder's ``add_search_field`` (a base of ``WorkflowBuilder``)."""

    __slots__ = ()

    _problems: list[str]
    _search_fields: list[SearchField]

    def add_search_field(
        self,
        name: str,
        kind: type | str,
        *,
        input: Callable[[Any], Any] | None = None,  # noqa: A002 - the run's input, as users say it
        state: Callable[[Mapping[str, Any]], Any] | None = None,
    ) -> Self:
        """Declare a search field: a typed value of each run, kept in an index filters read.

        Exactly one of ``input`` (a function of the run's input, computed
        once when the run is created) and ``state`` (a function of the
        committed state, computed at every commit; ``None`` unsets the
        field) says where its value comes from. Every commit writes the
        fields in its own transaction, so they never disagree with the
        run. Filters name it ``fields.NAME`` (``treadle runs --where
        'fields.customer == "42"'``; see ``docs/search.md``).

        Args:
            name: Lower-case letters, digits and ``_``.
            kind: ``str``, ``int`` or ``float`` (a number), ``datetime``, ``bool``
                (or ``"text"``, ``"number"``, ``"time"``, ``"bool"``).
            input: The value from the run's input.
            state: The value from the run's committed state (a mapping).
        """
        where = f"add_search_field({name!r})"
        if (input is None) == (state is None):
            self._problems.append(f"{where}: give exactly one of input= and state=")
            return self
        try:
            source, value = ("input", input) if input is not None else ("state", state)
            assert value is not None  # noqa: S101 - one of the two is given, checked above
            field = SearchField(name, FieldKind.of(kind), source, value)
            SearchFields((*self._search_fields, field))
        except (TypeError, ValueError) as problem:
            self._problems.append(f"{where}: {problem}")
            return self
        self._search_fields.append(field)
        return self

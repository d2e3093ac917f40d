"""Search fields as the builder's ``add_search_field`` declares them, checked where it is called.

A search field is a typed value of each run that its commits keep in an
index (see :mod:`treadle._values._search_fields`), so filters find runs
without reading them. Declared on the builder beside the state it reads;
a bad declaration is one more of ``build()``'s problems.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treadle._values._search_fields import FieldKind, SearchField, SearchFields

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence


def search_field(
    name: str,
    kind: type | str,
    input_: Callable[[Any], Any] | None,
    state: Callable[[Mapping[str, Any]], Any] | None,
    declared: Sequence[SearchField],
) -> SearchField:
    """The field ``add_search_field`` declares, beside those ``declared`` already.

    Raises:
        ValueError: naming what is wrong with it (the builder reports it
            with its other problems).
    """
    if (input_ is None) == (state is None):
        msg = "give exactly one of input= and state="
        raise ValueError(msg)
    source, value = ("input", input_) if input_ is not None else ("state", state)
    assert value is not None  # noqa: S101 - one of the two is given, checked above
    try:
        field = SearchField(name, FieldKind.of(kind), source, value)
        SearchFields((*declared, field))
    except TypeError as problem:
        raise ValueError(str(problem)) from problem
    return field

"""Saying which extra is missing, and how to install it, wherever one is met.

The heavy dependencies sit behind extras (``postgres``, ``server``, ``otel``,
``agents``, ``dask``, ``declarative``; see ``pyproject.toml``) and are
imported only by the code that needs them. Where such an import fails, the
user is told in one line which extra that is and the command that installs
it, from a release and from a clone (where ``'treadle[server]'`` would
install the released package instead of the code at hand). Every place that
imports an extra words it through :func:`needs_extra` or
:func:`importing_extra`, so the line is the same everywhere.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator


def needs_extra(what: str, extra: str, error: ImportError) -> str:
    """``what needs the extra extra (why): pip install ...``, one line.

    Args:
        what: What cannot work without it (``treadle serve``, ``treadle.otel``).
        extra: The extra's name in ``pyproject.toml``.
        error: The import that failed (its message says which module).
    """
    return (
        f"{what} needs the {extra} extra ({error}): pip install 'treadle[{extra}]' "
        f"(from a clone of treadle: pip install -e '.[{extra}]')"
    )


@contextlib.contextmanager
def importing_extra(what: str, extra: str) -> Iterator[None]:
    """Imports within that fail raise an ``ImportError`` saying which extra to install.

    Raises:
        ImportError: With the message of :func:`needs_extra`, from the original.
    """
    try:
        yield
    except ImportError as error:
        raise ImportError(needs_extra(what, extra, error), name=error.name) from error

r"""Text a store can keep as it is: UTF-8, which has no place for a lone surrogate.

A Python ``str`` may hold lone surrogates (U+D800 to U+DFFF): bytes decoded
with ``"surrogateescape"`` carry them, so a file name on Linux that is not
UTF-8 does, and so does any message made from one. Values go to a store as
JSON, whose escapes carry them; but names and texts a store keeps as
columns (run and executor ids, a workflow's name, an error, an outcome's
summary, a search field's text) go as UTF-8, which cannot. Such a text
once failed a run's commit after its superstep had run, or its failure's
record, and left the run ``running`` with no owner, to fail the same way
on every resume.

So a name is refused where it enters (:func:`checked_name`), and a text
that only reports something (an error) is kept with each lone surrogate
written as its escape, ``\udcff``, as ``repr`` shows it (:func:`storable`).
"""

from __future__ import annotations

import traceback


def lone_surrogate(text: str) -> int | None:
    """Where ``text`` holds its first lone surrogate; ``None`` when it holds none."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return error.start
    return None


def unstorable(what: str, name: str) -> str | None:
    """Why a store cannot keep ``name`` (``what`` says what it is); ``None``: it can."""
    at = lone_surrogate(name)
    if at is None:
        return None
    return (
        f"{what} {name!r} holds a lone surrogate (U+{ord(name[at]):04X} at position {at}), "
        f"which a store cannot keep: stored text is UTF-8"
    )


def checked_name(what: str, name: str) -> str:
    """``name`` once a store can keep it.

    Raises:
        ValueError: it holds a lone surrogate (the message says where).
    """
    problem = unstorable(what, name)
    if problem is not None:
        raise ValueError(problem)
    return name


def storable(text: str) -> str:
    r"""``text`` with each lone surrogate written as its escape (``\udcff``), else as it is."""
    if lone_surrogate(text) is None:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def message_of(error: BaseException) -> str:
    """``str(error)``, storable; made even when that ``str()`` raises (a user's ``__str__``)."""
    try:
        message = str(error)
    except Exception as failure:  # noqa: BLE001 - what failed is still known by its type
        return f"<str() of the error raised {type(failure).__name__}>"
    return storable(message)


def traceback_of(error: BaseException) -> str:
    """The error's full traceback (with causes), as a run's record keeps it.

    Empty for an error whose message says all there is (``one_line``: a
    definition's condition that failed, whose frames are treadle's own).
    """
    if getattr(error, "one_line", False) is True:
        return ""
    return "".join(traceback.format_exception(error))


def error_text(error: BaseException) -> str:
    """``"Type: message"``, as a run's record keeps an error (see :func:`message_of`)."""
    return f"{type(error).__name__}: {message_of(error)}"

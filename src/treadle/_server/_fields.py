"""Which fields of a value were at fault, for a 422's ``"fields"``.

The checks themselves are the runtime's (answers: ``_engine._answers``,
strictly; inputs: the commands layer's), and they report every field at
fault in one message, ``loc: what is wrong`` after the name of the type,
separated by ``;``. The page shows each next to its field, so the
message is split back into them here; a message in another form is one
field for the whole value (``loc`` ``""``).
"""

from __future__ import annotations

import re

_ANSWER_HEAD = re.compile(r"^request '.*?' expects [^:]+: ", re.DOTALL)
_INPUT_HEAD = re.compile(r"^the input does not fit .*?\(accepts [^)]*\): ", re.DOTALL)
_ALTERNATIVE = re.compile(r"^as [A-Za-z_][\w.<>]*, ")


def fields_of(message: str) -> list[dict[str, str]]:
    """The fields an answer's or input's refusal names, each ``{"loc", "message"}``."""
    for head in (_ANSWER_HEAD, _INPUT_HEAD):
        found = head.match(message)
        if found is not None:
            problems = message[found.end() :]
            break
    else:
        return [{"loc": "", "message": message}]
    # An input may fit one of several types: the problems with the first say enough.
    first = problems.split(" | ")[0]
    first = _ALTERNATIVE.sub("", first)
    fields = []
    for problem in first.split("; "):
        loc, colon, what = problem.partition(": ")
        if not colon or " " in loc:
            fields.append({"loc": "", "message": problem})
        else:
            fields.append({"loc": "" if loc == "value" else loc, "message": what})
    return fields

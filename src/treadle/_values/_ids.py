"""Fresh ids for runs and checkpoints: the time first, so a store's indexes grow at one end.

A run's id leads most of a SQL store's indexes (the runs' primary key, the
checkpoints', events' and audit's by run), and a checkpoint's id keys the
checkpoints. Random ids land anywhere in those B-trees: the runs of one
group commit then dirty a page each per index, every one written to the
log whole, and pages split half full. Ids that start with the time they
were made go in at the right-hand end, where runs made together share a few
pages, which fill up. Parking 20,000 runs on SQLite took 15-30% less CPU
and 4% fewer bytes a run than with random ids, and the gap grows with the
store (``docs/durability.md``).

Both are UUID version 7 (RFC 9562) as 32 hex digits, like ``uuid4().hex``:
48 bits of Unix time in milliseconds, then 74 random bits. They stay
unique, are not secrets (they name runs, and tell when they were made, as
a run's record does anyway), and sort in the order they were made. The
price: ids made in the same minute share their first ten digits, so a
prefix that names one run or checkpoint is about twelve digits long, not
six.

Their random bits, and those of every other id treadle makes (pieces,
owners), come from treadle's own generator (:func:`random_bits`), seeded
by the OS and again in a forked child: never from the ``random`` module's,
which is the program's. A step that calls ``random.seed(0)`` for
reproducible sampling, or two processes seeded alike (a script's
``random.seed(42)``, a test plugin's), would otherwise make the same ids
again: a checkpoint "taken" in the same millisecond, and a piece of state
that an earlier one already stored, which the store keeps (pieces are
written once) and the later checkpoint then restores: another
superstep's, or another run's, value. The generator is not a secret's
(Mersenne Twister, like ``random``): ids need to be unique, not
unguessable, and a system call per id lets go of the GIL (see
:func:`new_checkpoint_id`).
"""

from __future__ import annotations

import os
import random
import re
import time

# Per process by nature: one generator, reseeded in a forked child (which would
# otherwise repeat its parent's ids).
_GENERATOR = random.Random()  # noqa: S311 - unique ids, not secrets (module docstring)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_GENERATOR.seed)


def random_bits(count: int) -> int:
    """``count`` random bits from treadle's own generator: no ``random.seed`` moves it."""
    return _GENERATOR.getrandbits(count)


_VERSION_7 = 7 << 76
_VARIANT = 0b10 << 62  # RFC 9562's
_LOW_62 = (1 << 62) - 1


def _made_now(bits: int) -> str:
    """The id of this millisecond with 74 of ``bits``."""
    millis = time.time_ns() // 1_000_000
    value = (millis << 80) | _VERSION_7 | (bits >> 62) << 64 | _VARIANT | (bits & _LOW_62)
    return f"{value:032x}"


def new_run_id() -> str:
    """A fresh run id: a UUID version 7 as 32 hex digits."""
    return _made_now(_GENERATOR.getrandbits(74))


def new_checkpoint_id() -> str:
    """A fresh checkpoint id: a UUID version 7 as 32 hex digits.

    Made every superstep (and a run id with every run), so their random
    bits come from a generator rather than ``os.urandom``: a system call
    lets go of the GIL, and while a store's thread is busy, taking it back
    costs the event loop tens of microseconds (seen in profiles of many runs
    waking at once, and of many runs starting at once).
    """
    return _made_now(_GENERATOR.getrandbits(74))


RUN_ID_RULE = (
    "1 to 200 letters, digits or . _ ~ : @ + -, not starting with - and not . or .."
    " (it goes in URLs and commands)"
)
"""What a run id given by its caller may hold, at every door (Python, the CLI, the API).

``.`` and ``..`` are path segments a browser or an HTTP client resolves away
(``/api/runs/../cancel`` is ``/api/cancel``), and ``-x`` reads as an option
on a command line: no door could name such a run.
"""

_RUN_ID = re.compile(r"(?!-)(?!\.\.?$)[A-Za-z0-9._~:@+-]{1,200}")
_SHOWN = 60  # characters of a refused id its message quotes


def checked_run_id(run_id: object) -> str:
    """``run_id`` once every door can name it: in a URL's path, a command, a store's column.

    Raises:
        TypeError: it is not a ``str``.
        ValueError: it breaks :data:`RUN_ID_RULE` (the message says so).
    """
    if not isinstance(run_id, str):
        msg = f"run_id must be a str, got {type(run_id).__name__}: {run_id!r}"
        raise TypeError(msg)
    if _RUN_ID.fullmatch(run_id) is None:
        shown = repr(run_id[:_SHOWN]) + (
            f"... ({len(run_id)} chars)" if len(run_id) > _SHOWN else ""
        )
        msg = f"run_id {shown} must be {RUN_ID_RULE}"
        raise ValueError(msg)
    return run_id

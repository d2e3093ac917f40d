"""How a SQLite store keeps a large row of a run's event log: deflated against a dictionary.

A row's events are JSON text (``[[superstep, kind, executor_id, at, data],
...]``, or SQLite's shorter layout 2 of the same: see
:mod:`treadle._stores._event_rows`): a commit's few events, and now and then a
large one (an output, a traceback, a request's payload). Deflate against a
preset dictionary of the log's own words (zlib's ``zdict``: kinds, data
keys, statuses, an actor's fields) brings any row to about a quarter of its
text, but its cost is mostly fixed, ~57,000 instructions for a row of 400
bytes: packing every row took 10% more CPU per durable superstep to save
300 bytes. So rows of :data:`PACK_FROM` characters or more are packed, where
the bytes saved are many and the cost is small beside what built them.

A packed row is bytes, :data:`PACKED_V1` and then raw deflate of its text; a
row of text is the text (short rows, rows written before packing, and those
the store writes in SQL: status changes and actions' events). The writer
packs a row before its INSERT (:func:`pack_events`; an SQL function did
before, ``treadle_pack_events``, a call from SQLite back into Python for
every row). :func:`events_text` reads every kind of row as the
log's JSON; the SQLite store's outbox trigger reads rows through it, as the
SQL function :data:`TEXT_FUNCTION`, which every writer connection defines
(:func:`define_functions`).

The dictionary is part of the file format: a row packed with it can only be
read with it. Never edit :data:`_DICTIONARY_V1`; a better one is a new
leading byte, read beside the old.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

from treadle._stores._event_rows import is_layout_2, log_text

if TYPE_CHECKING:
    import sqlite3

PACKED_V1 = 1
"""The first byte of a row packed with :data:`_DICTIONARY_V1`."""

TEXT_FUNCTION = "treadle_events_text"

PACK_FROM = 1024
"""The length from which a row is packed; shorter rows stay text."""

# Least common first: deflate reaches the end of the dictionary in the
# fewest bits, so the words of every superstep come last.
_DICTIONARY_V1 = (
    b'"run_migrated",null,{"from_version":,"to_version":,"migrations":[],"renamed":{},'
    b'"dropped":[],"state_keys":[],"actor":'
    b'"run_forked","run_paused","run_unpaused","run_resumed","run_cancelled","run_pruned",'
    b'"message_sent","request_timed_out","request_answered",null,{"request_id":"","answer":'
    b'"request",{"request_id":"","payload":,"response_type":"'
    b'"executor_failed",{"attempt":1,"retrying":false,"routed_to":null,"error":{"type":"",'
    b'"message":"","traceback":"Traceback (most recent call last):\\n  File \\"'
    b'"progress","custom","output",{"value":'
    b'"status_changed",null,{"status":"completed","error":null}],'
    b'"status_changed",null,{"status":"failed","error":'
    b'"run_started",null,{"resumed":true,"from_status":"waiting","by":"'
    b'"run_created",null,{"actor":{"kind":"user","name":"","label":"user:","door":"api",'
    b'"role":"operator","groups":[]}'
    b'"actor":{"kind":"python","name":"","label":"python:","door":"python","role":"admin",'
    b'"groups":[]},"audit":{"seq":,"hash":"'
    b'[0,"run_started",null,{}],[0,"checkpoint_saved",null,{"checkpoint_id":"'
    b'"status_changed",null,{"status":"running","error":null}],'
    b'"executor_suspended",{"position":0,"wait":"timer","key":"tim-'
    b'"status_changed",null,{"status":"waiting","error":null}]]'
    b'[1,"superstep_started",null,{"executor_ids":["'
    b'"],[1,"executor_invoked","'
    b'",{"position":0,"attempt":1}],[1,"executor_completed","'
    b'",{"position":0}],[1,"superstep_completed",null,{}],'
    b'[1,"checkpoint_saved",null,{"checkpoint_id":"'
)

# A 2 KiB window holds the dictionary and a row's first 600 bytes, and a
# small hash table keeps copying the primed compressor cheap (setting the
# dictionary afresh costs more than deflating a row); level 4 finds the
# dictionary's words as well as level 9 does here, in a third of the time.
_WINDOW_BITS = -11  # raw deflate: no zlib header or checksum (SQLite pages have neither need)
_PRIMED = zlib.compressobj(
    4, zlib.DEFLATED, _WINDOW_BITS, 4, zlib.Z_DEFAULT_STRATEGY, _DICTIONARY_V1
)


def pack_events(text: str) -> str | bytes:
    """The row for ``text`` (a row's events as text): packed from :data:`PACK_FROM` characters."""
    if len(text) < PACK_FROM:
        return text
    packer = _PRIMED.copy()
    return bytes((PACKED_V1,)) + packer.compress(text.encode()) + packer.flush()


def events_text(row: str | bytes) -> str:
    """A row's events as the log's JSON text, whether packed, in layout 2 or written as it.

    Raises:
        ValueError: ``row`` is bytes that are not a packed row, or a row of
            layout 2 that does not read (a bad disk, a hand edit); the
            caller names the row.
    """
    text = unpacked(row)
    return log_text(text) if is_layout_2(text) else text


def unpacked(row: str | bytes) -> str:
    """A row's text, inflated if it is packed: the log's JSON, or layout 2 (``_event_rows``).

    Raises:
        ValueError: ``row`` is bytes that are not a packed row.
    """
    if isinstance(row, str):
        return row
    if not row or row[0] != PACKED_V1:
        raise ValueError(f"a packed row starts with {PACKED_V1}, not {row[:1]!r}")
    unpacker = zlib.decompressobj(_WINDOW_BITS, _DICTIONARY_V1)
    try:
        text = unpacker.decompress(row[1:]) + unpacker.flush()
    except zlib.error as error:
        raise ValueError(f"a packed row does not inflate: {error}") from None
    if not unpacker.eof:
        raise ValueError("a packed row ends early")
    return text.decode()


def define_functions(connection: sqlite3.Connection) -> None:
    """Give ``connection`` the SQL function that reads every kind of row as the log's JSON."""
    connection.create_function(TEXT_FUNCTION, 1, events_text, deterministic=True)

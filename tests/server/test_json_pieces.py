"""A large body is encoded in pieces, byte for byte what one piece would give; a small inline.

``json`` and pydantic encode a value whole in native code, holding the GIL
for as long as it takes: a 4 MB run's body encoded whole on a worker
thread still held the event loop's thread for most of it. In pieces of
about ``INLINE_WEIGHT``, the GIL passes between them. These count the
pieces and compare the bytes; no clock is read.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math

import pytest
from hypothesis import given, settings

from strategies import values
from treadle._server import _json
from treadle._server._json import INLINE_WEIGHT, JsonResponse, encode_in_pieces

ROWS = 20_000  # about 1 MB of JSON


def _pieces_written(value, monkeypatch) -> tuple[bytes, list[int]]:
    written: list[int] = []
    dumps = _json._dumps

    def counted(data):
        text = dumps(data)
        written.append(len(text))
        return text

    monkeypatch.setattr(_json, "_dumps", counted)
    return encode_in_pieces(value), written


def test_a_large_body_is_encoded_in_pieces_as_one_would_be(monkeypatch):
    rows = [{"id": f"BIG-{i}", "name": "x" * 20, "values": [i, i / 2]} for i in range(ROWS)]
    detail = {"run": {"run_id": "r"}, "outputs": [ROWS], "state": {"rows": rows}, "graph": None}
    whole = JsonResponse(detail).body
    body, written = _pieces_written(detail, monkeypatch)
    assert body == whole
    assert len(whole) > 50 * INLINE_WEIGHT
    assert max(written) <= 4 * INLINE_WEIGHT, f"a piece of {max(written)} characters"
    assert len(written) > 20


@dataclasses.dataclass(frozen=True)
class Row:
    name: str
    at: dt.date


@pytest.mark.parametrize(
    "value",
    [
        {"n": math.nan, "inf": [math.inf] * 5000, 5: (1, 2), "when": dt.date(2024, 1, 2)},
        {"rows": [Row(f"r{i}", dt.date(2024, 1, 1)) for i in range(5000)], "ok": True},
        [[i, {"k": "é" * 10, 7: None}] for i in range(8000)],
        {"big": "y" * 100_000, "tail": list(range(10_000)), "empty": {}, "none": []},
        {"deep": [[[[[[[[["z" * 40] * 300] * 3]]]]]]], "last": 1},
        {f"key{i}": {"x": i, "s": "v" * 30} for i in range(3000)},
    ],
    ids=["nan-keys-times", "dataclasses", "lists", "strings", "deep", "many-keys"],
)
def test_pieces_write_what_one_piece_would(value, monkeypatch):
    body, written = _pieces_written(value, monkeypatch)
    assert body == JsonResponse(value).body
    assert len(written) > 1  # it was split


async def test_a_small_body_is_encoded_on_the_loop(monkeypatch):
    # A hop to a thread and back costs more than encoding a small body.
    def no_pieces(value):
        raise AssertionError("a small body went to a worker thread, in pieces")

    monkeypatch.setattr(_json, "encode_in_pieces", no_pieces)
    response = await _json.json_response({"run": {"run_id": "r", "status": "completed"}})
    assert response.body == b'{"run":{"run_id":"r","status":"completed"}}'


@given(value=values)
@settings(max_examples=300, deadline=None)
def test_any_value_in_pieces_is_the_bytes_of_one_piece(value):
    # Pieces of a few characters: every dict, list and tuple the value holds is split.
    whole = JsonResponse(value).body
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(_json, "INLINE_WEIGHT", 4)
        assert encode_in_pieces(value) == whole

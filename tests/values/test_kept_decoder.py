"""``JsonSerializer.loads`` keeps one decoder: it reads bytes as ``json.loads`` with its hook does.

``json.loads`` with an ``object_hook`` makes a decoder per call, and every
woken run decodes its checkpoint's frame; the serializer makes its decoder
once and takes ``json.loads``' own steps for bytes. Whatever the bytes, the
value (or the error) must be ``json.loads``'.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import strategies
from strategies import assert_same
from treadle._exceptions import SerializationError
from treadle._values._serialization import JsonSerializer, _refuse_constant

_SERIALIZER = JsonSerializer(strategies.make_registry())


def _general(data: bytes) -> Any:
    """What ``loads`` gave by way of ``json.loads`` (a decoder made for the call)."""
    try:
        hook = _SERIALIZER._hook  # the general path, for comparison
        return json.loads(data, object_hook=hook, parse_constant=_refuse_constant)
    except SerializationError:
        raise
    except (ValueError, RecursionError) as exc:
        raise SerializationError(f"stored data is not valid treadle JSON: {exc}") from exc


def _outcome(read: Any, data: bytes) -> tuple[str, Any]:
    try:
        return "value", read(data)
    except SerializationError as error:
        return "error", str(error)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=strategies.values)
def test_typed_values_read_as_json_loads_reads_them(value):
    data = _SERIALIZER.dumps(value)

    assert_same(_general(data), _SERIALIZER.loads(data))


@given(
    text=st.text(max_size=40) | st.from_regex(r'\s*[\[{"0-9ntfNI-].{0,30}', fullmatch=True),
    encoding=st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32-be"]),
)
def test_any_text_in_any_encoding_reads_or_fails_as_json_loads(text, encoding):
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError:
        return
    assert _outcome(_SERIALIZER.loads, data) == _outcome(_general, data)


@given(st.binary(max_size=40))
def test_any_bytes_read_or_fail_as_json_loads(data):
    assert _outcome(_SERIALIZER.loads, data) == _outcome(_general, data)

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import enum
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, TypedDict, Union

import pydantic
import pytest
import typing_extensions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import strategies
from strategies import Color, Level, Node, Point, Shape, assert_same
from treadle._exceptions import SerializationError
from treadle._values._serialization import (
    TAG,
    JsonSerializer,
    PickleSerializer,
    Serializer,
    TypeRegistry,
    dump_plain,
)


@pytest.fixture(scope="module")
def serializer() -> JsonSerializer:
    return JsonSerializer(strategies.make_registry())


# --- round trips ------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=strategies.values)
def test_every_supported_value_round_trips_with_its_types(serializer, value):
    data = serializer.dumps(value)
    assert_same(value, serializer.loads(data))
    json.loads(data)  # always valid, plain JSON


def test_values_json_represents_stay_plain(serializer):
    value = {"a": [1, "x", None, True, 1.5], "b": {}}
    assert serializer.dumps(value) == b'{"a":[1,"x",null,true,1.5],"b":{}}'


def test_tagged_values_have_a_documented_shape(serializer):
    assert json.loads(serializer.dumps((1, "a"))) == {TAG: "tuple", "v": [1, "a"]}
    assert json.loads(serializer.dumps({1: "one"})) == {TAG: "dict", "v": [[1, "one"]]}
    assert json.loads(serializer.dumps(Color.RED)) == {
        TAG: "enum",
        "n": "strategies.Color",
        "v": "red",
    }


@pytest.mark.parametrize(
    "value",
    [
        {TAG: "tuple", "v": [1, 2]},
        {TAG: "dc", "n": "os.system", "v": {"command": "true"}},
        [{TAG: None}, {"a": {TAG: {TAG: 1}}}],
        "\ud800 lone surrogate",
    ],
)
def test_user_data_that_looks_like_a_tag_round_trips(serializer, value):
    assert_same(value, serializer.loads(serializer.dumps(value)))


def test_dataclass_restore_sets_init_false_fields_as_stored(serializer):
    node = Node("n", payload=(1, 2))
    node.visits = 7
    restored = serializer.loads(serializer.dumps(node))
    assert restored == node
    assert restored.visits == 7


def test_pickle_serializer_round_trips_what_json_cannot():
    value = {"f": complex(1, 2), "ex": ValueError("x")}
    restored = PickleSerializer().loads(PickleSerializer().dumps(value))
    assert restored["f"] == complex(1, 2)
    assert isinstance(restored["ex"], ValueError)


def test_both_serializers_satisfy_the_protocol():
    serializers: list[Serializer] = [JsonSerializer(), PickleSerializer()]
    assert [s.name for s in serializers] == ["json", "pickle-unsafe"]


# --- hostile and corrupt input -----------------------------------------------------------------


class _WritesMarker:
    """Unpickling an instance writes ``path``: a stand-in for arbitrary code execution."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.write_text, (self.path, "code ran"))


def test_a_pickle_that_runs_code_is_refused_and_never_run(tmp_path, serializer):
    marker = tmp_path / "pwned"
    payload = pickle.dumps({"state": _WritesMarker(marker)})
    with pytest.raises(SerializationError, match="not valid treadle JSON"):
        serializer.loads(payload)
    assert not marker.exists()


def test_the_hostile_pickle_is_live(tmp_path):
    # Shows the payload above would have run: only the opt-in serializer runs it.
    marker = tmp_path / "pwned"
    PickleSerializer().loads(pickle.dumps(_WritesMarker(marker)))
    assert marker.read_text() == "code ran"


HOSTILE_TAGS = [
    {TAG: kind, "n": name, "v": arg}
    for kind in ("enum", "dc", "model")
    for name in ("os.system", "subprocess.Popen", "builtins.eval", "posix.system")
    for arg in (["touch /tmp/treadle-pwned"], {"args": "touch /tmp/treadle-pwned"})
] + [
    {TAG: "os.system", "v": "touch /tmp/treadle-pwned"},
    {TAG: "subprocess.Popen", "n": "subprocess.Popen", "v": ["true"]},
    {TAG: "pickle", "v": "gASVAAAAAAAAAAA="},
]


@pytest.mark.parametrize("tag", HOSTILE_TAGS, ids=lambda t: f"{t[TAG]}:{t.get('n')}")
def test_tags_naming_dangerous_callables_are_refused(tag, serializer, monkeypatch):
    calls: list[object] = []
    monkeypatch.setattr(os, "system", lambda *a: calls.append(a))
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: calls.append(a))
    modules_before = set(sys.modules)
    with pytest.raises(SerializationError) as raised:
        serializer.loads(json.dumps({"state": [tag]}).encode())
    assert calls == []
    assert set(sys.modules) == modules_before  # nothing was imported by name
    if "n" in tag:
        assert repr(tag["n"]) in str(raised.value)


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\x80\x04K\x01.",
        b"NaN",
        b"[" * 100_000,
        b'{"__t":"float","v":"1e3"}',
        b'{"__t":"tuple","v":{"a":1}}',
        b'{"__t":"dict","v":[[[1],2]]}',
        b'{"__t":"dict","v":[[1,2,3]]}',
        b'{"__t":"bytes","v":"not base64!"}',
        b'{"__t":"datetime","v":"2024-01-01T00:00:00","z":"../../etc/passwd"}',
        b'{"__t":"datetime","v":"2024-01-01T00:00:00","z":"No/Such_Zone"}',
        b'{"__t":"timedelta","v":[1,2]}',
        b'{"__t":"decimal","v":1}',
        b'{"__t":"enum","n":"strategies.Color","v":"purple"}',
        b'{"__t":"enum","n":"strategies.Point","v":1}',
        b'{"__t":"dc","n":"strategies.Point","v":{"x":1,"z":2}}',
        b'{"__t":"dc","n":"strategies.Point","v":[1,2]}',
        b'{"__t":"model","n":"strategies.Owner","v":{"name":1}}',
        b'{"__t":7,"v":1}',
        b"\xff\xfe\x00",
    ],
)
def test_malformed_data_raises_serialization_error(serializer, payload):
    with pytest.raises(SerializationError):
        serializer.loads(payload)


_json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from([TAG, "v", "n", "z", "o", "f", "tn", "x"]), inner)
        | st.fixed_dictionaries(
            {
                TAG: st.sampled_from(
                    ["tuple", "set", "dict", "bytes", "datetime", "time", "enum", "dc"]
                )
            },
            optional={"v": inner, "n": st.sampled_from(["strategies.Color", "strategies.Node"])},
        )
    ),
    max_leaves=12,
)


@settings(deadline=None)
@given(doc=_json_like)
def test_arbitrary_tagged_json_decodes_or_raises_serialization_error(serializer, doc):
    with contextlib.suppress(SerializationError):
        serializer.loads(json.dumps(doc).encode())


@given(data=st.binary())
def test_arbitrary_bytes_decode_or_raise_serialization_error(serializer, data):
    with contextlib.suppress(SerializationError):
        serializer.loads(data)


# --- errors that say what to do ---------------------------------------------------------------


def test_decoding_an_unregistered_type_says_how_to_register_it(serializer):
    data = serializer.dumps({"s": Shape.LINE})
    with pytest.raises(SerializationError, match=r"'strategies\.Shape' is not registered") as e:
        JsonSerializer(TypeRegistry()).loads(data)
    assert "TypeRegistry.register" in str(e.value)


@dataclasses.dataclass
class Account:
    owner: Any


def test_encoding_an_unsupported_value_names_its_type_and_path():
    registry = TypeRegistry()
    registry.register(Account)
    value = {"docs": [1, 2, 3, Account(owner=object())]}
    with pytest.raises(
        SerializationError, match=r"builtins\.object at value\['docs'\]\[3\]\.owner"
    ):
        JsonSerializer(registry).dumps(value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({(1, object()): 2}, "builtins.object at value<key (1, <object"),
        ([{1: frozenset({Point(1, 2.0)})}], "Point at value[0][1]<set element>: register it"),
        ((Account,), "builtins.type at value[0]: the JSON serializer stores"),
    ],
)
def test_unsupported_values_are_located(value, message):
    with pytest.raises(SerializationError) as raised:
        JsonSerializer().dumps(value)
    assert message in str(raised.value)


class _CustomZone(dt.tzinfo):
    def utcoffset(self, _):
        return dt.timedelta(0)


def test_unsupported_encodings_raise_serialization_error():
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    unsupported = [cyclic, 10**5000, dt.datetime(2024, 1, 1, tzinfo=_CustomZone()), Level, 1j]
    for value in unsupported:
        with pytest.raises(SerializationError):
            JsonSerializer(strategies.make_registry()).dumps(value)


# --- the registry -----------------------------------------------------------------------------


def _two_classes_named_alike() -> tuple[type, type]:
    def make() -> type:
        @dataclasses.dataclass
        class Twin:
            x: int

        return Twin

    return make(), make()


def test_two_classes_under_one_name_is_a_value_error_naming_both():
    first, second = _two_classes_named_alike()
    registry = TypeRegistry()
    registry.register(first)
    with pytest.raises(ValueError, match=r"Twin.*already belongs to.*Twin"):
        registry.register(second)
    with pytest.raises(ValueError, match="already belongs to"):
        TypeRegistry().register_annotation(list[first | second])  # type: ignore[valid-type]
    registry.register(second, name="Twin2")  # a distinct name resolves it
    registry.register(first)  # registering again is harmless


def test_a_class_registered_explicitly_keeps_one_name():
    registry = TypeRegistry()
    registry.register(Point, name="geo.Point")
    registry.register_annotation(Point)  # the walk keeps the chosen name
    assert registry.name_of(Point) == "geo.Point"
    with pytest.raises(ValueError, match=r"already registered as 'geo\.Point'"):
        registry.register(Point, name="other.Point")


def test_an_explicit_name_replaces_a_walked_one_and_old_data_still_loads():
    registry = TypeRegistry()
    registry.register_annotation(Point)
    old = JsonSerializer(registry).dumps(Point(1, 2.0))
    registry.register(Point, name="geo.Point")
    assert b"geo.Point" in JsonSerializer(registry).dumps(Point(1, 2.0))
    assert JsonSerializer(registry).loads(old) == Point(1, 2.0)


@pytest.mark.parametrize("bad", [int, str, object, Any, "strategies.Point", Point(1, 2.0)])
def test_only_enums_dataclasses_and_models_can_be_registered(bad):
    with pytest.raises(TypeError, match="only enums, dataclasses and pydantic models"):
        TypeRegistry().register(bad)


class InOptional(enum.Enum):
    A = 1


class InLiteral(enum.Enum):
    B = 1


@dataclasses.dataclass
class InList:
    x: int


@dataclasses.dataclass
class InDictValue:
    x: int


@dataclasses.dataclass(frozen=True)
class InDictKey:
    x: int


@dataclasses.dataclass
class InUnion:
    x: int


@dataclasses.dataclass
class InDataclassField:
    x: int


class InModelField(pydantic.BaseModel):
    x: int


class InTypedDict(enum.Enum):
    C = 1


@dataclasses.dataclass
class InAnnotated:
    x: int


class InPlainTypedDict(enum.Enum):
    D = 1


class Items(typing_extensions.TypedDict):  # pydantic needs this one before Python 3.12
    item: InTypedDict


class PlainItems(TypedDict):
    item: InPlainTypedDict


@dataclasses.dataclass
class Tree:  # forward references, recursion and nested containers
    children: list[Tree]
    leaf: "InDataclassField | None"  # noqa: UP037 - a string annotation on purpose
    tagged: tuple[Annotated[InAnnotated, "meta"], ...]
    extra: PlainItems


class Envelope(pydantic.BaseModel):
    body: InModelField
    items: Items
    kind: Literal[InLiteral.B, "other"]
    keys: frozenset[InDictKey] = frozenset()


def test_register_annotation_finds_classes_nested_anywhere():
    registry = TypeRegistry()
    registry.register_annotation(
        Union[  # noqa: UP007 - the old spellings are what this test walks
            Optional[InOptional],  # noqa: UP045
            list[InList],
            dict[InDictKey, InDictValue],
            InUnion | set[int],
            Tree,
            Envelope,
        ]
    )
    found = {cls.__name__ for cls in registry._by_name.values()}
    assert found == {
        "InOptional",
        "InLiteral",
        "InList",
        "InDictValue",
        "InDictKey",
        "InUnion",
        "InDataclassField",
        "InModelField",
        "InTypedDict",
        "InPlainTypedDict",
        "InAnnotated",
        "Tree",
        "Envelope",
    }


def test_register_annotation_skips_what_it_cannot_resolve():
    @dataclasses.dataclass
    class Later:
        other: NotYetDefined  # type: ignore[name-defined]  # noqa: F821

    registry = TypeRegistry()
    registry.register_annotation(Later | int | str | None)
    assert registry.name_of(Later) is not None


def test_registered_dataclass_loads_old_data_after_a_field_with_a_default_is_added():
    @dataclasses.dataclass
    class V1:
        a: int

    @dataclasses.dataclass
    class V2:
        a: int
        b: str = "new"

    old, new = TypeRegistry(), TypeRegistry()
    old.register(V1, name="Thing")
    new.register(V2, name="Thing")
    assert JsonSerializer(new).loads(JsonSerializer(old).dumps(V1(1))) == V2(1, "new")
    with pytest.raises(SerializationError, match=r"has no field\(s\) \['b'\]"):
        JsonSerializer(old).loads(JsonSerializer(new).dumps(V2(1)))


@pytest.mark.integration
def test_importing_the_serializer_does_not_import_pydantic():
    code = (
        "import sys, treadle._values._serialization as s\n"
        "s.JsonSerializer().dumps({'a': (1, 2)})\n"
        "assert 'pydantic' not in sys.modules, 'pydantic was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- plain JSON bytes (every checkpoint frame and piece) ---------------------------------------

_plain_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),  # lone surrogates included: only an escape carries them
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(_plain_json)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_plain_json_bytes_read_back_as_the_standard_library_wrote_them(document):
    standard = json.JSONEncoder(separators=(",", ":"), check_circular=False, allow_nan=False)
    written = dump_plain(document)
    assert json.loads(written.decode("utf-8", "surrogatepass")) == json.loads(
        standard.encode(document)
    )


def test_plain_json_refuses_what_json_cannot_hold_and_writes_words_that_only_look_so():
    for refused in ([1, {"a": float("nan")}], {"x": float("inf")}, [10**5000]):
        with pytest.raises(SerializationError, match="cannot serialize value"):
            dump_plain(refused)
    assert json.loads(dump_plain(["NaN", "-Infinity", "\ud800"])) == ["NaN", "-Infinity", "\ud800"]

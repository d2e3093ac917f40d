"""The allowlist of classes that stored checkpoint data may name.

A :class:`TypeRegistry` maps stable names to enums, dataclasses and pydantic
models. The serializer writes those names and, when loading, resolves them here
and nowhere else, so stored data can never make treadle import or run code.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import typing
from typing import Any, Literal, NamedTuple

from treadle._exceptions import SerializationError

if typing.TYPE_CHECKING:
    from collections.abc import Mapping

_Kind = Literal["enum", "dc", "model"]
_T = typing.TypeVar("_T")


class TypeEntry(NamedTuple):
    """How one allowed class is stored: its name, kind and fields."""

    name: str
    kind: _Kind
    fields: tuple[str, ...]
    init_fields: frozenset[str]


def loaded(module: str, attr: str) -> Any:
    """Return ``module.attr`` if ``module`` is already imported, else ``None``."""
    mod = sys.modules.get(module)
    return None if mod is None else getattr(mod, attr, None)


def kind_of(cls: Any) -> _Kind | None:
    if not isinstance(cls, type):
        return None
    if issubclass(cls, enum.Enum):
        return "enum"
    if dataclasses.is_dataclass(cls):
        return "dc"
    base_model = loaded("pydantic.main", "BaseModel")  # no model exists unless it is loaded
    return "model" if base_model is not None and issubclass(cls, base_model) else None


def qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class TypeRegistry:
    """Allowlist of the classes that stored data may name, each under one stable name.

    Decoding looks names up here and nowhere else, which is what makes loading
    a checkpoint safe. The engine fills it from handler annotations through
    :meth:`register_annotation`; users add anything else with :meth:`register`.
    """

    def __init__(self) -> None:
        """Create an empty registry."""
        self._by_name: dict[str, type] = {}
        self._by_class: dict[type, TypeEntry] = {}
        self._explicit: set[type] = set()

    def register(self, cls: type, name: str | None = None) -> None:
        """Allow ``cls`` (an enum, dataclass or pydantic model) under ``name``.

        Args:
            cls: The class to allow.
            name: Name written into stored data. Defaults to
                ``"module.QualName"``; pass a fixed name to keep old
                checkpoints loadable after moving or renaming the class.

        Raises:
            TypeError: ``cls`` is not an enum, dataclass or pydantic model.
            ValueError: ``name`` belongs to another class, or ``cls`` was
                already registered explicitly under a different name.
        """
        kind = kind_of(cls)
        if kind is None:
            raise TypeError(
                f"only enums, dataclasses and pydantic models can be registered, not {cls!r}"
            )
        current = self._by_class.get(cls)
        if current is not None and (name is None or name == current.name):
            self._explicit.add(cls)
            return
        if current is not None and cls in self._explicit:
            raise ValueError(
                f"{qualified(cls)} is already registered as {current.name!r}; a class has one name"
            )
        # An explicit name replaces one found by an annotation walk; the old one still decodes.
        self._claim(cls, kind, qualified(cls) if name is None else name)
        self._explicit.add(cls)

    def include(self, other: TypeRegistry) -> None:
        """Allow every class ``other`` allows, under the same names.

        A workflow that runs another as a sub-workflow stores that one's
        messages and state in its own checkpoints, so it allows its types too.

        Raises:
            ValueError: a name belongs to different classes in the two.
        """
        for name, cls in other._by_name.items():
            entry = other._by_class.get(cls)
            if self._by_name.get(name) is not cls and entry is not None:
                self._claim(cls, entry.kind, name)

    def register_annotation(self, annotation: Any) -> None:
        """Register every enum, dataclass and pydantic model reachable from a type annotation.

        Walks unions, ``Optional``, ``Annotated``, ``Literal``, generic containers,
        dataclass fields, pydantic model fields and TypedDict items, so the engine
        can build the allowlist from each handler's message type. Other classes are
        skipped (encoding them later fails with a clear message), as are forward
        references that cannot be resolved.

        Raises:
            ValueError: Two different classes found share one default name.
        """
        self._walk(annotation, set())

    def name_of(self, cls: type) -> str | None:
        """Return the name ``cls`` is stored under, or ``None`` if it is not allowed."""
        entry = self._by_class.get(cls)
        return None if entry is None else entry.name

    def class_of(self, name: str) -> type | None:
        """Return the class registered under ``name``, or ``None``."""
        return self._by_name.get(name)

    def _claim(self, cls: type, kind: _Kind, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a registered name must be a non-empty string, not {name!r}")
        other = self._by_name.get(name)
        if other is not None and other is not cls:
            raise ValueError(
                f"cannot register {qualified(cls)} as {name!r}: that name already belongs to "
                f"{qualified(other)}; pass name= to tell them apart"
            )
        fields = dataclasses.fields(cls) if kind == "dc" else ()
        init = frozenset(f.name for f in fields if f.init)
        self._by_name[name] = cls
        self._by_class[cls] = TypeEntry(name, kind, tuple(f.name for f in fields), init)

    def _walk(self, tp: Any, seen: set[int]) -> None:
        if id(tp) in seen:
            return
        seen.add(id(tp))
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is typing.Annotated:
            args = args[:1]
        elif origin is Literal:
            args = tuple(type(a) for a in args if isinstance(a, enum.Enum))
        elif isinstance(tp, typing.TypeVar):
            args = (tp.__bound__, *tp.__constraints__)
        elif isinstance(tp, typing.NewType) or type(tp).__name__ == "TypeAliasType":
            args = (getattr(tp, "__supertype__", None) or tp.__value__,)
        elif isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__"):
            # a TypedDict, from typing or typing_extensions (typing.is_typeddict misses the latter)
            args = tuple(_hints(tp).values())
        elif (kind := kind_of(tp)) is not None:
            if tp not in self._by_class:
                self._claim(tp, kind, qualified(tp))
            if kind == "dc":
                hints = _hints(tp)
                args = tuple(hints.get(f.name, f.type) for f in dataclasses.fields(tp))
            elif kind == "model":
                args = tuple(f.annotation for f in tp.model_fields.values())
        for arg in (origin, *args):  # the origin of a generic dataclass or model is one
            if arg is not None:
                self._walk(arg, seen)

    @property
    def entries(self) -> Mapping[type, TypeEntry]:
        """Each allowed class and how it is stored (read-only; the serializer's fast path)."""
        return self._by_class

    def restore(self, kind: str, d: dict[str, Any]) -> Any:
        """Rebuild a stored enum, dataclass or model from its tagged object.

        Raises:
            SerializationError: the name is not allowed, or the stored kind
                or fields do not match the class.
        """
        name = of(str, d.get("n"))
        cls = self._by_name.get(name)
        if cls is None:
            raise SerializationError(
                f"type {name!r} is not registered; call TypeRegistry.register(<the class>, "
                f"name={name!r}) or annotate a handler with it (treadle never imports a type "
                "named by stored data)"
            )
        entry = self._by_class[cls]
        if entry.kind != kind:
            raise SerializationError(f"{name!r} is stored as {kind!r} but is a {entry.kind!r}")
        if kind == "enum":
            return cls(d["v"])
        if kind == "model":
            return cls.model_validate(d["v"])  # type: ignore[attr-defined]
        fields = of(dict, d["v"])
        if unknown := fields.keys() - entry.fields:
            raise SerializationError(f"{name!r} has no field(s) {sorted(unknown)}")
        obj = cls(**{k: x for k, x in fields.items() if k in entry.init_fields})
        for k, x in fields.items():
            if k not in entry.init_fields:
                object.__setattr__(obj, k, x)  # as stored, even on a frozen dataclass
        return obj


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except (NameError, TypeError, AttributeError, SyntaxError):
        return dict(getattr(cls, "__annotations__", {}))  # unresolved strings are skipped


def of(kind: type[_T], value: Any) -> _T:
    if type(value) is not kind:
        raise SerializationError(f"expected {kind.__name__}, found {type(value).__name__}")
    return value

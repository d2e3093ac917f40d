"""The public surface: deliberate, sorted, one home per name, and light to import.

``treadle`` holds the core (building and running workflows); the secondary
namespaces hold the rest. Each public name lives in exactly one public module,
and says so in its ``__module__``, so reprs, tracebacks and pickles name an
importable path (``treadle.RunStatus``, ``treadle.errors.RunBusyError``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib
import pickle
import pkgutil
import re
import subprocess
import sys
import traceback
import types
import typing

import pytest

import treadle
import treadle.errors
import treadle.events
from treadle.errors import TreadleError
from treadle.events import WorkflowEvent

PUBLIC_MODULES = (
    "treadle",
    "treadle.agents",
    "treadle.dask",
    "treadle.declarative",
    "treadle.errors",
    "treadle.events",
    "treadle.otel",
    "treadle.serialization",
    "treadle.stores",
    "treadle.testing",
    "treadle.versions",
    "treadle.workers",
)

OPTIONAL_EXTRAS = (
    "celpy",
    "dask",
    "distributed",
    "opentelemetry",
    "psycopg",
    "psycopg_pool",
    "pydantic",
    "pydantic_ai",
    "rich",
    "starlette",
    "typer",
    "uvicorn",
    "yaml",
)


def exported(module_name: str) -> dict[str, object]:
    module = importlib.import_module(module_name)
    return {name: getattr(module, name) for name in module.__all__}


def defined_in_treadle(cls: type) -> bool:
    return cls.__module__ == "treadle" or cls.__module__.startswith("treadle.")


def all_subclasses(cls: type) -> set[type]:
    found: set[type] = set()
    pending = [cls]
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                pending.append(sub)
    return found


@pytest.fixture(scope="module")
def every_treadle_module() -> None:
    """Import every module of the package, so no class escapes the walks below."""
    for info in pkgutil.walk_packages(treadle.__path__, "treadle."):
        importlib.import_module(info.name)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_all_is_sorted_and_every_name_resolves(module_name):
    module = importlib.import_module(module_name)
    assert module.__all__ == sorted(module.__all__)
    assert len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        assert hasattr(module, name), f"{module_name}.{name}"


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_class_and_function_has_a_docstring(module_name):
    missing = [
        name
        for name, value in exported(module_name).items()
        if isinstance(value, type | types.FunctionType) and not (value.__doc__ or "").strip()
    ]
    assert missing == []


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_class_and_function_names_its_public_module(module_name):
    wrong = {
        name: value.__module__
        for name, value in exported(module_name).items()
        if isinstance(value, type | types.FunctionType) and value.__module__ != module_name
    }
    assert wrong == {}


def test_no_name_is_exported_by_two_public_modules():
    homes: dict[str, list[str]] = {}
    for module_name in PUBLIC_MODULES:
        for name in exported(module_name):
            homes.setdefault(name, []).append(module_name)
    assert {name: where for name, where in homes.items() if len(where) > 1} == {}


def test_the_top_level_stays_small_and_holds_no_errors_or_events():
    assert len(treadle.__all__) <= 50
    for value in exported("treadle").values():
        if isinstance(value, type):
            assert not issubclass(value, BaseException | WorkflowEvent), value


@pytest.mark.usefixtures("every_treadle_module")
def test_every_error_of_the_tree_is_exported_by_treadle_errors():
    tree = {TreadleError} | {cls for cls in all_subclasses(TreadleError) if defined_in_treadle(cls)}
    assert tree == set(exported("treadle.errors").values())


@pytest.mark.usefixtures("every_treadle_module")
def test_every_event_class_is_exported_by_treadle_events():
    events = {WorkflowEvent} | {c for c in all_subclasses(WorkflowEvent) if defined_in_treadle(c)}
    assert events == set(exported("treadle.events").values())


def test_the_drawing_of_the_error_tree_matches_the_classes():
    doc = treadle.errors.__doc__ or ""
    rows = re.findall(r"^    ((?:[│ ]   )*(?:[├└]── )?)(\w+)(.*)$", doc, flags=re.MULTILINE)
    assert rows, "treadle.errors draws no tree"
    drawn: dict[str, type | None] = {}
    parents: list[type] = []
    for prefix, name, note in rows:
        cls = getattr(treadle.errors, name)
        depth = len(prefix) // 4
        del parents[depth:]
        parent = parents[-1] if parents else None
        assert parent is None or parent in cls.__bases__, f"{name} drawn under {parent}"
        also = {b.__name__ for b in cls.__bases__ if not issubclass(b, TreadleError)}
        if parent is not None:  # the root's own base is Exception, not worth drawing
            assert set(re.findall(r"\[(\w+)\]", note)) == also, name
        drawn[name] = parent
        parents.append(cls)
    assert sorted(drawn) == treadle.errors.__all__


def test_reprs_tracebacks_and_pickles_name_public_paths():
    assert repr(treadle.RunResult) == "<class 'treadle.RunResult'>"
    assert repr(treadle.errors.RunBusyError) == "<class 'treadle.errors.RunBusyError'>"
    error = treadle.errors.RoutingError("nowhere to go")
    (line,) = traceback.format_exception_only(error)
    assert line == "treadle.errors.RoutingError: nowhere to go\n"
    failure = treadle.ExecutorFailure("charge", "builtins.ValueError", "no", "Traceback ...", 1)
    spawned = treadle.SpawnResult(name="n", key="k")
    for value in (treadle.RunStatus.COMPLETED, spawned, failure, error):
        dumped = pickle.dumps(value)
        assert b"treadle._" not in dumped
        assert repr(pickle.loads(dumped)) == repr(value)  # noqa: S301 - our own bytes


def test_type_hints_of_public_classes_still_resolve():
    """Renaming the module must not strand the names their annotations use."""
    assert typing.get_type_hints(treadle.PendingRequest)["payload"] is typing.Any
    assert typing.get_type_hints(treadle.events.OutputEvent)["value"] is typing.Any
    options = typing.get_type_hints(treadle.RunOptions)
    assert options["timeout"] == float | dt.timedelta | None
    (field,) = [f for f in dataclasses.fields(treadle.SpawnResult) if f.name == "value"]
    assert field.type is typing.Any  # what pydantic reads
    assert typing.get_type_hints(treadle.ExecutorFailure)["input"] is typing.Any


def test_import_treadle_loads_no_optional_extra():
    code = f"import sys, treadle; print([m for m in {OPTIONAL_EXTRAS!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_secondary_namespaces_load_no_optional_extra_until_used():
    """``.otel``, ``.dask``, ``.agents`` and ``.declarative`` alone need their extra."""
    extras = ("treadle.otel", "treadle.dask", "treadle.agents", "treadle.declarative")
    modules = ", ".join(m for m in PUBLIC_MODULES if m not in extras)
    code = f"import sys, {modules}; print([m for m in {OPTIONAL_EXTRAS!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

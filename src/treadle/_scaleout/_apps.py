"""Finding workflows by app path and by name, for every command, workers and clients.

An app path says where workflows live: ``pkg.module`` or ``path/app.py``,
optionally ``:attribute`` naming one. A worker or a server hosts every
workflow an app holds (:func:`load_app`) and serves runs by the name and
version each was built with (see :mod:`treadle._workflow._versions`): a
module may hold several versions of one workflow, and a run goes on with
its own. A command that needs one workflow (``treadle run``, ``graph``,
``check-upgrade``) takes it with :func:`choose_workflow`: the newest
version of the one name the app holds, as ``Runtime.start`` takes the
newest version of a name, so every command reads an app the same way.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from treadle._exceptions import AppLoadError
from treadle._graph._limits import CallLimit
from treadle._workflow._versions import Hosted
from treadle._workflow._workflow import Workflow

if TYPE_CHECKING:
    from types import ModuleType


def load_app(spec: str) -> list[Workflow]:
    """The workflows an app path names, each with its origin recorded.

    ``pkg.module:attribute`` or ``path/app.py:attribute`` names one
    workflow; ``pkg.module`` or ``path/app.py`` every ``Workflow`` at the
    module's top level (every version). The current directory is importable,
    as it is for ``python -m``; a file's directory, as for a script.

    Raises:
        AppLoadError: The module does not import, the attribute is missing or
            not a ``Workflow``, or the module holds none.
    """
    return list(_workflows_of(spec).values())


def load_limits(spec: str) -> list[CallLimit]:
    """The call limits an app declares: every ``CallLimit`` at its module's top level.

    ``treadle worker`` declares them for the runs it serves, so an app that
    names a limit in its workflows (``limits=["openai"]``) says its numbers
    once, beside them.

    Raises:
        AppLoadError: The module does not import.
    """
    module, _ = import_app(spec.partition(":")[0])
    return [value for value in vars(module).values() if isinstance(value, CallLimit)]


def choose_workflow(spec: str) -> Workflow:
    """The one workflow an app path names: the one rule every command follows.

    An attribute names it; else the app must hold workflows of one name, and
    the newest version of it is taken (older versions kept beside it, as
    ``docs/versions.md`` says to, are for the runs that started on them).

    Raises:
        AppLoadError: It does not load, or it holds workflows of several
            names (the message lists them, to name one), or two of one
            version.
    """
    found = _workflows_of(spec)
    try:
        hosted = Hosted(found.values())
    except ValueError as error:
        raise AppLoadError(str(error)) from error
    if len(hosted.names()) == 1:
        [newest] = hosted
        return newest
    where = spec.partition(":")[0]
    attribute = {id(workflow): name for name, workflow in found.items()}
    held = []
    for workflow in hosted:  # the newest version of each name
        versions = hosted.versions(workflow.name)
        also = f" (versions {', '.join(map(str, versions))})" if len(versions) > 1 else ""
        held.append(f"{where}:{attribute[id(workflow)]}{also}")
    msg = (
        f"{where!r} holds {len(held)} workflows at its top level; "
        f"name one ({', '.join(held) or 'none'})"
    )
    raise AppLoadError(msg)


def import_app(where: str) -> tuple[ModuleType, str]:
    """The module of an app path (``pkg.module`` or ``path/app.py``) and its origin prefix.

    The origin prefix is what a run records to find its workflow again: the
    module's name, or the file's absolute path.

    Raises:
        AppLoadError: It does not import.
    """
    if where.endswith(".py") or "/" in where:
        return import_file(where), str(Path(where).resolve())
    return import_here(where), where


def _workflows_of(spec: str) -> dict[str, Workflow]:
    """The workflows ``spec`` names, by their attribute in its module; origins recorded."""
    where, colon, attribute = spec.partition(":")
    if not where or (colon and not attribute.strip()):  # 'app:' names no workflow: a typo
        msg = f"{spec!r} is not an app: write pkg.module:workflow, pkg.module or path/app.py"
        raise AppLoadError(msg)
    module, origin = import_app(where)
    found = {name: v for name, v in vars(module).items() if isinstance(v, Workflow)}
    if attribute:
        named = getattr(module, attribute, None)
        if not isinstance(named, Workflow):
            what = "has no attribute" if named is None else f"has a {type(named).__name__} as"
            close = difflib.get_close_matches(attribute, list(found), n=1)
            hint = f"; did you mean {where}:{close[0]}?" if close else ""
            listed = ", ".join(found) or "none"
            msg = f"{where!r} {what} {attribute!r}, not a Workflow (its workflows: {listed}){hint}"
            raise AppLoadError(msg)
        found = {attribute: named}
    elif not found:
        msg = f"{where!r} defines no Workflow at its top level"
        raise AppLoadError(msg)
    for name, workflow in found.items():
        if workflow.origin is None:
            workflow.origin = f"{origin}:{name}"
    return found


def import_file(path: str) -> ModuleType:
    """Import a Python file as a module (its directory importable, as for a script).

    Raises:
        AppLoadError: There is no such file, or it does not import.
    """
    file = Path(path).resolve()
    if not file.is_file():
        msg = f"no file {str(file)!r}"
        raise AppLoadError(msg)
    name = file.stem
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(file):
        return loaded
    if str(file.parent) not in sys.path:
        sys.path.insert(0, str(file.parent))
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        msg = f"cannot import {str(file)!r}: not a Python file"
        raise AppLoadError(msg)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        del sys.modules[name]
        msg = f"cannot import {str(file)!r}: {type(error).__name__}: {error}"
        raise AppLoadError(msg) from error
    return module


def import_here(module_name: str) -> ModuleType:
    """Import a module, the current directory importable as for ``python -m``.

    Raises:
        AppLoadError: It does not import; the message says why.
    """
    here = str(Path.cwd())
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        return importlib.import_module(module_name)
    except Exception as error:
        msg = f"cannot import {module_name!r}: {type(error).__name__}: {error}"
        raise AppLoadError(msg) from error

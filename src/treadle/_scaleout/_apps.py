"""Finding workflows by import path and by name, for workers and clients.

A worker is told where its workflows live (``--app pkg.module`` or
``--app pkg.module:workflow``) and serves runs by the name and version each
workflow was built with (see :mod:`treadle._workflow._versions`): a module
may hold several versions of one workflow, and a run goes on with its own.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from treadle._exceptions import AppLoadError
from treadle._values._strict import fit_type
from treadle._workflow._workflow import Workflow

if TYPE_CHECKING:
    from types import ModuleType


def load_app(spec: str) -> list[Workflow]:
    """The workflows an import path names.

    ``pkg.module:attribute`` names one workflow; ``pkg.module`` every
    ``Workflow`` at the module's top level. The current directory is
    importable, as it is for ``python -m``.

    Raises:
        AppLoadError: The module does not import, the attribute is missing or
            not a ``Workflow``, or the module holds none.
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name:
        msg = f"{spec!r} is not an import path: write pkg.module or pkg.module:workflow"
        raise AppLoadError(msg)
    module = import_here(module_name)
    if attribute:
        found = getattr(module, attribute, None)
        if not isinstance(found, Workflow):
            what = "no such attribute" if found is None else f"a {type(found).__name__}"
            msg = f"{spec!r} is not a Workflow ({what}); name one built with .build()"
            raise AppLoadError(msg)
        chosen = {attribute: found}
    else:
        chosen = {name: v for name, v in vars(module).items() if isinstance(v, Workflow)}
        if not chosen:
            msg = f"module {module_name!r} defines no Workflow at its top level"
            raise AppLoadError(msg)
    for name, workflow in chosen.items():
        if workflow.origin is None:
            workflow.origin = f"{module_name}:{name}"
    return list(chosen.values())


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


def coerce_input(workflow: Workflow, value: Any) -> Any:
    """Turn JSON into the type the start executor accepts (a dataclass, a model...).

    Checked as answers are (:mod:`treadle._values._strict`): nothing is
    coerced (``"12"`` is no number) and a key the type lacks is refused,
    naming it; a whole number is a ``float`` where one is accepted.

    Raises:
        AppLoadError: The value fits none of the types the start executor takes.
    """
    accepted = workflow.prototype(workflow.start_id).accepted_types()
    if any(isinstance(value, cls) for cls in accepted) or object in accepted:
        return value
    problems = []
    for cls in accepted:
        built, wrong = fit_type(cls, value)
        if not wrong:
            return built
        problems.append(f"as {cls.__qualname__}, {'; '.join(wrong)}")
    names = ", ".join(c.__qualname__ for c in accepted)
    msg = (
        f"the input does not fit the start executor {workflow.start_id!r} "
        f"(accepts {names}): {' | '.join(problems)}"
    )
    raise AppLoadError(msg)

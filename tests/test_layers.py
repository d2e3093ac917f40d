"""treadle's floors hold: no module imports a floor above its own.

The contracts live in ``pyproject.toml`` (``[tool.importlinter]``) and are
drawn in CONTRIBUTING.md. They count every import, including those under
``TYPE_CHECKING`` and inside functions.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(source_root: Path, config: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(source_root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(config), "--no-cache"],
        capture_output=True,
        text=True,
        env=env,
        cwd=source_root,
        check=False,
        timeout=120,
    )


def test_every_module_imports_only_its_floor_and_below():
    done = lint_imports(ROOT / "src", ROOT / "pyproject.toml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 2 kept, 0 broken." in done.stdout


@pytest.mark.parametrize(
    ("module", "upward_import", "named"),
    [
        # the engine naming the Workflow API, even only for the type checker
        (
            "_engine/_state.py",
            (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from treadle._workflow._workflow import Workflow\n"
            ),
            "treadle._engine._state -> treadle._workflow._workflow",
        ),
        # a store reaching into the engine (stores and engine stand side by side)
        (
            "_stores/_sql_rows.py",
            "from treadle._engine._result import RunStatus\n",
            "treadle._stores._sql_rows -> treadle._engine._result",
        ),
        # the barrier reaching for the loop, even only for the type checker: it must stay
        # pure (it takes the committed point and returns the next one)
        (
            "_engine/_commit.py",
            (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from treadle._engine._loop import RunLoop\n"
            ),
            "treadle._engine._commit -> treadle._engine._loop",
        ),
        # the bottom floor naming anything of treadle
        (
            "_exceptions/_core.py",
            "def _late() -> None:\n    from treadle._graph import _edges\n",
            "treadle._exceptions._core -> treadle._graph._edges",
        ),
    ],
)
def test_an_upward_import_breaks_the_build(tmp_path, module, upward_import, named):
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "treadle", copy / "treadle")
    target = copy / "treadle" / module
    target.write_text(target.read_text() + "\n" + upward_import)
    done = lint_imports(copy, ROOT / "pyproject.toml")
    assert done.returncode != 0
    assert "BROKEN" in done.stdout
    assert named in done.stdout, done.stdout


def _named_in_layers() -> set[str]:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (floors,) = [c["layers"] for c in contracts["contracts"] if c["type"] == "layers"]
    return {part.strip() for floor in floors for part in floor.split("|")}


def test_every_package_and_public_module_stands_on_a_floor():
    # import-linter checks only the modules a layer names: a package left
    # out of the list (a new one, or one moved) could import anything.
    # (__main__, `python -m treadle`, is the command line's entry and nothing imports it.)
    package = ROOT / "src" / "treadle"
    modules = {
        f"treadle.{path.stem}"
        for path in package.iterdir()
        if (path.suffix == ".py" and path.stem not in ("__init__", "__main__"))
        or (path.is_dir() and (path / "__init__.py").exists())
    }
    assert modules - _named_in_layers() == set()


def _drawn_floors() -> dict[str, int]:
    """Each module CONTRIBUTING.md's drawing of the layers names, with the floor it is drawn on."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    drawing = text.split("## Layers", 1)[1].split("```", 2)[1]
    floors: dict[str, int] = {}
    floor = 0
    for line in drawing.splitlines():
        number = re.match(r"\s*(\d+)\s", line)
        if number:
            floor = int(number.group(1))
        for name in re.findall(r"(?<![\w.])(_[a-z]\w*)(?:/|\.py\b)", line):
            floors[f"treadle.{name}"] = floor
        for name in re.findall(r"(?:(?<=\s)|^)(?:treadle)?\.([a-z]\w*)", line):
            floors[f"treadle.{name}"] = floor
    return floors


def test_the_drawing_in_contributing_shows_every_floor_as_the_contracts_do():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (floors,) = [c["layers"] for c in contracts["contracts"] if c["type"] == "layers"]
    contracted = {
        part.strip(): len(floors) - index
        for index, floor in enumerate(floors)
        for part in floor.split("|")
    }
    assert _drawn_floors() == contracted

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture
def write(tmp_path: Path):
    """Write a definition (dedented) to a file in tmp_path and return its path."""

    def write(text: str, name: str = "flow.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
        return path

    return write


TREADLE = str(Path(sys.executable).parent / "treadle")


@pytest.fixture
def treadle_command(tmp_path: Path):
    """The `treadle` command in a subprocess, in tmp_path, with these tests' modules importable."""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("TREADLE_")}
        env = {**inherited, "PYTHONPATH": str(HERE.parent), "COLUMNS": "300", "NO_COLOR": "1"}
        return subprocess.run(
            [TREADLE, *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=50,
            check=False,
        )

    return run

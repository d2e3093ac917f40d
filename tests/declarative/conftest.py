from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cli.treadle_cli import Cli

HERE = Path(__file__).resolve().parent


@pytest.fixture
def write(tmp_path: Path):
    """Write a definition (dedented) to a file in tmp_path and return its path."""

    def write(text: str, name: str = "flow.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
        return path

    return write


@pytest.fixture
def treadle_command(tmp_path: Path):
    """The `treadle` command in tmp_path, with these tests' modules importable and no store."""
    cli = Cli(tmp_path, PYTHONPATH=str(HERE.parent), COLUMNS="300", NO_COLOR="1")
    del cli.env["TREADLE_STORE"]
    return cli

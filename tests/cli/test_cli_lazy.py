"""``treadle <command>`` imports its own command's module, not every other command's.

A worker's start-up is part of what ``benchmarks/scaleout.py`` measures
(from the processes' start to the last run completed): importing every
command's module (the server's, the schedules', the inspectors'...) and
building all their options cost ``treadle worker`` about 0.2 s of its
0.7 s to its first claim, and rich (with the views that print runs) a
tenth more. So :mod:`treadle._cli._app` names each module's commands and
imports a module when one of them is asked for, errors import rich when
they are printed, and a PostgreSQL store comes without the SQLite and
in-memory ones; these tests keep it so, and keep the names the app lists
true to what the modules define.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from treadle._cli._app import COMMANDS, app, commands_of

_REPORT = """
import sys
from treadle._cli._app import main
sys.argv = ["treadle", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(" ".join(sorted(sys.modules)), file=sys.stderr)
"""


def _imported(*argv: str) -> set[str]:
    """The modules ``treadle *argv`` has imported when it exits (a process of its own)."""
    done = subprocess.run(
        [sys.executable, "-c", _REPORT, *argv], capture_output=True, text=True, check=True
    )
    return set(done.stderr.split())


@pytest.mark.parametrize(
    ("argv", "own", "prints"),
    [(("worker", "--help"), "_worker", False), (("--version",), None, True)],
    ids=["worker", "version"],
)
def test_a_command_imports_no_other_command_module(argv, own, prints):
    imported = _imported(*argv)
    others = {f"treadle._cli.{module}" for module, _ in COMMANDS if module != own}
    assert sorted(imported & others) == []
    if own is not None:
        assert f"treadle._cli.{own}" in imported
    if not prints:  # nor rich, nor the views: a command imports them to print, a worker logs
        assert sorted(m for m in imported if m.partition(".")[0] == "rich") == []
        assert "treadle._cli._views" not in imported


@pytest.mark.parametrize(("module", "names"), COMMANDS, ids=[m for m, _ in COMMANDS])
def test_commands_lists_what_each_module_defines_in_order(module, names):
    cli = importlib.import_module(f"treadle._cli.{module}").cli
    assert tuple(commands_of(cli)) == names


def test_a_postgresql_store_is_opened_without_the_other_stores_modules():
    code = (
        "import sys\n"
        "from treadle._operations._inputs import open_store\n"
        "open_store('postgresql://127.0.0.1:5432/test')\n"  # opens no connection yet
        "print(' '.join(sorted(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    imported = set(done.stdout.split())
    assert "treadle._stores._postgres" in imported
    assert (
        sorted(imported & {"treadle.stores", "treadle._stores._sqlite", "treadle._stores._memory"})
        == []
    )


def test_a_misspelt_command_is_still_matched_against_every_name():
    done = CliRunner().invoke(app, ["wrker"], prog_name="treadle")
    assert done.exit_code == 2
    assert "No such command 'wrker'. Did you mean 'worker'?" in done.output

"""Every test under tests/scaleout/ is marked ``integration``, by its conftest's hook.

A ``pytestmark`` in a conftest does nothing, so ``-m "not integration"`` used
to run scale-out tests that need PostgreSQL and worker processes.
"""

import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


# Plugins that neither mark nor deselect (and the collection needs none of them): without
# them a collection starts in half the time (hypothesis's import alone is 0.8 s).
UNNEEDED = ["cacheprovider", "hypothesispytest", "xdist", "xdist.looponfail", "anyio"]


def collect(*args: str) -> subprocess.CompletedProcess[str]:
    plugins = [option for name in UNNEEDED for option in ("-p", f"no:{name}")]
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", *plugins, *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=HERE.parent.parent,
    )


def test_this_test_carries_the_integration_marker(request):
    assert request.node.get_closest_marker("integration") is not None


def test_deselecting_integration_leaves_nothing_under_scaleout():
    # One collection (a pytest process costs seconds): what it deselected shows the
    # check is not vacuous, and nothing is left collected.
    rest = collect("-m", "not integration", str(HERE))
    # Exit code 5: every test was deselected, none was collected.
    assert rest.returncode == 5, rest.stdout + rest.stderr
    assert [line for line in rest.stdout.splitlines() if "::" in line] == []
    deselected = re.search(r"\((\d+) deselected\)", rest.stdout)
    assert deselected is not None, rest.stdout
    assert int(deselected[1]) > 10  # the check above is not vacuous
